//! The compaction job running by itself: a [`Compactor`], made by
//! [`Store::compactor`](crate::Store::compactor), folds one kind's shard
//! rows on a thread of its own, a batch at a time, and holds the writer for
//! at most a set share of the time.
//!
//! It is written once, over the seam's `compact_batch` (one committed
//! transaction per call, `crate::seam::compaction` deciding what it folds), so
//! every store gets it unchanged. Its loop is written once too, as `async
//! fn`s over an [`Env`]: a thread runs it ([`OnThread`]), and with the
//! feature `tokio` so does a tokio task (`task.rs`).

use crate::error::Result;
use crate::job::JobThread;
use crate::seam::compaction;
use crate::seam::{Backend, BatchPlan, CompactionStats, Kind, Resume};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The pause before a batch that failed with a retryable error (a busy
/// store, a serialization conflict, a lost connection) is tried again. The
/// store has already retried it `max_attempts` times by then.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// The shortest pause the cap makes the compactor take; see [`Throttle`].
const MIN_PAUSE: Duration = Duration::from_millis(1);

/// Runs compaction batches for [`Store::compactor`](crate::Store::compactor)
/// in the background: interval, batch size, and a cap on the share of time
/// it may hold the writer.
///
/// A **pass** is what [`Store::compact`](crate::Store::compact) does: a scan
/// of every entity of the kind, in key order, in batches, each batch one
/// committed write transaction that folds the rows it read. The compactor
/// starts a pass every [`interval`](Compactor::interval) (at once if the
/// last one took longer) until it is stopped.
///
/// **Holding the writer.** A batch *holds the writer* from its first
/// statement inside its write transaction to the return of its commit: on
/// SQLite that is the time it owns the file's single write lock (after
/// `BEGIN IMMEDIATE` was granted), on PostgreSQL the time its transaction
/// holds the row locks of the rows it folds. Waiting for the lock is not
/// holding it. After a batch that held the writer for `h`, the compactor
/// owes a pause of `h × (1 − c) / c`, where `c` is the
/// [`max_writer_share`](Compactor::max_writer_share), and pauses as soon as
/// it owes a millisecond or more (a shorter sleep would overshoot; an
/// overshoot counts towards the next pause). So at the start of every
/// batch, the time it has held the writer is at most `c` times its age,
/// plus `c` × 1 ms; a pass run with [`run_once`](Compactor::run_once) pays
/// what it owes before it returns. [`CompactorStats::writer_time`] is the
/// measured total, [`CompactorStats::writer_share`] the share.
///
/// **Guarantees**, the same as [`Store::compact`](crate::Store::compact)'s,
/// because a pass is made of the same batches:
///
/// - every batch preserves each field's folded value exactly, and commits
///   whole or not at all, so the compactor can be stopped, can fail, or its
///   process can be killed at any point;
/// - any number of compactors (and `compact` calls) may run on one store at
///   once, in threads or processes, alongside any number of writers: every
///   batch re-reads the rows it rewrites inside its own write transaction,
///   so no row is folded twice (on SQLite batches take turns on the write
///   lock; on PostgreSQL a batch locks the rows it read, or fails its
///   commit in optimistic mode and is retried);
/// - a retryable error (a busy store, a conflict, a lost connection) makes
///   the compactor wait and try the same batch again; any other error stops
///   it, and [`CompactorHandle::stop`] returns that error;
/// - an entity whose rows cannot be folded (a total out of its type's
///   range, a corrupt row) is skipped and counted in
///   [`CompactorStats::entities_skipped`], never an error that stops the
///   compactor; [`Store::compact`](crate::Store::compact) lists them.
///
/// ```
/// use autoshard::{shard_fold, shard_method, Pending, Shardable, Sqlite, Store};
/// use std::time::Duration;
///
/// #[derive(Shardable, Debug)]
/// struct Page {
///     #[shard(id)]
///     id: u64,
///     #[shard(neutral = 0)] // dynamic: one row per save until compacted
///     views: i64,
///     #[shard(pending)]
///     pending: Pending<Self>,
/// }
///
/// impl Page {
///     #[shard_method]
///     fn view(&mut self) {
///         self.views += 1;
///     }
///     #[shard_fold]
///     fn fold_views(a: i64, b: i64) -> i64 {
///         a + b
///     }
/// }
///
/// # fn main() -> autoshard::Result<()> {
/// let db = Sqlite::memory()?;
/// db.insert(&Page { id: 1, views: 0, pending: Pending::default() })?;
/// let compactor = db
///     .compactor::<Page>()
///     .interval(Duration::from_millis(10)) // a pass every 10 ms
///     .batch_rows(1_000)                   // rows read per transaction
///     .max_writer_share(0.25)              // hold the writer at most 25% of the time
///     .spawn()?;
///
/// let mut page: Page = db.load(&1)?.unwrap();
/// for _ in 0..100 {
///     page.view();
///     db.save(&mut page)?; // appends a row; the compactor folds them
/// }
/// while db.shard_count::<Page>(&1, "views")? > 1 {
///     std::thread::sleep(Duration::from_millis(5));
/// }
/// let stats = compactor.stop()?;
/// assert_eq!(stats.rows_merged, 100);
/// assert!(stats.writer_share() <= 0.25 + 0.05);
/// assert_eq!(db.load::<Page>(&1)?.unwrap().views, 100);
/// # Ok(())
/// # }
/// ```
pub struct Compactor<T> {
    job: Job,
    _entity: PhantomData<fn() -> T>,
}

/// The compactor's settings and store, without the entity type, for its
/// thread.
#[derive(Clone)]
pub(crate) struct Job {
    store: Arc<dyn Batches>,
    kind: Kind,
    interval: Duration,
    max_writer_share: f64,
}

/// What a [`Compactor`] did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactorStats {
    /// Passes completed: scans of every entity of the kind.
    pub passes: u64,
    /// Batch transactions committed.
    pub batches: u64,
    /// Entities that had rows to fold, counted once per pass.
    pub entities_compacted: u64,
    /// Entities left as they were because a field's rows cannot be folded,
    /// counted once per pass (`Store::compact` lists them, in
    /// [`CompactionStats::skipped`]).
    pub entities_skipped: u64,
    /// Shard rows read.
    pub rows_scanned: u64,
    /// Shard rows folded into another row and deleted.
    pub rows_merged: u64,
    /// Automatic shard counts halved because their entity was quiet.
    pub counts_lowered: u64,
    /// Batches that failed with a retryable error (after the store's own
    /// retries) and were tried again.
    pub retries: u64,
    /// Time spent holding the writer, summed over the committed batches
    /// (see [`Compactor`] for the definition).
    pub writer_time: Duration,
    /// The longest any one batch held the writer.
    pub longest_batch: Duration,
    /// Time spent pausing to keep the writer share under the cap.
    pub throttled: Duration,
    /// Time since the compactor started (until it ended, once it has).
    pub elapsed: Duration,
}

impl CompactorStats {
    /// The share of its life the compactor held the writer:
    /// `writer_time / elapsed`, between 0 and 1 (0 before any time passed).
    pub fn writer_share(&self) -> f64 {
        if self.elapsed.is_zero() {
            return 0.0;
        }
        self.writer_time.as_secs_f64() / self.elapsed.as_secs_f64()
    }

    fn add_batch(&mut self, batch: &CompactionStats, skipped: u64, held: Duration) {
        self.batches += 1;
        self.entities_compacted += batch.entities_compacted;
        self.entities_skipped += skipped;
        self.rows_scanned += batch.rows_scanned;
        self.rows_merged += batch.rows_merged;
        self.counts_lowered += batch.counts_lowered;
        self.writer_time += held;
        self.longest_batch = self.longest_batch.max(held);
    }
}

impl<T> Compactor<T> {
    pub(crate) fn new<S: Backend + Clone + Send + Sync + 'static>(store: &S, kind: Kind) -> Self {
        Compactor {
            job: Job {
                store: Arc::new(store.clone()),
                kind,
                interval: Duration::from_secs(1),
                max_writer_share: 0.25,
            },
            _entity: PhantomData,
        }
    }

    /// How often a pass starts (default 1 s): the next pass starts this long
    /// after the previous one started, or as soon as it ended if it took
    /// longer. Rows saved just after a pass passed their entity wait about
    /// this long to be folded.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.job.interval = interval;
        self
    }

    /// Rows a batch transaction reads (default: the store's
    /// `compaction_batch_rows`, 10,000; at least 1). Smaller batches hold
    /// the writer for shorter stretches; bigger ones pay the commit less
    /// often.
    pub fn batch_rows(mut self, rows: usize) -> Self {
        self.job.kind.batch_rows = Some(rows.max(1));
        self
    }

    /// How long an entity must go without observed contention before a
    /// pass halves its automatic shard counts (`shards = LOW..=HIGH`, not
    /// below `LOW`), folding the rows above the new count into shard 0 in
    /// the same transaction (default [`DEFAULT_QUIET_PERIOD`], 5 minutes).
    /// Each pass halves a quiet count once, and a halving restarts the
    /// period, so a count falls from `HIGH` to `LOW` over several periods
    /// and climbs back at once if contention returns. [`Store::compact`]
    /// uses the default.
    ///
    /// [`DEFAULT_QUIET_PERIOD`]: crate::DEFAULT_QUIET_PERIOD
    /// [`Store::compact`]: crate::Store::compact
    pub fn quiet_period(mut self, period: Duration) -> Self {
        self.job.kind.quiet = Some(period);
        self
    }

    /// The largest share of time the compactor may hold the writer, in
    /// `(0, 1]` (default 0.25): after a batch that held it for `h`, it
    /// pauses `h × (1 − share) / share`. `1.0` never pauses.
    ///
    /// # Panics
    ///
    /// If `share` is not in `(0, 1]`.
    pub fn max_writer_share(mut self, share: f64) -> Self {
        assert!(
            share > 0.0 && share <= 1.0,
            "max_writer_share must be in (0, 1], got {share}"
        );
        self.job.max_writer_share = share;
        self
    }

    /// Starts the compactor on a thread of its own; its first pass starts
    /// at once. It runs until the handle is stopped or dropped, or until an
    /// error that is not retryable.
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`](crate::Error::Spawn) if the operating system cannot
    /// start a thread.
    pub fn spawn(self) -> Result<CompactorHandle> {
        let shared = Arc::new(Shared::new());
        let job = self.job;
        let thread = JobThread::spawn(
            "compactor",
            format!("autoshard-compactor-{}", job.kind.name),
            {
                let shared = shared.clone();
                move || {
                    let result = run_to_end(job.run(&OnThread(&shared)));
                    shared.lock().ended = Some(Instant::now());
                    result
                }
            },
        )?;
        Ok(CompactorHandle { shared, thread })
    }

    /// Runs one pass on this thread, pausing after each batch as the cap
    /// demands, and returns what it did.
    ///
    /// # Errors
    ///
    /// The first store error that is not retryable (retryable ones are
    /// waited out and the batch tried again). Rows that cannot be folded
    /// are not errors: they are skipped and counted. Batches committed
    /// before it stay committed.
    pub fn run_once(&self) -> Result<CompactorStats> {
        let shared = Shared::new();
        let env = OnThread(&shared);
        let mut throttle = Throttle::default();
        run_to_end(async {
            self.job.pass(&env, &mut throttle).await?;
            throttle.pay(&env, Duration::ZERO).await;
            Ok(shared.stats())
        })
    }
}

/// Where the compactor's loop runs: what its batches and its waits are.
/// On a thread ([`OnThread`]) a batch runs in place and a wait is on the
/// condition variable, so none of the loop's awaits pends and one poll
/// runs it to its end ([`run_to_end`]); in a tokio task (`task.rs`) a
/// batch runs on the store's threads and a wait is on tokio's timer.
pub(crate) trait Env {
    /// One batch of `job`'s kind from `from`.
    fn batch(&self, job: &Job, from: &Resume) -> impl Future<Output = Result<BatchPlan>>;
    /// Waits until `deadline`, or less if a stop is requested.
    fn sleep_until(&self, deadline: Instant) -> impl Future<Output = ()>;
    fn shared(&self) -> &Shared;
}

/// The loop on a thread of its own.
struct OnThread<'a>(&'a Shared);

impl Env for OnThread<'_> {
    async fn batch(&self, job: &Job, from: &Resume) -> Result<BatchPlan> {
        compaction::traced_batch(&job.kind, || job.store.compact_batch(&job.kind, from))
    }

    async fn sleep_until(&self, deadline: Instant) {
        self.0.sleep_until(deadline);
    }

    fn shared(&self) -> &Shared {
        self.0
    }
}

/// Runs a loop over [`OnThread`] to its end: nothing in it pends.
pub(crate) fn run_to_end<R>(run: impl Future<Output = R>) -> R {
    let mut run = std::pin::pin!(run);
    let waker = std::task::Waker::noop();
    match run
        .as_mut()
        .poll(&mut std::task::Context::from_waker(waker))
    {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => unreachable!("a thread's batches and waits never pend"),
    }
}

impl Job {
    pub(crate) async fn run(&self, env: &impl Env) -> Result<()> {
        let mut throttle = Throttle::default();
        while !env.shared().stopping() {
            let started = Instant::now();
            self.pass(env, &mut throttle).await?;
            env.sleep_until(started + self.interval).await;
        }
        Ok(())
    }

    /// One scan of the kind; returns early, between batches, on a stop.
    async fn pass(&self, env: &impl Env, throttle: &mut Throttle) -> Result<()> {
        let mut from = Resume::Done;
        let mut last_skipped = None;
        loop {
            if env.shared().stopping() {
                return Ok(());
            }
            let batch = match env.batch(self, &from).await {
                Ok(batch) => batch,
                Err(e) if e.is_retryable() => {
                    #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
                    let retries = {
                        let mut shared = env.shared().lock();
                        shared.stats.retries += 1;
                        shared.stats.retries
                    };
                    // Closed before the pause: an entered span is tied to its
                    // thread, and a task may resume on another after the await.
                    drop(crate::trace::retry!(kind = self.kind.name,
                        attempt = retries, error = %e));
                    env.sleep_until(Instant::now() + RETRY_PAUSE).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let held = batch.started.elapsed();
            let skipped = compaction::newly_skipped(&mut last_skipped, &batch.skipped);
            env.shared()
                .lock()
                .stats
                .add_batch(&batch.stats, skipped, held);
            throttle.owe(self.pause_after(held));
            throttle.pay(env, MIN_PAUSE).await;
            match batch.resume {
                Resume::Done => {
                    env.shared().lock().stats.passes += 1;
                    return Ok(());
                }
                resume => from = resume,
            }
        }
    }

    /// The pause that keeps the share of time holding the writer at most
    /// the cap: `held / (held + pause) == share`.
    fn pause_after(&self, held: Duration) -> Duration {
        let share = self.max_writer_share;
        held.mul_f64((1.0 - share) / share)
    }
}

/// Pauses owed to the cap. A pause shorter than [`MIN_PAUSE`] is put off
/// and added to the next one, because a sleep that short overshoots by more
/// than its length; an overshoot is credit against the next pause. So the
/// time paused is never less than the time owed minus `MIN_PAUSE`.
#[derive(Default)]
struct Throttle {
    /// Seconds owed; negative is credit.
    owed: f64,
}

impl Throttle {
    fn owe(&mut self, pause: Duration) {
        self.owed += pause.as_secs_f64();
    }

    /// Pauses for what is owed, if that is at least `min`.
    async fn pay(&mut self, env: &impl Env, min: Duration) {
        if self.owed <= 0.0 || self.owed < min.as_secs_f64() {
            return;
        }
        let paused = Instant::now();
        env.sleep_until(paused + Duration::from_secs_f64(self.owed))
            .await;
        let slept = paused.elapsed();
        self.owed -= slept.as_secs_f64();
        env.shared().lock().stats.throttled += slept;
    }
}

impl<T> Clone for Compactor<T> {
    fn clone(&self) -> Self {
        Compactor {
            job: self.job.clone(),
            _entity: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Compactor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compactor")
            .field("kind", &self.job.kind.name)
            .field("interval", &self.job.interval)
            .field("batch_rows", &self.job.kind.batch_rows)
            .field("quiet_period", &self.job.kind.quiet_period())
            .field("max_writer_share", &self.job.max_writer_share)
            .finish_non_exhaustive()
    }
}

/// A running [`Compactor`]. Dropping it stops the compactor after its
/// current batch and waits for it; [`stop`](CompactorHandle::stop) does the
/// same and reports how it ended.
#[must_use = "dropping the handle stops the compactor"]
pub struct CompactorHandle {
    shared: Arc<Shared>,
    thread: JobThread<()>,
}

impl CompactorHandle {
    /// What the compactor did so far (while it runs, or after it ended).
    pub fn stats(&self) -> CompactorStats {
        self.shared.stats()
    }

    /// Whether the compactor has ended: only an error ends it by itself.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Stops the compactor after its current batch (a batch is never cut
    /// short; a pause or the wait for the next pass is) and returns what it
    /// did.
    ///
    /// # Errors
    ///
    /// The error that had stopped the compactor, as
    /// [`Compactor::run_once`] describes. A panic in the compactor's thread
    /// (in a user's fold) is resumed here.
    pub fn stop(mut self) -> Result<CompactorStats> {
        self.shared.request_stop();
        self.finish()
    }

    /// Waits for the compactor to end by itself, which only an error does,
    /// then as [`stop`](CompactorHandle::stop): for a supervisor that
    /// watches it on a thread of its own.
    ///
    /// # Errors
    ///
    /// As [`stop`](CompactorHandle::stop).
    pub fn join(mut self) -> Result<CompactorStats> {
        self.finish()
    }

    fn finish(&mut self) -> Result<CompactorStats> {
        let result = self.thread.join().expect("joined once");
        result.map(|()| self.shared.stats())
    }
}

crate::job::impl_job!(CompactorHandle, CompactorStats);

impl Drop for CompactorHandle {
    fn drop(&mut self) {
        let shared = &self.shared;
        self.thread.stop_dropped(false, || shared.request_stop());
    }
}

impl fmt::Debug for CompactorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactorHandle")
            .field("stats", &self.stats())
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// A store as the compactor's thread owns it.
pub(crate) trait Batches: Send + Sync {
    fn compact_batch(&self, kind: &Kind, from: &Resume) -> Result<BatchPlan>;
}

impl<S: Backend + Send + Sync> Batches for S {
    fn compact_batch(&self, kind: &Kind, from: &Resume) -> Result<BatchPlan> {
        self.__entities().0.compact_batch(kind, from)
    }
}

/// What the compactor's thread (or task) and its handle share.
pub(crate) struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// Wakes a task's wait on a stop, as `wake` does a thread's.
    #[cfg(feature = "tokio")]
    stopped: tokio::sync::Notify,
}

struct State {
    stop: bool,
    stats: CompactorStats,
    started: Instant,
    ended: Option<Instant>,
}

impl Shared {
    fn new() -> Self {
        Shared {
            state: Mutex::new(State {
                stop: false,
                stats: CompactorStats::default(),
                started: Instant::now(),
                ended: None,
            }),
            wake: Condvar::new(),
            #[cfg(feature = "tokio")]
            stopped: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned lock still holds
        // consistent counters.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stats(&self) -> CompactorStats {
        let state = self.lock();
        let end = state.ended.unwrap_or_else(Instant::now);
        CompactorStats {
            elapsed: end.saturating_duration_since(state.started),
            ..state.stats
        }
    }

    fn stopping(&self) -> bool {
        self.lock().stop
    }

    fn request_stop(&self) {
        self.lock().stop = true;
        self.wake.notify_all();
        #[cfg(feature = "tokio")]
        self.stopped.notify_waiters();
    }

    /// Sleeps until `deadline`, or less if a stop is requested.
    fn sleep_until(&self, deadline: Instant) {
        let mut state = self.lock();
        while !state.stop {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            state = self
                .wake
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(feature = "tokio")]
mod task;
#[cfg(feature = "tokio")]
pub use self::task::CompactorTask;
#[cfg(feature = "tokio")]
pub(crate) use self::task::Offload;

#[cfg(all(test, feature = "sqlite"))]
mod tests;

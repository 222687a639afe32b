//! Job aggregation: a durable, sharded queue of score updates, drained in
//! batches by one writer.
//!
//! [`Ranking::enqueue`] stores an update in a queue table of the board's own
//! database (the SQLite file, or the PostgreSQL schema) and returns once
//! that row is committed. A [`Worker`] takes the oldest rows, applies them
//! to the tree with `Ranking::apply_in` (the code direct writes use, over
//! the backend's `Storage`) and deletes them, all in one write transaction.
//!
//! This module is the backend-neutral part: group commit, workers, flush.
//! The SQL lives in `sqlite.rs` and `postgres.rs`, one function per queue
//! operation, called through `on_backend!`.
//!
//! **Exactly once.** A batch's apply and its delete commit together or not
//! at all, so after a crash at any point the batch is either applied and
//! gone from the queue, or untouched and still queued for the next worker.
//! No two workers (in any process) apply the same rows: on SQLite they take
//! turns on the file's write lock, on PostgreSQL each queue shard is taken
//! by one transaction at a time (see `postgres.rs`); either way a worker
//! reads a shard after the previous batch's delete committed. Scores are
//! absolute besides, so even a batch applied twice would change nothing.
//!
//! Two places batch work:
//!
//! - **Group commit.** Concurrent `enqueue` calls of one process share a
//!   transaction: the first caller to find no commit in progress becomes the
//!   *leader*, takes every update queued so far in memory (its own included)
//!   and commits them together; callers that arrive meanwhile park and learn
//!   their batch's outcome, error included. One fsync then acknowledges as
//!   many updates as there were waiting callers. A leader with fewer updates
//!   than the last batch had waits up to 100 µs for the others to come back:
//!   producers that wait for their acknowledgement arrive in waves, and
//!   without the wait the first of a wave would commit alone.
//! - **Draining.** The worker applies up to [`Worker::batch_size`] updates
//!   (default 1,000) per transaction, so a tree node shared by many updates
//!   is read and written once per batch, not once per update.
//!
//! **Queue sharding.** A board has [`RankingConfig::queues`] queue shards. A
//! player's updates always go to the same shard (a stable hash of the name),
//! and each shard numbers its rows with a sequence that never goes back, so
//! draining every shard oldest-first applies each player's updates in the
//! order they were acknowledged. On SQLite the shards share the file's one
//! write lock, so they add no write parallelism (and each shard's tail is one
//! more page per group commit); they keep the per-player order explicit and
//! let the worker rotate between shards fairly. On PostgreSQL group commits
//! of different processes lock only their shards' sequence rows, and
//! workers drain different shards at once.
//!
//! [`RankingConfig::queues`]: super::RankingConfig::queues

#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;

use super::storage::Backend;
use super::{Inner, Ranking};
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

/// How long [`Ranking::flush`] waits before it gives up.
pub const DEFAULT_FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the leader of a group commit waits for callers of the last batch
/// to come back before it commits what it has. Short next to a commit
/// (about 120 µs with an fsync here), and only paid when fewer callers came
/// back than last time.
const GATHER: Duration = Duration::from_micros(100);

/// A worker whose transaction met a busy store waits this long before the
/// next try, instead of failing: another process may simply hold the lock.
const BUSY_PAUSE: Duration = Duration::from_millis(5);

/// How often `flush` looks at the queue when no worker of this process
/// signals progress: a worker in another process cannot signal.
const FLUSH_POLL: Duration = Duration::from_millis(5);

/// Calls the backend's version of a queue operation: `sqlite::$f` or
/// `postgres::$f`, with the board and its store first.
macro_rules! on_backend {
    ($ranking:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let ranking: &Ranking = $ranking;
        match &ranking.inner.backend {
            Backend::Sqlite(db) => sqlite::$f(ranking, db, $($arg),*),
            #[cfg(feature = "postgres")]
            Backend::Postgres(pg) => postgres::$f(ranking, pg, $($arg),*),
        }
    }};
}

/// What one worker transaction did.
pub(super) struct Drained {
    /// Updates applied (and deleted from the queue).
    applied: usize,
    /// Whether a queue shard was skipped because another worker held it:
    /// the queue may not be empty although nothing was applied.
    contended: bool,
}

impl Ranking {
    /// Queues `player`'s new absolute score for a [`Worker`] to apply, and
    /// returns once the update is durably stored in the queue: committed with
    /// the store's durability settings (on SQLite its `synchronous`; under
    /// the default [`Synchronous::Full`](crate::Synchronous::Full) it
    /// survives power loss; on PostgreSQL the server's `synchronous_commit`).
    ///
    /// The input is checked as [`set_score`](Ranking::set_score) checks it;
    /// a refused update is not queued. Concurrent calls in this process are
    /// committed together in one transaction (group commit), so a durable
    /// enqueue does not cost one fsync per call. A player's queued updates
    /// are applied in the order they were committed (calls that overlap in
    /// time, in the order they reached the queue); how they interleave with
    /// direct `set_score` calls for the same player depends on when the
    /// worker gets to them.
    ///
    /// Errors: [`Error::InvalidName`] and [`Error::ScoreOutOfRange`] before
    /// anything is queued; a store error if the commit failed, in which case
    /// the update is not queued (every caller of that group commit gets the
    /// error).
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// use autoshard::Sqlite;
    /// # let dir = tempfile::tempdir()?;
    /// let db = Sqlite::open(dir.path().join("game.db"))?;
    /// let board = Ranking::create(&db, "season-1", RankingConfig::new(0..10_000))?;
    /// let worker = board.worker().spawn()?;
    /// board.enqueue("dave", 77)?;
    /// board.flush()?; // everything enqueued so far is applied
    /// assert_eq!(board.score("dave")?, Some(77));
    /// worker.stop()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn enqueue(&self, player: &str, score: i64) -> Result<()> {
        self.enqueue_update(player, Some(score))
    }

    /// Queues the removal of `player`, in order with its queued scores.
    pub fn enqueue_remove(&self, player: &str) -> Result<()> {
        self.enqueue_update(player, None)
    }

    fn enqueue_update(&self, player: &str, score: Option<i64>) -> Result<()> {
        self.check_update(player, score)?;
        let item = Item {
            queue: queue_of(player, self.queues()),
            player: player.to_owned(),
            score,
        };
        self.queue_state()?.commit(self, item)
    }

    /// Updates queued and not yet applied, in all queue shards.
    pub fn queued(&self) -> Result<u64> {
        self.queue_state()?;
        on_backend!(self, queued())
    }

    /// A [`Worker`] for this board, with default options.
    pub fn worker(&self) -> Worker {
        Worker {
            ranking: self.clone(),
            batch_size: 1_000,
            idle_timeout: Duration::from_millis(20),
            linger: Duration::from_millis(20),
            exit_when_idle: false,
        }
    }

    /// Waits until every update enqueued before this call (by any handle or
    /// process) is applied, for at most [`DEFAULT_FLUSH_TIMEOUT`].
    ///
    /// A worker must be running somewhere; without one the queue never
    /// drains and this returns [`Error::FlushTimeout`]. Updates enqueued
    /// after the call started are not waited for.
    pub fn flush(&self) -> Result<()> {
        self.flush_within(DEFAULT_FLUSH_TIMEOUT)
    }

    /// [`flush`](Ranking::flush) with its own time limit.
    pub fn flush_within(&self, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        let state = self.queue_state()?;
        let marks = on_backend!(self, marks())?;
        let _urgent = state.urgent();
        loop {
            let seen = state.applied_batches();
            let behind = on_backend!(self, behind(&marks, false))?;
            if behind == 0 {
                return Ok(());
            }
            let waited = started.elapsed();
            if waited >= timeout {
                let remaining = on_backend!(self, behind(&marks, true))?;
                return Err(Error::FlushTimeout { remaining, waited });
            }
            state.wait_applied(seen, FLUSH_POLL.min(timeout - waited));
        }
    }

    /// This process's queue coordination for the board, creating the queue
    /// tables on first use. Every public queue call goes through here
    /// before it touches the queue tables.
    fn queue_state(&self) -> Result<Arc<QueueState>> {
        registry::state_for(self)
    }
}

/// The stable queue shard of `player`: FNV-1a over its UTF-8 bytes, the same
/// in every process and version, because a player whose updates moved to
/// another shard could see them applied out of order.
fn queue_of(player: &str, queues: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in player.as_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % u64::from(queues.max(1))) as u32
}

/// The queue shards `items` go to, ascending: the order a group commit
/// takes them in.
fn shards_of(items: &[Item]) -> Vec<u32> {
    let mut shards: Vec<u32> = items.iter().map(|i| i.queue).collect();
    shards.sort_unstable();
    shards.dedup();
    shards
}

/// An update waiting in memory for the next group commit.
struct Item {
    queue: u32,
    player: String,
    score: Option<i64>,
}

/// What this process's enqueuers, workers and flushers of one board share.
pub(super) struct QueueState {
    group: parking_lot::Mutex<Group>,
    /// Batches below this number have an outcome. Read without the lock,
    /// so a woken follower whose batch is done returns without queueing for
    /// the mutex behind the other followers.
    finished: AtomicU64,
    /// Batches that failed so far: while none did, a follower learns its
    /// outcome from `finished` alone.
    failures: AtomicU64,
    /// A gathering leader waits here for more updates.
    arrived: parking_lot::Condvar,
    signal: Mutex<Signal>,
    /// Workers wait here for new updates (or a stop); flushers for applied
    /// batches.
    signalled: Condvar,
    /// Group-commit transactions, for the test that shows calls are grouped.
    commits: AtomicU64,
}

#[derive(Default)]
struct Group {
    /// Updates of batch `open`, in the order their callers arrived.
    pending: Vec<Item>,
    /// Parked followers and the batch each waits for.
    waiters: Vec<(u64, Thread)>,
    /// The batch now collecting updates.
    open: u64,
    /// Whether a caller leads a batch right now (gathering or committing).
    leading: bool,
    /// Whether the leader waits for more updates of the open batch.
    gathering: bool,
    /// How many updates the last batch held: the leader of a smaller batch
    /// waits (up to [`GATHER`]) for callers of the last one to come back.
    target: usize,
    /// Failed batches: the error and how many followers have yet to read it.
    failed: HashMap<u64, (Error, usize)>,
}

#[derive(Default)]
struct Signal {
    /// Group commits so far: a worker that saw a change has work.
    enqueued: u64,
    /// Updates those group commits held: a lingering worker stops waiting
    /// once a full batch is there.
    items: u64,
    /// Worker batches applied so far: a flusher that saw a change looks again.
    applied: u64,
    /// Flushes in progress: workers skip their linger while any waits.
    urgent: usize,
    /// Flushes started so far: wakes an idle worker, which may not have
    /// seen updates enqueued by another process yet.
    flushes: u64,
}

impl QueueState {
    fn new() -> Self {
        QueueState {
            group: parking_lot::Mutex::new(Group::default()),
            finished: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            arrived: parking_lot::Condvar::new(),
            signal: Mutex::new(Signal::default()),
            signalled: Condvar::new(),
            commits: AtomicU64::new(0),
        }
    }

    fn signal(&self) -> MutexGuard<'_, Signal> {
        self.signal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Group commit: returns once `item` is committed, or with the error of
    /// the transaction that tried to commit it.
    ///
    /// Followers park instead of waiting on a condition variable: the
    /// leader then wakes all of them at once, and each returns on its own
    /// core without taking the mutex. With a condition variable they would
    /// be handed the mutex one after another, and on a small machine that
    /// chain of wake-ups, not the commit, bounded the rate.
    fn commit(&self, ranking: &Ranking, item: Item) -> Result<()> {
        let mut group = self.group.lock();
        let batch = group.open;
        group.pending.push(item);
        if group.gathering && group.pending.len() >= group.target {
            self.arrived.notify_one();
        }
        loop {
            if self.finished.load(Ordering::Acquire) > batch {
                drop(group);
                return self.outcome(batch);
            }
            if !group.leading {
                // Our batch is the open one: only a leader closes a batch,
                // and it finishes that batch before anyone else can lead.
                debug_assert_eq!(group.open, batch);
                return self.lead(ranking, group);
            }
            group.waiters.push((batch, std::thread::current()));
            drop(group);
            // Woken when our batch is done, or (first in line of the open
            // batch) when the leader left and someone must take over; any
            // other wake-up just looks again.
            std::thread::park();
            if self.finished.load(Ordering::Acquire) > batch {
                return self.outcome(batch);
            }
            group = self.group.lock();
        }
    }

    /// The outcome of a finished batch, for one of its followers.
    fn outcome(&self, batch: u64) -> Result<()> {
        if self.failures.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        let mut group = self.group.lock();
        let Some((error, readers)) = group.failed.get_mut(&batch) else {
            return Ok(());
        };
        *readers -= 1;
        let copy = copy_error(error);
        if *readers == 0 {
            group.failed.remove(&batch);
        }
        Err(copy)
    }

    /// Commits the open batch for every caller in it.
    fn lead(&self, ranking: &Ranking, mut group: parking_lot::MutexGuard<'_, Group>) -> Result<()> {
        group.leading = true;
        if group.pending.len() < group.target {
            // The callers of the last batch are on their way back with their
            // next update, but a woken thread takes a while to run: without
            // this wait, whoever comes back first commits alone and batches
            // stay near one update.
            group.gathering = true;
            let deadline = Instant::now() + GATHER;
            while group.pending.len() < group.target {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    break;
                };
                self.arrived.wait_for(&mut group, left);
            }
            group.gathering = false;
        }
        let batch = group.open;
        let items = std::mem::take(&mut group.pending);
        group.open += 1;
        group.target = items.len();
        drop(group);
        // If the write panics, the followers must still be released.
        let mut guard = Leading {
            state: self,
            batch,
            members: items.len(),
            outcome: None,
        };
        let outcome = on_backend!(ranking, write_items(&items));
        self.commits.fetch_add(1, Ordering::Relaxed);
        guard.outcome = Some(outcome.as_ref().map(|_| ()).map_err(copy_error));
        drop(guard);
        if outcome.is_ok() {
            let mut signal = self.signal();
            signal.enqueued += 1;
            signal.items += items.len() as u64;
            self.signalled.notify_all();
        }
        outcome
    }

    fn urgent(&self) -> Urgent<'_> {
        let mut signal = self.signal();
        signal.urgent += 1;
        signal.flushes += 1;
        drop(signal);
        self.signalled.notify_all();
        Urgent(self)
    }

    fn applied_batches(&self) -> u64 {
        self.signal().applied
    }

    fn wait_applied(&self, seen: u64, timeout: Duration) {
        let signal = self.signal();
        if signal.applied == seen {
            let _ = self.signalled.wait_timeout(signal, timeout);
        }
    }

    fn note_applied(&self) {
        self.signal().applied += 1;
        self.signalled.notify_all();
    }
}

/// Releases the followers of a batch with its outcome, also when the leader
/// unwinds.
struct Leading<'a> {
    state: &'a QueueState,
    batch: u64,
    members: usize,
    outcome: Option<Result<(), Error>>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let outcome = self.outcome.take().unwrap_or_else(|| {
            Err(Error::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                Some("the group commit's leader panicked before it committed".into()),
            )))
        });
        let state = self.state;
        let mut group = state.group.lock();
        if let Err(error) = outcome {
            let followers = self.members - 1;
            if followers > 0 {
                group.failed.insert(self.batch, (error, followers));
                state.failures.fetch_add(1, Ordering::Release);
            }
        }
        // Under the lock: a follower checks `finished` under it before it
        // parks, so it either sees this or is in `waiters` below.
        state.finished.store(self.batch + 1, Ordering::Release);
        group.leading = false;
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut group.waiters)
            .into_iter()
            .partition(|(batch, _)| *batch <= self.batch);
        let next = waiting.first().map(|(_, thread)| thread.clone());
        group.waiters = waiting;
        drop(group);
        for (_, thread) in done {
            thread.unpark();
        }
        if let Some(thread) = next {
            thread.unpark();
        }
    }
}

/// Marks a flush in progress for as long as it lives.
struct Urgent<'a>(&'a QueueState);

impl Drop for Urgent<'_> {
    fn drop(&mut self) {
        self.0.signal().urgent -= 1;
    }
}

/// The same error again, for every caller of a failed group commit. The
/// errors a queue insert can meet (a busy store, an SQLite failure, a
/// conflict, an unreachable server, a commit in doubt) keep their variant,
/// so retryable stays retryable; anything else keeps its message.
fn copy_error(error: &Error) -> Error {
    type Source = Box<dyn std::error::Error + Send + Sync>;
    let message = |e: &Source| -> Source { e.to_string().into() };
    match error {
        Error::Busy { attempts } => Error::Busy {
            attempts: *attempts,
        },
        Error::Conflict { attempts } => Error::Conflict {
            attempts: *attempts,
        },
        Error::Unavailable { attempts, source } => Error::Unavailable {
            attempts: *attempts,
            source: message(source),
        },
        Error::InDoubt {
            writer,
            seq,
            source,
        } => Error::InDoubt {
            writer: *writer,
            seq: *seq,
            source: message(source),
        },
        Error::Sqlite(rusqlite::Error::SqliteFailure(code, message)) => {
            Error::Sqlite(rusqlite::Error::SqliteFailure(*code, message.clone()))
        }
        other => Error::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(format!("group commit failed: {other}")),
        )),
    }
}

/// Drains a board's queue: one writer applying batches of queued updates.
///
/// Made by [`Ranking::worker`]; [`spawn`](Worker::spawn) runs it on its own
/// thread, [`drain`](Worker::drain) on the caller's until the queue is
/// empty. Any number of workers, in any number of processes, may drain one
/// board at once: each batch is one write transaction, and a queue shard is
/// read by one batch at a time (on SQLite the workers take turns on the
/// file's write lock; on PostgreSQL they drain different shards at once),
/// so a batch's rows are gone before the next worker reads that shard.
#[derive(Debug, Clone)]
pub struct Worker {
    ranking: Ranking,
    batch_size: usize,
    idle_timeout: Duration,
    linger: Duration,
    exit_when_idle: bool,
}

/// What a worker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Transactions that applied at least one update.
    pub batches: u64,
    /// Updates applied.
    pub updates: u64,
    /// Transactions that found the store busy and were tried again later.
    pub busy: u64,
}

impl Worker {
    /// Most updates applied per transaction (default 1,000, at least 1).
    /// Bigger batches share more tree nodes per write but hold the write
    /// lock longer.
    pub fn batch_size(mut self, updates: usize) -> Self {
        self.batch_size = updates.max(1);
        self
    }

    /// How long an idle worker sleeps before it looks at the queue again
    /// (default 20 ms). An enqueue or a flush in this process wakes it at
    /// once; an enqueue in another process is seen within this long (then
    /// the [`linger`](Worker::linger) applies).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// How long the worker waits after a batch that did not fill up, so the
    /// next one collects more updates (default 20 ms; cut short once a full
    /// batch is queued in this process, and skipped while a
    /// [`flush`](Ranking::flush) waits). Under load this is what makes the
    /// batches big: producers commit while the worker waits, and an update
    /// applied in a batch of hundreds costs a fraction of one applied in a
    /// batch of ten (the tree nodes and pages they share are written once,
    /// and the commit is paid once). Zero applies every update as soon as
    /// possible.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Whether the worker ends when it finds the queue empty (default
    /// false: it waits for more). Such a worker does not linger: it is there
    /// to empty the queue, not to wait for producers.
    pub fn exit_when_idle(mut self, exit: bool) -> Self {
        self.exit_when_idle = exit;
        self
    }

    /// Starts the worker on a thread of its own. It stops when the handle
    /// is stopped or dropped, or at the first error that is not a busy
    /// store.
    pub fn spawn(self) -> Result<WorkerHandle> {
        let state = self.ranking.queue_state()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name(format!("autoshard-worker-{}", self.ranking.name()))
            .spawn({
                let (state, stop) = (state.clone(), stop.clone());
                move || self.run(&state, &stop)
            })
            .expect("failed to spawn the worker thread");
        Ok(WorkerHandle {
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// Applies queued updates on this thread until the queue is empty.
    pub fn drain(self) -> Result<WorkerStats> {
        let state = self.ranking.queue_state()?;
        self.exit_when_idle(true)
            .run(&state, &AtomicBool::new(false))
    }

    fn run(self, state: &QueueState, stop: &AtomicBool) -> Result<WorkerStats> {
        let mut stats = WorkerStats::default();
        let queues = self.ranking.queues().max(1);
        let mut first = 0;
        while !stop.load(Ordering::Acquire) {
            let (seen, flushes, items) = {
                let signal = state.signal();
                (signal.enqueued, signal.flushes, signal.items)
            };
            let drained = on_backend!(&self.ranking, drain_batch(self.batch_size, first));
            let applied = match drained {
                // Nothing for us, but other workers hold shards that may
                // still have rows: not idle, only waiting our turn.
                Ok(Drained {
                    applied: 0,
                    contended: true,
                }) => {
                    stats.busy += 1;
                    std::thread::sleep(BUSY_PAUSE);
                    continue;
                }
                Ok(drained) => drained.applied,
                Err(e) if e.is_retryable() => {
                    stats.busy += 1;
                    std::thread::sleep(BUSY_PAUSE);
                    continue;
                }
                Err(e) => return Err(e),
            };
            first = (first + 1) % queues;
            if applied > 0 {
                stats.batches += 1;
                stats.updates += applied as u64;
                state.note_applied();
            }
            if applied == self.batch_size {
                continue;
            }
            if applied == 0 {
                if self.exit_when_idle {
                    break;
                }
                let woken = |s: &Signal| s.enqueued != seen || s.flushes != flushes;
                self.wait(state, stop, woken, self.idle_timeout);
            }
            if self.exit_when_idle {
                continue;
            }
            // A batch that did not fill up: let the next one collect more.
            let full = self.batch_size as u64;
            let ready = |s: &Signal| s.urgent > 0 || s.items - items >= full;
            self.wait(state, stop, ready, self.linger);
        }
        Ok(stats)
    }

    /// Sleeps up to `timeout`, waking early on a stop or when `wake` holds.
    fn wait(
        &self,
        state: &QueueState,
        stop: &AtomicBool,
        wake: impl Fn(&Signal) -> bool,
        timeout: Duration,
    ) {
        if timeout.is_zero() {
            return;
        }
        let deadline = Instant::now() + timeout;
        let mut signal = state.signal();
        loop {
            // The stop flag is set before the signal mutex is taken to
            // notify, so checking it under the mutex cannot miss the wake-up.
            if stop.load(Ordering::Acquire) || wake(&signal) {
                return;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            signal = state
                .signalled
                .wait_timeout(signal, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A running [`Worker`]. Dropping it stops the worker after its current
/// batch and waits for it; [`stop`](WorkerHandle::stop) does the same and
/// reports how the worker ended.
#[derive(Debug)]
#[must_use = "dropping the handle stops the worker"]
pub struct WorkerHandle {
    state: Arc<QueueState>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<WorkerStats>>>,
}

impl WorkerHandle {
    /// Stops the worker after its current batch. Returns what it did, or
    /// the error that had already stopped it.
    pub fn stop(mut self) -> Result<WorkerStats> {
        self.request_stop();
        self.finish()
    }

    /// Waits for the worker to end by itself: at the first error, or when
    /// it was made with [`Worker::exit_when_idle`] and found the queue empty.
    pub fn join(mut self) -> Result<WorkerStats> {
        self.finish()
    }

    /// Whether the worker has ended (failed, or idle with
    /// [`Worker::exit_when_idle`]).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        let _signal = self.state.signal();
        self.state.signalled.notify_all();
    }

    fn finish(&mut self) -> Result<WorkerStats> {
        let thread = self.thread.take().expect("joined once");
        match thread.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.request_stop();
            // The outcome is for `stop`; a dropped handle has nobody to tell.
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for QueueState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueState")
            .field("commits", &self.commits.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// PRIVATE HELPER (ranking-queue): finds the [`QueueState`] of a board.
///
/// The state belongs on the board handle (a field of `ranking::Inner`),
/// but that struct is another module's; until it grows one, this registry
/// maps each handle to its state. Handles of one SQLite file and board
/// share one state, so enqueues from any of them are committed together
/// and wake any of their workers. An in-memory database has no name to
/// share by, and a PostgreSQL handle none that is certain (see
/// `postgres::prepare`), so each such handle keeps its own (that costs
/// group-commit sharing between handles, never correctness: the database
/// orders all commits anyway).
mod registry {
    use super::*;

    #[derive(Default)]
    struct Registry {
        /// By the address of a handle's `Inner`. The `Weak` pins that
        /// allocation, so a live handle at the same address is that handle.
        handles: HashMap<usize, (Weak<Inner>, Arc<QueueState>)>,
        /// By (database, board row id).
        boards: HashMap<(String, i64), Weak<QueueState>>,
    }

    // Read on every enqueue by every producer thread, written once per
    // handle: a read-write lock keeps the producers from queueing here.
    static REGISTRY: parking_lot::RwLock<Option<Registry>> = parking_lot::const_rwlock(None);

    pub(super) fn state_for(ranking: &Ranking) -> Result<Arc<QueueState>> {
        let key = Arc::as_ptr(&ranking.inner) as usize;
        let known = REGISTRY
            .read()
            .as_ref()
            .and_then(|r| r.handles.get(&key).map(|(_, state)| state.clone()));
        if let Some(state) = known {
            return Ok(state);
        }
        // First use by this handle: make sure the tables exist, then find
        // the database's state.
        let database = on_backend!(ranking, prepare())?;
        let mut guard = REGISTRY.write();
        let registry = guard.get_or_insert_with(Registry::default);
        registry
            .handles
            .retain(|_, (inner, _)| inner.strong_count() > 0);
        registry.boards.retain(|_, state| state.strong_count() > 0);
        if let Some((_, state)) = registry.handles.get(&key) {
            return Ok(state.clone());
        }
        let state = match database {
            Some(database) => {
                let key = (database, ranking.board_id());
                let found = registry.boards.get(&key).and_then(Weak::upgrade);
                found.unwrap_or_else(|| {
                    let state = Arc::new(QueueState::new());
                    registry.boards.insert(key, Arc::downgrade(&state));
                    state
                })
            }
            None => Arc::new(QueueState::new()),
        };
        registry
            .handles
            .insert(key, (Arc::downgrade(&ranking.inner), state.clone()));
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ranking::RankingConfig;
    use crate::Sqlite;
    use std::sync::Barrier;

    #[test]
    fn queue_shards_are_stable_and_spread() {
        // Fixed values: a change of hash would reorder queued updates of
        // players whose shard moved.
        assert_eq!(queue_of("alice", 1), 0);
        assert_eq!(queue_of("", 7), (0xcbf2_9ce4_8422_2325u64 % 7) as u32);
        let mut seen = [0; 8];
        for n in 0..8_000 {
            seen[queue_of(&format!("player-{n}"), 8) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1_200).contains(&c)), "{seen:?}");
    }

    /// Group commit: 8 threads enqueueing at once need fewer transactions
    /// than enqueues. One transaction per call (the bug this guards
    /// against) makes `commits == enqueues` and fails the assertion.
    #[test]
    fn concurrent_enqueues_share_commits() {
        let dir = tempfile::tempdir().unwrap();
        let db = Sqlite::open(dir.path().join("q.db")).unwrap();
        let board = Ranking::create(&db, "b", RankingConfig::new(0..1_000).queues(3)).unwrap();
        let state = board.queue_state().unwrap();
        let (threads, each) = (8, 100);
        let start = Barrier::new(threads);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (board, start) = (&board, &start);
                s.spawn(move || {
                    start.wait();
                    for n in 0..each {
                        board.enqueue(&format!("p{t}-{n}"), n as i64).unwrap();
                    }
                });
            }
        });
        let enqueues = (threads * each) as u64;
        let commits = state.commits.load(Ordering::Relaxed);
        assert_eq!(board.queued().unwrap(), enqueues);
        assert!(
            commits < enqueues * 3 / 4,
            "{commits} commits for {enqueues} enqueues"
        );
        // Sequence numbers are dense per shard and never reused.
        let stats = board.worker().drain().unwrap();
        assert_eq!(stats.updates, enqueues);
        board.enqueue("late", 1).unwrap();
        let seqs: Vec<i64> = db
            .read(|tx| {
                let mut s = tx.prepare("SELECT seq FROM autoshard_rank_queue")?;
                let rows = s.query_map([], |r| r.get(0))?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .unwrap();
        assert_eq!(seqs.len(), 1);
        assert!(seqs[0] > 0, "a drained shard restarted its sequence");
    }

    /// Another connection holds the write lock, so group commits fail with
    /// `Busy`: every caller gets the error, the leader's followers included,
    /// and nothing is queued.
    #[test]
    fn a_failed_group_commit_fails_every_caller_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let db = Sqlite::builder(&path)
            .busy_timeout(Duration::from_millis(200))
            .max_attempts(1)
            .open()
            .unwrap();
        let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
        let state = board.queue_state().unwrap();
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let threads = 8;
        let start = Barrier::new(threads);
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let calls: Vec<_> = (0..threads)
                .map(|t| {
                    let (board, start) = (&board, &start);
                    s.spawn(move || {
                        start.wait();
                        board.enqueue(&format!("p{t}"), 1)
                    })
                })
                .collect();
            calls.into_iter().map(|c| c.join().unwrap()).collect()
        });
        for result in &results {
            assert!(
                matches!(result, Err(Error::Busy { attempts: 1 })),
                "{result:?}"
            );
        }
        let commits = state.commits.load(Ordering::Relaxed);
        assert!(
            commits < threads as u64,
            "no batch had followers: {commits}"
        );
        blocker.execute_batch("ROLLBACK").unwrap();
        assert_eq!(board.queued().unwrap(), 0);
        board.enqueue("after", 2).unwrap();
        assert_eq!(board.queued().unwrap(), 1);
    }

    #[test]
    fn a_handle_of_the_same_file_shares_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let db = Sqlite::open(&path).unwrap();
        let board = Ranking::create(&db, "b", RankingConfig::new(0..10)).unwrap();
        let other = Ranking::open(&Sqlite::open(&path).unwrap(), "b").unwrap();
        let memory = Sqlite::memory().unwrap();
        let in_memory = Ranking::create(&memory, "b", RankingConfig::new(0..10)).unwrap();
        let a = board.queue_state().unwrap();
        assert!(Arc::ptr_eq(&a, &other.queue_state().unwrap()));
        assert!(!Arc::ptr_eq(&a, &in_memory.queue_state().unwrap()));
    }
}

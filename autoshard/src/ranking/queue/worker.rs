//! Workers: one writer applying batches of queued updates.

use super::env::{Env, OnThread};
use super::group::{QueueState, Signal};
use super::{Bound, Drained, BUSY_PAUSE};
use crate::error::Result;
use crate::job::{JobThread, Live};
use crate::ranking::cache::NodeCache;
use crate::ranking::shape;
use crate::ranking::Ranking;
use crate::trace;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Drains a board's queue: one writer applying batches of queued updates.
///
/// Made by [`Ranking::worker`]; [`spawn`](BoardWorker::spawn) runs it on its own
/// thread, [`drain`](BoardWorker::drain) on the caller's until the queue is
/// empty. Any number of workers, in any number of processes, may drain one
/// board at once: each batch is one write transaction, and a queue shard is
/// read by one batch at a time (on SQLite the workers take turns on the
/// file's write lock; on PostgreSQL they drain different shards at once),
/// so a batch's rows are gone before the next worker reads that shard.
#[derive(Debug, Clone)]
pub struct BoardWorker {
    pub(super) ranking: Ranking,
    batch_size: usize,
    batch_bytes: usize,
    idle_timeout: Duration,
    linger: Duration,
    exit_when_idle: bool,
    dead_letter: bool,
    cache: bool,
    keep_top: Option<u64>,
}

/// What a worker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BoardWorkerStats {
    /// Transactions that applied at least one update.
    pub batches: u64,
    /// Updates applied.
    pub updates: u64,
    /// Transactions that found the store busy and were tried again later.
    pub busy: u64,
    /// Queued rows that could not be applied and were moved to the board's
    /// [dead letters](crate::ranking::Ranking::dead_letters): an increment
    /// whose sum would leave the board's range, or corruption as
    /// [`Error::Corrupt`](crate::Error::Corrupt) would report it (an
    /// invalid player name, a score outside the board, a row the store
    /// could not read).
    pub dead_letters: u64,
    /// Row reads the worker's [cache](BoardWorker::cache) answered.
    pub cache_hits: u64,
    /// Row reads that went to the store.
    pub cache_misses: u64,
    /// Players removed by [`keep_top`](BoardWorker::keep_top) trims.
    pub trimmed: u64,
}

/// [`BoardWorker::batch_size`]'s default: high enough that the memory bound
/// ([`DEFAULT_BATCH_BYTES`]) is the one a backlog meets first.
pub const DEFAULT_BATCH_SIZE: usize = 1_000_000;

/// [`BoardWorker::batch_bytes`]'s default: 64 MiB, some 150,000 queued updates
/// with short names and no entry data.
pub const DEFAULT_BATCH_BYTES: usize = 64 << 20;

impl BoardWorker {
    pub(super) fn new(ranking: Ranking) -> Self {
        BoardWorker {
            ranking,
            batch_size: DEFAULT_BATCH_SIZE,
            batch_bytes: DEFAULT_BATCH_BYTES,
            idle_timeout: Duration::from_millis(20),
            linger: Duration::from_millis(20),
            exit_when_idle: false,
            dead_letter: true,
            cache: true,
            keep_top: None,
        }
    }

    /// Most updates applied per transaction (default
    /// [`DEFAULT_BATCH_SIZE`], a million, at least 1). A batch takes the
    /// whole backlog up to this bound and [`batch_bytes`](BoardWorker::batch_bytes),
    /// so batches grow with the backlog: when producers outrun the worker,
    /// the next batch is bigger, and a bigger batch shares more tree nodes
    /// and pages per write and pays its commit once (BENCHMARKS.md, "SQLite
    /// queue keeps up"), until the worker catches up. The price: a batch
    /// holds the board's write lock for longer, which direct writers wait
    /// for; enqueues do not (the queue has storage of its own). A fixed
    /// small bound (say 1,000) bounds that wait, at the cost of throughput.
    pub fn batch_size(mut self, updates: usize) -> Self {
        self.batch_size = updates.max(1);
        self
    }

    /// About the most memory a batch's queued rows may take (default
    /// [`DEFAULT_BATCH_BYTES`], 64 MiB; at least one row is always taken).
    /// Counted per row as its player name, entry data and a fixed share
    /// for the apply's bookkeeping, so with long names or large entry data
    /// batches hold fewer updates. Rows are read in chunks of 4,096 and a
    /// batch stops once it reaches the bound, so it may pass it by one
    /// chunk. Not counted: the worker's [cache](BoardWorker::cache), bounded on
    /// its own.
    pub fn batch_bytes(mut self, bytes: usize) -> Self {
        self.batch_bytes = bytes;
        self
    }

    /// How long an idle worker sleeps before it looks at the queue again
    /// (default 20 ms). An enqueue or a flush in this process wakes it at
    /// once; an enqueue in another process is seen within this long (then
    /// the [`linger`](BoardWorker::linger) applies). `Duration::MAX` never looks
    /// unwoken.
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
    /// possible; `Duration::MAX` waits for a full batch or a flush.
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

    /// What the worker does with a queued row it cannot apply: an increment
    /// whose sum would leave the board's range, or a player name or a score
    /// the board refuses, or a row the store cannot read, which can only
    /// have been written behind the library's back (a hand edit, or damage
    /// to the database). With `true` (the default) it moves the row to the
    /// board's [dead letters](crate::ranking::Ranking::dead_letters), in the
    /// transaction that applies the rows around it, and counts it in
    /// [`BoardWorkerStats::dead_letters`], so the rest of the queue keeps
    /// draining. With `false` it stops at the row with
    /// [`Error::ScoreOutOfRange`](crate::Error::ScoreOutOfRange) (an
    /// increment) or [`Error::Corrupt`](crate::Error::Corrupt) (the rest),
    /// applying nothing of that batch and leaving the row queued.
    pub fn dead_letter(mut self, enabled: bool) -> Self {
        self.dead_letter = enabled;
        self
    }

    /// Whether the worker keeps the rows it applies to in memory across its
    /// batches (default true), so a batch reads only rows the worker has
    /// not seen: player rows, leaves, inner nodes and arrival nodes. The
    /// cache is dropped whenever another writer (a direct write, another
    /// worker, in any process) wrote the board since this worker's last
    /// batch; it is only used on stores whose writers are serialized
    /// (SQLite). Costs memory: up to about a million player rows, plus the
    /// tree rows touched.
    pub fn cache(mut self, enabled: bool) -> Self {
        self.cache = enabled;
        self
    }

    /// Keeps the board trimmed to its top `n` players (ordinal ranks): after
    /// every batch that applied updates, the worker runs
    /// [`Ranking::keep_top(n)`](Ranking::keep_top), in batches of its own
    /// (default: no trim). So a queued board stays small the way a Redis
    /// sorted set is kept small with `ZADD` then `ZREMRANGEBYRANK`, and the
    /// trim is applied in order with the queue: everything a batch applied
    /// is trimmed before the next batch is taken.
    ///
    /// Between a batch's commit and its trim's, a reader may see more than
    /// `n` players, and direct writes ([`Ranking::set_score`]) are trimmed
    /// only after the next batch. On a split board each tree's worker keeps
    /// its tree to its top `n`: the board's top `n` are always among them,
    /// and the board holds at most `k · n` (call [`Ranking::keep_top`] for
    /// exactly `n`). The trim is a write of its own, so the worker's
    /// [cache](BoardWorker::cache) starts over after it.
    /// `docs/design/ranking-queue.md` ("Trimming a queued board") says why
    /// this is a worker's option rather than a queued operation.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::new(0..100))?;
    /// for (i, p) in ["ann", "bo", "cy", "di"].iter().enumerate() {
    ///     board.enqueue(p, i as i64)?;
    /// }
    /// let stats = board.worker().keep_top(2).drain()?;
    /// assert_eq!((board.len()?, stats.trimmed), (2, 2));
    /// # Ok(()) }
    /// ```
    ///
    /// With `n = 0` (which would empty the board after every batch) the
    /// worker applies nothing and ends with
    /// [`Error::InvalidRanking`](crate::Error::InvalidRanking), from
    /// [`drain`](BoardWorker::drain) or its handle.
    pub fn keep_top(mut self, n: u64) -> Self {
        self.keep_top = Some(n);
        self
    }

    /// Starts the worker on a thread of its own. It stops when the handle
    /// is stopped or dropped, or at the first error that is not a busy
    /// store.
    ///
    /// # Errors
    ///
    /// A store error creating the queue tables on first use; the worker's
    /// own errors come from [`BoardWorkerHandle::stop`] or [`join`](BoardWorkerHandle::join).
    pub fn spawn(self) -> Result<BoardWorkerHandle> {
        let boards = self.queue_boards();
        if let [board] = &boards[..] {
            return self.for_queue(board).spawn_one();
        }
        let handles = boards
            .iter()
            .map(|board| self.for_queue(board).spawn_one())
            .collect::<Result<Vec<_>>>()?;
        Ok(BoardWorkerHandle::of_trees(handles))
    }

    /// The boards whose queues this worker drains, each with a worker of
    /// its own: the board, or each of a split board's trees (the board's
    /// shape says which).
    pub(super) fn queue_boards(&self) -> Vec<Ranking> {
        shape::of(&self.ranking)
            .writes()
            .queue_boards(&self.ranking)
    }

    /// This worker for one of its [`queue_boards`](BoardWorker::queue_boards).
    pub(super) fn for_queue(&self, board: &Ranking) -> BoardWorker {
        BoardWorker {
            ranking: board.clone(),
            ..self.clone()
        }
    }

    /// [`spawn`](BoardWorker::spawn) on a board with one queue.
    fn spawn_one(self) -> Result<BoardWorkerHandle> {
        let state = super::queue_state(&self.ranking)?;
        let stop = Arc::new(AtomicBool::new(false));
        let live = Live::new(BoardWorkerStats::default());
        let thread = JobThread::spawn(
            "queue worker",
            format!("autoshard-worker-{}", self.ranking.name()),
            {
                let (state, stop, live) = (state.clone(), stop.clone(), live.clone());
                move || self.run(&state, &stop, &live)
            },
        )?;
        Ok(BoardWorkerHandle {
            state,
            stop,
            live,
            thread,
            #[cfg(feature = "tokio")]
            task: None,
            trees: Vec::new(),
        })
    }

    /// Applies queued updates on this thread until the queue is empty.
    ///
    /// # Errors
    ///
    /// The first error that is not a busy store (a busy store is waited
    /// out): a store error, or with [`dead_letter`](BoardWorker::dead_letter)
    /// off the error of a queued update that cannot be applied. Batches
    /// committed before it stay applied.
    pub fn drain(self) -> Result<BoardWorkerStats> {
        let mut total = BoardWorkerStats::default();
        for board in self.queue_boards() {
            let state = super::queue_state(&board)?;
            let live = Live::new(BoardWorkerStats::default());
            let one = self.for_queue(&board).exit_when_idle(true);
            total.add(one.run(&state, &AtomicBool::new(false), &live)?);
        }
        Ok(total)
    }

    fn run(
        self,
        state: &QueueState,
        stop: &AtomicBool,
        live: &Live<BoardWorkerStats>,
    ) -> Result<BoardWorkerStats> {
        crate::compactor::run_to_end(self.run_in(&OnThread, state, stop, live))
    }

    /// The worker's one loop, on a thread ([`OnThread`]) or in a tokio
    /// task (`task.rs`): only where its batches run and how it waits differ.
    pub(super) async fn run_in(
        &self,
        env: &impl Env,
        state: &QueueState,
        stop: &AtomicBool,
        live: &Live<BoardWorkerStats>,
    ) -> Result<BoardWorkerStats> {
        if self.keep_top == Some(0) {
            // Refused before the first batch, as `Ranking::keep_top(0)` is.
            return self
                .ranking
                .keep_top(0)
                .map(|_| BoardWorkerStats::default());
        }
        let mut stats = BoardWorkerStats::default();
        let queues = self.ranking.inner.queues().max(1);
        let mut first = 0;
        // The first batch also deletes what a crashed worker applied but
        // left queued.
        let mut sweep = true;
        let mut cache = self.cache.then(NodeCache::default);
        while !stop.load(Ordering::Acquire) {
            live.publish(&stats);
            let (seen, flushes, items) = {
                let signal = state.signal();
                (signal.enqueued, signal.flushes, signal.items)
            };
            let bound = Bound {
                updates: self.batch_size,
                bytes: self.batch_bytes,
            };
            let drained = env
                .drain(
                    &self.ranking,
                    (bound, first, self.dead_letter, sweep),
                    &mut cache,
                )
                .await;
            if let Some(cache) = &cache {
                (stats.cache_hits, stats.cache_misses) = (cache.hits, cache.misses);
            }
            let (taken, bounded) = match drained {
                // Nothing for us, but other workers hold shards that may
                // still have rows: not idle, only waiting our turn.
                Ok(Drained {
                    taken: 0,
                    contended: true,
                    ..
                }) => {
                    stats.busy += 1;
                    env.pause(BUSY_PAUSE).await;
                    continue;
                }
                Ok(drained) => {
                    sweep = false;
                    if drained.applied > 0 {
                        stats.batches += 1;
                        stats.updates += drained.applied as u64;
                        stats.trimmed += self.trim(env).await?;
                    }
                    stats.dead_letters += drained.dead_letters as u64;
                    (drained.taken, drained.bounded)
                }
                Err(e) if e.is_retryable() => {
                    stats.busy += 1;
                    {
                        // Closed before the pause: an entered span cannot
                        // cross an await.
                        let _retry = trace::retry!(board = self.ranking.name(),
                            attempt = stats.busy, error = %e);
                    }
                    env.pause(BUSY_PAUSE).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            live.publish(&stats);
            first = (first + 1) % queues;
            if taken > 0 {
                state.note_applied();
            }
            // More may be queued beyond the bound: no pause.
            if bounded {
                continue;
            }
            if taken == 0 {
                if self.exit_when_idle {
                    break;
                }
                let woken = |s: &Signal| s.enqueued != seen || s.flushes != flushes;
                env.wait(state, stop, woken, self.idle_timeout).await;
            }
            if self.exit_when_idle {
                continue;
            }
            // A batch that did not fill up: let the next one collect more.
            let full = self.batch_size as u64;
            let ready = |s: &Signal| s.urgent > 0 || s.items - items >= full;
            env.wait(state, stop, ready, self.linger).await;
        }
        live.publish(&stats);
        Ok(stats)
    }

    /// The [`keep_top`](BoardWorker::keep_top) trim after a batch, a busy store
    /// waited out as a batch's is.
    async fn trim(&self, env: &impl Env) -> Result<u64> {
        let Some(n) = self.keep_top else {
            return Ok(0);
        };
        loop {
            match env.keep_top(&self.ranking, n).await {
                Err(e) if e.is_retryable() => env.pause(BUSY_PAUSE).await,
                other => return other,
            }
        }
    }
}

/// A running [`BoardWorker`]. Dropping it stops the worker after its current
/// batch and waits for it; [`stop`](BoardWorkerHandle::stop) does the same and
/// reports how the worker ended.
#[derive(Debug)]
#[must_use = "dropping the handle stops the worker"]
pub struct BoardWorkerHandle {
    state: Arc<QueueState>,
    stop: Arc<AtomicBool>,
    live: Arc<Live<BoardWorkerStats>>,
    thread: JobThread<BoardWorkerStats>,
    /// A worker running as a tokio task instead (`task.rs`).
    #[cfg(feature = "tokio")]
    pub(super) task: Option<tokio::task::JoinHandle<Result<BoardWorkerStats>>>,
    /// A split board's: one handle per tree (and no thread of its own).
    pub(super) trees: Vec<BoardWorkerHandle>,
}

impl BoardWorkerStats {
    pub(super) fn add(&mut self, other: BoardWorkerStats) {
        self.batches += other.batches;
        self.updates += other.updates;
        self.busy += other.busy;
        self.dead_letters += other.dead_letters;
        self.cache_hits += other.cache_hits;
        self.cache_misses += other.cache_misses;
        self.trimmed += other.trimmed;
    }
}

impl BoardWorkerHandle {
    /// One handle over a split board's trees' handles (none of its own).
    pub(super) fn of_trees(trees: Vec<BoardWorkerHandle>) -> Self {
        BoardWorkerHandle {
            state: trees[0].state.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            live: Live::new(BoardWorkerStats::default()),
            thread: JobThread::absent(),
            #[cfg(feature = "tokio")]
            task: None,
            trees,
        }
    }

    #[cfg(feature = "tokio")]
    pub(super) fn of_task(
        state: Arc<QueueState>,
        stop: Arc<AtomicBool>,
        live: Arc<Live<BoardWorkerStats>>,
        task: tokio::task::JoinHandle<Result<BoardWorkerStats>>,
    ) -> Self {
        BoardWorkerHandle {
            state,
            stop,
            live,
            thread: JobThread::absent(),
            task: Some(task),
            trees: Vec::new(),
        }
    }

    /// What the worker did so far (a split board's: summed over its
    /// trees), while it runs and after it ended.
    pub fn stats(&self) -> BoardWorkerStats {
        if self.trees.is_empty() {
            return self.live.get();
        }
        let mut sum = BoardWorkerStats::default();
        self.trees.iter().for_each(|t| sum.add(t.stats()));
        sum
    }

    /// Stops the worker after its current batch. Returns what it did, or
    /// the error that had already stopped it.
    ///
    /// # Errors
    ///
    /// The error that stopped the worker, as [`BoardWorker::drain`] describes.
    /// A panic in the worker thread is resumed here.
    pub fn stop(mut self) -> Result<BoardWorkerStats> {
        self.request_stop();
        self.finish()
    }

    /// Waits for the worker to end by itself: at the first error, or when
    /// it was made with [`BoardWorker::exit_when_idle`] and found the queue empty.
    ///
    /// # Errors
    ///
    /// As [`stop`](BoardWorkerHandle::stop).
    pub fn join(mut self) -> Result<BoardWorkerStats> {
        self.finish()
    }

    /// Whether the worker has ended (failed, or idle with
    /// [`BoardWorker::exit_when_idle`]).
    pub fn is_finished(&self) -> bool {
        #[cfg(feature = "tokio")]
        let task_finished = self.task.as_ref().is_none_or(|t| t.is_finished());
        #[cfg(not(feature = "tokio"))]
        let task_finished = true;
        self.thread.is_finished()
            && task_finished
            && self.trees.iter().all(BoardWorkerHandle::is_finished)
    }

    pub(super) fn request_stop(&self) {
        self.trees.iter().for_each(BoardWorkerHandle::request_stop);
        signal_stop(&self.stop, &self.state);
    }

    fn finish(&mut self) -> Result<BoardWorkerStats> {
        if !self.trees.is_empty() {
            // Every tree's worker is joined, the first error reported.
            let mut total = Ok(BoardWorkerStats::default());
            for mut tree in std::mem::take(&mut self.trees) {
                match (tree.finish(), &mut total) {
                    (Ok(stats), Ok(sum)) => sum.add(stats),
                    (Err(e), Ok(_)) => total = Err(e),
                    (_, Err(_)) => {}
                }
            }
            return total;
        }
        self.thread.join().expect("joined once")
    }
}

crate::job::impl_job!(BoardWorkerHandle, BoardWorkerStats);

impl Drop for BoardWorkerHandle {
    fn drop(&mut self) {
        #[cfg(feature = "tokio")]
        let task = self.task.is_some();
        #[cfg(not(feature = "tokio"))]
        let task = false;
        // A split board's handle has no thread: its trees' handles drop
        // after this, each stopping its own.
        let (stop, state) = (&self.stop, &self.state);
        self.thread.stop_dropped(task, || signal_stop(stop, state));
    }
}

/// Sets a worker's stop flag and wakes its waits (the condition variable
/// of a thread, the notify of a task).
fn signal_stop(stop: &AtomicBool, state: &QueueState) {
    stop.store(true, Ordering::Release);
    let _signal = state.signal();
    state.notify_all();
}

impl std::fmt::Debug for QueueState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueState")
            .field("commits", &self.commits.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

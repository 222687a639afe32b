//! Job aggregation: a durable, sharded queue of score updates, drained in
//! batches by one writer.
//!
//! [`Ranking::enqueue`] commits an update to a queue shard in the queue's
//! own storage (on SQLite a file of its own), so it never waits for a
//! worker's apply. A [`BoardWorker`] takes, in one board transaction, the rows of
//! each queue shard above the shard's applied-through mark, applies them
//! with the code direct writes use and moves the mark; after that commits,
//! it deletes the rows through the mark in a transaction of the queue's.
//! This module is store-neutral: group commit (`group.rs`), workers
//! (`worker.rs`), flush, and the drain transaction over the seam's queue
//! primitives.
//!
//! Invariants the code relies on (`docs/design/ranking-tree.md`, "Writes and
//! exactly-once" and "The queue's data model", states them in full):
//!
//! - a batch's apply and its shards' applied-through marks commit together,
//!   a worker only takes rows above the marks, and a queue shard is drained
//!   by one transaction at a time (`Storage::claim_queue`, before the mark
//!   is read), so every acknowledged update is applied exactly once, also
//!   when a crash comes between the apply and the queue's delete;
//! - a player's updates always go to the same shard (a stable hash of the
//!   name), and a shard's sequence numbers never go back, so draining each
//!   shard oldest-first applies a player's updates in acknowledgement order.

mod drain;
mod env;
mod group;
#[cfg(feature = "tokio")]
mod task;
mod worker;

pub use self::worker::{
    BoardWorker, BoardWorkerHandle, BoardWorkerStats, DEFAULT_BATCH_BYTES, DEFAULT_BATCH_SIZE,
};

#[cfg(test)]
use self::drain::drain_in;
pub(in crate::ranking) use self::drain::{deletable, Bound, Drained};
pub(in crate::ranking) use self::env::{Env, OnThread};
pub(crate) use self::group::QueueState;
#[cfg(feature = "tokio")]
pub(in crate::ranking) use self::task::InTask;
use super::{Ranking, Update};
use crate::error::{Error, Result};
use crate::hash::{fnv, FNV_OFFSET};
use crate::seam::{DeadLetter, QueuedUpdate};
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How long [`Ranking::flush`] waits before it gives up.
pub const DEFAULT_FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the leader of a group commit waits for callers of the last batch
/// to come back before it commits what it has. Short next to a commit with
/// an fsync, and only paid when fewer callers came back than last time.
const GATHER: Duration = Duration::from_micros(100);

/// A worker whose transaction met a busy store waits this long before the
/// next try, instead of failing: another process may simply hold the lock.
const BUSY_PAUSE: Duration = Duration::from_millis(5);

/// How often `flush` looks at the queue when no worker of this process
/// signals progress: a worker in another process cannot signal.
pub(crate) const FLUSH_POLL: Duration = Duration::from_millis(5);

/// A flush in progress on one queue board ([`Ranking::flush_start`]).
pub(crate) struct Flush {
    pub(crate) state: Arc<QueueState>,
    marks: Vec<(u32, i64)>,
    _urgent: group::Urgent,
}

/// Test hooks of the crash tests (`__private::queue_hooks`): a worker that
/// aborts the process between a committed apply and the queue's delete,
/// and (the control's bug) one that ignores the applied-through marks.
/// Only with the `failpoints` feature: a build without it has no abort
/// and no switch that double-applies (see the no-op twin below).
#[cfg(feature = "failpoints")]
pub(crate) mod hooks {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    /// Abort after this many more committed batches (0: never).
    pub(crate) static ABORT_BEFORE_DELETE: AtomicU64 = AtomicU64::new(0);
    /// Take every queued row, applied or not.
    pub(crate) static IGNORE_MARKS: AtomicBool = AtomicBool::new(false);

    /// Called between a batch's commit and its delete.
    pub(super) fn before_delete() {
        let left = ABORT_BEFORE_DELETE.load(Ordering::Relaxed);
        if left == 1 {
            std::process::abort();
        }
        if left > 1 {
            ABORT_BEFORE_DELETE.store(left - 1, Ordering::Relaxed);
        }
    }

    /// Whether workers take every queued row, applied or not.
    pub(super) fn ignore_marks() -> bool {
        IGNORE_MARKS.load(Ordering::Relaxed)
    }
}

/// Without `failpoints` the hooks do nothing, and the compiler drops them.
#[cfg(not(feature = "failpoints"))]
pub(crate) mod hooks {
    pub(super) fn before_delete() {}

    pub(super) fn ignore_marks() -> bool {
        false
    }
}

impl Ranking {
    /// Queues a score for `player` for a [`BoardWorker`] to apply under the
    /// board's [`Policy`](super::Policy) (a new score, or on an `Increment`
    /// board a delta, added exactly once), and returns once the update is
    /// durably stored in the queue: committed with
    /// the store's durability settings (on SQLite its `synchronous`; under
    /// the default [`Synchronous::Full`](crate::Synchronous::Full) it
    /// survives power loss; on PostgreSQL the server's `synchronous_commit`).
    /// The queue has storage of its own, so this never waits for a worker's
    /// apply: on SQLite the file `<database>-queue` next to the database
    /// (back it up with it), on PostgreSQL its own tables.
    ///
    /// The input is checked as [`set_score`](Ranking::set_score) checks it;
    /// a refused update is not queued. An increment's sum depends on what is
    /// applied before it, so any `i64` delta is queued; one whose sum would
    /// leave the range is moved to the [dead
    /// letters](Ranking::dead_letters) by the worker, and the player's later
    /// updates are applied without it. Concurrent calls in this process are
    /// committed together in one transaction (group commit), so a durable
    /// enqueue does not cost one fsync per call. A player's queued updates
    /// are applied in the order they were committed (calls that overlap in
    /// time, in the order they reached the queue); how they interleave with
    /// direct `set_score` calls for the same player depends on when the
    /// worker gets to them.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] and [`Error::ScoreOutOfRange`] (not for
    /// increments) before anything is queued; [`Error::RankingNotFound`]
    /// once the board is deleted (a stale handle), decided in the append's
    /// own transaction or script, so an acknowledged update is applied or
    /// dead-lettered, never left for a board that is gone (an update
    /// committed before a delete is deleted with the board); a store error if the commit
    /// failed, in which case
    /// the update is not queued (every caller of that group commit gets the
    /// error; see [`Error::GroupCommit`]).
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
        self.enqueue_update(Update::score(player, score))
    }

    /// Queues the removal of `player`, in order with its queued scores.
    ///
    /// # Errors
    ///
    /// As [`enqueue`](Ranking::enqueue).
    pub fn enqueue_remove(&self, player: &str) -> Result<()> {
        self.enqueue_item(player, None, None)
    }

    /// The queue row of one update of this board: its shard is the
    /// player's (what [`enqueue`](Ranking::enqueue) appends; a family
    /// appends several boards' rows in one transaction).
    pub(in crate::ranking) fn queued_update(
        &self,
        player: &str,
        score: Option<i64>,
    ) -> QueuedUpdate {
        QueuedUpdate {
            queue: queue_of(player, self.queues()),
            player: player.to_owned(),
            score,
            data: None,
        }
    }

    pub(in crate::ranking) fn enqueue_item(
        &self,
        player: &str,
        score: Option<i64>,
        data: Option<Vec<u8>>,
    ) -> Result<()> {
        self.check_update(player, score)?;
        self.shape().writes().enqueue(self, player, score, data)
    }

    /// [`enqueue`](Ranking::enqueue) on a board of one tree, checked.
    pub(in crate::ranking) fn one_tree_enqueue(
        &self,
        player: &str,
        score: Option<i64>,
        data: Option<Vec<u8>>,
    ) -> Result<()> {
        let item = QueuedUpdate {
            queue: queue_of(player, self.queues()),
            player: player.to_owned(),
            score,
            data,
        };
        self.queue_state()?.commit(self, item)
    }

    /// Updates queued and not yet applied, in all queue shards.
    ///
    /// # Errors
    ///
    /// A store error (creating the queue tables on first use, or the count).
    pub fn queued(&self) -> Result<u64> {
        self.shape().writes().queued(self)
    }

    pub(in crate::ranking) fn one_tree_queued(&self) -> Result<u64> {
        self.queue_state()?;
        self.inner.boards.queued(self.inner.id)
    }

    /// Updates acknowledged and not applied yet, from each queue shard's
    /// head (the next sequence number) and applied-through mark alone: two
    /// statements of one row per queue shard, however long the queue. Equal
    /// to [`queued`](Ranking::queued) while nothing writes the queue tables
    /// behind the library's back (a row deleted by hand still counts here).
    /// The heads are read before the marks: an update enqueued after the
    /// heads is not counted, nor one enqueued and applied between the reads.
    pub(crate) fn backlog(&self) -> Result<u64> {
        self.shape().writes().backlog(self)
    }

    pub(in crate::ranking) fn one_tree_backlog(&self) -> Result<u64> {
        self.queue_state()?;
        if !self.inner.boards.backlog_from_marks() {
            return self.inner.boards.queued(self.inner.id);
        }
        let heads = self.inner.boards.queue_marks(self.inner.id)?;
        // A mark may have passed the head read before it (enqueued and
        // applied since): that shard has nothing older waiting.
        self.read(|st, _| {
            let mut behind = 0u64;
            for &(queue, next) in &heads {
                let applied = st.applied_through(queue)?;
                behind += u64::try_from(next - 1 - applied).unwrap_or(0);
            }
            Ok(behind)
        })
    }

    /// A [`BoardWorker`] for this board, with default options.
    pub fn worker(&self) -> BoardWorker {
        BoardWorker::new(self.clone())
    }

    /// Waits until every update enqueued before this call (by any handle or
    /// process) is applied, for at most [`DEFAULT_FLUSH_TIMEOUT`].
    ///
    /// A worker must be running somewhere; without one the queue never
    /// drains and this returns [`Error::FlushTimeout`]. Updates enqueued
    /// after the call started are not waited for.
    ///
    /// # Errors
    ///
    /// [`Error::FlushTimeout`] after [`DEFAULT_FLUSH_TIMEOUT`], or a store
    /// error.
    pub fn flush(&self) -> Result<()> {
        self.flush_within(DEFAULT_FLUSH_TIMEOUT)
    }

    /// [`flush`](Ranking::flush) with its own time limit (`Duration::MAX`
    /// waits as long as it takes).
    ///
    /// # Errors
    ///
    /// [`Error::FlushTimeout`] after `timeout`, with how many updates are
    /// still queued; or a store error.
    pub fn flush_within(&self, timeout: Duration) -> Result<()> {
        self.shape().writes().flush_within(self, timeout)
    }

    pub(in crate::ranking) fn one_tree_flush_within(&self, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        let flush = self.flush_start()?;
        loop {
            let seen = flush.state.applied_batches();
            if self.flush_behind(&flush, false)? == 0 {
                return Ok(());
            }
            let waited = started.elapsed();
            if waited >= timeout {
                let remaining = self.flush_behind(&flush, true)?;
                return Err(Error::FlushTimeout { remaining, waited });
            }
            flush
                .state
                .wait_applied(seen, FLUSH_POLL.min(timeout - waited));
        }
    }

    /// The first step of a flush of this queue board (one of
    /// [`queue_boards`](Ranking::queue_boards)): checks that the board
    /// still exists, notes what is queued now, and marks a flush in
    /// progress (so workers of this process do not linger) until the
    /// returned value is dropped. The sync flush then waits between
    /// [`flush_behind`](Ranking::flush_behind) checks on the queue's
    /// condition variable, the async one on its `Notify`.
    pub(crate) fn flush_start(&self) -> Result<Flush> {
        // A deleted board's handle fails here.
        self.read(|_, _| Ok(()))?;
        let state = self.queue_state()?;
        let marks = self.inner.boards.queue_marks(self.inner.id)?;
        let urgent = state.urgent();
        Ok(Flush {
            state,
            marks,
            _urgent: urgent,
        })
    }

    /// Updates of `flush`'s marks not applied yet: with `count` false,
    /// only whether there is any (0 or 1).
    pub(crate) fn flush_behind(&self, flush: &Flush, count: bool) -> Result<u64> {
        self.inner
            .boards
            .queued_below(self.inner.id, &flush.marks, count)
    }

    /// The boards whose queues hold this board's queued updates: itself,
    /// or each of its trees.
    #[cfg(feature = "tokio")]
    pub(crate) fn queue_boards(&self) -> Vec<Ranking> {
        self.shape().writes().queue_boards(self)
    }

    /// This process's queue coordination for the board, creating the queue
    /// tables on first use. Every public queue call goes through here
    /// before it touches the queue tables.
    pub(in crate::ranking) fn queue_state(&self) -> Result<Arc<QueueState>> {
        if let Some(state) = self.inner.queue.get() {
            return Ok(state.clone());
        }
        let database = self.inner.boards.prepare_queue()?;
        let state = match database {
            Some(database) => shared_state(database, self.inner.id),
            None => Arc::new(QueueState::new()),
        };
        // A racing first call may have set it: use whichever won.
        Ok(self.inner.queue.get_or_init(|| state).clone())
    }

    /// The queued updates that could not be applied and were moved aside,
    /// oldest first: increments whose sum would have left the board's range,
    /// and rows written behind the library's back (a hand edit, or damage to
    /// the database) with a player name or a score the board refuses, or
    /// that the store could not read. A worker moves each such
    /// row here, in the transaction that drains its neighbours, so the rest
    /// of its queue shard keeps draining ([`BoardWorkerStats::dead_letters`]
    /// counts them). To apply one after all, [`enqueue`](Ranking::enqueue)
    /// it corrected; then [`delete_dead_letter`](Ranking::delete_dead_letter)
    /// it. Reads one row per dead letter.
    ///
    /// # Errors
    ///
    /// A store error (also when a stored dead letter cannot be read).
    pub fn dead_letters(&self) -> Result<Vec<DeadLetter>> {
        self.shape().writes().dead_letters(self)
    }

    pub(in crate::ranking) fn one_tree_dead_letters(&self) -> Result<Vec<DeadLetter>> {
        self.queue_state()?;
        self.inner.boards.dead_letters(self.inner.id)
    }

    /// How many dead letters the board keeps, by one count statement (or
    /// `HLEN`), not a read of each ([`StoreMetrics`](crate::StoreMetrics)).
    pub(crate) fn dead_letter_count(&self) -> Result<u64> {
        self.shape().writes().dead_letter_count(self)
    }

    pub(in crate::ranking) fn one_tree_dead_letter_count(&self) -> Result<u64> {
        self.queue_state()?;
        self.inner.boards.dead_letter_count(self.inner.id)
    }

    /// How long the oldest update not applied yet has been queued, by the
    /// store's clock; `None` when nothing (with an enqueue time) is queued.
    /// One index seek per queue shard ([`StoreMetrics`](crate::StoreMetrics)).
    pub(crate) fn oldest_queued_age(&self) -> Result<Option<Duration>> {
        self.shape().writes().oldest_queued_age(self)
    }

    pub(in crate::ranking) fn one_tree_oldest_queued_age(&self) -> Result<Option<Duration>> {
        self.queue_state()?;
        self.inner.boards.oldest_queued_age(self.inner.id)
    }

    /// Deletes dead letter `id` ([`DeadLetter::id`]); whether there was one.
    ///
    /// # Errors
    ///
    /// A store error; nothing is deleted then.
    pub fn delete_dead_letter(&self, id: i64) -> Result<bool> {
        self.shape().writes().delete_dead_letter(self, id)
    }

    pub(in crate::ranking) fn one_tree_delete_dead_letter(&self, id: i64) -> Result<bool> {
        self.queue_state()?;
        self.inner.boards.delete_dead_letter(self.inner.id, id)
    }
}

/// The queue state of board `board` in `database`, shared by every handle of
/// this process that reaches it, so enqueues from any of them are committed
/// together and wake any of their workers. Sharing costs nothing where the
/// store cannot name its database with certainty (`None` from
/// `prepare_queue`: an in-memory SQLite database, PostgreSQL): each handle
/// then keeps its own, and the database orders all commits anyway.
fn shared_state(database: String, board: i64) -> Arc<QueueState> {
    type Boards = HashMap<(String, i64), Weak<QueueState>>;
    static BOARDS: parking_lot::Mutex<Option<Boards>> = parking_lot::const_mutex(None);
    let mut boards = BOARDS.lock();
    let boards = boards.get_or_insert_with(HashMap::new);
    boards.retain(|_, state| state.strong_count() > 0);
    let key = (database, board);
    if let Some(state) = boards.get(&key).and_then(Weak::upgrade) {
        return state;
    }
    let state = Arc::new(QueueState::new());
    boards.insert(key, Arc::downgrade(&state));
    state
}

/// The stable queue shard of `player`: FNV-1a over its UTF-8 bytes, the same
/// in every process and version, because a player whose updates moved to
/// another shard could see them applied out of order.
fn queue_of(player: &str, queues: u32) -> u32 {
    (fnv(FNV_OFFSET, player.as_bytes()) % u64::from(queues.max(1))) as u32
}

impl Ranking {
    /// Group-commit transactions this handle's queue state ran, for the
    /// test that shows calls are grouped.
    #[cfg(test)]
    pub(crate) fn group_commits(&self) -> Result<u64> {
        Ok(self
            .queue_state()?
            .commits
            .load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Whether two handles share their queue state.
    #[cfg(test)]
    pub(crate) fn shares_queue_with(&self, other: &Ranking) -> Result<bool> {
        Ok(Arc::ptr_eq(&self.queue_state()?, &other.queue_state()?))
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

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

pub(in crate::ranking) mod drain;
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
use crate::ranking::shape;
use crate::ranking::write;
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

/// [`Ranking::enqueue`].
pub(in crate::ranking) fn enqueue(ranking: &Ranking, player: &str, score: i64) -> Result<()> {
    ranking.enqueue_update(Update::score(player, score))
}

/// [`Ranking::enqueue_remove`].
pub(in crate::ranking) fn enqueue_remove(ranking: &Ranking, player: &str) -> Result<()> {
    enqueue_item(ranking, player, None, None)
}

/// The queue row of one update of this board: its shard is the
/// player's (what [`enqueue`](Ranking::enqueue) appends; a family
/// appends several boards' rows in one transaction).
pub(in crate::ranking) fn queued_update(
    ranking: &Ranking,
    player: &str,
    score: Option<i64>,
) -> QueuedUpdate {
    QueuedUpdate {
        queue: queue_of(player, ranking.inner.queues()),
        player: player.to_owned(),
        score,
        data: None,
    }
}

pub(in crate::ranking) fn enqueue_item(
    ranking: &Ranking,
    player: &str,
    score: Option<i64>,
    data: Option<Vec<u8>>,
) -> Result<()> {
    write::check_update(ranking, player, score)?;
    shape::of(ranking)
        .writes()
        .enqueue(ranking, player, score, data)
}

/// [`enqueue`](Ranking::enqueue) on a board of one tree, checked.
pub(in crate::ranking) fn one_tree_enqueue(
    ranking: &Ranking,
    player: &str,
    score: Option<i64>,
    data: Option<Vec<u8>>,
) -> Result<()> {
    let item = QueuedUpdate {
        queue: queue_of(player, ranking.inner.queues()),
        player: player.to_owned(),
        score,
        data,
    };
    queue_state(ranking)?.commit(ranking, item)
}

/// [`Ranking::queued`].
pub(in crate::ranking) fn queued(ranking: &Ranking) -> Result<u64> {
    shape::of(ranking).writes().queued(ranking)
}

pub(in crate::ranking) fn one_tree_queued(ranking: &Ranking) -> Result<u64> {
    queue_state(ranking)?;
    ranking.inner.boards.queued(ranking.inner.id)
}

/// [`Ranking::backlog`].
pub(in crate::ranking) fn backlog(ranking: &Ranking) -> Result<u64> {
    shape::of(ranking).writes().backlog(ranking)
}

pub(in crate::ranking) fn one_tree_backlog(ranking: &Ranking) -> Result<u64> {
    queue_state(ranking)?;
    if !ranking.inner.boards.backlog_from_marks() {
        return ranking.inner.boards.queued(ranking.inner.id);
    }
    let heads = ranking.inner.boards.queue_marks(ranking.inner.id)?;
    // A mark may have passed the head read before it (enqueued and
    // applied since): that shard has nothing older waiting.
    ranking.inner.read(|st, _| {
        let mut behind = 0u64;
        for &(queue, next) in &heads {
            let applied = st.applied_through(queue)?;
            behind += u64::try_from(next - 1 - applied).unwrap_or(0);
        }
        Ok(behind)
    })
}

/// [`Ranking::worker`].
pub(in crate::ranking) fn worker(ranking: &Ranking) -> BoardWorker {
    BoardWorker::new(ranking.clone())
}

/// [`Ranking::flush`].
pub(in crate::ranking) fn flush(ranking: &Ranking) -> Result<()> {
    ranking.flush_within(DEFAULT_FLUSH_TIMEOUT)
}

/// [`Ranking::flush_within`].
pub(in crate::ranking) fn flush_within(ranking: &Ranking, timeout: Duration) -> Result<()> {
    shape::of(ranking).writes().flush_within(ranking, timeout)
}

pub(in crate::ranking) fn one_tree_flush_within(
    ranking: &Ranking,
    timeout: Duration,
) -> Result<()> {
    let started = Instant::now();
    let flush = ranking.flush_start()?;
    loop {
        let seen = flush.state.applied_batches();
        if ranking.flush_behind(&flush, false)? == 0 {
            return Ok(());
        }
        let waited = started.elapsed();
        if waited >= timeout {
            let remaining = ranking.flush_behind(&flush, true)?;
            return Err(Error::FlushTimeout { remaining, waited });
        }
        flush
            .state
            .wait_applied(seen, FLUSH_POLL.min(timeout - waited));
    }
}

/// [`Ranking::flush_start`].
pub(in crate::ranking) fn flush_start(ranking: &Ranking) -> Result<Flush> {
    // A deleted board's handle fails here.
    ranking.inner.read(|_, _| Ok(()))?;
    let state = queue_state(ranking)?;
    let marks = ranking.inner.boards.queue_marks(ranking.inner.id)?;
    let urgent = state.urgent();
    Ok(Flush {
        state,
        marks,
        _urgent: urgent,
    })
}

/// [`Ranking::flush_behind`].
pub(in crate::ranking) fn flush_behind(
    ranking: &Ranking,
    flush: &Flush,
    count: bool,
) -> Result<u64> {
    ranking
        .inner
        .boards
        .queued_below(ranking.inner.id, &flush.marks, count)
}

/// [`Ranking::queue_boards`].
#[cfg(feature = "tokio")]
pub(in crate::ranking) fn queue_boards(ranking: &Ranking) -> Vec<Ranking> {
    shape::of(ranking).writes().queue_boards(ranking)
}

/// This process's queue coordination for the board, creating the queue
/// tables on first use. Every public queue call goes through here
/// before it touches the queue tables.
pub(in crate::ranking) fn queue_state(ranking: &Ranking) -> Result<Arc<QueueState>> {
    if let Some(state) = ranking.inner.queue.get() {
        return Ok(state.clone());
    }
    let database = ranking.inner.boards.prepare_queue()?;
    let state = match database {
        Some(database) => shared_state(database, ranking.inner.id),
        None => Arc::new(QueueState::new()),
    };
    // A racing first call may have set it: use whichever won.
    Ok(ranking.inner.queue.get_or_init(|| state).clone())
}

/// [`Ranking::dead_letters`].
pub(in crate::ranking) fn dead_letters(ranking: &Ranking) -> Result<Vec<DeadLetter>> {
    shape::of(ranking).writes().dead_letters(ranking)
}

pub(in crate::ranking) fn one_tree_dead_letters(ranking: &Ranking) -> Result<Vec<DeadLetter>> {
    queue_state(ranking)?;
    ranking.inner.boards.dead_letters(ranking.inner.id)
}

/// [`Ranking::dead_letter_count`].
pub(in crate::ranking) fn dead_letter_count(ranking: &Ranking) -> Result<u64> {
    shape::of(ranking).writes().dead_letter_count(ranking)
}

pub(in crate::ranking) fn one_tree_dead_letter_count(ranking: &Ranking) -> Result<u64> {
    queue_state(ranking)?;
    ranking.inner.boards.dead_letter_count(ranking.inner.id)
}

/// [`Ranking::oldest_queued_age`].
pub(in crate::ranking) fn oldest_queued_age(ranking: &Ranking) -> Result<Option<Duration>> {
    shape::of(ranking).writes().oldest_queued_age(ranking)
}

pub(in crate::ranking) fn one_tree_oldest_queued_age(
    ranking: &Ranking,
) -> Result<Option<Duration>> {
    queue_state(ranking)?;
    ranking.inner.boards.oldest_queued_age(ranking.inner.id)
}

/// [`Ranking::delete_dead_letter`].
pub(in crate::ranking) fn delete_dead_letter(ranking: &Ranking, id: i64) -> Result<bool> {
    shape::of(ranking).writes().delete_dead_letter(ranking, id)
}

pub(in crate::ranking) fn one_tree_delete_dead_letter(ranking: &Ranking, id: i64) -> Result<bool> {
    queue_state(ranking)?;
    ranking
        .inner
        .boards
        .delete_dead_letter(ranking.inner.id, id)
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

/// [`Ranking::group_commits`].
#[cfg(test)]
pub(in crate::ranking) fn group_commits(ranking: &Ranking) -> Result<u64> {
    Ok(queue_state(ranking)?
        .commits
        .load(std::sync::atomic::Ordering::Relaxed))
}

/// [`Ranking::shares_queue_with`].
#[cfg(test)]
pub(in crate::ranking) fn shares_queue_with(ranking: &Ranking, other: &Ranking) -> Result<bool> {
    Ok(Arc::ptr_eq(&queue_state(ranking)?, &queue_state(other)?))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

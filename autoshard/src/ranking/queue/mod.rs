//! Job aggregation: a durable, sharded queue of score updates, drained in
//! batches by one writer.
//!
//! [`Ranking::enqueue`] commits an update to a queue shard in the board's own
//! database; a [`Worker`] takes the oldest rows, applies them with the code
//! direct writes use (`Ranking::apply_in`) and deletes them, in one write
//! transaction. This module is store-neutral: group commit (`group.rs`),
//! workers (`worker.rs`), flush, and the drain transaction over the seam's
//! queue primitives.
//!
//! Invariants the code relies on (`docs/design.md`, "Writes and
//! exactly-once", states them in full):
//!
//! - a batch's apply and its delete commit together, and a queue shard is
//!   drained by one transaction at a time (`Storage::claim_queue`), so every
//!   acknowledged update is applied exactly once;
//! - a player's updates always go to the same shard (a stable hash of the
//!   name), and a shard's sequence numbers never go back, so draining each
//!   shard oldest-first applies a player's updates in acknowledgement order.

mod group;
mod worker;

pub use self::worker::{Worker, WorkerHandle, WorkerStats};

pub(crate) use self::group::QueueState;
use super::Ranking;
use crate::error::{Error, Result};
use crate::hash::{fnv, FNV_OFFSET};
use crate::seam::{QueuedUpdate, Storage};
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
const FLUSH_POLL: Duration = Duration::from_millis(5);

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
    /// # Errors
    ///
    /// [`Error::InvalidName`] and [`Error::ScoreOutOfRange`] before
    /// anything is queued; a store error if the commit failed, in which case
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
        self.enqueue_update(player, Some(score))
    }

    /// Queues the removal of `player`, in order with its queued scores.
    ///
    /// # Errors
    ///
    /// As [`enqueue`](Ranking::enqueue).
    pub fn enqueue_remove(&self, player: &str) -> Result<()> {
        self.enqueue_update(player, None)
    }

    fn enqueue_update(&self, player: &str, score: Option<i64>) -> Result<()> {
        self.check_update(player, score)?;
        let item = QueuedUpdate {
            queue: queue_of(player, self.queues()),
            player: player.to_owned(),
            score,
        };
        self.queue_state()?.commit(self, item)
    }

    /// Updates queued and not yet applied, in all queue shards.
    ///
    /// # Errors
    ///
    /// A store error (creating the queue tables on first use, or the count).
    pub fn queued(&self) -> Result<u64> {
        self.queue_state()?;
        self.inner.boards.queued(self.inner.id)
    }

    /// A [`Worker`] for this board, with default options.
    pub fn worker(&self) -> Worker {
        Worker::new(self.clone())
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
        let started = Instant::now();
        let state = self.queue_state()?;
        let boards = &self.inner.boards;
        let marks = boards.queue_marks(self.inner.id)?;
        let _urgent = state.urgent();
        loop {
            let seen = state.applied_batches();
            let behind = boards.queued_below(self.inner.id, &marks, false)?;
            if behind == 0 {
                return Ok(());
            }
            let waited = started.elapsed();
            if waited >= timeout {
                let remaining = boards.queued_below(self.inner.id, &marks, true)?;
                return Err(Error::FlushTimeout { remaining, waited });
            }
            state.wait_applied(seen, FLUSH_POLL.min(timeout - waited));
        }
    }

    /// This process's queue coordination for the board, creating the queue
    /// tables on first use. Every public queue call goes through here
    /// before it touches the queue tables.
    fn queue_state(&self) -> Result<Arc<QueueState>> {
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

    /// One worker transaction: the oldest queued updates (up to `max`) of
    /// the shards no other worker holds, taken in turn from `first`, applied
    /// in queue order with the code direct writes use, then deleted, all in
    /// one transaction.
    fn drain_batch(&self, max: usize, first: u32) -> Result<Drained> {
        let queues = self.queues().max(1);
        self.write_with(|st: &dyn Storage| {
            let mut updates = Vec::new();
            let mut taken = Vec::new();
            let mut contended = false;
            for k in 0..queues {
                let room = max - updates.len();
                if room == 0 {
                    break;
                }
                let queue = (first + k) % queues;
                if !st.claim_queue(queue)? {
                    contended = true;
                    continue;
                }
                if let Some(last) = st.take_queued(queue, room, &mut updates)? {
                    taken.push((queue, last));
                }
            }
            if !updates.is_empty() {
                self.apply_in(st, &updates)?;
                for &(queue, last) in &taken {
                    st.delete_queued(queue, last)?;
                }
            }
            Ok(Drained {
                applied: updates.len(),
                contended,
            })
        })
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
mod tests {
    use super::*;

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
}

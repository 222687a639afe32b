//! Job aggregation: a durable, sharded queue of score updates, drained in
//! batches by one writer.
//!
//! [`Ranking::enqueue`] commits an update to a queue shard in the queue's
//! own storage (on SQLite a file of its own), so it never waits for a
//! worker's apply. A [`Worker`] takes, in one board transaction, the rows of
//! each queue shard above the shard's applied-through mark, applies them
//! with the code direct writes use and moves the mark; after that commits,
//! it deletes the rows through the mark in a transaction of the queue's.
//! This module is store-neutral: group commit (`group.rs`), workers
//! (`worker.rs`), flush, and the drain transaction over the seam's queue
//! primitives.
//!
//! Invariants the code relies on (`docs/design.md`, "Writes and
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

mod group;
mod worker;

pub use self::worker::{Worker, WorkerHandle, WorkerStats};

pub(crate) use self::group::QueueState;
use super::apply::{apply_updates_from, store_entry_data, Refused};
use super::cache::{CachedTx, NodeCache};
use super::handle::check_player;
use super::policy::Rules;
use super::tree::Geometry;
use super::Ranking;
use crate::error::{Error, Result};
use crate::hash::{fnv, FNV_OFFSET};
use crate::seam::{DeadLetter, QueuedRow, QueuedUpdate, Storage, NOTHING_APPLIED};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
pub(in crate::ranking) struct Drained {
    /// Rows taken from the queue: applied or set aside.
    pub(in crate::ranking) taken: usize,
    /// Updates applied.
    applied: usize,
    /// Rows moved to the dead letters.
    dead_letters: usize,
    /// Whether a queue shard was skipped because another worker held it:
    /// the queue may not be empty although nothing was taken.
    contended: bool,
    /// The claimed shards' applied-through marks after the batch, and
    /// whether the batch took rows from each: what the queue's delete
    /// removes once the batch committed.
    marks: Vec<(u32, i64, bool)>,
}

/// Test hooks of the crash tests (`__private::queue_hooks`): a worker that
/// aborts the process between a committed apply and the queue's delete,
/// and (the control's bug) one that ignores the applied-through marks.
pub(crate) mod hooks {
    use super::*;

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
}

impl Ranking {
    /// Queues a score for `player` for a [`Worker`] to apply under the
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
    /// increments) before anything is queued; a store error if the commit
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

    /// [`enqueue`](Ranking::enqueue) with entry data, which the worker
    /// stores with the score in the transaction that applies it, by the
    /// rule [`submit_with`](Ranking::submit_with) follows: always under
    /// `Replace` and `Increment`, under `Best` and `Worst` only when the
    /// update changed the score. Within one worker batch the last taken
    /// data of a player wins; a dead-lettered update's data is dropped with
    /// it.
    ///
    /// ```
    /// use autoshard::ranking::{Order, Policy, Ranking, RankingConfig};
    /// # let dir = tempfile::tempdir()?;
    /// let db = autoshard::Sqlite::open(dir.path().join("segments.db"))?;
    /// let config = RankingConfig::new(1..86_400)
    ///     .policy(Policy::Best)
    ///     .order(Order::LowerIsBetter)
    ///     .entry_data(32);
    /// let segment = Ranking::create(&db, "hawk-hill", config)?;
    /// segment.enqueue_with("ann", 301, b"effort-17")?;
    /// segment.enqueue_with("ann", 315, b"effort-18")?; // slower: not the record
    /// segment.worker().drain()?;
    /// assert_eq!(segment.top(1)?[0].data.as_deref(), Some(&b"effort-17"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::EntryDataTooLarge`] for data over the board's limit (on a
    /// board that keeps none, any data); otherwise as
    /// [`enqueue`](Ranking::enqueue). Nothing is queued on error.
    pub fn enqueue_with(&self, player: &str, score: i64, data: &[u8]) -> Result<()> {
        let max = self.config().entry_data_limit() as usize;
        if data.len() > max {
            return Err(Error::EntryDataTooLarge {
                len: data.len(),
                max,
            });
        }
        // As `submit_with`: a board that keeps no data gets none.
        let data = (max > 0).then(|| data.to_vec());
        self.enqueue_item(player, Some(score), data)
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

    fn enqueue_update(&self, player: &str, score: Option<i64>) -> Result<()> {
        self.enqueue_item(player, score, None)
    }

    pub(in crate::ranking) fn enqueue_item(
        &self,
        player: &str,
        score: Option<i64>,
        data: Option<Vec<u8>>,
    ) -> Result<()> {
        if let Some(split) = self.split() {
            return split.enqueue(player, score, data);
        }
        self.check_update(player, score)?;
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
        if let Some(split) = self.split() {
            return split.queued();
        }
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
        if let Some(split) = self.split() {
            return split.flush_within(timeout);
        }
        let started = Instant::now();
        // A deleted board's handle fails here (`enqueue` does not check).
        self.read(|_, _| Ok(()))?;
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

    /// One worker batch: its board transaction ([`drain_in_from`]), then the
    /// queue's delete of what it applied; with `dead_letter` false, a row
    /// that cannot be applied fails it instead of being set aside. With
    /// `sweep`, the delete also covers claimed shards the batch took nothing
    /// from: rows a worker that crashed before its delete left behind.
    pub(in crate::ranking) fn drain_batch(
        &self,
        (max, first, dead_letter, sweep): (usize, u32, bool, bool),
        cache: Option<&mut NodeCache>,
    ) -> Result<Drained> {
        let (queues, rules) = (self.queues().max(1), self.rules());
        let with_data = (rules, self.config().entry_data_limit());
        let mut staged = None;
        let floor = &|n| self.arrival_floor(n);
        let outcome = self.write_generation(|st: &dyn Storage, before| {
            let g = self.geometry();
            let cached = cache
                .as_deref()
                .and_then(|c| CachedTx::begin(st, c, before));
            let Some(cached) = cached else {
                return drain_in_from(st, g, with_data, queues, max, first, dead_letter, floor);
            };
            let drained = drain_in_from(
                &cached,
                g,
                with_data,
                queues,
                max,
                first,
                dead_letter,
                floor,
            )?;
            staged = Some(cached.finish());
            Ok(drained)
        });
        if let Some(cache) = cache {
            match (&outcome, staged) {
                (Ok(_), Some(staged)) => cache.commit(staged),
                // Failed, or in doubt: the next batch reads afresh.
                _ => cache.clear(),
            }
        }
        let drained = outcome?;
        let through: Vec<(u32, i64)> = drained
            .marks
            .iter()
            .filter(|&&(_, mark, took)| (took || sweep) && mark != NOTHING_APPLIED)
            .map(|&(queue, mark, _)| (queue, mark))
            .collect();
        if !through.is_empty() {
            hooks::before_delete();
            match self.inner.boards.delete_queued(self.inner.id, &through) {
                // The batch is applied and marked: rows left queued below
                // the marks are never taken again, and the next delete of
                // their shard removes them.
                Err(e) if e.is_retryable() => {}
                other => other?,
            }
        }
        Ok(drained)
    }

    /// The queued updates that could not be applied and were moved aside,
    /// oldest first: increments whose sum would have left the board's range,
    /// and rows written behind the library's back (a hand edit, or damage to
    /// the database) with a player name or a score the board refuses, or
    /// that the store could not read. A worker moves each such
    /// row here, in the transaction that drains its neighbours, so the rest
    /// of its queue shard keeps draining ([`WorkerStats::dead_letters`]
    /// counts them). To apply one after all, [`enqueue`](Ranking::enqueue)
    /// it corrected; then [`delete_dead_letter`](Ranking::delete_dead_letter)
    /// it. Reads one row per dead letter.
    ///
    /// # Errors
    ///
    /// A store error (also when a stored dead letter cannot be read).
    pub fn dead_letters(&self) -> Result<Vec<DeadLetter>> {
        if let Some(split) = self.split() {
            return split.dead_letters();
        }
        self.queue_state()?;
        self.inner.boards.dead_letters(self.inner.id)
    }

    /// Deletes dead letter `id` ([`DeadLetter::id`]); whether there was one.
    ///
    /// # Errors
    ///
    /// A store error; nothing is deleted then.
    pub fn delete_dead_letter(&self, id: i64) -> Result<bool> {
        if let Some(split) = self.split() {
            return split.delete_dead_letter(id);
        }
        self.queue_state()?;
        self.inner.boards.delete_dead_letter(self.inner.id, id)
    }
}

/// [`drain_in_from`] handing out the arrival numbers of a board of one
/// tree, for the tests.
#[cfg(test)]
fn drain_in(
    st: &dyn Storage,
    g: &Geometry,
    rules: (Rules, u32),
    queues: u32,
    max: usize,
    first: u32,
    dead_letter: bool,
) -> Result<Drained> {
    drain_in_from(st, g, rules, queues, max, first, dead_letter, &|_| 0)
}

/// One worker transaction over any storage: from each queue shard no
/// other worker holds, taken in turn from `first`, the oldest rows above the
/// shard's applied-through mark (up to `max` in all); those that cannot be
/// applied (an invalid player name, a score outside the board, a row the
/// store cannot read) moved to the dead letters, or with `dead_letter`
/// false reported as [`Error::Corrupt`]; the others applied in queue order
/// under the board's policy with the code direct writes use (inner-node deltas to shard 0: the
/// worker writes in big batches, so it need not spread); then each shard's
/// mark moved to the last row taken. All in the caller's transaction, so
/// applied (or set aside) and marked together. Deleting the rows is the
/// caller's, after the commit. An increment whose sum would leave the
/// range (which `enqueue` cannot know) is refused where it falls in the
/// player's sequence: moved to the dead letters, the player's later updates
/// applied without it; or with `dead_letter` false the batch fails with
/// [`Error::ScoreOutOfRange`]. Entry data queued with an update is stored
/// as `submit_with` would store it (on a board that keeps data: `limit` is
/// its most bytes, 0 for none).
///
/// A shard's rows must come in increasing sequence order above the mark:
/// a queue index that damage put out of order would otherwise hand out a
/// row the mark then skips, or one it already covers.
///
///
/// `floor(n)` is the lowest arrival number the batch's `n` updates may
/// take (`Ranking::arrival_floor`).
#[allow(clippy::too_many_arguments)] // one call site, each a distinct knob
fn drain_in_from(
    st: &dyn Storage,
    g: &Geometry,
    (rules, limit): (Rules, u32),
    queues: u32,
    max: usize,
    first: u32,
    dead_letter: bool,
    floor: &dyn Fn(usize) -> u64,
) -> Result<Drained> {
    let mut rows = Vec::new();
    // Per queue shard read: the shard, its mark, and its rows' range in
    // `rows`.
    let mut taken = Vec::new();
    let mut marks = Vec::new();
    let mut contended = false;
    for k in 0..queues {
        let room = max - rows.len();
        if room == 0 {
            break;
        }
        let queue = (first + k) % queues;
        if !st.claim_queue(queue)? {
            contended = true;
            continue;
        }
        let mark = st.applied_through(queue)?;
        let after = if hooks::IGNORE_MARKS.load(Ordering::Relaxed) {
            NOTHING_APPLIED
        } else {
            mark
        };
        let start = rows.len();
        st.take_queued(queue, after, room, &mut rows)?;
        if rows.len() > start {
            taken.push((queue, after, start..rows.len()));
        } else {
            marks.push((queue, mark, false));
        }
    }
    let row_name = |queue: u32, seq: i64| format!("queued update (queue {queue}, seq {seq})");
    for (queue, after, range) in &taken {
        let mut last = *after;
        for row in &rows[range.clone()] {
            if row.seq <= last {
                return Err(st.corrupt(
                    row_name(*queue, row.seq),
                    format!("taken after seq {last}: the queue is out of order"),
                ));
            }
            last = row.seq;
        }
    }
    let mut updates = Vec::with_capacity(rows.len());
    // The queue shard and row of each update.
    let mut origins = Vec::with_capacity(rows.len());
    let mut dead_letters = 0;
    for (queue, _, range) in &taken {
        for row in &rows[range.clone()] {
            let Some(reason) = unappliable(g, (rules, limit), row) else {
                updates.push((row.player.as_str(), row.score));
                origins.push((*queue, row));
                continue;
            };
            if !dead_letter {
                return Err(st.corrupt(row_name(*queue, row.seq), reason));
            }
            st.dead_letter(*queue, row.seq, &row.player, row.score, &reason)?;
            dead_letters += 1;
        }
    }
    let mut refused = Refused::new();
    if !updates.is_empty() {
        let refusals = dead_letter.then_some(&mut refused);
        let base = floor(updates.len());
        let floor = |i: usize| if base == 0 { 0 } else { base + i as u64 };
        let steps = apply_updates_from(st, g, rules, 0, &updates, refusals, &floor)?;
        if limit > 0 {
            let data = origins.iter().map(|(_, row)| row.data.as_deref());
            store_entry_data(st, rules, &updates, data, &steps, &refused)?;
        }
    }
    for (i, why) in &refused {
        let (queue, row) = origins[*i];
        st.dead_letter(queue, row.seq, &row.player, row.score, &why.to_string())?;
    }
    dead_letters += refused.len();
    for (queue, _, range) in taken {
        let last = rows[range.end - 1].seq;
        st.set_applied_through(queue, last)?;
        marks.push((queue, last, true));
    }
    Ok(Drained {
        taken: rows.len(),
        applied: updates.len() - refused.len(),
        dead_letters,
        contended,
        marks,
    })
}

/// Why a queued row cannot be applied, if it cannot: what `enqueue` would
/// have refused it for, or why the store could not read it.
fn unappliable(g: &Geometry, (rules, limit): (Rules, u32), row: &QueuedRow) -> Option<String> {
    if let Some(why) = &row.unreadable {
        return Some(why.clone());
    }
    if let Some(data) = row.data.as_ref().filter(|d| d.len() > limit as usize) {
        let (len, max) = (data.len(), limit as usize);
        return Some(Error::EntryDataTooLarge { len, max }.to_string());
    }
    let refused = check_player(&row.player).and_then(|()| match row.score {
        Some(value) => rules.check_value(g, value),
        None => Ok(()),
    });
    refused.err().map(|e| e.to_string())
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

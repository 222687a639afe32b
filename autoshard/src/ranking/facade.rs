//! The [`Ranking`] type and its whole API: the only `impl Ranking`.
//!
//! Each method here is the board's documented contract and a call into the
//! module that does the work (`read.rs`, `write.rs`, `queue/`, ...), which
//! dispatches over the board's shape (`shape/`) where shapes differ. A
//! module adds behaviour to a board with free functions taking the handle,
//! never with an `impl Ranking` of its own, so the API is read here, in
//! one place, and an extension (`trees/`, `approx/`, `family/`) cannot
//! grow the engine's type behind its back.

use super::approx::{self, ApproxSnapshot, Refresh, Refresher};
use super::handle::{self, Inner};
use super::queue::{self, BoardWorker, Flush};
use super::{
    composite, config, lifecycle, policy, read, trees, trim, update, write, BoardConfig, Entry,
    RankingConfig, RankingStore, Submission, Tie, Update,
};
#[cfg(doc)] // the docs' links
use crate::error::Error;
use crate::error::Result;
use crate::seam::DeadLetter;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

/// A leaderboard stored in a database. See the [module docs](super).
///
/// Cloning is cheap and shares the handle. Every query runs in one read
/// transaction, so it sees either all or none of any batch; every write is
/// one write transaction.
#[derive(Clone)]
pub struct Ranking {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for Ranking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ranking")
            .field("name", &self.inner.name)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Ranking {
    // Making a handle: `handle.rs`.

    /// Creates the board `name` (1 to [`MAX_BOARD_NAME_LEN`](super::MAX_BOARD_NAME_LEN) bytes, no
    /// control characters) in `db`, empty.
    ///
    /// # Errors
    ///
    /// [`Error::RankingExists`](crate::Error::RankingExists) if a board or a [`Family`](super::Family) is
    /// called `name`, [`Error::InvalidName`](crate::Error::InvalidName) for a bad name,
    /// [`Error::InvalidRanking`](crate::Error::InvalidRanking) for an empty range, branching outside
    /// 2..=1000, zero shards or queues, entry data over
    /// [`MAX_ENTRY_DATA`](super::MAX_ENTRY_DATA) bytes, or composite
    /// dimensions that make no board ([`RankingConfig::dimensions`]).
    /// Nothing is written on error.
    pub fn create(db: &impl RankingStore, name: &str, config: RankingConfig) -> Result<Self> {
        handle::create(db, name, config)
    }

    /// Opens the board `name`, created earlier by any handle or process.
    ///
    /// # Errors
    ///
    /// [`Error::RankingNotFound`](crate::Error::RankingNotFound) if there is none, [`Error::InvalidName`](crate::Error::InvalidName)
    /// for a name `create` would refuse, [`Error::Corrupt`](crate::Error::Corrupt) for a stored
    /// configuration that makes no tree.
    pub fn open(db: &impl RankingStore, name: &str) -> Result<Self> {
        handle::open(db, name)
    }

    /// The board's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The board's configuration.
    pub fn config(&self) -> &BoardConfig {
        &self.inner.config
    }

    // Opening a board that may not exist yet: `config.rs`.

    /// Opens the board `name` if it exists, checking that it was created
    /// with `config`, or creates it with `config`: for an application that
    /// declares its boards in code and must not silently run against one of
    /// another shape (say a `Best` board it expects, stored as `Replace`).
    ///
    /// ```
    /// use autoshard::ranking::{Policy, Ranking, RankingConfig};
    /// use autoshard::{Error, Sqlite};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = Sqlite::memory()?;
    /// let points = RankingConfig::new(0..1_000_000).policy(Policy::Increment);
    /// let board = Ranking::open_or_create(&db, "points", points.clone())?; // created
    /// let again = Ranking::open_or_create(&db, "points", points.clone())?; // opened
    /// let other = Ranking::open_or_create(&db, "points", points.policy(Policy::Best));
    /// assert!(matches!(other, Err(Error::RankingMismatch { .. })));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::RankingMismatch`] if the stored board differs from `config`
    /// (range, branching, shards, queues, policy, order or dimensions); otherwise as
    /// [`create`](Ranking::create) and [`open`](Ranking::open). Nothing is
    /// written on error.
    pub fn open_or_create(
        db: &impl RankingStore,
        name: &str,
        config: RankingConfig,
    ) -> Result<Self> {
        config::open_or_create(db, name, config)
    }

    // Listing, deleting and resetting boards: `lifecycle.rs`.

    /// The names of the boards in `db`, sorted; the member boards of
    /// [families](super::Family) are not listed (see [`Family::list`](super::Family::list)).
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// assert!(Ranking::list(&db)?.is_empty());
    /// Ranking::create(&db, "weekly", RankingConfig::new(0..100))?;
    /// Ranking::create(&db, "daily", RankingConfig::new(0..100))?;
    /// assert_eq!(Ranking::list(&db)?, ["daily", "weekly"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A store error.
    pub fn list(db: &impl RankingStore) -> Result<Vec<String>> {
        lifecycle::list(db)
    }

    /// Deletes the board `name`: its players and entry data, its tree, its
    /// queued updates, applied-through marks and dead letters. Whether there
    /// was one (`Ok(false)`: nothing to delete). Other boards' writers do not
    /// wait for it: on PostgreSQL it takes only this board's lock and
    /// deletes only its rows, in one transaction; on SQLite (one writer per
    /// file) it marks the board deleted and then deletes its rows in
    /// batches of a few thousand, each its own short transaction; on Redis
    /// Cluster it is one script on the board's slot.
    ///
    /// Handles of the deleted board fail with [`Error::RankingNotFound`]
    /// from then on, also after a board of the same name is created, which
    /// starts empty, [`enqueue`](Ranking::enqueue) included: the append
    /// checks in its own transaction or script (no extra round trip), so an
    /// enqueue racing the delete is either deleted with the board's queue
    /// or refused, never acknowledged and left behind.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// use autoshard::Error;
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let old = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// old.set_score("alice", 42)?;
    /// assert!(Ranking::delete(&db, "season")?);
    /// assert!(!Ranking::delete(&db, "season")?);
    /// assert!(matches!(old.len(), Err(Error::RankingNotFound { .. })));
    /// let new = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// assert!(matches!(old.set_score("bob", 1), Err(Error::RankingNotFound { .. })));
    /// assert_eq!(new.len()?, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a name [`create`](Ranking::create) would
    /// refuse, or a store error. A failed delete on SQLite may have marked
    /// the board deleted and left some of its rows: the next delete of any
    /// board finishes them. On Redis Cluster it may have deleted the board
    /// and left its name registered: deleting it again finishes.
    pub fn delete(db: &impl RankingStore, name: &str) -> Result<bool> {
        lifecycle::delete(db, name)
    }

    /// Empties the board and keeps its configuration. Updates queued
    /// before the reset are dropped, not applied (the queue shards'
    /// applied-through marks move past them in the reset's transaction);
    /// updates queued while it runs may land either side of it. Dead
    /// letters go too.
    ///
    /// One write transaction holding the whole board: on PostgreSQL the
    /// board's writers wait for it (other boards' do not); on SQLite every
    /// writer of the file does, so resetting a huge board there is as slow
    /// as deleting its rows. On Redis Cluster it is one commit that unlinks
    /// the board's keys, and the board's writers run again after it.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "daily", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("alice", 10), ("bob", 20)])?;
    /// board.reset()?;
    /// assert_eq!(board.len()?, 0);
    /// board.set_score("carol", 5)?;
    /// assert_eq!(board.rank_of_score(5)?, 1);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::RankingNotFound`] if the board was deleted; a store error
    /// as any write; [`Error::InvalidRanking`] if queue workers kept a queue
    /// shard for two seconds.
    pub fn reset(&self) -> Result<()> {
        lifecycle::reset(self)
    }

    // Direct writes, visible when they return: `write.rs`.

    /// Submits `score` for `player` under the board's
    /// [`Policy`](super::Policy): with the default
    /// [`Policy::Replace`](super::Policy::Replace) it becomes their score,
    /// replacing any earlier one; [`Policy::Best`](super::Policy::Best) and
    /// [`Policy::Worst`](super::Policy::Worst) keep the better or worse of
    /// the two; [`Policy::Increment`](super::Policy::Increment) adds it.
    /// [`submit`](Ranking::submit) does the same and reports what changed.
    /// Setting the score a player already has changes nothing (not even
    /// their place among ties), so a retried call is harmless, except under
    /// `Increment`, where every call adds.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`](crate::Error::ScoreOutOfRange) for a score
    /// outside the board's range (under `Increment`, a sum outside it),
    /// [`Error::InvalidName`](crate::Error::InvalidName) (player names are 1
    /// to [`MAX_PLAYER_LEN`](super::MAX_PLAYER_LEN) bytes without NUL), or a
    /// store error; nothing is written on error.
    pub fn set_score(&self, player: &str, score: i64) -> Result<()> {
        write::set_score(self, player, score)
    }

    /// Removes `player`; returns whether they were on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a player name
    /// `set_score` would refuse, or a store error; nothing is written on
    /// error.
    pub fn remove(&self, player: &str) -> Result<bool> {
        write::remove(self, player)
    }

    /// Submits many scores in one transaction, all or nothing: one bad
    /// entry refuses the whole batch before anything is written.
    ///
    /// The batch is applied by its net effect: the values are taken in
    /// order under the board's policy, so a player named twice ends at the
    /// later score (`Replace`), the best of both (`Best`), or the sum
    /// (`Increment`); a player whose final score is the one they had before
    /// keeps their place among ties; players arriving at one score are
    /// ordered by their last change in the slice. So applying the same
    /// batch again changes nothing, except under `Increment`.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`](crate::Error::ScoreOutOfRange) (under
    /// `Increment`, for a running sum outside the range) or
    /// [`Error::InvalidName`](crate::Error::InvalidName) for any entry
    /// (nothing is written then), or a store error.
    pub fn set_scores(&self, scores: &[(&str, i64)]) -> Result<()> {
        write::set_scores(self, scores)
    }

    // Writes of one `Update` value (a score or dimensions, with entry data
    // or not): `update.rs`.

    /// Writes `update` in one write transaction under the board's policy,
    /// as [`set_score`](Ranking::set_score) does with a plain score: a
    /// tuple ([`Update::dims`]) is encoded first, and entry data
    /// ([`Update::with_data`]) is stored by the rule
    /// [`submit_update`](Ranking::submit_update) states.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Policy, Ranking, RankingConfig, Update};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// // Trophies (more first), then retries (fewer first).
    /// let config = RankingConfig::dimensions([Dim::higher(0..10_000), Dim::lower(0..1_000)]);
    /// let board = Ranking::create(&db, "season", config.policy(Policy::Best))?;
    /// board.write(Update::dims("ann", &[30, 2]))?;
    /// board.write(Update::dims("ann", &[30, 5]))?; // Best keeps [30, 2]
    /// assert_eq!(board.dims("ann")?, Some(vec![30, 2]));
    /// # Ok(())
    /// # }
    /// ```
    ///
    pub fn write(&self, update: Update<'_>) -> Result<()> {
        update::write(self, update)
    }

    /// Submits `update` and reports what changed, as
    /// [`submit`](Ranking::submit) does with a plain score; a tuple's
    /// scores in the report are encoded ([`decode`](Ranking::decode) them),
    /// its ranks and `new_best` are the tuple's.
    ///
    /// Entry data (an effort id, a display name: at most
    /// [`RankingConfig::entry_data`](super::RankingConfig::entry_data)
    /// bytes) is stored in the same transaction when the submission is what
    /// the player's entry now stands for: always under `Replace` and
    /// `Increment`, under `Best` and `Worst` only when the score changed (a
    /// slower effort leaves the record's data). [`top`](Ranking::top),
    /// [`page`](Ranking::page) and [`around`](Ranking::around) return it in
    /// [`Entry::data`](super::Entry::data). Writes without data leave a
    /// player's data as it is; [`remove`](Ranking::remove) deletes it with
    /// the player.
    ///
    /// ```
    /// use autoshard::ranking::{Policy, Ranking, RankingConfig, ScoreOrder, Update};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let config = RankingConfig::new(1..86_400)
    ///     .policy(Policy::Best)
    ///     .order(ScoreOrder::LowerIsBetter)
    ///     .entry_data(64);
    /// let segment = Ranking::create(&db, "hawk-hill", config)?;
    /// segment.submit_update(Update::score("ann", 301).with_data(b"effort-17"))?;
    /// let slower = segment.submit_update(Update::score("ann", 315).with_data(b"effort-18"))?;
    /// assert!(!slower.new_best); // not the record: its data is not kept
    /// let top = segment.top(1)?;
    /// assert_eq!((top[0].score, top[0].data.as_deref()), (301, Some(&b"effort-17"[..])));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`write`](Ranking::write).
    pub fn submit_update(&self, update: Update<'_>) -> Result<Submission> {
        update::submit_update(self, update)
    }

    /// Queues `update` for a [`BoardWorker`](super::BoardWorker), as
    /// [`enqueue`](Ranking::enqueue) does with a plain score: checked here
    /// (a tuple encoded, data against the board's limit), applied by the
    /// worker under the board's policy, entry data by the rule
    /// [`submit_update`](Ranking::submit_update) states.
    ///
    /// ```
    /// use autoshard::ranking::{Policy, Ranking, RankingConfig, ScoreOrder, Update};
    /// # let dir = tempfile::tempdir()?;
    /// let db = autoshard::Sqlite::open(dir.path().join("segments.db"))?;
    /// let config = RankingConfig::new(1..86_400)
    ///     .policy(Policy::Best)
    ///     .order(ScoreOrder::LowerIsBetter)
    ///     .entry_data(32);
    /// let segment = Ranking::create(&db, "hawk-hill", config)?;
    /// segment.enqueue_update(Update::score("ann", 301).with_data(b"effort-17"))?;
    /// segment.enqueue_update(Update::score("ann", 315).with_data(b"effort-18"))?; // slower
    /// segment.worker().drain()?;
    /// assert_eq!(segment.top(1)?[0].data.as_deref(), Some(&b"effort-17"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`write`](Ranking::write), and as
    /// [`enqueue`](Ranking::enqueue); nothing is queued on error.
    pub fn enqueue_update(&self, update: Update<'_>) -> Result<()> {
        update::enqueue_update(self, update)
    }

    // Submissions under the board's policy: `policy.rs`.

    /// Submits `score` for `player` under the board's [`Policy`](super::Policy) and
    /// [`ScoreOrder`](super::ScoreOrder), as [`set_score`](Ranking::set_score) does, and reports what
    /// happened: the old and new score and rank, and whether it is a
    /// personal best. One write transaction; the ranks cost one tree
    /// descent each.
    ///
    /// ```
    /// use autoshard::ranking::{ScoreOrder, Policy, Ranking, RankingConfig};
    /// use autoshard::Sqlite;
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = Sqlite::memory()?;
    /// // Seconds on a segment: only each rider's best effort counts.
    /// let config = RankingConfig::new(1..86_400).policy(Policy::Best).order(ScoreOrder::LowerIsBetter);
    /// let segment = Ranking::create(&db, "hawk-hill", config)?;
    /// segment.set_scores(&[("ann", 300), ("bo", 320), ("cy", 340)])?;
    ///
    /// let slow = segment.submit("cy", 360)?; // not a record: the 340 stays
    /// assert!(!slow.new_best && !slow.changed());
    /// assert_eq!((slow.new_score, slow.new_rank), (340, 3));
    ///
    /// let pr = segment.submit("cy", 310)?;
    /// assert!(pr.new_best);
    /// assert_eq!((pr.old_score, pr.new_score), (Some(340), 310));
    /// assert_eq!((pr.old_rank, pr.new_rank), (Some(3), 2)); // "3rd to 2nd"
    /// assert_eq!(segment.top(1)?[0].player, "ann");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`set_score`](Ranking::set_score); nothing is written on error.
    pub fn submit(&self, player: &str, score: i64) -> Result<Submission> {
        policy::submit(self, player, score)
    }

    // Composite scores: `composite/`.

    /// The encoded score of a tuple: what the single-dimension calls
    /// ([`set_score`](Ranking::set_score), [`rank_of_score`](Ranking::rank_of_score),
    /// [`Entry::score`](super::Entry::score), ...) take and return on a
    /// composite board. A higher encoded score always ranks first. On a
    /// single-dimension board the tuple is one score, encoded as itself.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let config = RankingConfig::dimensions([Dim::higher(0..10), Dim::lower(0..100)]);
    /// let board = Ranking::create(&db, "levels", config)?;
    /// let score = board.encode(&[3, 7])?;
    /// assert_eq!(board.decode(score)?, [3, 7]);
    /// assert!(board.encode(&[3, 6])? > score); // fewer retries rank first
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::DimensionCount`] for a tuple of another length than the
    /// board's dimensions, [`Error::DimensionOutOfRange`] naming the first
    /// value outside its dimension's range (on a single-dimension board,
    /// [`Error::ScoreOutOfRange`]).
    pub fn encode(&self, values: &[i64]) -> Result<i64> {
        composite::encode(self, values)
    }

    /// The tuple an encoded score stands for, e.g. an
    /// [`Entry::score`](super::Entry::score) from [`top`](Ranking::top),
    /// [`page`](Ranking::page) or [`around`](Ranking::around), or a
    /// [`Submission`](super::Submission)'s scores; on a single-dimension board `[score]`.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`] for a number outside the encoded range.
    pub fn decode(&self, score: i64) -> Result<Vec<i64>> {
        composite::decode(self, score)
    }

    /// [`set_scores`](Ranking::set_scores) of tuples: one transaction, all
    /// or nothing, applied by its net effect as `set_scores` is.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::dimensions([Dim::higher(0..9), Dim::lower(0..9)]))?;
    /// board.set_dims_batch(&[("ann", [5, 2]), ("bo", [5, 1])])?;
    /// assert_eq!(board.dims_at_rank(1)?, Some(vec![5, 1]));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`write`](Ranking::write) of an [`Update::dims`](super::Update::dims) for any entry;
    /// nothing is written on error.
    pub fn set_dims_batch<V: AsRef<[i64]>>(&self, entries: &[(&str, V)]) -> Result<()> {
        composite::set_dims_batch(self, entries)
    }

    // The queue: durable writes a worker applies: `queue/`.

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
        queue::enqueue(self, player, score)
    }

    /// Queues the removal of `player`, in order with its queued scores.
    ///
    /// # Errors
    ///
    /// As [`enqueue`](Ranking::enqueue).
    pub fn enqueue_remove(&self, player: &str) -> Result<()> {
        queue::enqueue_remove(self, player)
    }

    /// Updates queued and not yet applied, in all queue shards.
    ///
    /// # Errors
    ///
    /// A store error (creating the queue tables on first use, or the count).
    pub fn queued(&self) -> Result<u64> {
        queue::queued(self)
    }

    /// A [`BoardWorker`] for this board, with default options.
    pub fn worker(&self) -> BoardWorker {
        queue::worker(self)
    }

    /// Waits until every update enqueued before this call (by any handle or
    /// process) is applied, for at most [`DEFAULT_FLUSH_TIMEOUT`](super::DEFAULT_FLUSH_TIMEOUT).
    ///
    /// A worker must be running somewhere; without one the queue never
    /// drains and this returns [`Error::FlushTimeout`]. Updates enqueued
    /// after the call started are not waited for.
    ///
    /// # Errors
    ///
    /// [`Error::FlushTimeout`] after [`DEFAULT_FLUSH_TIMEOUT`](super::DEFAULT_FLUSH_TIMEOUT), or a store
    /// error.
    pub fn flush(&self) -> Result<()> {
        queue::flush(self)
    }

    /// [`flush`](Ranking::flush) with its own time limit (`Duration::MAX`
    /// waits as long as it takes).
    ///
    /// # Errors
    ///
    /// [`Error::FlushTimeout`] after `timeout`, with how many updates are
    /// still queued; or a store error.
    pub fn flush_within(&self, timeout: Duration) -> Result<()> {
        queue::flush_within(self, timeout)
    }

    /// The queued updates that could not be applied and were moved aside,
    /// oldest first: increments whose sum would have left the board's range,
    /// and rows written behind the library's back (a hand edit, or damage to
    /// the database) with a player name or a score the board refuses, or
    /// that the store could not read. A worker moves each such
    /// row here, in the transaction that drains its neighbours, so the rest
    /// of its queue shard keeps draining ([`BoardWorkerStats::dead_letters`](super::BoardWorkerStats::dead_letters)
    /// counts them). To apply one after all, [`enqueue`](Ranking::enqueue)
    /// it corrected; then [`delete_dead_letter`](Ranking::delete_dead_letter)
    /// it. Reads one row per dead letter.
    ///
    /// # Errors
    ///
    /// A store error (also when a stored dead letter cannot be read).
    pub fn dead_letters(&self) -> Result<Vec<DeadLetter>> {
        queue::dead_letters(self)
    }

    /// Deletes dead letter `id` ([`DeadLetter::id`]); whether there was one.
    ///
    /// # Errors
    ///
    /// A store error; nothing is deleted then.
    pub fn delete_dead_letter(&self, id: i64) -> Result<bool> {
        queue::delete_dead_letter(self, id)
    }

    // Reads: each in one snapshot: `read.rs`.

    /// 1 + the number of players with a score strictly better than `score`
    /// (higher, or lower on an [`ScoreOrder::LowerIsBetter`](super::ScoreOrder::LowerIsBetter)
    /// board), whether or not anyone holds `score`. Reads: one node per
    /// tree level.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`].
    pub fn rank_of_score(&self, score: i64) -> Result<u64> {
        read::rank_of_score(self, score)
    }

    /// `player`'s rank under `tie`, or `None` if they are not on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse;
    /// [`Error::Corrupt`] when the stored rows contradict each other; a
    /// store error.
    pub fn rank(&self, player: &str, tie: Tie) -> Result<Option<u64>> {
        read::rank(self, player, tie)
    }

    /// `player`'s score, or `None` if they are not on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse,
    /// or a store error.
    pub fn score(&self, player: &str) -> Result<Option<i64>> {
        read::score(self, player)
    }

    /// The score of the player at ordinal rank `rank` (1-based): the score
    /// `s` with `rank_of_score(s) <= rank < rank_of_score(s) + players at s`.
    /// `None` for rank 0 or past the last player.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when the stored counts contradict each other, or
    /// a store error.
    pub fn score_at_rank(&self, rank: u64) -> Result<Option<i64>> {
        read::score_at_rank(self, rank)
    }

    /// The first `n` entries (fewer if the board is smaller). Like every
    /// list, each entry carries all three ranks ([`Entry::rank_for`]); the
    /// list is in ordinal order (`position` 1, 2, 3, ...).
    ///
    /// # Errors
    ///
    /// As [`page`](Ranking::page).
    pub fn top(&self, n: u64) -> Result<Vec<Entry>> {
        read::top(self, n)
    }

    /// The entries at ordinal ranks `from..=to` (1-based, inclusive; fewer
    /// or none past the end): "who is ranked 150 through 175?". Pages are
    /// cut by [`Entry::position`], the ordinal rank; each entry carries its
    /// standard and dense ranks too ([`Entry::rank_for`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] unless `1 <= from <= to`.
    pub fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
        read::page(self, from, to)
    }

    /// `player`'s entry with up to `k` entries above and `k` below, in
    /// ranking order (by [`Entry::position`]); empty if the player is not
    /// on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse;
    /// [`Error::Corrupt`] when the stored rows contradict each other; a
    /// store error.
    pub fn around(&self, player: &str, k: u64) -> Result<Vec<Entry>> {
        read::around(self, player, k)
    }

    /// The entries of `players` who are on the board, ranked among
    /// themselves: `rank`, `dense` and `position` count only members of
    /// the set, with the board's order and tie rules (among tied players,
    /// the one who reached the score first is first). Players not on the
    /// board are left out; a name given twice counts once. All scores come
    /// from one snapshot of the board.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..1_000))?;
    /// board.set_scores(&[("ann", 50), ("ben", 90), ("cat", 70), ("dan", 70)])?;
    /// // Ann follows Cat and Ben; she is third among the three of them.
    /// let friends = board.among(&["ann", "cat", "ben", "eve"])?;
    /// let places: Vec<_> = friends.iter().map(|e| (e.player.as_str(), e.rank)).collect();
    /// assert_eq!(places, [("ben", 1), ("cat", 2), ("ann", 3)]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for more than [`MAX_AMONG`](super::MAX_AMONG) names,
    /// [`Error::InvalidName`] for a name `set_score` would refuse, a store
    /// error; [`Error::Corrupt`] for a stored score outside the board.
    pub fn among(&self, players: &[&str]) -> Result<Vec<Entry>> {
        read::among(self, players)
    }

    /// How many players are on the board. Reads: the root.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] for a negative stored count, or a store error.
    pub fn len(&self) -> Result<u64> {
        read::len(self)
    }

    /// Whether no player is on the board.
    ///
    /// # Errors
    ///
    /// As [`len`](Ranking::len).
    pub fn is_empty(&self) -> Result<bool> {
        read::is_empty(self)
    }

    /// Recomputes every tree node from the player table (O(n), for tests
    /// and after a crash) and compares. Errors with [`Error::Corrupt`] on the
    /// first mismatch: a count that differs or is negative, a shard row out
    /// of place, an arrival tree that disagrees with its players.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] naming the first mismatch, or a store error.
    pub fn check_integrity(&self) -> Result<()> {
        read::check_integrity(self)
    }

    /// `player`'s entry: their score, all three ranks and their entry data
    /// ([`Ranking::submit_update`]); `None` if they are not on the board. One
    /// read transaction.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig, Tie, Update};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100).entry_data(16))?;
    /// board.set_scores(&[("ann", 50), ("ben", 90), ("cat", 50)])?;
    /// board.submit_update(Update::score("dan", 40).with_data(b"level 3"))?;
    /// let cat = board.entry("cat")?.expect("on the board");
    /// assert_eq!((cat.score, cat.rank, cat.dense, cat.position), (50, 2, 2, 3));
    /// assert_eq!(cat.rank_for(Tie::Ordinal), 3);
    /// assert_eq!(board.entry("dan")?.unwrap().data.as_deref(), Some(&b"level 3"[..]));
    /// assert_eq!(board.entry("eve")?, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a name `set_score` would refuse,
    /// [`Error::ApproximateBoard`] on an approximate board (its ranks are
    /// not kept), [`Error::Corrupt`], or a store error.
    pub fn entry(&self, player: &str) -> Result<Option<Entry>> {
        read::entry(self, player)
    }

    /// How many players have a score in `scores` (both ends included).
    /// Reads: two descents of the tree, in one read transaction, whatever
    /// the count. The part of `scores` outside the board's range holds
    /// nobody. On a composite board the range is over the encoded score
    /// ([`Ranking::encode`]); on a lower-is-better board it is still
    /// `low..=high` in score values.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("ann", 50), ("ben", 90), ("cat", 50), ("dan", 10)])?;
    /// assert_eq!(board.count_between(50..=90)?, 3);
    /// assert_eq!(board.count_between(-5..=1_000)?, 4);
    /// assert!(board.count_between(90..=50).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for an empty (reversed) range,
    /// [`Error::ApproximateBoard`] on an approximate board, a store error.
    pub fn count_between(&self, scores: RangeInclusive<i64>) -> Result<u64> {
        read::count_between(self, scores)
    }

    /// Up to `limit` entries with a score in `scores` (both ends included),
    /// in ranking order, best first: the page of ordinal ranks those
    /// players hold, so O(log n + k) reads for k entries, in one read
    /// transaction. `limit` 0 gives none. Ranges as in
    /// [`count_between`](Ranking::count_between) (composite boards: the
    /// encoded score).
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("ann", 50), ("ben", 90), ("cat", 50), ("dan", 10)])?;
    /// let mid = board.between(20..=95, 10)?;
    /// let names: Vec<_> = mid.iter().map(|e| (e.player.as_str(), e.position)).collect();
    /// assert_eq!(names, [("ben", 1), ("ann", 2), ("cat", 3)]);
    /// assert_eq!(board.between(20..=95, 1)?[0].player, "ben");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`count_between`](Ranking::count_between).
    pub fn between(&self, scores: RangeInclusive<i64>, limit: u64) -> Result<Vec<Entry>> {
        read::between(self, scores, limit)
    }

    /// `player`'s percentile, `None` if they are not on the board: the
    /// percentage of the board's players whose score is no better than
    /// theirs, themselves included, `100 × (n − rank + 1) / n` for `n`
    /// players and the standard rank `rank`. The best player is at 100;
    /// tied players share a percentile; it is never 0 for a player on the
    /// board. One read transaction. On a composite board, over the
    /// encoded tuple (its ranking order).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a name `set_score` would refuse,
    /// [`Error::ApproximateBoard`] on an approximate board, a store error.
    pub fn percentile(&self, player: &str) -> Result<Option<f64>> {
        read::percentile(self, player)
    }

    /// The score at percentile `p` (`0..=100`), by the nearest-rank method:
    /// list the `n` scores worst first, and take the one at place
    /// `⌈p / 100 × n⌉` (place 1 for `p = 0`): the worst score at which
    /// at least `p` percent of the players are no better. `None` on an
    /// empty board. `score_at_percentile(percentile(player))` is the
    /// player's score. One read transaction. On a composite board, the
    /// encoded tuple ([`Ranking::decode`]).
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// // Worst first: 10, 20, 30, 40, 50.
    /// board.set_scores(&[("a", 10), ("b", 20), ("c", 30), ("d", 40), ("e", 50)])?;
    /// assert_eq!(board.score_at_percentile(50.0)?, Some(30)); // place ⌈2.5⌉ = 3
    /// assert_eq!(board.score_at_percentile(40.0)?, Some(20)); // place 2
    /// assert_eq!(board.score_at_percentile(0.0)?, Some(10));
    /// assert_eq!(board.score_at_percentile(100.0)?, Some(50));
    /// assert_eq!(board.percentile("b")?, Some(40.0)); // 2 of 5 are no better
    /// assert!(board.score_at_percentile(100.5).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for `p` outside `0..=100` or NaN,
    /// [`Error::ApproximateBoard`] on an approximate board, a store error.
    pub fn score_at_percentile(&self, p: f64) -> Result<Option<i64>> {
        read::score_at_percentile(self, p)
    }

    /// Page `n` (1-based) of pages of `size` entries: ordinal ranks
    /// `(n - 1) × size + 1 ..= n × size`, as [`page`](Ranking::page) gives
    /// them; empty past the last page.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("a", 10), ("b", 20), ("c", 30), ("d", 40), ("e", 50)])?;
    /// assert_eq!(board.page_count(2)?, 3);
    /// let third: Vec<_> = board.page_number(3, 2)?.into_iter().map(|e| e.player).collect();
    /// assert_eq!(third, ["a"]);
    /// assert!(board.page_number(4, 2)?.is_empty());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for `n` or `size` 0, a store error.
    pub fn page_number(&self, n: u64, size: u64) -> Result<Vec<Entry>> {
        read::page_number(self, n, size)
    }

    /// How many pages of `size` entries the board fills: `⌈len / size⌉`
    /// (0 for an empty board).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for `size` 0, a store error.
    pub fn page_count(&self, size: u64) -> Result<u64> {
        read::page_count(self, size)
    }

    // Composite boards' reads: the reads above, through the codec.
    /// 1 + the players whose tuple ranks strictly before `values`, whether
    /// or not anyone holds it.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::dimensions([Dim::higher(0..9), Dim::lower(0..9)]))?;
    /// board.set_dims_batch(&[("ann", [5, 2]), ("bo", [5, 1]), ("cy", [4, 0])])?;
    /// assert_eq!(board.rank_of_dims(&[5, 2])?, 2); // behind bo's fewer retries
    /// assert_eq!(board.rank_of_dims(&[5, 0])?, 1);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`encode`](Ranking::encode).
    pub fn rank_of_dims(&self, values: &[i64]) -> Result<u64> {
        read::rank_of_dims(self, values)
    }

    /// `player`'s tuple, or `None` if they are not on the board.
    ///
    /// # Errors
    ///
    /// As [`score`](Ranking::score); [`Error::Corrupt`] for a stored score
    /// outside the encoded range.
    pub fn dims(&self, player: &str) -> Result<Option<Vec<i64>>> {
        read::dims(self, player)
    }

    /// The tuple of the player at ordinal rank `rank`, as
    /// [`score_at_rank`](Ranking::score_at_rank).
    ///
    /// # Errors
    ///
    /// As [`score_at_rank`](Ranking::score_at_rank).
    pub fn dims_at_rank(&self, rank: u64) -> Result<Option<Vec<i64>>> {
        read::dims_at_rank(self, rank)
    }

    // Removing many players at once: `trim.rs`.

    /// Removes `player`'s entry data ([`submit_update`](Ranking::submit_update)),
    /// keeping the player and their score and place; whether they are on
    /// the board. On a board that keeps no entry data there is none to
    /// remove, and this only says whether the player is on the board.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig, Update};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::new(0..100).entry_data(16))?;
    /// board.submit_update(Update::score("ann", 40).with_data(b"replay-7"))?;
    /// assert!(board.remove_data("ann")?);
    /// assert_eq!(board.top(1)?[0].data, None);
    /// assert_eq!(board.score("ann")?, Some(40));
    /// assert!(!board.remove_data("bo")?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name
    /// [`set_score`](Ranking::set_score) would refuse, or a store error.
    pub fn remove_data(&self, player: &str) -> Result<bool> {
        trim::remove_data(self, player)
    }

    /// Removes every player whose score lies in `scores` (both ends
    /// included; parts of it outside the board's range hold nobody), in
    /// batches of at most [`TRIM_BATCH`](super::TRIM_BATCH) players, each its own write
    /// transaction; how many were removed. On a composite board the range
    /// is of encoded scores ([`encode`](Ranking::encode)).
    ///
    /// Writers of the board wait for one batch at most. A player in the
    /// range when the call starts and not written during it is removed; a
    /// player never in the range while it runs is kept; a player written
    /// while it runs may go either way (the batch that reaches them decides
    /// from their score then). When it returns, its last batch found the
    /// range empty (or emptied it) in one snapshot.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("ann", 10), ("bo", 20), ("cy", 30), ("di", 40)])?;
    /// assert_eq!(board.remove_between(15..=30)?, 2);
    /// assert_eq!(board.len()?, 2);
    /// assert_eq!(board.remove_between(90..=1_000)?, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for an empty range (`hi < lo`);
    /// [`Error::ApproximateBoard`] on an approximate board; a store error
    /// (the batches committed before it stay removed).
    pub fn remove_between(&self, scores: RangeInclusive<i64>) -> Result<u64> {
        trim::remove_between(self, scores)
    }

    /// Removes every player ranked below the first `n` (ordinal ranks,
    /// [`Tie::Ordinal`](super::Tie::Ordinal): of players tied at the cut,
    /// those who reached the score first stay), in batches of at most
    /// [`TRIM_BATCH`](super::TRIM_BATCH) players, each its own write transaction; how many
    /// were removed. The way a board is kept small.
    ///
    /// Writers of the board wait for one batch at most. Each batch removes
    /// players ranked below `n` in its own snapshot, so when it returns,
    /// the board held at most `n` players as its last batch committed; a
    /// player written while it runs may survive it (later writes can
    /// bring the board above `n` again), and on a split board (whose batches
    /// read the merged trees, then remove per tree) a player written
    /// between a batch's read and its removal is kept if their score moved.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("ann", 10), ("bo", 20), ("cy", 20), ("di", 40)])?;
    /// assert_eq!(board.keep_top(2)?, 2); // bo reached 20 before cy
    /// let left: Vec<_> = board.top(10)?.into_iter().map(|e| e.player).collect();
    /// assert_eq!(left, ["di", "bo"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for `n = 0` ([`reset`](Ranking::reset)
    /// empties a board); [`Error::ApproximateBoard`] on an approximate
    /// board; a store error (the batches committed before it stay removed).
    pub fn keep_top(&self, n: u64) -> Result<u64> {
        trim::keep_top(self, n)
    }

    // Split boards (`RankingConfig::trees`): `trees/`.

    /// A [`BoardWorker`](super::BoardWorker) for tree `tree` of a split board only
    /// (for one of the board's trees: `0..tree_count`); on a board of one
    /// tree, `tree` 0 is the board's own worker. Running one worker per tree
    /// in separate processes spreads the apply over them.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "split", RankingConfig::new(0..100).trees(2))?;
    /// board.enqueue("ann", 5)?;
    /// board.enqueue("bo", 6)?;
    /// for t in 0..2 {
    ///     board.tree_worker(t)?.drain()?;
    /// }
    /// assert_eq!(board.len()?, 2);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for a tree the board does not have.
    pub fn tree_worker(&self, tree: u32) -> Result<super::BoardWorker> {
        trees::tree_worker(self, tree)
    }

    /// The tree `player` lives in, `0..tree_count` (always 0 on a board of
    /// one tree): a stable hash of the name, the same in every process.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "split", RankingConfig::new(0..100).trees(4))?;
    /// assert!(board.tree_of("ann") < 4);
    /// # Ok(()) }
    /// ```
    pub fn tree_of(&self, player: &str) -> u32 {
        trees::tree_of(player, self.inner.config.trees().max(1) as usize) as u32
    }

    // Approximate boards: `approx/`.

    /// The approximate standard rank of `score` on an approximate board
    /// ([`RankingConfig::approximate`](super::RankingConfig::approximate)):
    /// 1 + the players with a better score, estimated from the bucket
    /// snapshot the last [`refresh`](Ranking::refresh) published.
    ///
    /// Reads: the snapshot pointer (one small row); the bucket rows only
    /// when another refresh has published since this handle last read them
    /// (the snapshot is cached in the process, keyed by its number).
    /// [`approx_snapshot`](Ranking::approx_snapshot) answers with no read.
    ///
    /// **Error bound.** Against the exact rank among the players as the
    /// refresh read them, the estimate is exact at each bucket's best and
    /// worst score, just below its best, and between buckets; inside a
    /// bucket it is off by at most the bucket's interior players (neither
    /// at its best nor at its worst score), which is below `ceil(n / b) -
    /// 1` for `n` players and `b` buckets
    /// ([`ApproxSnapshot::error_bound`]). Each update since the refresh
    /// can move the exact rank of a score by one more. A better score never
    /// gets a worse estimate.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::new(0..10_000).approximate(4))?;
    /// let scores: Vec<(String, i64)> = (0..100).map(|i| (format!("p{i}"), i * 100)).collect();
    /// let scores: Vec<(&str, i64)> = scores.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    /// board.set_scores(&scores)?; // only player rows
    /// board.refresh()?;
    /// assert_eq!(board.approx_rank(9_900)?, 1); // a bucket's best: exact
    /// assert_eq!(board.approx_rank(5_000)?, 50); // inside: interpolated
    /// assert_eq!(board.approx_snapshot()?.error_bound(), 23); // at most ceil(100 / 4) - 2
    /// assert!(board.rank("p3", autoshard::ranking::Tie::Standard).is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::ApproximateBoard`] on an exact board,
    /// [`Error::NoSnapshot`] before the first refresh,
    /// [`Error::ScoreOutOfRange`], or a store error.
    pub fn approx_rank(&self, score: i64) -> Result<u64> {
        approx::approx_rank(self, score)
    }

    /// The published snapshot, read (or taken from this process's cache
    /// when unchanged) now: its [`rank`](ApproxSnapshot::rank) reads
    /// nothing, for callers that rank many scores, or that accept the
    /// snapshot they hold until they ask again.
    ///
    /// # Errors
    ///
    /// As [`approx_rank`](Ranking::approx_rank).
    pub fn approx_snapshot(&self) -> Result<Arc<ApproxSnapshot>> {
        approx::approx_snapshot(self)
    }

    // Approximate boards, publishing snapshots: `approx/refresh.rs`.

    /// Recomputes an approximate board's buckets from its score index and
    /// publishes them as a new snapshot, which
    /// [`approx_rank`](Ranking::approx_rank) answers from then on.
    ///
    /// The protocol (docs/design/approximate-boards.md, "Approximate boards"): reserve a new
    /// snapshot number; read the score index in one read transaction
    /// (writers go on meanwhile); write the buckets under the new number, a chunk per
    /// transaction, where no reader looks; then, in one transaction, check
    /// that every row is there, flip the board's pointer to the new number
    /// and delete the older snapshots. A reader reads the pointer and the
    /// rows it names in one transaction, so it always sees one complete
    /// snapshot: the previous one until the flip commits, also while a
    /// refresh runs or after one was killed (whose rows the next publish
    /// deletes). Refreshes may run concurrently, from any process.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::new(0..1000).approximate(10))?;
    /// let scores: Vec<(String, i64)> = (0..100).map(|i| (format!("p{i}"), i * 7)).collect();
    /// let scores: Vec<(&str, i64)> = scores.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    /// board.set_scores(&scores)?;
    /// let refresh = board.refresh()?;
    /// assert_eq!((refresh.players, refresh.buckets, refresh.published), (100, 10, true));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::ApproximateBoard`] on an exact board, a store error, or
    /// [`Error::Corrupt`] for a score index or snapshot rows that
    /// contradict themselves; nothing is published on error.
    pub fn refresh(&self) -> Result<Refresh> {
        approx::refresh::refresh(self)
    }

    /// A thread that [`refresh`](Ranking::refresh)es this board every
    /// `interval` (at least 1 ms) until its handle is stopped or dropped:
    /// the background job of an approximate board.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// use std::time::Duration;
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::new(0..1000).approximate(10))?;
    /// board.set_score("ann", 500)?;
    /// let refresher = board.refresher(Duration::from_millis(10)).spawn()?;
    /// while board.approx_snapshot().is_err() {
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// assert_eq!(board.approx_rank(400)?, 2);
    /// assert!(refresher.stop()?.published >= 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn refresher(&self, interval: Duration) -> Refresher {
        approx::refresh::refresher(self, interval)
    }

    // What the crate outside `ranking/` asks of a board: the async API's
    // flush, metrics and the queue's tests.

    /// Updates acknowledged and not applied yet, from each queue shard's
    /// head (the next sequence number) and applied-through mark alone: two
    /// statements of one row per queue shard, however long the queue. Equal
    /// to [`queued`](Ranking::queued) while nothing writes the queue tables
    /// behind the library's back (a row deleted by hand still counts here).
    /// The heads are read before the marks: an update enqueued after the
    /// heads is not counted, nor one enqueued and applied between the reads.
    pub(crate) fn backlog(&self) -> Result<u64> {
        queue::backlog(self)
    }

    /// The first step of a flush of this queue board (one of
    /// [`queue_boards`](Ranking::queue_boards)): checks that the board
    /// still exists, notes what is queued now, and marks a flush in
    /// progress (so workers of this process do not linger) until the
    /// returned value is dropped. The sync flush then waits between
    /// [`flush_behind`](Ranking::flush_behind) checks on the queue's
    /// condition variable, the async one on its `Notify`.
    pub(crate) fn flush_start(&self) -> Result<Flush> {
        queue::flush_start(self)
    }

    /// Updates of `flush`'s marks not applied yet: with `count` false,
    /// only whether there is any (0 or 1).
    pub(crate) fn flush_behind(&self, flush: &Flush, count: bool) -> Result<u64> {
        queue::flush_behind(self, flush, count)
    }

    /// The boards whose queues hold this board's queued updates: itself,
    /// or each of its trees.
    #[cfg(feature = "tokio")]
    pub(crate) fn queue_boards(&self) -> Vec<Ranking> {
        queue::queue_boards(self)
    }

    /// How many dead letters the board keeps, by one count statement (or
    /// `HLEN`), not a read of each ([`StoreMetrics`](crate::StoreMetrics)).
    pub(crate) fn dead_letter_count(&self) -> Result<u64> {
        queue::dead_letter_count(self)
    }

    /// How long the oldest update not applied yet has been queued, by the
    /// store's clock; `None` when nothing (with an enqueue time) is queued.
    /// One index seek per queue shard ([`StoreMetrics`](crate::StoreMetrics)).
    pub(crate) fn oldest_queued_age(&self) -> Result<Option<Duration>> {
        queue::oldest_queued_age(self)
    }

    /// Group-commit transactions this handle's queue state ran, for the
    /// test that shows calls are grouped.
    #[cfg(test)]
    pub(crate) fn group_commits(&self) -> Result<u64> {
        queue::group_commits(self)
    }

    /// Whether two handles share their queue state.
    #[cfg(test)]
    pub(crate) fn shares_queue_with(&self, other: &Ranking) -> Result<bool> {
        queue::shares_queue_with(self, other)
    }
}

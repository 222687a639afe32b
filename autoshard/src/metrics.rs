//! [`StoreMetrics`]: one call a service exports (a `/metrics` handler, a
//! log line a minute) with what its boards' queues hold and what this
//! process did. It sits above the ranking layer, which it reads; the
//! process counters it reads are counted below (`crate::counters`).

use crate::counters::{self, Counter};
use crate::entity::Shardable;
use crate::error::Result;
use crate::ranking::{Ranking, RankingStore};
use crate::store::Store;
use serde::Serialize;
use std::time::Duration;

/// A snapshot of a store's boards and of this process's work, from
/// [`StoreMetrics::snapshot`].
///
/// Which numbers are exact:
///
/// - [`BoardMetrics::queued`] is exact for what the library wrote, from the
///   queue shards' heads and applied-through marks (see its docs);
/// - [`BoardMetrics::dead_letters`] is exact;
/// - [`BoardMetrics::oldest_queued`] is the enqueue time the store stamped
///   on the oldest row not applied yet, aged by the store's clock;
/// - [`ProcessCounters`] are exact for this process since it started, all
///   stores and handles together, and nothing of other processes.
///
/// Compaction lag is per kind, and a snapshot knows no kinds:
/// [`with_kind`](StoreMetrics::with_kind) adds one kind's
/// ([`KindLag`]), at the cost of [`Store::stats`]: one count statement per
/// sharded field over every shard row of the kind (in the database,
/// nothing transferred), so a scrape that adds kinds should not run every
/// second on millions of rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StoreMetrics {
    /// One entry per board of [`Ranking::list`], in its order (family
    /// member boards are not listed).
    pub boards: Vec<BoardMetrics>,
    /// One entry per kind added with [`with_kind`](StoreMetrics::with_kind),
    /// in the order added.
    pub kinds: Vec<KindLag>,
    /// What this process did.
    pub counters: ProcessCounters,
}

/// How far compaction lags for one kind, in a [`StoreMetrics`]: what
/// [`Store::stats`] counts, summed over the kind's sharded fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KindLag {
    /// The kind's name.
    pub kind: String,
    /// Shard rows compaction would fold away now
    /// ([`KindStats::pending`](crate::KindStats::pending)).
    pub pending: u64,
    /// How long ago the oldest of them was appended
    /// ([`KindStats::oldest_pending`](crate::KindStats::oldest_pending),
    /// whose docs say when a store cannot tell).
    pub oldest_pending: Option<Duration>,
}

/// One board's queue in a [`StoreMetrics`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BoardMetrics {
    /// The board's name.
    pub board: String,
    /// Updates enqueued ([`Ranking::enqueue`]) and not applied by a worker
    /// yet. On SQLite and PostgreSQL each queue shard's next sequence
    /// number minus its applied-through mark: two statements of one row per
    /// queue shard however long the queue is, equal to [`Ranking::queued`]
    /// (which counts the rows) unless rows were deleted by hand. On Redis
    /// Cluster the queue shards' stream lengths (one `XLEN` each), which is
    /// what `queued` reads there. An update enqueued while the snapshot is
    /// read may or may not count.
    pub queued: u64,
    /// Rows a worker could not apply and set aside
    /// ([`Ranking::dead_letters`]): one count statement (`HLEN` on Redis
    /// Cluster), however many there are.
    pub dead_letters: u64,
    /// How long the oldest update not applied yet has been queued, by the
    /// store's clock (each row is stamped when its enqueue commits: a time
    /// column on SQLite and PostgreSQL, a stream field on Redis Cluster);
    /// one index seek per queue shard. `None` when nothing is queued, or
    /// the rows waiting were queued by a version that stamped none.
    pub oldest_queued: Option<Duration>,
}

/// What this process did since it started, counted where it happens in
/// the code every store shares; exact, and never reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ProcessCounters {
    /// Saves and `save_delta`s that wrote something and committed.
    pub saves: u64,
    /// Saves that gave up on contention:
    /// [`Error::Conflict`](crate::Error::Conflict) or
    /// [`Error::Busy`](crate::Error::Busy).
    pub save_conflicts: u64,
    /// Attempts retried anywhere: a store transaction after a busy
    /// database, a serialization failure, a deadlock, a lost connection or
    /// a Redis refusal; a worker or compactor batch after a retryable
    /// error; a PostgreSQL compaction batch after its `statement_timeout`.
    /// Each is one `autoshard.retry` span with feature `tracing`.
    pub retries: u64,
    /// Automatic shard counts raised by saves that observed contention.
    pub shard_counts_raised: u64,
    /// Automatic shard counts halved by compaction batches.
    pub shard_counts_lowered: u64,
    /// Committed compaction batches ([`Store::compact`](crate::Store::compact)
    /// and [`Compactor`](crate::Compactor)s).
    pub compaction_batches: u64,
    /// Shard rows those batches folded into another row and deleted.
    pub rows_merged: u64,
    /// Committed worker batches that applied at least one update (board
    /// and family workers).
    pub worker_batches: u64,
    /// Queued updates workers applied (a family submission counts once).
    pub updates_applied: u64,
    /// Queued rows workers moved to their board's or family's dead letters.
    pub dead_lettered: u64,
    /// Group-commit transactions that appended enqueued updates.
    pub group_commits: u64,
    /// Updates those transactions appended: `enqueued / group_commits` is
    /// the mean group size.
    pub enqueued: u64,
}

impl StoreMetrics {
    /// Reads the snapshot: per board of `db`, a few statements of at most
    /// one row per queue shard and a count of its dead letters, and the
    /// process's counters. Creates a board's queue tables if it has none
    /// yet, as [`Ranking::queued`] does.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// use autoshard::StoreMetrics;
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "weekly", RankingConfig::new(0..1_000))?;
    /// board.enqueue("alice", 10)?;
    /// board.enqueue("bob", 20)?;
    ///
    /// let metrics = StoreMetrics::snapshot(&db)?;
    /// assert_eq!(metrics.boards[0].board, "weekly");
    /// assert_eq!(metrics.boards[0].queued, 2);
    /// assert!(metrics.counters.enqueued >= 2);
    /// // serde: `serde_json::to_string(&metrics)` for an exporter.
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A store error. A board deleted while the snapshot is read is left
    /// out.
    pub fn snapshot(db: &impl RankingStore) -> Result<Self> {
        let mut boards = Vec::new();
        for name in Ranking::list(db)? {
            match board(db, &name) {
                Err(crate::Error::RankingNotFound { .. }) => {}
                other => boards.push(other?),
            }
        }
        Ok(StoreMetrics {
            boards,
            kinds: Vec::new(),
            counters: ProcessCounters::now(),
        })
    }

    /// Adds kind `T`'s compaction lag ([`KindLag`]) from `db`, by
    /// [`Store::stats`] (see the cost above).
    ///
    /// ```
    /// # use autoshard::{Pending, Shardable, Store, StoreMetrics};
    /// # #[derive(Shardable)]
    /// # struct Page {
    /// #     #[shard(id)] id: u64,
    /// #     #[shard(neutral = 0, fold = autoshard::fold::checked_sum)] views: i64,
    /// #     #[shard(pending)] pending: Pending<Self>,
    /// # }
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// db.insert(&Page { id: 1, views: 0, pending: Pending::default() })?;
    /// let metrics = StoreMetrics::snapshot(&db)?.with_kind::<Page>(&db)?;
    /// assert_eq!(metrics.kinds[0].pending, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Store::stats`].
    pub fn with_kind<T: Shardable>(mut self, db: &impl Store) -> Result<Self> {
        let stats = db.stats::<T>()?;
        self.kinds.push(KindLag {
            kind: stats.kind.to_owned(),
            pending: stats.pending(),
            oldest_pending: stats.oldest_pending(),
        });
        Ok(self)
    }
}

fn board(db: &impl RankingStore, name: &str) -> Result<BoardMetrics> {
    let board = Ranking::open(db, name)?;
    Ok(BoardMetrics {
        queued: board.backlog()?,
        dead_letters: board.dead_letter_count()?,
        oldest_queued: board.oldest_queued_age()?,
        board: name.to_owned(),
    })
}

impl ProcessCounters {
    /// This process's counters now, without reading any store.
    pub fn now() -> Self {
        let get = Counter::get;
        ProcessCounters {
            saves: get(&counters::SAVES),
            save_conflicts: get(&counters::SAVE_CONFLICTS),
            retries: get(&counters::RETRIES),
            shard_counts_raised: get(&counters::COUNTS_RAISED),
            shard_counts_lowered: get(&counters::COUNTS_LOWERED),
            compaction_batches: get(&counters::COMPACTION_BATCHES),
            rows_merged: get(&counters::ROWS_MERGED),
            worker_batches: get(&counters::WORKER_BATCHES),
            updates_applied: get(&counters::UPDATES_APPLIED),
            dead_lettered: get(&counters::DEAD_LETTERED),
            group_commits: get(&counters::GROUP_COMMITS),
            enqueued: get(&counters::ENQUEUED),
        }
    }
}

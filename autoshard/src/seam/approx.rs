//! The approximate-board half of the seam: bucket snapshots of a board's
//! score index (`ranking/approx/`, docs/design/approximate-boards.md, "Approximate boards").
//!
//! An approximate board keeps only player rows (the score index); a
//! refresh summarizes them into buckets and publishes the buckets as a
//! numbered snapshot. The store keeps, per approximate board, one pointer
//! row (the board's bucket count, the published snapshot, the next
//! snapshot number) and the rows of the snapshots. The protocol that makes
//! a published snapshot always complete lives here, once, as the contract
//! of these methods: rows are written under a reserved number nobody reads,
//! and [`ApproxStore::approx_publish`] flips the pointer only after
//! checking, in its own transaction, that every row is there.

use crate::error::{Error, Result};

/// One bucket of a snapshot, in tree scores (higher is better): the
/// players with a tree score in `lo..=hi`. A score is never split between
/// two buckets, so `hi` and `lo` are held scores and every player at them
/// is in this bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    /// The best score in the bucket.
    pub hi: i64,
    /// The worst score in the bucket (`lo <= hi`).
    pub lo: i64,
    /// Players in the bucket.
    pub count: u64,
    /// Players at `hi`.
    pub at_hi: u64,
    /// Players at `lo` (`count` when `lo == hi`).
    pub at_lo: u64,
}

/// A published snapshot as stored: its number, the players it counted, and
/// its buckets, best first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredSnapshot {
    pub id: i64,
    pub total: u64,
    pub buckets: Vec<Bucket>,
}

/// Receives a board's score index, best score first, as runs of equal
/// scores: first the number of players, then each `(score, players)`.
pub(crate) trait ScoreSink {
    fn total(&mut self, players: u64) -> Result<()>;
    fn run(&mut self, score: i64, players: u64) -> Result<()>;
}

/// The snapshot operations a store implements for approximate boards. The
/// board's mode itself (its bucket count) is written by
/// [`BoardStore::create_board`](super::BoardStore::create_board) in the
/// creating transaction, from [`BoardSpec::buckets`](super::BoardSpec).
pub(crate) trait ApproxStore: Send + Sync {
    /// The number of the board's published snapshot, `None` before the
    /// first publish: one small read, so a reader with the snapshot cached
    /// reads nothing else.
    fn approx_current(&self, board: i64) -> Result<Option<i64>>;

    /// The published snapshot, pointer and rows read in one transaction (so
    /// never the rows of another snapshot); `None` before the first publish.
    fn approx_snapshot(&self, board: i64) -> Result<Option<StoredSnapshot>>;

    /// Streams the board's score index into `sink` in one read transaction
    /// (one consistent view of the players): the count, then runs of equal
    /// tree scores, best first.
    fn approx_scores(&self, board: i64, sink: &mut dyn ScoreSink) -> Result<()>;

    /// Reserves a snapshot number above every number reserved before, in
    /// its own transaction: concurrent refreshes never share one, and rows a
    /// killed refresh left under its number are never published.
    fn approx_begin(&self, board: i64) -> Result<i64>;

    /// Writes buckets `first..first + buckets.len()` of unpublished
    /// snapshot `snapshot`, in one transaction.
    fn approx_put(&self, board: i64, snapshot: i64, first: u32, buckets: &[Bucket]) -> Result<()>;

    /// In one transaction: checks that snapshot `snapshot` has exactly
    /// `buckets` rows counting `total` players
    /// ([`Error::Corrupt`](crate::Error::Corrupt) if not: nothing is
    /// published), flips the pointer to it unless a later snapshot is
    /// already published (then returns `false`), and deletes the rows of
    /// every earlier snapshot, published or abandoned.
    fn approx_publish(&self, board: i64, snapshot: i64, total: u64, buckets: u32) -> Result<bool>;

    /// Players on the board, counted from the score index.
    fn approx_len(&self, board: i64) -> Result<u64>;

    /// Up to `limit` players after the first `skip` in ranking order (tree
    /// score descending, then arrival, then name), as `(player, tree
    /// score)`, in one read transaction.
    fn approx_page(&self, board: i64, skip: u64, limit: u64) -> Result<Vec<(String, i64)>>;
}

/// A stored count or position read back: negative is damage.
pub(crate) fn unsigned(value: i64, what: &str) -> Result<u64> {
    u64::try_from(value).map_err(|_| Error::Corrupt {
        kind: "ranking",
        id: "approximate board".into(),
        field: what.into(),
        reason: format!("{value} is negative"),
    })
}

/// A count as SQL stores it (counts stay below `2^63` in practice).
pub(crate) fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

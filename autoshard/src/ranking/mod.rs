//! Leaderboards: the rank of a score in O(log n) store reads.
//!
//! `SELECT count(*) FROM players WHERE score > ?` reads every higher player.
//! A [`Ranking`] keeps, next to each player's score, an N-ary tree over the
//! score range whose nodes count the players (and distinct scores) under
//! each child, as the Google Code Jam ranking library does: a rank is the
//! sum of the counts right of one root-to-leaf path. Inner node counts are
//! statically sharded counters (each write adds its delta to one random
//! shard row, readers sum the shards), so concurrent writers do not all
//! rewrite the root. `docs/design/ranking-tree.md` ("Ranking tree") has the data model,
//! invariants and the read count of every query.
//!
//! Each board has a [`Policy`] (what a submitted score does: replace, keep
//! the best or worst, add) and a [`ScoreOrder`] (higher or lower is better),
//! set in its [`RankingConfig`]; [`Ranking::submit`] reports what a
//! submission changed. A board's score may also be a tuple of up to
//! [`MAX_DIMENSIONS`] integers, each with its own range and order, ranked
//! lexicographically ([`RankingConfig::dimensions`], [`Ranking::write`]).
//!
//! ```
//! use autoshard::ranking::{Ranking, RankingConfig, Tie};
//! use autoshard::Sqlite;
//!
//! # fn main() -> autoshard::Result<()> {
//! let db = Sqlite::memory()?;
//! let board = Ranking::create(&db, "season-1", RankingConfig::new(0..10_000).branching(100).node_shards(8))?;
//! let board = Ranking::open(&db, "season-1")?; // from any handle or process
//!
//! board.set_scores(&[("alice", 30), ("bob", 40), ("carol", 30), ("dave", 12)])?;
//! board.set_score("dave", 50)?; // absolute: replaces 12
//! assert_eq!(board.rank_of_score(30)?, 3); // bob and dave are higher
//! assert_eq!(board.rank("carol", Tie::Standard)?, Some(3));
//! assert_eq!(board.rank("carol", Tie::Dense)?, Some(3));
//! assert_eq!(board.rank("carol", Tie::Ordinal)?, Some(4)); // alice reached 30 first
//! assert_eq!(board.score_at_rank(2)?, Some(40));
//!
//! let top = board.top(2)?;
//! assert_eq!((top[0].player.as_str(), top[0].score, top[0].rank), ("dave", 50, 1));
//! let near = board.around("bob", 1)?; // dave, bob, alice
//! assert_eq!(near.iter().map(|e| e.position).collect::<Vec<_>>(), [1, 2, 3]);
//!
//! assert!(board.remove("dave")?);
//! assert_eq!(board.len()?, 3);
//! board.check_integrity()?;
//! # Ok(())
//! # }
//! ```

mod among;
mod apply;
mod approx;
mod board_config;
mod cache;
mod composite;
mod config;
pub mod entity_board;
mod facade;
mod family;
mod handle;
mod integrity;
mod lifecycle;
#[cfg(test)]
pub(crate) mod memory;
mod native;
mod policy;
mod query;
mod queue;
mod read;
mod shape;
mod storage;
mod tree;
mod trees;
mod trim;
mod update;
mod write;

pub use self::among::MAX_AMONG;
pub use self::approx::{
    ApproxBucket, ApproxSnapshot, Refresh, Refresher, RefresherHandle, RefresherStats,
};
pub use self::board_config::BoardConfig;
pub use self::composite::{Dim, MAX_DIMENSIONS};
pub use self::config::RankingConfig;
pub use self::facade::Ranking;
pub use self::family::{
    Family, FamilyConfig, FamilySubmission, FamilyUpdate, FamilyWorker, FamilyWorkerHandle,
    FamilyWorkerStats, Member, Period, Span, Weekday, Window, MAX_FAMILY_NAME_LEN, MAX_FILTERS,
    MAX_FILTER_LEN, MAX_FILTER_VALUES, MAX_KEEP,
};
pub use self::policy::{Policy, ScoreOrder, Submission};
pub use self::queue::{
    BoardWorker, BoardWorkerHandle, BoardWorkerStats, DEFAULT_BATCH_BYTES, DEFAULT_BATCH_SIZE,
    DEFAULT_FLUSH_TIMEOUT,
};
pub use self::trim::TRIM_BATCH;
#[cfg(feature = "tokio")]
pub(crate) use self::update::OwnedUpdate;
pub use self::update::Update;
pub use crate::seam::DeadLetter;

pub(crate) use self::apply::apply_updates;
#[cfg(feature = "failpoints")]
pub(crate) use self::approx::hooks as approx_hooks;
#[cfg(feature = "failpoints")]
pub(crate) use self::family::hooks as family_hooks;
#[cfg(feature = "failpoints")]
pub(crate) use self::queue::hooks as queue_hooks;
#[cfg(feature = "tokio")]
pub(crate) use self::queue::FLUSH_POLL;
#[cfg(feature = "failpoints")]
pub(crate) use self::trees::hooks as trees_hooks;
#[cfg(feature = "failpoints")]
pub(crate) use self::trim::hooks as trim_hooks;
use crate::seam::Backend;

/// Longest board name, in bytes.
pub const MAX_BOARD_NAME_LEN: usize = 128;
/// Longest player name, in bytes.
pub const MAX_PLAYER_LEN: usize = 256;
/// Most shard rows per inner tree node.
pub const MAX_SHARDS: u32 = 1024;
/// Most queue shards.
pub const MAX_QUEUES: u32 = 1024;
/// Most bytes of entry data a board may keep per player
/// ([`RankingConfig::entry_data`]).
pub const MAX_ENTRY_DATA: u32 = 1024;
/// Most buckets of an approximate board ([`RankingConfig::approximate`]).
pub const MAX_BUCKETS: u32 = 65_536;
/// Most players an approximate board ranks exactly at the top
/// ([`RankingConfig::exact_top`]).
pub const MAX_EXACT_TOP: u32 = 100_000;
/// Most trees a board may be split into ([`RankingConfig::trees`]).
pub const MAX_TREES: u32 = 64;

/// How players with equal scores are ranked.
///
/// For the scores 18, 15, 15, 7: Standard gives 1, 2, 2, 4; Dense 1, 2, 2,
/// 3; Ordinal 1, 2, 3, 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tie {
    /// "1224": tied players share the best rank, and the next rank skips as
    /// many places as were shared: 1 + players with a higher score.
    Standard,
    /// "1223": tied players share a rank, and the next rank follows on:
    /// 1 + distinct higher scores.
    Dense,
    /// "1234": every player has their own rank; among tied players, the one
    /// who reached the score first ranks higher. Reaching means the last
    /// change to that score: setting the same score again keeps the place,
    /// leaving the score and coming back goes behind the others.
    Ordinal,
}

/// One player's place on a board, as returned by [`Ranking::entry`] and
/// the lists: [`Ranking::top`], [`Ranking::page`], [`Ranking::page_number`],
/// [`Ranking::around`], [`Ranking::between`] and [`Ranking::among`].
///
/// **Every entry carries all three ranks**, one per [`Tie`] rule: `rank`
/// (standard, "1224"), `dense` ("1223") and `position` (ordinal, "1234");
/// [`rank_for`](Entry::rank_for) picks one by rule, as
/// [`Ranking::rank`] takes one. Lists are in ordinal order (`position`
/// goes 1, 2, 3, ... within a page) and pages are cut by it; `among`
/// counts all three within the set it was given.
///
/// ```
/// use autoshard::ranking::{Ranking, RankingConfig, Tie};
/// # fn main() -> autoshard::Result<()> {
/// let db = autoshard::Sqlite::memory()?;
/// let board = Ranking::create(&db, "b", RankingConfig::new(0..100))?;
/// board.set_scores(&[("ann", 18), ("ben", 15), ("cat", 15), ("dan", 7)])?;
/// let ranks: Vec<_> = board.top(4)?.iter().map(|e| (e.rank, e.dense, e.position)).collect();
/// assert_eq!(ranks, [(1, 1, 1), (2, 2, 2), (2, 2, 3), (4, 3, 4)]);
/// let dan = board.entry("dan")?.unwrap();
/// assert_eq!(dan.rank_for(Tie::Dense), board.rank("dan", Tie::Dense)?.unwrap());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The player.
    pub player: String,
    /// The player's score.
    pub score: i64,
    /// Standard rank ([`Tie::Standard`], "1224"): 1 + players with a
    /// better score.
    pub rank: u64,
    /// Dense rank ([`Tie::Dense`], "1223"): 1 + distinct better scores.
    pub dense: u64,
    /// Ordinal rank ([`Tie::Ordinal`], "1234"): the 1-based place in the
    /// list, ties broken by who reached the score first. Pages are cut by
    /// it.
    pub position: u64,
    /// The entry data the player's score was submitted with
    /// ([`Ranking::submit_update`]); always `None` on a board that keeps none.
    pub data: Option<Vec<u8>>,
}

impl Entry {
    /// The entry's rank under `tie`: `rank`, `dense` or `position`, the
    /// value [`Ranking::rank`] gives for that rule in the same snapshot.
    pub fn rank_for(&self, tie: Tie) -> u64 {
        match tie {
            Tie::Standard => self.rank,
            Tie::Dense => self.dense,
            Tie::Ordinal => self.position,
        }
    }
}

/// A store that can hold ranking boards: [`Sqlite`](crate::Sqlite),
/// [`Postgres`](crate::Postgres) and [`AnyStore`](crate::AnyStore).
///
/// Sealed: implemented for every store of this crate, through its internal
/// seam, so more stores can follow without changing any signature.
pub trait RankingStore: Backend {}

impl<S: Backend + ?Sized> RankingStore for S {}

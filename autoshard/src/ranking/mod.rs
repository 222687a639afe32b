//! Leaderboards: the rank of a score in O(log n) store reads.
//!
//! `SELECT count(*) FROM players WHERE score > ?` reads every higher player.
//! A [`Ranking`] keeps, next to each player's score, an N-ary tree over the
//! score range whose nodes count the players (and distinct scores) under
//! each child, as the Google Code Jam ranking library does: a rank is the
//! sum of the counts right of one root-to-leaf path. Inner node counts are
//! statically sharded counters (each write adds its delta to one random
//! shard row, readers sum the shards), so concurrent writers do not all
//! rewrite the root. `docs/design.md` ("Ranking tree") has the data model,
//! invariants and the read count of every query.
//!
//! Each board has a [`Policy`] (what a submitted score does: replace, keep
//! the best or worst, add) and an [`Order`] (higher or lower is better),
//! set in its [`RankingConfig`]; [`Ranking::submit`] reports what a
//! submission changed. A board's score may also be a tuple of up to
//! [`MAX_DIMENSIONS`] integers, each with its own range and order, ranked
//! lexicographically ([`RankingConfig::dimensions`], [`Ranking::set_dims`]).
//!
//! ```
//! use autoshard::ranking::{Ranking, RankingConfig, Tie};
//! use autoshard::Sqlite;
//!
//! # fn main() -> autoshard::Result<()> {
//! let db = Sqlite::memory()?;
//! let board = Ranking::create(&db, "season-1", RankingConfig::new(0..10_000).branching(100).shards(8))?;
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
mod cache;
mod composite;
mod config;
pub mod entity_board;
mod family;
mod integrity;
mod lifecycle;
#[cfg(test)]
pub(crate) mod memory;
mod policy;
mod query;
mod queue;
mod storage;
mod tree;
mod trees;

pub use self::among::MAX_AMONG;
pub use self::approx::{ApproxBucket, ApproxSnapshot, Refresh, Refresher, RefresherHandle};
pub use self::composite::{Dim, MAX_DIMENSIONS};
pub use self::config::RankingConfig;
pub use self::family::{
    Family, FamilyConfig, FamilyEntry, FamilySubmission, FamilyWorker, FamilyWorkerHandle,
    FamilyWorkerStats, Member, Period, Span, Weekday, Window, MAX_FAMILY_NAME_LEN, MAX_FILTERS,
    MAX_FILTER_LEN, MAX_FILTER_VALUES, MAX_KEEP,
};
pub use self::policy::{Order, Policy, Submission};
pub use self::queue::{Worker, WorkerHandle, WorkerStats, DEFAULT_FLUSH_TIMEOUT};
pub use crate::seam::DeadLetter;

pub(crate) use self::approx::hooks as approx_hooks;
pub(crate) use self::policy::apply_updates;
use self::policy::apply_updates_from;
use self::policy::{Rules, Step};
use self::query::Want;
pub(crate) use self::queue::hooks as queue_hooks;
use self::queue::QueueState;
use self::storage::Storage;
use self::tree::Geometry;
pub(crate) use self::trees::hooks as trees_hooks;
use crate::error::{Error, Result};
use crate::seam::{Backend, Board, BoardStore};
use std::sync::{Arc, OnceLock};

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

/// One player's place on a board, as returned by [`Ranking::top`],
/// [`Ranking::page`] and [`Ranking::around`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The player.
    pub player: String,
    /// The player's score.
    pub score: i64,
    /// Standard rank ([`Tie::Standard`]): 1 + players with a higher score.
    pub rank: u64,
    /// Dense rank ([`Tie::Dense`]): 1 + distinct higher scores.
    pub dense: u64,
    /// Ordinal rank ([`Tie::Ordinal`]): the 1-based place in the list, ties
    /// broken by who reached the score first. Pages are cut by it.
    pub position: u64,
    /// The entry data the player's score was submitted with
    /// ([`Ranking::submit_with`]); always `None` on a board that keeps none.
    pub data: Option<Vec<u8>>,
}

/// A store that can hold ranking boards: [`Sqlite`](crate::Sqlite),
/// [`Postgres`](crate::Postgres) and [`AnyStore`](crate::AnyStore).
///
/// Sealed: implemented for every store of this crate, through its internal
/// seam, so more stores can follow without changing any signature.
pub trait RankingStore: Backend {}

impl<S: Backend + ?Sized> RankingStore for S {}

/// A leaderboard stored in a database. See the [module docs](self).
///
/// Cloning is cheap and shares the handle. Every query runs in one read
/// transaction, so it sees either all or none of any batch; every write is
/// one write transaction.
#[derive(Clone)]
pub struct Ranking {
    inner: Arc<Inner>,
}

struct Inner {
    boards: Arc<dyn BoardStore>,
    name: String,
    id: i64,
    config: RankingConfig,
    geometry: Geometry,
    /// This process's queue coordination for the board (group commit,
    /// worker wake-ups), made on the first queue call: see `queue.rs`.
    queue: OnceLock<Arc<QueueState>>,
    /// This process's copy of an approximate board's published snapshot.
    approx: approx::Cache,
    /// A split board's trees (`trees/mod.rs`); empty for a board of one.
    trees: Vec<Ranking>,
    /// Whether this board is a tree of a split board: its arrival numbers
    /// are board-wide (`trees/arrival.rs`).
    tree_member: bool,
}

impl std::fmt::Debug for Ranking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ranking")
            .field("name", &self.inner.name)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

fn check_board_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() || name.len() > MAX_BOARD_NAME_LEN {
        "a board name must be 1 to 128 bytes long"
    } else if name.chars().any(char::is_control) {
        "a board name may not contain control characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: name.into(),
        reason: reason.into(),
    })
}

fn check_player(player: &str) -> Result<()> {
    let reason = if player.is_empty() || player.len() > MAX_PLAYER_LEN {
        "a player name must be 1 to 256 bytes long"
    } else if player.contains('\0') {
        // PostgreSQL text cannot hold NUL; refuse it on every backend.
        "a player name may not contain NUL"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: player.into(),
        reason: reason.into(),
    })
}

impl Ranking {
    /// Creates the board `name` (1 to [`MAX_BOARD_NAME_LEN`] bytes, no
    /// control characters) in `db`, empty.
    ///
    /// # Errors
    ///
    /// [`Error::RankingExists`] if a board or a [`Family`] is called `name`,
    /// [`Error::InvalidName`] for a bad name, [`Error::InvalidRanking`] for
    /// an empty range, branching outside 2..=1000, zero shards or queues,
    /// entry data over [`MAX_ENTRY_DATA`] bytes, or composite dimensions
    /// that make no board ([`RankingConfig::dimensions`]).
    /// Nothing is written on error.
    pub fn create(db: &impl RankingStore, name: &str, config: RankingConfig) -> Result<Self> {
        check_board_name(name)?;
        let geometry = config.geometry()?;
        let boards = db.__boards().0;
        // A family lives under a hidden name: one name, one leaderboard.
        if boards.open_board(&family::registry_name(name))?.is_some() {
            return Err(Error::RankingExists { name: name.into() });
        }
        let id = boards.create_board(name, &config.spec())?;
        let mut board = Self::with(boards, name, id, config, geometry);
        if board.config().tree_count() > 1 {
            let trees = trees::create(&board.inner.boards, name, board.config())?;
            Arc::get_mut(&mut board.inner)
                .expect("not shared yet")
                .trees = trees;
        }
        Ok(board)
    }

    /// Creates a tree of a split board (`trees/mod.rs`) under its stored
    /// name, which `create` would refuse.
    fn create_tree(boards: Arc<dyn BoardStore>, name: &str, config: RankingConfig) -> Result<Self> {
        let geometry = config.geometry()?;
        let id = boards.create_board(name, &config.spec())?;
        let mut board = Self::with(boards, name, id, config, geometry);
        Arc::get_mut(&mut board.inner)
            .expect("not shared yet")
            .tree_member = true;
        Ok(board)
    }

    /// Opens a tree of a split board.
    fn open_tree(boards: Arc<dyn BoardStore>, name: &str) -> Result<Self> {
        let mut board = Self::open_in(boards, name)?;
        Arc::get_mut(&mut board.inner)
            .expect("not shared yet")
            .tree_member = true;
        Ok(board)
    }

    /// Opens the board `name`, created earlier by any handle or process.
    ///
    /// # Errors
    ///
    /// [`Error::RankingNotFound`] if there is none, [`Error::InvalidName`]
    /// for a name `create` would refuse, [`Error::Corrupt`] for a stored
    /// configuration that makes no tree.
    pub fn open(db: &impl RankingStore, name: &str) -> Result<Self> {
        check_board_name(name)?;
        let mut board = Self::open_in(db.__boards().0, name)?;
        if board.config().tree_count() > 1 {
            let trees = trees::open(&board.inner.boards, name, board.config())?;
            Arc::get_mut(&mut board.inner)
                .expect("not shared yet")
                .trees = trees;
        }
        Ok(board)
    }

    fn open_in(boards: Arc<dyn BoardStore>, name: &str) -> Result<Self> {
        let (id, spec) = boards
            .open_board(name)?
            .ok_or_else(|| Error::RankingNotFound { name: name.into() })?;
        let corrupt = |reason: String| Error::Corrupt {
            kind: "ranking",
            id: name.into(),
            field: "configuration".into(),
            reason,
        };
        let config = RankingConfig::from_spec(spec).map_err(corrupt)?;
        let geometry = config.geometry().map_err(|e| corrupt(e.to_string()))?;
        Ok(Self::with(boards, name, id, config, geometry))
    }

    fn with(
        boards: Arc<dyn BoardStore>,
        name: &str,
        id: i64,
        config: RankingConfig,
        geometry: Geometry,
    ) -> Self {
        Ranking {
            inner: Arc::new(Inner {
                boards,
                name: name.into(),
                id,
                config,
                geometry,
                queue: OnceLock::new(),
                approx: approx::Cache::default(),
                trees: Vec::new(),
                tree_member: false,
            }),
        }
    }

    /// The board's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The board's configuration.
    pub fn config(&self) -> &RankingConfig {
        &self.inner.config
    }

    fn geometry(&self) -> &Geometry {
        &self.inner.geometry
    }

    fn rules(&self) -> Rules {
        self.inner.config.rules()
    }

    /// The shard row a direct write's inner-node deltas go to.
    fn random_shard(&self) -> u32 {
        crate::random::range(0..self.inner.config.shard_count())
    }

    fn board(&self) -> Board<'_> {
        Board {
            id: self.inner.id,
            name: &self.inner.name,
        }
    }

    /// Runs `f` in one read transaction (one snapshot).
    fn read<R>(&self, f: impl Fn(&dyn Storage, &Geometry) -> Result<R>) -> Result<R> {
        let mut out = None;
        self.inner.boards.read_board(self.board(), &mut |st| {
            out = Some(f(st, self.geometry())?);
            Ok(())
        })?;
        Ok(out.expect("set by a successful transaction"))
    }

    /// Runs `f` in one write transaction (retried whole if the store must).
    fn write_with<R>(&self, mut f: impl FnMut(&dyn Storage) -> Result<R>) -> Result<R> {
        self.write_generation(|st, _| f(st))
    }

    /// [`write_with`](Ranking::write_with), passing `f` the board's write
    /// generation as the transaction found it. Every write transaction
    /// moves it first thing: a queue worker's cache relies on that
    /// (`cache.rs`).
    fn write_generation<R>(
        &self,
        mut f: impl FnMut(&dyn Storage, Option<u64>) -> Result<R>,
    ) -> Result<R> {
        let mut out = None;
        self.inner.boards.write_board(self.board(), &mut |st| {
            let before = st.bump_generation()?;
            out = Some(f(st, before)?);
            Ok(())
        })?;
        Ok(out.expect("set by a successful transaction"))
    }

    /// Applies `updates` (validated) in one write transaction under the
    /// board's policy, inner-node deltas going to one random shard; each
    /// update's tree scores before and after it.
    fn write(&self, updates: &[(&str, Option<i64>)]) -> Result<Vec<Step>> {
        self.write_at(updates, None)
    }

    /// [`write`](Ranking::write); `at`, on a tree of a split board, is a
    /// block of arrival numbers reserved for a batch of the whole board and
    /// each update's index in that batch, so that players arriving in
    /// different trees are ordered as the batch orders them.
    fn write_at(
        &self,
        updates: &[(&str, Option<i64>)],
        at: Option<(u64, &[usize])>,
    ) -> Result<Vec<Step>> {
        let (rules, shard) = (self.rules(), self.random_shard());
        self.write_with(|st| {
            let base = at.map_or_else(|| self.arrival_floor(updates.len()), |(base, _)| base);
            let floor = |i: usize| match at {
                _ if base == 0 => 0,
                Some((_, index)) => base + index[i] as u64,
                None => base + i as u64,
            };
            apply_updates_from(st, self.geometry(), rules, shard, updates, None, &floor)
        })
    }

    /// Submits `score` for `player` under the board's [`Policy`]: with the
    /// default [`Policy::Replace`] it becomes their score, replacing any
    /// earlier one; [`Policy::Best`] and [`Policy::Worst`] keep the better
    /// or worse of the two; [`Policy::Increment`] adds it.
    /// [`submit`](Ranking::submit) does the same and reports what changed.
    /// Setting the score a player already has changes nothing (not even
    /// their place among ties), so a retried call is harmless, except under
    /// `Increment`, where every call adds.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`] for a score outside the board's range
    /// (under `Increment`, a sum outside it), [`Error::InvalidName`]
    /// (player names are 1 to [`MAX_PLAYER_LEN`] bytes without NUL), or a
    /// store error; nothing is written on error.
    pub fn set_score(&self, player: &str, score: i64) -> Result<()> {
        self.check_input(player, Some(score))?;
        if let Some(split) = self.split() {
            return split.set_score(player, score);
        }
        self.write(&[(player, Some(score))]).map(drop)
    }

    /// Removes `player`; returns whether they were on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse,
    /// or a store error; nothing is written on error.
    pub fn remove(&self, player: &str) -> Result<bool> {
        check_player(player)?;
        if let Some(split) = self.split() {
            return split.remove(player);
        }
        Ok(self.write(&[(player, None)])?[0].before.is_some())
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
    /// [`Error::ScoreOutOfRange`] (under `Increment`, for a running sum
    /// outside the range) or [`Error::InvalidName`] for any entry (nothing
    /// is written then), or a store error.
    pub fn set_scores(&self, scores: &[(&str, i64)]) -> Result<()> {
        if let Some(split) = self.split() {
            return split.set_scores(scores);
        }
        for &(player, score) in scores {
            self.check_input(player, Some(score))?;
        }
        if scores.is_empty() {
            return Ok(());
        }
        let updates: Vec<_> = scores.iter().map(|&(p, s)| (p, Some(s))).collect();
        self.write(&updates).map(drop)
    }

    /// 1 + the number of players with a score strictly better than `score`
    /// (higher, or lower on an [`Order::LowerIsBetter`] board), whether or
    /// not anyone holds `score`. Reads: one node per tree level.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`].
    pub fn rank_of_score(&self, score: i64) -> Result<u64> {
        self.exact_only("rank_of_score")?;
        let tree = self.rules().tree_score(self.geometry(), score)?;
        let offset = self.geometry().checked_offset(tree)?;
        if let Some(split) = self.split() {
            return split.rank_of_offset(offset);
        }
        self.read(|st, g| Ok(query::place_of(st, g, offset, Want::default())?.above + 1))
    }

    /// `player`'s rank under `tie`, or `None` if they are not on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse;
    /// [`Error::Corrupt`] when the stored rows contradict each other; a
    /// store error.
    pub fn rank(&self, player: &str, tie: Tie) -> Result<Option<u64>> {
        check_player(player)?;
        self.exact_only("rank")?;
        if let Some(split) = self.split() {
            return split.rank(player, tie);
        }
        self.read(|st, g| {
            let Some((score, arrival)) = st.player(player)? else {
                return Ok(None);
            };
            let want = Want {
                distinct: tie == Tie::Dense,
                counter: tie == Tie::Ordinal,
            };
            let place = player_place(st, g, score, want)?;
            // Counts are at most `i64::MAX` (`query::count`), so none of
            // these sums can overflow, whatever the rows hold.
            Ok(Some(match tie {
                Tie::Standard => place.above + 1,
                Tie::Dense => place.distinct_above + 1,
                Tie::Ordinal => {
                    place.above + query::arrived_before(st, g, score, place.counter, arrival)? + 1
                }
            }))
        })
    }

    /// `player`'s score, or `None` if they are not on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse,
    /// or a store error.
    pub fn score(&self, player: &str) -> Result<Option<i64>> {
        check_player(player)?;
        if let Some(split) = self.split() {
            return split.score(player);
        }
        let rules = self.rules();
        self.read(|st, g| match st.player(player)? {
            Some((tree, _)) => Ok(Some(rules.checked_score(st, g, tree)?)),
            None => Ok(None),
        })
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
        self.exact_only("score_at_rank")?;
        if let Some(split) = self.split() {
            return split.score_at_rank(rank);
        }
        let rules = self.rules();
        self.read(|st, g| match query::locate(st, g, rank)? {
            Some(l) => Ok(Some(rules.checked_score(st, g, l.score)?)),
            None => Ok(None),
        })
    }

    /// The first `n` entries (fewer if the board is smaller).
    ///
    /// # Errors
    ///
    /// As [`page`](Ranking::page).
    pub fn top(&self, n: u64) -> Result<Vec<Entry>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        self.page(1, n)
    }

    /// The entries at ordinal ranks `from..=to` (1-based, inclusive; fewer
    /// or none past the end): "who is ranked 150 through 175?".
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] unless `1 <= from <= to`.
    pub fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
        if from == 0 || from > to {
            return Err(Error::InvalidRanking {
                reason: format!(
                    "page {from}..={to}: ranks start at 1 and a page must not end before it starts"
                ),
            });
        }
        if self.rules().approx {
            return approx::page(self, from, to);
        }
        if let Some(split) = self.split() {
            return split.page(from, to);
        }
        self.read(|st, g| self.entries(st, g, query::page(st, g, from, to)?))
    }

    /// Entries as a query found them, with their scores back from tree
    /// scores and, on a board that keeps it, their entry data (one more
    /// statement).
    fn entries(&self, st: &dyn Storage, g: &Geometry, mut found: Vec<Entry>) -> Result<Vec<Entry>> {
        let rules = self.rules();
        if rules.order != Order::HigherIsBetter {
            for e in &mut found {
                e.score = rules.checked_score(st, g, e.score)?;
            }
        }
        if self.inner.config.entry_data_limit() > 0 && !found.is_empty() {
            let mut data = std::collections::HashMap::new();
            let players: Vec<&str> = found.iter().map(|e| e.player.as_str()).collect();
            st.players_data(&players, &mut |player, bytes| {
                data.insert(player.to_owned(), bytes.to_vec());
                Ok(())
            })?;
            for e in &mut found {
                e.data = data.remove(&e.player);
            }
        }
        Ok(found)
    }

    /// `player`'s entry with up to `k` entries above and `k` below, in
    /// ranking order; empty if the player is not on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse;
    /// [`Error::Corrupt`] when the stored rows contradict each other; a
    /// store error.
    pub fn around(&self, player: &str, k: u64) -> Result<Vec<Entry>> {
        check_player(player)?;
        self.exact_only("around")?;
        if let Some(split) = self.split() {
            return split.around(player, k);
        }
        self.read(|st, g| {
            let Some((score, arrival)) = st.player(player)? else {
                return Ok(Vec::new());
            };
            let want = Want {
                distinct: false,
                counter: true,
            };
            let place = player_place(st, g, score, want)?;
            let position =
                place.above + query::arrived_before(st, g, score, place.counter, arrival)? + 1;
            let (from, to) = (
                position.saturating_sub(k).max(1),
                position.saturating_add(k),
            );
            self.entries(st, g, query::page(st, g, from, to)?)
        })
    }

    /// How many players are on the board. Reads: the root.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] for a negative stored count, or a store error.
    pub fn len(&self) -> Result<u64> {
        if self.rules().approx {
            return approx::len(self);
        }
        if let Some(split) = self.split() {
            return split.len();
        }
        self.read(|st, g| query::len(st, g))
    }

    /// Whether no player is on the board.
    ///
    /// # Errors
    ///
    /// As [`len`](Ranking::len).
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
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
        self.exact_only("check_integrity")?;
        if let Some(split) = self.split() {
            return split.check_integrity();
        }
        let shards = self.inner.config.shard_count();
        self.read(|st, g| integrity::check(st, g, shards))
    }

    /// Checks one queued update (player name, value) without writing.
    pub(crate) fn check_update(&self, player: &str, score: Option<i64>) -> Result<()> {
        self.check_input(player, score)
    }

    /// Queue shards (`RankingConfig::queues`).
    pub(crate) fn queues(&self) -> u32 {
        self.inner.config.queue_count()
    }
}

/// Where a held score sits: the player row says `score` is held, so a
/// counter of 0 would be corruption.
fn player_place(
    st: &dyn Storage,
    g: &Geometry,
    score: i64,
    want: Want,
) -> Result<query::ScorePlace> {
    let offset = g.offset(score).ok_or_else(|| {
        st.corrupt(
            format!("player score {score}"),
            "outside the board's range".into(),
        )
    })?;
    let place = query::place_of(st, g, offset, want)?;
    if want.counter && place.counter == 0 {
        return Err(st.corrupt(
            format!("leaf of score {score}"),
            "a player holds it, but its arrival counter is 0".into(),
        ));
    }
    Ok(place)
}

//! Building a board's configuration, and opening a board by the
//! configuration an application declares.

use super::board_config::BoardConfig;
use super::composite::{self, Dim};
use super::policy::{Policy, ScoreOrder};
use super::{Ranking, RankingStore};
use crate::error::{Error, Result};
use std::ops::Range;

/// The shape of a new board, for [`Ranking::create`](super::Ranking::create).
///
/// Scores are integers in `[min, max)`; any range inside `i64` works, up to
/// `i64::MIN..i64::MAX`. The tree has `ceil(log_B(max - min))` levels, so
/// branching trades node size (`16 * B` bytes a row) against depth (reads
/// per query): the default 100 answers a 0..10,000 board in 2 reads.
///
/// The [`Policy`] and [`ScoreOrder`] say what a submitted score does and which
/// scores rank first; like the rest of the shape they are stored with the
/// board and cannot change.
///
/// ```
/// use autoshard::ranking::{ScoreOrder, Policy, RankingConfig};
///
/// // Elapsed seconds, best effort per rider, fastest first.
/// let segment = RankingConfig::new(1..86_400).policy(Policy::Best).order(ScoreOrder::LowerIsBetter);
/// // Points that only ever add up.
/// let points = RankingConfig::new(0..1_000_000).policy(Policy::Increment);
/// ```
///
/// A board reports the configuration it was created with as a
/// [`BoardConfig`], whose getters have these methods' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankingConfig(BoardConfig);

impl RankingConfig {
    /// A board for scores in `range` (`[min, max)`), branching 100, one
    /// shard, one queue, [`Policy::Replace`], [`ScoreOrder::HigherIsBetter`].
    pub fn new(range: Range<i64>) -> Self {
        RankingConfig(BoardConfig {
            min: range.start,
            max: range.end,
            branching: 100,
            shards: 1,
            queues: 1,
            policy: Policy::Replace,
            order: ScoreOrder::HigherIsBetter,
            entry_data: 0,
            dims: None,
            buckets: None,
            exact_top: 0,
            trees: 1,
        })
    }

    /// A board of composite scores: 1 to [`MAX_DIMENSIONS`](super::MAX_DIMENSIONS)
    /// dimensions, each with its own range and order, ranked
    /// lexicographically (the first dimension decides, ties go to the next),
    /// exactly: no floats, no padding. Otherwise as [`new`](RankingConfig::new).
    ///
    /// The board holds every tuple as one *encoded score* (see
    /// [`Ranking::encode`](super::Ranking::encode)), so every query and tie
    /// rule is defined on the tuple. The product of the dimensions' widths
    /// must be at most `2^64 - 1` (four dimensions of 65,535 values, or
    /// one of `2^32` and one of `2^32 - 1`); [`Policy::Increment`] and
    /// [`order`](RankingConfig::order) do not apply (orders are per
    /// dimension). [`Ranking::create`](super::Ranking::create) refuses
    /// anything else with [`Error::InvalidRanking`]. The configuration's
    /// range (given to [`RankingConfig::new`]) is the encoded scores' range.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Ranking, RankingConfig, Tie, Update};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// // Seed 001: trophies (more first), retries (fewer first), time in ms (less first).
    /// let config = RankingConfig::dimensions([
    ///     Dim::higher(0..10_000),
    ///     Dim::lower(0..1_000),
    ///     Dim::lower(0..86_400_000),
    /// ]);
    /// let board = Ranking::create(&db, "levels", config)?;
    /// board.write(Update::dims("ann", &[12, 3, 61_000]))?;
    /// board.write(Update::dims("bo", &[12, 1, 95_000]))?; // fewer retries beat ann
    /// board.write(Update::dims("cy", &[12, 1, 70_000]))?; // same retries, faster beats bo
    /// let top = board.top(3)?;
    /// let names: Vec<_> = top.iter().map(|e| e.player.as_str()).collect();
    /// assert_eq!(names, ["cy", "bo", "ann"]);
    /// assert_eq!(board.decode(top[0].score)?, [12, 1, 70_000]);
    /// assert_eq!(board.rank("ann", Tie::Standard)?, Some(3));
    /// # Ok(())
    /// # }
    /// ```
    pub fn dimensions(dims: impl IntoIterator<Item = Dim>) -> Self {
        let dims: Vec<Dim> = dims.into_iter().collect();
        // A refused set of dimensions keeps an empty range here; `create`
        // reports what is wrong with the dimensions themselves.
        let range = composite::Codec::new(&dims).map_or(0..0, |c| c.range());
        let mut config = RankingConfig::new(range);
        config.0.dims = Some(dims);
        config
    }

    /// Most bytes of entry data a player's entry may carry, 0 to
    /// [`MAX_ENTRY_DATA`](super::MAX_ENTRY_DATA) (default 0: none). Entry data is written with the
    /// score ([`Ranking::submit_update`](super::Ranking::submit_update)) and
    /// returned in every [`Entry`](super::Entry): the effort that set a
    /// personal record, a display name.
    pub fn entry_data(mut self, max_bytes: u32) -> Self {
        self.0.entry_data = max_bytes;
        self
    }

    /// What a submitted score does to the stored one (default
    /// [`Policy::Replace`]).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.0.policy = policy;
        self
    }

    /// Which scores rank first (default [`ScoreOrder::HigherIsBetter`]).
    pub fn order(mut self, order: ScoreOrder) -> Self {
        self.0.order = order;
        self
    }

    /// Children per tree node, 2 to 1000 (default 100).
    pub fn branching(mut self, branching: u32) -> Self {
        self.0.branching = branching;
        self
    }

    /// Shard rows per inner tree node, 1 to [`MAX_SHARDS`](super::MAX_SHARDS) (default 1).
    /// Each direct write adds to one random shard, so more shards mean
    /// less contention between writers and more rows for readers to sum.
    pub fn node_shards(mut self, shards: u32) -> Self {
        self.0.shards = shards;
        self
    }

    /// Queue shards for queued updates, 1 to [`MAX_QUEUES`](super::MAX_QUEUES) (default 1).
    pub fn queues(mut self, queues: u32) -> Self {
        self.0.queues = queues;
        self
    }

    /// An approximate board of `buckets` buckets (1 to
    /// [`MAX_BUCKETS`](super::MAX_BUCKETS)): an update writes only the
    /// player's row, and ranks come from
    /// [`Ranking::approx_rank`](super::Ranking::approx_rank), interpolated
    /// in the bucket snapshot the last [`Ranking::refresh`](super::Ranking::refresh)
    /// published. Exact ranks are refused there
    /// ([`Error::ApproximateBoard`](crate::Error::ApproximateBoard)); see
    /// the [`approx_rank`](super::Ranking::approx_rank) docs for the error
    /// bound and what else such a board answers. Not with entry data.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "a", RankingConfig::new(0..1_000_000).approximate(100))?;
    /// assert_eq!(board.config().approximate(), Some(100));
    /// let exact = Ranking::create(&db, "e", RankingConfig::new(0..10))?;
    /// assert_eq!(exact.config().approximate(), None);
    /// # Ok(()) }
    /// ```
    pub fn approximate(mut self, buckets: u32) -> Self {
        self.0.buckets = Some(buckets);
        self
    }

    /// On an approximate board, the best `players` (up to
    /// [`MAX_EXACT_TOP`](super::MAX_EXACT_TOP); default 0) are ranked
    /// exactly as of each snapshot, the Code Jam article's advice: a refresh
    /// gives each distinct score among them a bucket of its own, on top of
    /// the board's buckets, so [`approx_rank`](super::Ranking::approx_rank)
    /// is exact for any score at or above the `players`-th best and still
    /// reads O(1) rows. Equal-count buckets put a sparse tail of top scores
    /// into one wide bucket, where linear interpolation is worst in
    /// relative terms (measured in docs/design/approximate-boards.md, "Approximate boards").
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let config = RankingConfig::new(0..1_000_000).approximate(100).exact_top(1_000);
    /// assert_eq!(Ranking::create(&db, "a", config)?.config().exact_top(), 1_000);
    /// # Ok(()) }
    /// ```
    pub fn exact_top(mut self, players: u32) -> Self {
        self.0.exact_top = players;
        self
    }

    /// Splits the board into `k` trees, 1 to [`MAX_TREES`](super::MAX_TREES)
    /// (default 1). A player lives in one tree (by a hash of the name); each
    /// tree has its own queue shards, worker and, on SQLite, database file
    /// (`<database>-tree<t>`), so `k` workers apply queued updates in
    /// parallel. Queries merge the trees (`docs/design/sharded-trees.md`, "Sharded
    /// trees"): ties still rank by who reached the score first, board-wide.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig, Tie};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "split", RankingConfig::new(0..100).trees(4))?;
    /// board.set_scores(&[("ann", 7), ("bo", 9), ("cy", 7)])?;
    /// assert_eq!(board.config().trees(), 4);
    /// assert_eq!(board.rank("cy", Tie::Ordinal)?, Some(3)); // ann reached 7 first
    /// assert_eq!(board.rank("cy", Tie::Dense)?, Some(2));
    /// # Ok(()) }
    /// ```
    pub fn trees(mut self, k: u32) -> Self {
        self.0.trees = k;
        self
    }

    /// The configuration this builder describes, as a board created with
    /// it reports it.
    pub(crate) fn as_built(&self) -> &BoardConfig {
        &self.0
    }
}

impl From<RankingConfig> for BoardConfig {
    fn from(config: RankingConfig) -> Self {
        config.0
    }
}

/// Starts from an existing board's configuration: to create another board
/// like it.
impl From<BoardConfig> for RankingConfig {
    fn from(config: BoardConfig) -> Self {
        RankingConfig(config)
    }
}

/// [`Ranking::open_or_create`].
pub(in crate::ranking) fn open_or_create(
    db: &impl RankingStore,
    name: &str,
    config: RankingConfig,
) -> Result<Ranking> {
    config.as_built().geometry()?;
    let board = match Ranking::open(db, name) {
        Err(Error::RankingNotFound { .. }) => match Ranking::create(db, name, config.clone()) {
            // Created meanwhile by another handle: check that one.
            Err(Error::RankingExists { .. }) => Ranking::open(db, name)?,
            created => return created,
        },
        opened => opened?,
    };
    match board.config().differs_from(config.as_built()) {
        None => Ok(board),
        Some(reason) => Err(Error::RankingMismatch {
            name: name.into(),
            reason,
        }),
    }
}

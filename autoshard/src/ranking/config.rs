//! The shape of a board, and opening a board by the shape an application
//! declares.

use super::policy::{Order, Policy, Rules};
use super::tree::Geometry;
use super::{Ranking, RankingStore, MAX_ENTRY_DATA, MAX_QUEUES, MAX_SHARDS};
use crate::error::{Error, Result};
use crate::seam::BoardSpec;
use std::ops::Range;

/// The shape of a new board, for [`Ranking::create`](super::Ranking::create).
///
/// Scores are integers in `[min, max)`; any range inside `i64` works, up to
/// `i64::MIN..i64::MAX`. The tree has `ceil(log_B(max - min))` levels, so
/// branching trades node size (`16 * B` bytes a row) against depth (reads
/// per query): the default 100 answers a 0..10,000 board in 2 reads.
///
/// The [`Policy`] and [`Order`] say what a submitted score does and which
/// scores rank first; like the rest of the shape they are stored with the
/// board and cannot change.
///
/// ```
/// use autoshard::ranking::{Order, Policy, RankingConfig};
///
/// // Elapsed seconds, best effort per rider, fastest first.
/// let segment = RankingConfig::new(1..86_400).policy(Policy::Best).order(Order::LowerIsBetter);
/// assert_eq!(segment.update_policy(), Policy::Best);
/// // Points that only ever add up.
/// let points = RankingConfig::new(0..1_000_000).policy(Policy::Increment);
/// assert_eq!(points.score_order(), Order::HigherIsBetter);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankingConfig {
    min: i64,
    max: i64,
    branching: u32,
    shards: u32,
    queues: u32,
    policy: Policy,
    order: Order,
    entry_data: u32,
    trees: u32,
}

impl RankingConfig {
    /// A board for scores in `range` (`[min, max)`), branching 100, one
    /// shard, one queue, [`Policy::Replace`], [`Order::HigherIsBetter`].
    pub fn new(range: Range<i64>) -> Self {
        RankingConfig {
            min: range.start,
            max: range.end,
            branching: 100,
            shards: 1,
            queues: 1,
            policy: Policy::Replace,
            order: Order::HigherIsBetter,
            entry_data: 0,
            trees: 1,
        }
    }

    /// Most bytes of entry data a player's entry may carry, 0 to
    /// [`MAX_ENTRY_DATA`] (default 0: none). Entry data is written with the
    /// score ([`Ranking::submit_with`](super::Ranking::submit_with)) and
    /// returned in every [`Entry`](super::Entry): the effort that set a
    /// personal record, a display name.
    pub fn entry_data(mut self, max_bytes: u32) -> Self {
        self.entry_data = max_bytes;
        self
    }

    /// Most bytes of entry data per player (0: none).
    pub fn entry_data_limit(&self) -> u32 {
        self.entry_data
    }

    /// What a submitted score does to the stored one (default
    /// [`Policy::Replace`]).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Which scores rank first (default [`Order::HigherIsBetter`]).
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// The update policy.
    pub fn update_policy(&self) -> Policy {
        self.policy
    }

    /// The score order.
    pub fn score_order(&self) -> Order {
        self.order
    }

    pub(super) fn rules(&self) -> Rules {
        Rules {
            policy: self.policy,
            order: self.order,
        }
    }

    /// Children per tree node, 2 to 1000 (default 100).
    pub fn branching(mut self, branching: u32) -> Self {
        self.branching = branching;
        self
    }

    /// Shard rows per inner tree node, 1 to [`MAX_SHARDS`] (default 1).
    /// Each direct write adds to one random shard, so more shards mean
    /// less contention between writers and more rows for readers to sum.
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = shards;
        self
    }

    /// Queue shards for queued updates, 1 to [`MAX_QUEUES`] (default 1).
    pub fn queues(mut self, queues: u32) -> Self {
        self.queues = queues;
        self
    }

    /// Splits the board into `k` trees, 1 to [`MAX_TREES`](super::MAX_TREES)
    /// (default 1). A player lives in one tree (by a hash of the name); each
    /// tree has its own queue shards, worker and, on SQLite, database file
    /// (`<database>-tree<t>`), so `k` workers apply queued updates in
    /// parallel. Queries merge the trees (`docs/design.md`, "Sharded
    /// trees"): ties still rank by who reached the score first, board-wide.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig, Tie};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "split", RankingConfig::new(0..100).trees(4))?;
    /// board.set_scores(&[("ann", 7), ("bo", 9), ("cy", 7)])?;
    /// assert_eq!(board.config().tree_count(), 4);
    /// assert_eq!(board.rank("cy", Tie::Ordinal)?, Some(3)); // ann reached 7 first
    /// assert_eq!(board.rank("cy", Tie::Dense)?, Some(2));
    /// # Ok(()) }
    /// ```
    pub fn trees(mut self, k: u32) -> Self {
        self.trees = k;
        self
    }

    /// Trees the board is split into.
    pub fn tree_count(&self) -> u32 {
        self.trees
    }

    /// The score range `[min, max)`.
    pub fn range(&self) -> Range<i64> {
        self.min..self.max
    }

    /// Children per tree node.
    pub fn branching_factor(&self) -> u32 {
        self.branching
    }

    /// Shard rows per inner tree node.
    pub fn shard_count(&self) -> u32 {
        self.shards
    }

    /// Queue shards.
    pub fn queue_count(&self) -> u32 {
        self.queues
    }

    pub(super) fn spec(&self) -> BoardSpec {
        let mut policy: String = self.policy.stored().into();
        super::trees::store_trees(&mut policy, self.trees);
        BoardSpec {
            min: self.min,
            max: self.max,
            branching: self.branching,
            shards: self.shards,
            queues: self.queues,
            policy,
            order: self.order.stored().into(),
            entry_data: self.entry_data,
        }
    }

    /// The configuration a board was stored with, or why its policy or
    /// order is not one this version knows (the shape is checked by
    /// [`geometry`](RankingConfig::geometry)).
    pub(super) fn from_spec(mut spec: BoardSpec) -> Result<Self, String> {
        let trees = super::trees::stored_trees(&mut spec.policy)?;
        let policy = Policy::from_stored(&spec.policy)
            .ok_or_else(|| format!("unknown update policy {:?}", spec.policy))?;
        let order = Order::from_stored(&spec.order)
            .ok_or_else(|| format!("unknown score order {:?}", spec.order))?;
        Ok(RankingConfig {
            min: spec.min,
            max: spec.max,
            branching: spec.branching,
            shards: spec.shards,
            queues: spec.queues,
            policy,
            order,
            entry_data: spec.entry_data,
            trees,
        })
    }

    /// How a stored board's configuration (`self`) differs from the one
    /// an application expects, if it does.
    pub(super) fn differs_from(&self, expected: &RankingConfig) -> Option<String> {
        let fields = [
            (
                "range",
                format!("{:?}", self.range()),
                format!("{:?}", expected.range()),
            ),
            (
                "branching",
                self.branching.to_string(),
                expected.branching.to_string(),
            ),
            (
                "shards",
                self.shards.to_string(),
                expected.shards.to_string(),
            ),
            (
                "queues",
                self.queues.to_string(),
                expected.queues.to_string(),
            ),
            (
                "policy",
                format!("{:?}", self.policy),
                format!("{:?}", expected.policy),
            ),
            (
                "order",
                format!("{:?}", self.order),
                format!("{:?}", expected.order),
            ),
            (
                "entry data",
                self.entry_data.to_string(),
                expected.entry_data.to_string(),
            ),
            ("trees", self.trees.to_string(), expected.trees.to_string()),
        ];
        let differ: Vec<String> = fields
            .into_iter()
            .filter(|(_, stored, wanted)| stored != wanted)
            .map(|(field, stored, wanted)| format!("{field} is {stored}, not {wanted}"))
            .collect();
        (!differ.is_empty()).then(|| differ.join("; "))
    }

    /// The tree this configuration describes, or why it has none.
    pub(super) fn geometry(&self) -> Result<Geometry> {
        let geometry = Geometry::new(self.min, self.max, self.branching)?;
        let invalid = |reason: String| Err(Error::InvalidRanking { reason });
        if !(1..=MAX_SHARDS).contains(&self.shards) {
            return invalid(format!(
                "shards {} is outside 1..={MAX_SHARDS}",
                self.shards
            ));
        }
        if self.entry_data > MAX_ENTRY_DATA {
            return invalid(format!(
                "entry data {} is over {MAX_ENTRY_DATA} bytes",
                self.entry_data
            ));
        }
        super::trees::check_trees(self.trees)?;
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return invalid(format!(
                "queues {} is outside 1..={MAX_QUEUES}",
                self.queues
            ));
        }
        Ok(geometry)
    }
}

impl Ranking {
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
    /// (range, branching, shards, queues, policy or order); otherwise as
    /// [`create`](Ranking::create) and [`open`](Ranking::open). Nothing is
    /// written on error.
    pub fn open_or_create(
        db: &impl RankingStore,
        name: &str,
        config: RankingConfig,
    ) -> Result<Self> {
        config.geometry()?;
        let board = match Self::open(db, name) {
            Err(Error::RankingNotFound { .. }) => match Self::create(db, name, config.clone()) {
                // Created meanwhile by another handle: check that one.
                Err(Error::RankingExists { .. }) => Self::open(db, name)?,
                created => return created,
            },
            opened => opened?,
        };
        match board.config().differs_from(&config) {
            None => Ok(board),
            Some(reason) => Err(Error::RankingMismatch {
                name: name.into(),
                reason,
            }),
        }
    }
}

//! The configuration a board has: what [`RankingConfig`](super::RankingConfig)
//! built, as stored with the board and read back by
//! [`Ranking::config`](super::Ranking::config).
//!
//! The builder and the built value are two types so that each getter can
//! have the name of the builder method that sets it (`policy`, `shards`,
//! `trees`, ...), one rule for every field.

use super::composite::{self, Dim};
use super::policy::{Policy, Rules, ScoreOrder};
use super::tree::Geometry;
use super::{RankingConfig, MAX_ENTRY_DATA, MAX_QUEUES, MAX_SHARDS};
use crate::error::{Error, Result};
use crate::seam::BoardSpec;
use std::ops::Range;

/// A board's configuration, as created: each getter is named after the
/// [`RankingConfig`] method that sets it.
///
/// ```
/// use autoshard::ranking::{Policy, Ranking, RankingConfig, ScoreOrder};
///
/// # fn main() -> autoshard::Result<()> {
/// let db = autoshard::Sqlite::memory()?;
/// // Elapsed seconds, best effort per rider, fastest first.
/// let segment = RankingConfig::new(1..86_400).policy(Policy::Best).order(ScoreOrder::LowerIsBetter);
/// let board = Ranking::create(&db, "segment", segment.clone())?;
/// let config = board.config();
/// assert_eq!(config.policy(), Policy::Best);
/// assert_eq!(config.order(), ScoreOrder::LowerIsBetter);
/// assert_eq!(config.range(), 1..86_400);
/// assert_eq!(config.trees(), 1);
/// assert_eq!(config, &segment); // what was asked for
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardConfig {
    pub(super) min: i64,
    pub(super) max: i64,
    pub(super) branching: u32,
    pub(super) shards: u32,
    pub(super) queues: u32,
    pub(super) policy: Policy,
    pub(super) order: ScoreOrder,
    pub(super) entry_data: u32,
    /// `None` on a single-dimension board; `Some` (checked to hold 1 to 4
    /// dimensions) on a composite one.
    pub(super) dims: Option<Vec<Dim>>,
    /// `Some(b)`: an approximate board of `b` buckets (`approx/`).
    pub(super) buckets: Option<u32>,
    /// Players an approximate board's snapshot ranks exactly at the top.
    pub(super) exact_top: u32,
    pub(super) trees: u32,
}

impl BoardConfig {
    /// The score range `[min, max)` (on a composite board, the encoded
    /// scores' range).
    pub fn range(&self) -> Range<i64> {
        self.min..self.max
    }

    /// A composite board's dimensions; empty for a single-dimension board.
    pub fn dimensions(&self) -> &[Dim] {
        self.dims.as_deref().unwrap_or_default()
    }

    /// Most bytes of entry data per player (0: none).
    pub fn entry_data(&self) -> u32 {
        self.entry_data
    }

    /// What a submitted score does to the stored one.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Which scores rank first.
    pub fn order(&self) -> ScoreOrder {
        self.order
    }

    /// Children per tree node.
    pub fn branching(&self) -> u32 {
        self.branching
    }

    /// Shard rows per inner tree node.
    pub fn node_shards(&self) -> u32 {
        self.shards
    }

    /// Queue shards.
    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// The bucket count of an approximate board; `None` for an exact one.
    pub fn approximate(&self) -> Option<u32> {
        self.buckets
    }

    /// Players an approximate board ranks exactly at the top (0: none).
    pub fn exact_top(&self) -> u32 {
        self.exact_top
    }

    /// Trees the board is split into.
    pub fn trees(&self) -> u32 {
        self.trees
    }

    pub(super) fn rules(&self) -> Rules {
        Rules {
            policy: self.policy,
            order: self.order,
            approx: self.buckets.is_some(),
            shards: self.shards,
        }
    }

    pub(super) fn spec(&self) -> BoardSpec {
        BoardSpec {
            min: self.min,
            max: self.max,
            branching: self.branching,
            shards: self.shards,
            queues: self.queues,
            policy: self.policy.stored().into(),
            order: self.order.stored().into(),
            entry_data: self.entry_data,
            dims: composite::specs(self.dimensions()),
            trees: self.trees,
            buckets: self.buckets.unwrap_or(0),
            exact_top: self.exact_top,
        }
    }

    /// The configuration a board was stored with, or why its policy or
    /// order is not one this version knows (the shape is checked by
    /// [`geometry`](BoardConfig::geometry)).
    pub(crate) fn from_spec(spec: BoardSpec) -> Result<Self, String> {
        let policy = Policy::from_stored(&spec.policy)
            .ok_or_else(|| format!("unknown update policy {:?}", spec.policy))?;
        let order = ScoreOrder::from_stored(&spec.order)
            .ok_or_else(|| format!("unknown score order {:?}", spec.order))?;
        let dims = composite::from_specs(&spec.dims)?;
        let dims = (!dims.is_empty()).then_some(dims);
        Ok(BoardConfig {
            dims,
            min: spec.min,
            max: spec.max,
            branching: spec.branching,
            shards: spec.shards,
            queues: spec.queues,
            policy,
            order,
            entry_data: spec.entry_data,
            buckets: (spec.buckets > 0).then_some(spec.buckets),
            exact_top: spec.exact_top,
            trees: spec.trees,
        })
    }

    /// How a stored board's configuration (`self`) differs from the one
    /// an application expects, if it does.
    pub(super) fn differs_from(&self, expected: &BoardConfig) -> Option<String> {
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
            (
                "dimensions",
                format!("{:?}", self.dimensions()),
                format!("{:?}", expected.dimensions()),
            ),
            (
                "approximate buckets",
                format!("{:?}", self.buckets),
                format!("{:?}", expected.buckets),
            ),
            (
                "exact top",
                self.exact_top.to_string(),
                expected.exact_top.to_string(),
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
        if let Some(dims) = &self.dims {
            composite::check_config(dims, self.range(), self.policy, self.order)?;
        }
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
        if let Some(reason) =
            super::shape::check_approx_config(self.buckets, self.exact_top, self.entry_data)
        {
            return invalid(reason);
        }
        super::shape::check_trees(self.trees)?;
        if self.trees > 1 && self.buckets.is_some() {
            // A refresh reads one score index; a split board has k.
            return invalid("an approximate board is one tree (no `trees`)".into());
        }
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return invalid(format!(
                "queues {} is outside 1..={MAX_QUEUES}",
                self.queues
            ));
        }
        Ok(geometry)
    }
}

/// A board's configuration equals the one asked for when every field does.
impl PartialEq<RankingConfig> for BoardConfig {
    fn eq(&self, other: &RankingConfig) -> bool {
        self == other.as_built()
    }
}

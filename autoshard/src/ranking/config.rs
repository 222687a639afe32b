//! The shape of a board.

use super::tree::Geometry;
use super::{MAX_QUEUES, MAX_SHARDS};
use crate::error::{Error, Result};
use crate::seam::BoardSpec;
use std::ops::Range;

/// The shape of a new board, for [`Ranking::create`](super::Ranking::create).
///
/// Scores are integers in `[min, max)`; any range inside `i64` works, up to
/// `i64::MIN..i64::MAX`. The tree has `ceil(log_B(max - min))` levels, so
/// branching trades node size (`16 * B` bytes a row) against depth (reads
/// per query): the default 100 answers a 0..10,000 board in 2 reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankingConfig {
    min: i64,
    max: i64,
    branching: u32,
    shards: u32,
    queues: u32,
}

impl RankingConfig {
    /// A board for scores in `range` (`[min, max)`), branching 100, one
    /// shard, one queue.
    pub fn new(range: Range<i64>) -> Self {
        RankingConfig {
            min: range.start,
            max: range.end,
            branching: 100,
            shards: 1,
            queues: 1,
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
        BoardSpec {
            min: self.min,
            max: self.max,
            branching: self.branching,
            shards: self.shards,
            queues: self.queues,
        }
    }

    pub(super) fn from_spec(spec: BoardSpec) -> Self {
        RankingConfig {
            min: spec.min,
            max: spec.max,
            branching: spec.branching,
            shards: spec.shards,
            queues: spec.queues,
        }
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
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return invalid(format!(
                "queues {} is outside 1..={MAX_QUEUES}",
                self.queues
            ));
        }
        Ok(geometry)
    }
}

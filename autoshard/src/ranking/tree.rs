//! Geometry of the ranking trees: which node and child a score (or an
//! arrival number) falls in, with no store access.
//!
//! Heights count from the bottom: a node at height `h` covers `B^h`
//! consecutive offsets, and its child `c` covers `B^(h-1)` of them, so a
//! height-1 node (a leaf) has single offsets as children. Counting from the
//! bottom keeps a node's key stable when an arrival tree grows a new root.
//! Offsets are `u64` (a score's distance from `min`, up to `2^64 - 1`) and
//! powers of `B` are `u128`, so no step can overflow: `B^depth < width * B
//! <= 2^64 * 1000`.

use crate::error::{Error, Result};

/// Smallest and largest branching factor a board accepts.
pub(crate) const MIN_BRANCHING: u32 = 2;
/// See [`MIN_BRANCHING`].
pub(crate) const MAX_BRANCHING: u32 = 1000;

/// The score tree of one board.
#[derive(Debug, Clone)]
pub(crate) struct Geometry {
    min: i64,
    /// `max - min`: how many distinct scores the board holds (at least 1).
    width: u64,
    branching: u32,
    depth: u32,
}

impl Geometry {
    /// The tree over `[min, max)`, or why there can be none.
    pub fn new(min: i64, max: i64, branching: u32) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidRanking { reason };
        if min >= max {
            return Err(invalid(format!("empty score range {min}..{max}")));
        }
        if !(MIN_BRANCHING..=MAX_BRANCHING).contains(&branching) {
            return Err(invalid(format!(
                "branching {branching} is outside {MIN_BRANCHING}..={MAX_BRANCHING}"
            )));
        }
        // Two's complement: the difference of two i64 fits u64 exactly.
        let width = max.wrapping_sub(min) as u64;
        Ok(Geometry {
            min,
            width,
            branching,
            depth: height_for(branching, width),
        })
    }

    pub fn branching(&self) -> u32 {
        self.branching
    }

    /// `B` as a `usize`, for vector lengths.
    pub fn b(&self) -> usize {
        self.branching as usize
    }

    /// Height of the root; leaves are at height 1.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The smallest score.
    pub fn min(&self) -> i64 {
        self.min
    }

    /// One past the largest score.
    pub fn max(&self) -> i64 {
        self.min.wrapping_add(self.width as i64)
    }

    /// The score's distance from `min`, or `None` when it is out of range.
    pub fn offset(&self, score: i64) -> Option<u64> {
        let offset = score.wrapping_sub(self.min) as u64;
        (score >= self.min && offset < self.width).then_some(offset)
    }

    /// The score as far from the top of the range as `score` is from the
    /// bottom (`min + max - 1 - score`, without overflow), or `None` when
    /// `score` is out of range: a lower-is-better board's tree score.
    pub fn mirror(&self, score: i64) -> Option<i64> {
        let offset = self.offset(score)?;
        Some(self.score(self.width - 1 - offset))
    }

    /// The offset's distance from `min`, or a typed error when out of range.
    pub fn checked_offset(&self, score: i64) -> Result<u64> {
        self.offset(score).ok_or(Error::ScoreOutOfRange {
            score,
            min: self.min,
            max: self.max(),
        })
    }

    /// The score at `offset` (which must be below the width).
    pub fn score(&self, offset: u64) -> i64 {
        debug_assert!(offset < self.width);
        self.min.wrapping_add(offset as i64)
    }

    /// The index, among nodes of height `h`, of the node holding `position`.
    pub fn node(&self, position: u64, h: u32) -> u64 {
        node(self.branching, position, h)
    }

    /// Which child of its height-`h` node holds `position`.
    pub fn child(&self, position: u64, h: u32) -> usize {
        child(self.branching, position, h)
    }

    /// How many nodes of height `h` the score tree can have.
    pub fn nodes_at(&self, h: u32) -> u128 {
        (self.width as u128).div_ceil(pow(self.branching, h))
    }
}

/// `B^h`; exact for every height a tree here can reach.
pub(crate) fn pow(branching: u32, h: u32) -> u128 {
    (branching as u128).pow(h)
}

/// The smallest height `h >= 1` whose nodes cover `count` positions: the
/// root height of a tree over `0..count`.
pub(crate) fn height_for(branching: u32, count: u64) -> u32 {
    let mut h = 1;
    while pow(branching, h) < count as u128 {
        h += 1;
    }
    h
}

/// See [`Geometry::node`]; also used for arrival trees.
pub(crate) fn node(branching: u32, position: u64, h: u32) -> u64 {
    // position < 2^64 and B^h >= 2, so the quotient fits u64 (and i64).
    (position as u128 / pow(branching, h)) as u64
}

/// See [`Geometry::child`]; also used for arrival trees.
pub(crate) fn child(branching: u32, position: u64, h: u32) -> usize {
    (position as u128 / pow(branching, h - 1) % branching as u128) as usize
}

/// The first position under child `c` of node `idx` at height `h`.
pub(crate) fn child_start(branching: u32, idx: u64, h: u32, c: usize) -> u128 {
    idx as u128 * pow(branching, h) + c as u128 * pow(branching, h - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_is_the_smallest_covering_height() {
        let depth = |min, max, b| Geometry::new(min, max, b).unwrap().depth();
        assert_eq!(depth(0, 81, 3), 4); // the Code Jam example
        assert_eq!(depth(0, 82, 3), 5);
        assert_eq!(depth(0, 1, 2), 1);
        assert_eq!(depth(0, 2, 2), 1);
        assert_eq!(depth(0, 3, 2), 2);
        assert_eq!(depth(0, 10_000, 100), 2);
        assert_eq!(depth(0, 10_001, 100), 3);
        assert_eq!(depth(i64::MIN, i64::MAX, 2), 64);
        assert_eq!(depth(i64::MIN, i64::MAX, 1000), 7);
        assert_eq!(depth(i64::MIN, i64::MAX, 256), 8);
    }

    #[test]
    fn rejects_empty_ranges_and_bad_branching() {
        for (min, max, b) in [
            (5, 5, 10),
            (6, 5, 10),
            (0, 10, 1),
            (0, 10, 1001),
            (0, 10, 0),
        ] {
            let err = Geometry::new(min, max, b).unwrap_err();
            assert!(matches!(err, Error::InvalidRanking { .. }), "{err}");
        }
    }

    #[test]
    fn offsets_at_the_i64_extremes() {
        let g = Geometry::new(i64::MIN, i64::MAX, 2).unwrap();
        assert_eq!(g.offset(i64::MIN), Some(0));
        assert_eq!(g.offset(-1), Some((1 << 63) - 1));
        assert_eq!(g.offset(0), Some(1 << 63));
        assert_eq!(g.offset(i64::MAX - 1), Some(u64::MAX - 1));
        assert_eq!(g.offset(i64::MAX), None);
        assert_eq!(g.max(), i64::MAX);
        assert_eq!(g.score(u64::MAX - 1), i64::MAX - 1);
        assert_eq!(g.score(0), i64::MIN);
        // The top child of the root holds the upper half.
        assert_eq!(g.child(g.offset(0).unwrap(), 64), 1);
        assert_eq!(g.child(g.offset(-1).unwrap(), 64), 0);
        assert_eq!(g.node(u64::MAX - 1, 64), 0);
        assert_eq!(g.node(u64::MAX - 1, 1), (u64::MAX - 1) / 2);
        assert!(matches!(
            g.checked_offset(i64::MAX),
            Err(Error::ScoreOutOfRange {
                score: i64::MAX,
                ..
            })
        ));

        let g = Geometry::new(i64::MAX - 1, i64::MAX, 1000).unwrap();
        assert_eq!(
            (g.depth(), g.offset(i64::MAX - 1), g.offset(i64::MAX)),
            (1, Some(0), None)
        );
        let g = Geometry::new(-5, 5, 3).unwrap();
        assert_eq!(
            (g.offset(-6), g.offset(-5), g.offset(4), g.offset(5)),
            (None, Some(0), Some(9), None)
        );
    }

    #[test]
    fn child_index_and_node_follow_base_b_digits() {
        // 30 in base 3 is 1010: root child 1, then 0, 1, 0 (the Code Jam path).
        let g = Geometry::new(0, 81, 3).unwrap();
        let digits: Vec<_> = (1..=4).rev().map(|h| g.child(30, h)).collect();
        assert_eq!(digits, [1, 0, 1, 0]);
        let nodes: Vec<_> = (1..=4).rev().map(|h| g.node(30, h)).collect();
        assert_eq!(nodes, [0, 1, 3, 10]);
        for h in 1..=4 {
            let start = child_start(3, g.node(30, h), h, g.child(30, h));
            assert!(start <= 30 && 30 < start + pow(3, h - 1));
        }
    }

    #[test]
    fn node_counts_per_height() {
        let g = Geometry::new(0, 10_001, 100).unwrap();
        assert_eq!([g.nodes_at(1), g.nodes_at(2), g.nodes_at(3)], [101, 2, 1]);
        let g = Geometry::new(i64::MIN, i64::MAX, 2).unwrap();
        assert_eq!(g.nodes_at(1), 1 << 63);
        assert_eq!(g.nodes_at(64), 1);
    }

    #[test]
    fn arrival_tree_heights_grow_past_each_power() {
        assert_eq!(height_for(10, 0), 1);
        assert_eq!(height_for(10, 1), 1);
        assert_eq!(height_for(10, 10), 1);
        assert_eq!(height_for(10, 11), 2);
        assert_eq!(height_for(10, 100), 2);
        assert_eq!(height_for(10, 101), 3);
        assert_eq!(height_for(2, u64::MAX), 64);
        assert_eq!(height_for(1000, i64::MAX as u64), 7);
    }
}

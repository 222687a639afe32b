//! One snapshot of every tree of a split board, as one order: the merged
//! statistics a split board's queries are made of (`queries.rs`).
//!
//! The trees of a board are stored one of two ways, and the merge follows
//! them: count trees (`merge.rs`, `dense.rs`: the trees' nodes summed and
//! descended together) or trees the store orders natively (`native.rs`:
//! Redis sorted sets, counted and selected by their order). A board's
//! trees are all of one kind; the queries do not know which.

use super::super::storage::Storage;
use super::super::tree::Geometry;
use super::super::{query, Entry, Tie};
use super::{dense, merge, native};
use crate::error::Result;
use crate::seam::NativeBoard;

/// A player's rank as [`Snapshot::rank`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ranked {
    At(u64),
    Absent,
    /// The player moved while the rank was read: read it again, in a new
    /// snapshot.
    Moved,
}

/// The merged order of one snapshot of every tree. Scores are tree
/// scores, in the board's range; entries come out unfinished (tree
/// scores, no data), each with its tree.
pub(super) trait Snapshot {
    /// Players better than `score`, in all trees.
    fn above(&self, score: i64) -> Result<u64>;
    /// Distinct scores better than `score` held in any tree.
    fn distinct_above(&self, score: i64) -> Result<u64>;
    /// The 1-based ordinal position of the player of tree `t` at
    /// `(score, arrival)`.
    fn position_of(&self, t: usize, place: (i64, u64)) -> Result<u64>;
    /// The score at ordinal `position` (1-based), `None` past the end.
    fn score_at(&self, position: u64) -> Result<Option<i64>>;
    /// Entries at ordinal positions `from..=to`, `1 <= from <= to`.
    fn page(&self, from: u64, to: u64) -> Result<Vec<(Entry, usize)>>;
    /// Players on the board.
    fn len(&self) -> Result<u64>;
    /// The rank under `tie` of `player`, who lives in tree `t`.
    fn rank(&self, t: usize, player: &str, tie: Tie) -> Result<Ranked>;
}

/// The snapshot `sts` (one transaction per tree, in tree order) makes.
/// Trees of both kinds in one board (none is made so) are corruption.
pub(super) fn of<'a>(
    sts: &'a [&'a dyn Storage],
    g: &'a Geometry,
) -> Result<Box<dyn Snapshot + 'a>> {
    let natives: Vec<&dyn NativeBoard> = sts.iter().filter_map(|st| st.native()).collect();
    match natives.len() {
        0 => Ok(Box::new(CountTrees { sts, g })),
        n if n == sts.len() => Ok(Box::new(native::NativeTrees::new(natives, sts[0]))),
        n => Err(sts[0].corrupt(
            "split board".into(),
            format!("{n} of its {} trees stored natively", sts.len()),
        )),
    }
}

/// Count trees, summed and descended together.
struct CountTrees<'a> {
    sts: &'a [&'a dyn Storage],
    g: &'a Geometry,
}

impl Snapshot for CountTrees<'_> {
    fn above(&self, score: i64) -> Result<u64> {
        merge::above(self.sts, self.g, self.g.checked_offset(score)?)
    }

    fn distinct_above(&self, score: i64) -> Result<u64> {
        dense::distinct_above(self.sts, self.g, self.g.checked_offset(score)?)
    }

    fn position_of(&self, t: usize, place: (i64, u64)) -> Result<u64> {
        merge::position_of(self.sts, self.g, t, place)
    }

    fn score_at(&self, position: u64) -> Result<Option<i64>> {
        Ok(merge::locate(self.sts, self.g, position)?.map(|l| l.score))
    }

    fn page(&self, from: u64, to: u64) -> Result<Vec<(Entry, usize)>> {
        merge::page(self.sts, self.g, from, to)
    }

    fn len(&self) -> Result<u64> {
        let mut n = 0;
        for st in self.sts {
            n += query::len(*st, self.g)?;
        }
        Ok(n)
    }

    fn rank(&self, t: usize, player: &str, tie: Tie) -> Result<Ranked> {
        let Some(place) = held(self.sts, self.g, t, player)? else {
            return Ok(Ranked::Absent);
        };
        Ok(Ranked::At(match tie {
            Tie::Standard => self.above(place.0)? + 1,
            Tie::Dense => self.distinct_above(place.0)? + 1,
            Tie::Ordinal => self.position_of(t, place)?,
        }))
    }
}

/// `player`'s stored place in tree `t`, its score checked to be in the
/// board's range (corruption otherwise); `None` if absent.
pub(super) fn held(
    sts: &[&dyn Storage],
    g: &Geometry,
    t: usize,
    player: &str,
) -> Result<Option<(i64, u64)>> {
    let Some(place) = sts[t].player(player)? else {
        return Ok(None);
    };
    merge::offset_of(sts[t], g, place.0)?;
    Ok(Some(place))
}

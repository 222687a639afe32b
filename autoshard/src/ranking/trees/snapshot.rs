//! One snapshot of every tree of a split board, as one order: the merged
//! statistics a split board's queries are made of (`queries.rs`).
//!
//! The trees of a board are stored one of two ways, and the merge follows
//! them: count trees (`merge.rs`, `dense.rs`: the trees' nodes summed and
//! descended together) or trees the store orders natively (`native.rs`:
//! Redis sorted sets, counted and selected by their order). A board's
//! trees are all of one kind; the queries do not know which.

use super::super::shape::Span;
use super::super::storage::Storage;
use super::super::tree::Geometry;
use super::super::{query, Entry};
use super::{dense, merge, native};
use crate::error::Result;
use crate::seam::NativeBoard;

/// A player's place and ranks, as [`Snapshot::place`] found them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Placing {
    /// The tree score.
    pub score: i64,
    /// Standard rank.
    pub rank: u64,
    /// Ordinal rank, if it was asked (or came with the read).
    pub position: Option<u64>,
    /// Dense rank, if it was asked.
    pub dense: Option<u64>,
    /// Players on the board, if it was asked.
    pub len: Option<u64>,
}

/// The ranks [`Snapshot::place`] is asked for beside the standard one,
/// which every read gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Asked {
    pub position: bool,
    pub dense: bool,
    /// The players on the board (a percentile's `n`).
    pub len: bool,
}

/// What [`Snapshot::place`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Looked {
    At(Placing),
    Absent,
    /// The player moved while their place was read: read it again, in a
    /// new snapshot.
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
    /// The score at ordinal position `place(n)` of the board's `n >= 1`
    /// players (a percentile's), `None` on an empty board.
    fn score_at_len(&self, place: &dyn Fn(u64) -> u64) -> Result<Option<i64>>;
    /// Entries at ordinal positions `from..=to`, `1 <= from <= to`.
    fn page(&self, from: u64, to: u64) -> Result<Vec<(Entry, usize)>>;
    /// Players on the board.
    fn len(&self) -> Result<u64>;
    /// The players whose tree score lies in `span`, counted, and the first
    /// `limit` of them (none for 0): `View::between`.
    fn between(&self, span: Span, limit: u64) -> Result<(u64, Vec<(Entry, usize)>)>;
    /// The place and ranks of `player`, who lives in tree `t`: the ranks
    /// `asked` (each costs reads on count trees; a dense rank everywhere).
    fn place(&self, t: usize, player: &str, asked: Asked) -> Result<Looked>;
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

    fn score_at_len(&self, place: &dyn Fn(u64) -> u64) -> Result<Option<i64>> {
        match self.len()? {
            0 => Ok(None),
            n => self.score_at(place(n)),
        }
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

    /// As `View::between` does it: two counts, then a page.
    fn between(&self, span: Span, limit: u64) -> Result<(u64, Vec<(Entry, usize)>)> {
        let above = self.above(span.hi)?;
        let at_least = match span.lo == self.g.min() {
            true => self.len()?,
            false => self.above(span.lo - 1)?,
        };
        let n = at_least.saturating_sub(above);
        match n.min(limit) {
            0 => Ok((n, Vec::new())),
            k => Ok((n, self.page(above + 1, above + k)?)),
        }
    }

    fn place(&self, t: usize, player: &str, asked: Asked) -> Result<Looked> {
        let Some(place) = held(self.sts, self.g, t, player)? else {
            return Ok(Looked::Absent);
        };
        Ok(Looked::At(Placing {
            score: place.0,
            rank: self.above(place.0)? + 1,
            position: match asked.position {
                true => Some(self.position_of(t, place)?),
                false => None,
            },
            dense: match asked.dense {
                true => Some(self.distinct_above(place.0)? + 1),
                false => None,
            },
            len: match asked.len {
                true => Some(self.len()?),
                false => None,
            },
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

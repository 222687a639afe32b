//! The board's shape: the one place a read learns how the board it reads
//! is stored.
//!
//! A board is one of four shapes: one tree over the generic count tree,
//! one tree the store orders natively ([`NativeBoard`](crate::seam::NativeBoard):
//! Redis sorted sets), a board split into trees (`trees/`), or an
//! approximate board (`approx/`). Every public read in `read.rs` checks its
//! input and then calls [`Ranking::shape`]`().<read>(..)`; [`Shape`] has no
//! provided reads but the two built on `page` and `len`, so a new read
//! cannot compile until every shape answers it (issue 21: `among` once
//! read a split board's own, empty row, silently).
//!
//! Inside one snapshot, the reads built from a few order statistics
//! (`ranges.rs`: entries, score ranges, percentiles) go through [`View`],
//! which the count tree and the native board implement here (`one.rs`)
//! and the split board's merge in `trees/`; they are written once, for
//! every shape.

mod build;
mod one;
mod one_writes;
pub(super) mod ranges;
mod writes;

pub(in crate::ranking) use self::build::{
    approx_apply, arrival_floor, check_approx_config, check_name_free, check_trees, delete,
    exact_only, is_user_board, with_shape, ApproxCache,
};
pub(super) use self::one::ONE_TREE;
#[cfg(test)]
pub(super) use self::one::{player_place, tree_rank, CountTree};
pub(in crate::ranking) use self::writes::Writes;

use super::policy::Rules;
use super::storage::Storage;
use super::tree::Geometry;
use super::{Entry, Ranking, ScoreOrder, Tie};
use crate::error::Result;

/// A range of tree scores, `lo <= hi`: a caller's score range within the
/// board, turned to the tree's order (better is higher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::ranking) struct Span {
    pub lo: i64,
    pub hi: i64,
}

/// The reads of one board shape. Scores in and out are the caller's
/// (user) scores, except `Span`s; every read runs in one read
/// transaction (a split board: one snapshot per tree, all open at once,
/// as `trees/merge.rs` reads them). Inputs are checked by the caller
/// (`read.rs`) before a shape sees them. Its writes are
/// [`writes`](Shape::writes), so every shape answers both.
pub(in crate::ranking) trait Shape: Sync {
    fn rank_of_score(&self, b: &Ranking, score: i64) -> Result<u64>;
    fn rank(&self, b: &Ranking, player: &str, tie: Tie) -> Result<Option<u64>>;
    fn score(&self, b: &Ranking, player: &str) -> Result<Option<i64>>;
    fn score_at_rank(&self, b: &Ranking, rank: u64) -> Result<Option<i64>>;
    /// `1 <= from <= to`.
    fn page(&self, b: &Ranking, from: u64, to: u64) -> Result<Vec<Entry>>;
    fn around(&self, b: &Ranking, player: &str, k: u64) -> Result<Vec<Entry>>;
    /// `names` sorted and deduplicated.
    fn among(&self, b: &Ranking, names: &[&str]) -> Result<Vec<Entry>>;
    fn len(&self, b: &Ranking) -> Result<u64>;
    fn check_integrity(&self, b: &Ranking) -> Result<()>;
    fn entry(&self, b: &Ranking, player: &str) -> Result<Option<Entry>>;
    /// `None`: the caller's range holds no score of the board.
    fn count_between(&self, b: &Ranking, span: Option<Span>) -> Result<u64>;
    fn between(&self, b: &Ranking, span: Option<Span>, limit: u64) -> Result<Vec<Entry>>;
    fn percentile(&self, b: &Ranking, player: &str) -> Result<Option<f64>>;
    /// `p` in `0..=100`.
    fn score_at_percentile(&self, b: &Ranking, p: f64) -> Result<Option<i64>>;
    /// The shape's writes (`writes.rs`): an approximate board's are a board
    /// of one tree's.
    fn writes(&self) -> &'static dyn Writes;

    /// Page `n` (1-based) of `size` entries: a `page`, one read.
    fn page_number(&self, b: &Ranking, n: u64, size: u64) -> Result<Vec<Entry>> {
        let Some(from) = (n - 1).checked_mul(size).and_then(|s| s.checked_add(1)) else {
            return Ok(Vec::new());
        };
        self.page(b, from, from.saturating_add(size - 1))
    }

    /// Pages of `size` entries the board fills: a `len`, one read.
    fn page_count(&self, b: &Ranking, size: u64) -> Result<u64> {
        Ok(self.len(b)?.div_ceil(size))
    }
}

/// One snapshot of a board's order, in tree scores: the order statistics
/// the reads of `ranges.rs` are made of. Entries come out finished
/// (scores back from tree scores, entry data read).
pub(in crate::ranking) trait View {
    /// Players with a tree score strictly better than `tree` (in range).
    fn above(&self, tree: i64) -> Result<u64>;
    /// Players on the board.
    fn len(&self) -> Result<u64>;
    /// Entries at ordinal ranks `from..=to`, `1 <= from <= to`.
    fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>>;
    /// `player`'s entry, `None` if they are not on the board.
    fn entry(&self, player: &str) -> Result<Option<Entry>>;
    /// The (caller's) score at ordinal rank `position`, `None` past the end.
    fn score_at(&self, position: u64) -> Result<Option<i64>>;

    /// The (caller's) score at ordinal rank `place(n)` of the board's
    /// `n >= 1` players, `None` on an empty board: a percentile's. A
    /// snapshot that reads each store call once counts both in one.
    fn score_at_len(&self, place: &dyn Fn(u64) -> u64) -> Result<Option<i64>> {
        match self.len()? {
            0 => Ok(None),
            n => self.score_at(place(n)),
        }
    }

    /// The players whose tree score lies in `span`, counted, and the first
    /// `limit` of them (none for 0): they hold the ordinal ranks right
    /// after the players above `hi`, so the list is one page. A store that
    /// orders the board itself answers in one call.
    fn between(&self, g: &Geometry, span: Span, limit: u64) -> Result<(u64, Vec<Entry>)> {
        let above = self.above(span.hi)?;
        let at_least = match span.lo == g.min() {
            true => self.len()?,
            false => self.above(span.lo - 1)?,
        };
        let n = at_least.saturating_sub(above);
        match n.min(limit) {
            0 => Ok((n, Vec::new())),
            k => Ok((n, self.page(above + 1, above + k)?)),
        }
    }
}

/// The board's shape: the one dispatch point of the reads and writes.
pub(in crate::ranking) fn of(ranking: &Ranking) -> &'static dyn Shape {
    if ranking.inner.rules().approx {
        super::approx::SHAPE
    } else if ranking.inner.trees.is_empty() {
        ONE_TREE
    } else {
        super::trees::SHAPE
    }
}

/// Entries as a query found them, finished:
/// [`finish`] with this board's rules and entry data.
pub(in crate::ranking) fn entries(
    ranking: &Ranking,
    st: &dyn Storage,
    g: &Geometry,
    found: Vec<Entry>,
) -> Result<Vec<Entry>> {
    let data = ranking.inner.config.entry_data() > 0;
    finish(st, g, ranking.inner.rules(), data, found)
}

/// Entries as a query found them, with their scores back from tree
/// scores and, on a board that keeps it (`data`), their entry data (one
/// more statement).
pub(in crate::ranking) fn finish(
    st: &dyn Storage,
    g: &Geometry,
    rules: Rules,
    data: bool,
    mut found: Vec<Entry>,
) -> Result<Vec<Entry>> {
    if rules.order != ScoreOrder::HigherIsBetter {
        for e in &mut found {
            e.score = rules.checked_score(st, g, e.score)?;
        }
    }
    if data && !found.is_empty() {
        let mut kept = std::collections::HashMap::new();
        let players: Vec<&str> = found.iter().map(|e| e.player.as_str()).collect();
        st.players_data(&players, &mut |player, bytes| {
            kept.insert(player.to_owned(), bytes.to_vec());
            Ok(())
        })?;
        for e in &mut found {
            e.data = kept.remove(&e.player);
        }
    }
    Ok(found)
}

//! The reads of an approximate board: its score index answers what needs
//! no count (a player's score, `among`, pages by an index scan, the size);
//! what needs the exact tree it does not keep is refused with
//! [`Error::ApproximateBoard`](crate::Error::ApproximateBoard), naming the
//! call ([`Ranking::approx_rank`] estimates ranks instead).

use crate::error::Result;
use crate::ranking::shape::{Shape, Span, Writes, ONE_TREE};
use crate::ranking::{Entry, Ranking, Tie};

/// The shape of an approximate board.
pub(in crate::ranking) struct Approx;

pub(in crate::ranking) static SHAPE: &Approx = &Approx;

impl Shape for Approx {
    /// A board of one tree's: the apply (`apply/`) keeps its score index
    /// instead of a count tree, and what needs the exact tree (`submit`'s
    /// ranks, trims) is refused before the shape is asked.
    fn writes(&self) -> &'static dyn Writes {
        ONE_TREE
    }

    fn rank_of_score(&self, b: &Ranking, _: i64) -> Result<u64> {
        Err(super::exact_refused(b, "rank_of_score"))
    }

    fn rank(&self, b: &Ranking, _: &str, _: Tie) -> Result<Option<u64>> {
        Err(super::exact_refused(b, "rank"))
    }

    /// The player's row, as on an exact board of one tree.
    fn score(&self, b: &Ranking, player: &str) -> Result<Option<i64>> {
        ONE_TREE.score(b, player)
    }

    fn score_at_rank(&self, b: &Ranking, _: u64) -> Result<Option<i64>> {
        Err(super::exact_refused(b, "score_at_rank"))
    }

    fn page(&self, b: &Ranking, from: u64, to: u64) -> Result<Vec<Entry>> {
        super::page(b, from, to)
    }

    fn around(&self, b: &Ranking, _: &str, _: u64) -> Result<Vec<Entry>> {
        Err(super::exact_refused(b, "around"))
    }

    /// The players' rows, ranked in memory as on an exact board.
    fn among(&self, b: &Ranking, names: &[&str]) -> Result<Vec<Entry>> {
        ONE_TREE.among(b, names)
    }

    fn len(&self, b: &Ranking) -> Result<u64> {
        super::len(b)
    }

    fn check_integrity(&self, b: &Ranking) -> Result<()> {
        Err(super::exact_refused(b, "check_integrity"))
    }

    fn entry(&self, b: &Ranking, _: &str) -> Result<Option<Entry>> {
        Err(super::exact_refused(b, "entry"))
    }

    fn count_between(&self, b: &Ranking, _: Option<Span>) -> Result<u64> {
        Err(super::exact_refused(b, "count_between"))
    }

    fn between(&self, b: &Ranking, _: Option<Span>, _: u64) -> Result<Vec<Entry>> {
        Err(super::exact_refused(b, "between"))
    }

    fn percentile(&self, b: &Ranking, _: &str) -> Result<Option<f64>> {
        Err(super::exact_refused(b, "percentile"))
    }

    fn score_at_percentile(&self, b: &Ranking, _: f64) -> Result<Option<i64>> {
        Err(super::exact_refused(b, "score_at_percentile"))
    }
}

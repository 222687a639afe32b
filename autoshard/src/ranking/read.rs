//! The public reads of a board (`facade.rs` documents them): each
//! checks its input, then asks the board's shape (`shape/`), which runs it
//! in one read transaction (one snapshot) of one tree, of every tree of a
//! split board (`trees/`), or of an approximate board's index (`approx/`).
//! A composite board's tuple reads are these reads through its codec.
//! (Still elsewhere: the approximate board's own estimates, `approx/`, and
//! the queue's `queued` and `dead_letters`, `queue/`.)

use super::handle::check_player;
use super::shape;
use super::shape::Span;
use super::{Entry, Ranking, Tie, MAX_AMONG};
use crate::error::{Error, Result};
use std::ops::RangeInclusive;

/// [`Ranking::rank_of_score`].
pub(in crate::ranking) fn rank_of_score(ranking: &Ranking, score: i64) -> Result<u64> {
    shape::of(ranking).rank_of_score(ranking, score)
}

/// [`Ranking::rank`].
pub(in crate::ranking) fn rank(ranking: &Ranking, player: &str, tie: Tie) -> Result<Option<u64>> {
    check_player(player)?;
    shape::of(ranking).rank(ranking, player, tie)
}

/// [`Ranking::score`].
pub(in crate::ranking) fn score(ranking: &Ranking, player: &str) -> Result<Option<i64>> {
    check_player(player)?;
    shape::of(ranking).score(ranking, player)
}

/// [`Ranking::score_at_rank`].
pub(in crate::ranking) fn score_at_rank(ranking: &Ranking, rank: u64) -> Result<Option<i64>> {
    shape::of(ranking).score_at_rank(ranking, rank)
}

/// [`Ranking::top`].
pub(in crate::ranking) fn top(ranking: &Ranking, n: u64) -> Result<Vec<Entry>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    ranking.page(1, n)
}

/// [`Ranking::page`].
pub(in crate::ranking) fn page(ranking: &Ranking, from: u64, to: u64) -> Result<Vec<Entry>> {
    if from == 0 || from > to {
        return Err(Error::InvalidRanking {
            reason: format!(
                "page {from}..={to}: ranks start at 1 and a page must not end before it starts"
            ),
        });
    }
    shape::of(ranking).page(ranking, from, to)
}

/// [`Ranking::around`].
pub(in crate::ranking) fn around(ranking: &Ranking, player: &str, k: u64) -> Result<Vec<Entry>> {
    check_player(player)?;
    shape::of(ranking).around(ranking, player, k)
}

/// [`Ranking::among`].
pub(in crate::ranking) fn among(ranking: &Ranking, players: &[&str]) -> Result<Vec<Entry>> {
    if players.len() > MAX_AMONG {
        return Err(Error::InvalidRanking {
            reason: format!(
                "{} players given to `among`; at most {MAX_AMONG}",
                players.len()
            ),
        });
    }
    for player in players {
        check_player(player)?;
    }
    let mut names: Vec<&str> = players.to_vec();
    names.sort_unstable();
    names.dedup();
    shape::of(ranking).among(ranking, &names)
}

/// [`Ranking::len`].
pub(in crate::ranking) fn len(ranking: &Ranking) -> Result<u64> {
    shape::of(ranking).len(ranking)
}

/// [`Ranking::is_empty`].
pub(in crate::ranking) fn is_empty(ranking: &Ranking) -> Result<bool> {
    Ok(ranking.len()? == 0)
}

/// [`Ranking::check_integrity`].
pub(in crate::ranking) fn check_integrity(ranking: &Ranking) -> Result<()> {
    shape::of(ranking).check_integrity(ranking)
}

/// [`Ranking::entry`].
pub(in crate::ranking) fn entry(ranking: &Ranking, player: &str) -> Result<Option<Entry>> {
    check_player(player)?;
    shape::of(ranking).entry(ranking, player)
}

/// [`Ranking::count_between`].
pub(in crate::ranking) fn count_between(
    ranking: &Ranking,
    scores: RangeInclusive<i64>,
) -> Result<u64> {
    let span = span(ranking, "count_between", &scores)?;
    shape::of(ranking).count_between(ranking, span)
}

/// [`Ranking::between`].
pub(in crate::ranking) fn between(
    ranking: &Ranking,
    scores: RangeInclusive<i64>,
    limit: u64,
) -> Result<Vec<Entry>> {
    let span = span(ranking, "between", &scores)?;
    shape::of(ranking).between(ranking, span, limit)
}

/// [`Ranking::percentile`].
pub(in crate::ranking) fn percentile(ranking: &Ranking, player: &str) -> Result<Option<f64>> {
    check_player(player)?;
    shape::of(ranking).percentile(ranking, player)
}

/// [`Ranking::score_at_percentile`].
pub(in crate::ranking) fn score_at_percentile(ranking: &Ranking, p: f64) -> Result<Option<i64>> {
    if !(0.0..=100.0).contains(&p) {
        return Err(Error::InvalidRanking {
            reason: format!("percentile {p} is outside 0..=100"),
        });
    }
    shape::of(ranking).score_at_percentile(ranking, p)
}

/// [`Ranking::page_number`].
pub(in crate::ranking) fn page_number(ranking: &Ranking, n: u64, size: u64) -> Result<Vec<Entry>> {
    if n == 0 || size == 0 {
        return Err(Error::InvalidRanking {
            reason: format!("page {n} of size {size}: pages start at 1 and hold at least 1"),
        });
    }
    shape::of(ranking).page_number(ranking, n, size)
}

/// [`Ranking::page_count`].
pub(in crate::ranking) fn page_count(ranking: &Ranking, size: u64) -> Result<u64> {
    if size == 0 {
        return Err(Error::InvalidRanking {
            reason: "pages of size 0".into(),
        });
    }
    shape::of(ranking).page_count(ranking, size)
}

/// [`Ranking::rank_of_dims`].
pub(in crate::ranking) fn rank_of_dims(ranking: &Ranking, values: &[i64]) -> Result<u64> {
    ranking.rank_of_score(ranking.encode(values)?)
}

/// [`Ranking::dims`].
pub(in crate::ranking) fn dims(ranking: &Ranking, player: &str) -> Result<Option<Vec<i64>>> {
    match ranking.score(player)? {
        Some(score) => ranking.decode(score).map(Some),
        None => Ok(None),
    }
}

/// [`Ranking::dims_at_rank`].
pub(in crate::ranking) fn dims_at_rank(ranking: &Ranking, rank: u64) -> Result<Option<Vec<i64>>> {
    match ranking.score_at_rank(rank)? {
        Some(score) => ranking.decode(score).map(Some),
        None => Ok(None),
    }
}

/// The tree scores of `scores` within the board's range, `None` if none
/// is; [`Error::InvalidRanking`] for an empty range.
fn span(ranking: &Ranking, call: &str, scores: &RangeInclusive<i64>) -> Result<Option<Span>> {
    let (lo, hi) = (*scores.start(), *scores.end());
    if scores.is_empty() {
        return Err(Error::InvalidRanking {
            reason: format!("{call}({lo}..={hi}): an empty or reversed score range"),
        });
    }
    let g = ranking.inner.geometry();
    // `max` is one past the last score, and a board's range ends below
    // `i64::MAX`: no overflow.
    let (lo, hi) = (lo.max(g.min()), hi.min(g.max() - 1));
    if lo > hi {
        return Ok(None);
    }
    let rules = ranking.inner.rules();
    let (a, b) = (rules.tree_score(g, lo)?, rules.tree_score(g, hi)?);
    Ok(Some(Span {
        lo: a.min(b),
        hi: a.max(b),
    }))
}

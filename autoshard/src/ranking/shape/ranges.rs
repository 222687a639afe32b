//! The reads made of a few order statistics of one snapshot ([`View`]):
//! one player's entry, score ranges, percentiles. Written once for every
//! exact shape; each runs inside the shape's one read transaction.

use super::{Span, View};
use crate::error::Result;
use crate::ranking::tree::Geometry;
use crate::ranking::Entry;

/// Players whose tree score lies in `span` ([`View::between`] with no
/// list): those at or above `lo` less those above `hi`. Reads: two
/// descents (one and the root when `lo` is the board's lowest score).
pub(in crate::ranking) fn count_between(v: &dyn View, g: &Geometry, span: Span) -> Result<u64> {
    Ok(v.between(g, span, 0)?.0)
}

/// Up to `limit` entries whose tree score lies in `span`, in ranking
/// order: one page after two descents, O(log n + k).
pub(in crate::ranking) fn between(
    v: &dyn View,
    g: &Geometry,
    span: Span,
    limit: u64,
) -> Result<Vec<Entry>> {
    Ok(v.between(g, span, limit)?.1)
}

/// The percentage of `n` players at or below standard rank `rank`'s
/// score: 100 × (n − rank + 1) / n.
pub(in crate::ranking) fn percent(rank: u64, n: u64) -> f64 {
    (n - rank + 1) as f64 * 100.0 / n as f64
}

/// `player`'s [`percent`], `None` if they are not on the board.
pub(in crate::ranking) fn percentile(v: &dyn View, player: &str) -> Result<Option<f64>> {
    let Some(entry) = v.entry(player)? else {
        return Ok(None);
    };
    Ok(Some(percent(entry.rank, v.len()?)))
}

/// The nearest rank of percentile `p` among `n >= 1` scores listed worst
/// first: the least `k` in `1..=n` with `100 k / n >= p`, computed as
/// [`percent`] computes, so that a player's own percentile leads back to
/// their score whatever the rounding.
pub(in crate::ranking) fn nearest_rank(p: f64, n: u64) -> u64 {
    let share = |k: u64| k as f64 * 100.0 / n as f64;
    let mut k = ((p * n as f64 / 100.0).ceil() as u64).clamp(1, n);
    while k > 1 && share(k - 1) >= p {
        k -= 1;
    }
    while k < n && share(k) < p {
        k += 1;
    }
    k
}

/// The score at percentile `p` (nearest rank), `None` on an empty board.
pub(in crate::ranking) fn score_at_percentile(v: &dyn View, p: f64) -> Result<Option<i64>> {
    // Worst-first place k is best-first place n - k + 1.
    v.score_at_len(&|n| n - nearest_rank(p, n) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_rank_is_the_least_place_reaching_the_share() {
        // Five scores: each holds 20 %.
        let ranks: Vec<u64> = [0.0, 1.0, 20.0, 20.5, 40.0, 99.9, 100.0]
            .iter()
            .map(|&p| nearest_rank(p, 5))
            .collect();
        assert_eq!(ranks, [1, 1, 1, 2, 2, 5, 5]);
        // Every share a percentile can be leads back to its place.
        for n in 1..200 {
            for rank in 1..=n {
                let k = n - rank + 1;
                assert_eq!(nearest_rank(percent(rank, n), n), k, "n {n} rank {rank}");
            }
        }
    }
}

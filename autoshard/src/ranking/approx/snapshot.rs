//! A published bucket snapshot in memory, and the interpolation that turns
//! it into ranks.

use super::super::policy::Rules;
use super::super::tree::Geometry;
use crate::error::Result;
use crate::seam::{Bucket, StoredSnapshot};

/// One bucket of an [`ApproxSnapshot`], in the board's scores: the players
/// with a score from `worst` to `best` (inclusive; on a lower-is-better
/// board `best <= worst`). A score is never split between two buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ApproxBucket {
    /// The best score in the bucket.
    pub best: i64,
    /// The worst score in the bucket.
    pub worst: i64,
    /// Players in the bucket.
    pub players: u64,
    /// Players at `best`.
    pub at_best: u64,
    /// Players at `worst` (`players` when `best == worst`).
    pub at_worst: u64,
    /// Players in better buckets: the bucket's best score has standard rank
    /// `above + 1`.
    pub above: u64,
}

/// The bucket snapshot an approximate board's last
/// [`refresh`](super::super::Ranking::refresh) published, as
/// [`Ranking::approx_snapshot`](super::super::Ranking::approx_snapshot)
/// returns it: [`rank`](ApproxSnapshot::rank) answers from memory, with no
/// store read at all.
#[derive(Debug, Clone)]
pub struct ApproxSnapshot {
    id: i64,
    total: u64,
    buckets: Vec<Bucket>,
    /// `above[i]`: players in buckets `0..i`.
    above: Vec<u64>,
    rules: Rules,
    g: Geometry,
}

/// Players of bucket `b` with a tree score strictly above `t`, for `lo < t
/// < hi`: all `at_hi`, plus the interior players (scores strictly between
/// `lo` and `hi`) spread linearly over the interior scores. Exact at
/// `t = hi - 1`; off by at most the interior count anywhere.
pub(crate) fn interpolate(b: &Bucket, t: i64) -> u64 {
    let inner = b.count - b.at_hi - b.at_lo;
    // Widths as i128: `hi - lo` may exceed `i64`.
    let above = i128::from(b.hi) - 1 - i128::from(t);
    let width = i128::from(b.hi) - i128::from(b.lo) - 1;
    let share = (i128::from(inner) * above + width / 2) / width;
    b.at_hi + share as u64
}

impl ApproxSnapshot {
    pub(crate) fn new(stored: StoredSnapshot, rules: Rules, g: Geometry) -> Self {
        let mut above = Vec::with_capacity(stored.buckets.len());
        let mut sum = 0u64;
        for b in &stored.buckets {
            above.push(sum);
            sum = sum.saturating_add(b.count);
        }
        ApproxSnapshot {
            id: stored.id,
            total: stored.total,
            buckets: stored.buckets,
            above,
            rules,
            g,
        }
    }

    /// The snapshot's number: a later refresh publishes a higher one.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Players on the board when the refresh read its score index.
    pub fn players(&self) -> u64 {
        self.total
    }

    /// The buckets, best first.
    pub fn buckets(&self) -> Vec<ApproxBucket> {
        let real = |t| self.rules.score(&self.g, t).unwrap_or(t);
        self.buckets
            .iter()
            .zip(&self.above)
            .map(|(b, &above)| ApproxBucket {
                best: real(b.hi),
                worst: real(b.lo),
                players: b.count,
                at_best: b.at_hi,
                at_worst: b.at_lo,
                above,
            })
            .collect()
    }

    /// The most [`rank`](ApproxSnapshot::rank) can be off by, against the
    /// exact standard rank among the players the snapshot counted: the
    /// largest number of interior players (neither at its best nor at its
    /// worst score) of a bucket. A refresh of `b` buckets and an exact top
    /// of `t` keeps it at most `ceil((players - t) / b) - 2`.
    pub fn error_bound(&self) -> u64 {
        self.buckets
            .iter()
            .map(|b| match b.hi == b.lo {
                true => 0,
                false => b.count - b.at_hi - b.at_lo,
            })
            .max()
            .unwrap_or(0)
    }

    /// The approximate standard rank of `score` (1 + players with a better
    /// score) among the players the snapshot counted: exact at every
    /// bucket's best and worst score, just below its best, and between
    /// buckets, interpolated
    /// linearly inside a bucket, off by at most
    /// [`error_bound`](ApproxSnapshot::error_bound).
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`](crate::Error::ScoreOutOfRange).
    pub fn rank(&self, score: i64) -> Result<u64> {
        let t = self.rules.tree_score(&self.g, score)?;
        Ok(self.rank_of_tree(t, interpolate))
    }

    /// [`rank`](ApproxSnapshot::rank) of a tree score.
    pub(crate) fn rank_tree(&self, t: i64) -> u64 {
        self.rank_of_tree(t, interpolate)
    }

    /// [`rank`](ApproxSnapshot::rank) of a tree score, with the
    /// interpolation passed in (the unit tests' control passes a wrong one).
    pub(crate) fn rank_of_tree(&self, t: i64, inside: fn(&Bucket, i64) -> u64) -> u64 {
        // Buckets are best first, so `lo` descends: the first bucket with
        // `lo <= t` is the one holding `t`, or the one below the gap `t`
        // falls in.
        let i = self.buckets.partition_point(|b| b.lo > t);
        let Some(b) = self.buckets.get(i) else {
            return self.total.saturating_add(1);
        };
        let above = self.above[i];
        let within = if t >= b.hi {
            0
        } else if t == b.lo {
            b.count - b.at_lo
        } else {
            inside(b, t)
        };
        above + within + 1
    }
}

#[cfg(test)]
mod tests {
    use super::super::refresh::build;
    use super::*;
    use proptest::prelude::*;

    /// Checks every score of `0..width` against the exact rank among
    /// `scores`; `Err` names the first miss.
    fn check(
        scores: &[i64],
        buckets: u32,
        top: u32,
        width: i64,
        inside: fn(&Bucket, i64) -> u64,
    ) -> Result<(), String> {
        let mut sorted = scores.to_vec();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let (total, rows) = build(&sorted, buckets, top);
        let g = Geometry::new(0, width, 10).unwrap();
        let snap = ApproxSnapshot::new(
            StoredSnapshot {
                id: 1,
                total,
                buckets: rows.clone(),
            },
            Rules::default(),
            g,
        );
        let bound = snap.error_bound();
        let target = total
            .saturating_sub(u64::from(top))
            .div_ceil(u64::from(buckets));
        if rows.len() > buckets as usize + top as usize || bound > target.saturating_sub(2) {
            return Err(format!("{} buckets, bound {bound}", rows.len()));
        }
        let edges: Vec<i64> = rows.iter().flat_map(|b| [b.hi, b.lo, b.hi - 1]).collect();
        let mut worse = u64::MAX;
        for t in 0..width {
            let exact = 1 + scores.iter().filter(|&&s| s > t).count() as u64;
            let approx = snap.rank_of_tree(t, inside);
            let at_edge = edges.contains(&t) || !rows.iter().any(|b| b.lo < t && t < b.hi);
            let in_top = exact <= u64::from(top);
            if ((at_edge || in_top) && approx != exact) || approx.abs_diff(exact) > bound {
                return Err(format!(
                    "score {t}: approx {approx}, exact {exact}, bound {bound}"
                ));
            }
            // A better score never gets a worse rank.
            if approx > worse {
                return Err(format!("score {t}: approx {approx} after {worse} below it"));
            }
            worse = approx;
        }
        Ok(())
    }

    /// The control: interpolating from the wrong end of the bucket (within
    /// the bound, but not exact next to `hi` and not monotone).
    fn backwards(b: &Bucket, t: i64) -> u64 {
        let inner = b.count - b.at_hi - b.at_lo;
        let below = i128::from(t) - i128::from(b.lo) - 1;
        let width = i128::from(b.hi) - i128::from(b.lo) - 1;
        b.at_hi + (i128::from(inner) * below / width) as u64
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn within_the_bound_and_exact_at_edges(
            scores in prop::collection::vec(0i64..300, 0..400),
            buckets in 1u32..40,
            top in prop::sample::select(vec![0u32, 0, 1, 5, 50]),
        ) {
            let checked = check(&scores, buckets, top, 300, interpolate);
            prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
        }
    }

    #[test]
    fn a_wrong_interpolation_fails_the_check() {
        // Skewed scores: the backwards interpolation misses by more than
        // the interior count somewhere, and the check says so.
        let scores: Vec<i64> = (0..200).map(|i| (i * i) % 300).collect();
        assert!(check(&scores, 4, 0, 300, interpolate).is_ok());
        assert!(check(&scores, 4, 0, 300, backwards).is_err());
    }
}

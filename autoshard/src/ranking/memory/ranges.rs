//! The reads of `shape/ranges.rs` (issue 21: an entry, score ranges,
//! percentiles, pages by number) on a memory board, and the oracle's
//! brute-force answers, so the algorithms' property tests hold them to it.

use super::harness::{Board, Oracle};
use crate::error::Result;
use crate::ranking::policy::Rules;
use crate::ranking::shape::ranges;
use crate::ranking::shape::{CountTree, Span, View};
use crate::ranking::Entry;
use proptest::prelude::*;

impl Board {
    /// Runs `f` over a count-tree view of one read transaction.
    fn view<R>(&self, f: impl FnOnce(&dyn View) -> Result<R>) -> Result<R> {
        self.st.read(|tx| {
            let g = self.st.geometry();
            f(&CountTree {
                st: tx,
                g,
                rules: Rules::default(),
                data: false,
            })
        })
    }

    /// `lo..=hi` within the board (higher is better: tree scores are
    /// scores), as `Ranking::span` clamps it.
    fn span(&self, lo: i64, hi: i64) -> Option<Span> {
        let g = self.g();
        let (lo, hi) = (lo.max(g.min()), hi.min(g.max() - 1));
        (lo <= hi).then_some(Span { lo, hi })
    }

    pub fn entry(&self, player: &str) -> Result<Option<Entry>> {
        self.view(|v| v.entry(player))
    }

    pub fn count_between(&self, lo: i64, hi: i64) -> Result<u64> {
        match self.span(lo, hi) {
            Some(span) => self.view(|v| ranges::count_between(v, self.g(), span)),
            None => Ok(0),
        }
    }

    pub fn between(&self, lo: i64, hi: i64, limit: u64) -> Result<Vec<Entry>> {
        match self.span(lo, hi) {
            Some(span) => self.view(|v| ranges::between(v, self.g(), span, limit)),
            None => Ok(Vec::new()),
        }
    }

    pub fn percentile(&self, player: &str) -> Result<Option<f64>> {
        self.view(|v| ranges::percentile(v, player))
    }

    pub fn score_at_percentile(&self, p: f64) -> Result<Option<i64>> {
        self.view(|v| ranges::score_at_percentile(v, p))
    }
}

impl Oracle {
    /// `player`'s entry, from the sorted list.
    pub fn entry(&self, player: &str) -> Option<Entry> {
        self.entries().into_iter().find(|e| e.player == player)
    }

    /// Players with a score in `lo..=hi`.
    pub fn count_between(&self, lo: i64, hi: i64) -> u64 {
        let held = self.players.values();
        held.filter(|p| (lo..=hi).contains(&p.0)).count() as u64
    }

    /// The first `limit` entries with a score in `lo..=hi`.
    pub fn between(&self, lo: i64, hi: i64, limit: u64) -> Vec<Entry> {
        let inside = self.entries().into_iter();
        let inside = inside.filter(|e| (lo..=hi).contains(&e.score));
        inside.take(limit as usize).collect()
    }

    /// The share of players no better than `player`, in percent.
    pub fn percentile(&self, player: &str) -> Option<f64> {
        let score = self.players.get(player)?.0;
        let below = self.players.values().filter(|p| p.0 <= score).count();
        Some(below as f64 * 100.0 / self.players.len() as f64)
    }

    /// Nearest rank: the scores worst first, the least place `k` whose
    /// share `100 k / n` reaches `p`, found by counting up.
    pub fn score_at_percentile(&self, p: f64) -> Option<i64> {
        let mut worst_first: Vec<i64> = self.players.values().map(|p| p.0).collect();
        worst_first.sort_unstable();
        let n = worst_first.len();
        let k = (1..=n).find(|&k| k as f64 * 100.0 / n as f64 >= p)?;
        Some(worst_first[k - 1])
    }
}

/// The reads above agree with the oracle, for ranges around each probe.
pub(crate) fn verify_ranges(
    board: &Board,
    oracle: &Oracle,
    probes: &[i64],
) -> Result<(), TestCaseError> {
    for e in oracle.entries() {
        prop_assert_eq!(board.entry(&e.player)?, Some(e.clone()));
        prop_assert_eq!(board.percentile(&e.player)?, oracle.percentile(&e.player));
    }
    prop_assert_eq!(board.entry("nobody")?, oracle.entry("nobody"));
    prop_assert_eq!(board.percentile("nobody")?, None);
    for &lo in probes {
        for &hi in probes.iter().filter(|&&hi| hi >= lo) {
            let (lo, hi) = (lo.saturating_sub(1), hi);
            let want = oracle.count_between(lo, hi);
            prop_assert_eq!(board.count_between(lo, hi)?, want, "{}..={}", lo, hi);
            for limit in [0, 1, 3, u64::MAX] {
                let want = oracle.between(lo, hi, limit);
                prop_assert_eq!(
                    board.between(lo, hi, limit)?,
                    want,
                    "{}..={} {}",
                    lo,
                    hi,
                    limit
                );
            }
        }
    }
    prop_assert_eq!(
        board.count_between(i64::MIN, i64::MAX)?,
        oracle.players.len() as u64
    );
    for p in [0.0, 0.1, 12.5, 25.0, 33.3, 50.0, 66.7, 99.99, 100.0] {
        let want = oracle.score_at_percentile(p);
        prop_assert_eq!(board.score_at_percentile(p)?, want, "p {}", p);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::harness::{self, Board, Oracle};
    use super::*;
    use crate::ranking::shape::ranges::nearest_rank;
    use crate::ranking::Tie;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Each read against the oracle after random batches, on boards
        /// of every depth, with ties.
        #[test]
        fn the_range_reads_agree_with_the_oracle(
            (range, branching, shards, pool) in harness::board_shape(),
            ops in prop::collection::vec(harness::op(), 0..12),
        ) {
            let board = Board::new(range, branching, shards);
            let mut oracle = Oracle::default();
            for op in &ops {
                harness::run(&board, &mut oracle, &pool, op)?;
            }
            verify_ranges(&board, &oracle, &pool)?;
            prop_assert_eq!(board.score_at_percentile(50.0)?.is_none(), oracle.players.is_empty());
        }
    }

    /// Two ties and a gap: each read's answer spelled out.
    #[test]
    fn the_range_reads_on_a_small_board() {
        let board = Board::new(0..100, 3, 2);
        let mut oracle = Oracle::default();
        for (p, s) in [("a", 10), ("b", 50), ("c", 50), ("d", 90), ("e", 10)] {
            board.set(p, s).unwrap();
            oracle.set(p, s);
        }
        let c = board.entry("c").unwrap().unwrap();
        assert_eq!((c.score, c.rank, c.dense, c.position), (50, 2, 2, 3));
        assert_eq!(c.rank_for(Tie::Ordinal), 3);
        assert_eq!(board.count_between(10, 50).unwrap(), 4);
        assert_eq!(board.count_between(11, 49).unwrap(), 0);
        assert_eq!(board.count_between(-100, 1_000).unwrap(), 5);
        let names = |v: Vec<Entry>| v.into_iter().map(|e| e.player).collect::<Vec<_>>();
        assert_eq!(names(board.between(0, 50, 3).unwrap()), ["b", "c", "a"]);
        assert_eq!(board.percentile("a").unwrap(), Some(40.0));
        assert_eq!(board.percentile("d").unwrap(), Some(100.0));
        assert_eq!(board.score_at_percentile(40.0).unwrap(), Some(10));
        assert_eq!(board.score_at_percentile(41.0).unwrap(), Some(50));
        verify_ranges(&board, &oracle, &[0, 10, 50, 90, 99]).unwrap();
    }

    /// Control: an answer off by one player fails the check. With
    /// `count_between` taking `lo` as exclusive (`above(lo)` for
    /// `above(lo - 1)`, then in `ranges.rs`, now `View::between`'s
    /// default), the proptest above failed at once (`2 != 3`).
    #[test]
    fn a_wrong_answer_fails_the_check() {
        let board = Board::new(0..100, 3, 2);
        let mut oracle = Oracle::default();
        for (p, s) in [("a", 10), ("b", 50), ("c", 50)] {
            board.set(p, s).unwrap();
            oracle.set(p, s);
        }
        verify_ranges(&board, &oracle, &[10, 50]).unwrap();
        // The board still holds "d" at 50, the oracle does not.
        board.set("d", 50).unwrap();
        assert!(verify_ranges(&board, &oracle, &[10, 50]).is_err());
        assert_eq!(nearest_rank(100.0, 3), 3);
    }
}

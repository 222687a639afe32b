//! The brute-force answers to issue 21's new reads (an entry, score
//! ranges, percentiles, pages by number) from the policy oracle's sorted
//! list, and a check of every one of them against a board.
#![allow(dead_code)] // each suite uses its own part of this

use crate::policy_oracle::Oracle;
use autoshard::ranking::{Entry, Ranking};
use proptest::prelude::*;

/// Players with a score in `lo..=hi`, in ranking order.
pub fn between(o: &Oracle, lo: i64, hi: i64) -> Vec<Entry> {
    let all = o.entries().into_iter();
    all.filter(|e| (lo..=hi).contains(&e.score)).collect()
}

/// The share of players no better than `player`, in percent.
pub fn percentile(o: &Oracle, player: &str) -> Option<f64> {
    let score = o.players.get(player)?.0;
    let no_better = o
        .players
        .values()
        .filter(|p| !o.order.is_better(p.0, score));
    Some(no_better.count() as f64 * 100.0 / o.players.len() as f64)
}

/// Nearest rank: the scores worst first, the least place `k` whose share
/// `100 k / n` reaches `p`.
pub fn score_at_percentile(o: &Oracle, p: f64) -> Option<i64> {
    let mut worst_first: Vec<i64> = o.entries().iter().map(|e| e.score).collect();
    worst_first.reverse();
    let n = worst_first.len();
    let k = (1..=n).find(|&k| k as f64 * 100.0 / n as f64 >= p)?;
    Some(worst_first[k - 1])
}

/// Every new read of `board` against the oracle: each player's entry and
/// percentile, ranges between any two of `ends` with a few limits,
/// percentiles, pages by number.
pub fn verify_new_reads(board: &Ranking, o: &Oracle, ends: &[i64]) -> Result<(), TestCaseError> {
    let entries = o.entries();
    for e in &entries {
        prop_assert_eq!(board.entry(&e.player)?, Some(e.clone()), "entry");
        prop_assert_eq!(board.percentile(&e.player)?, percentile(o, &e.player));
    }
    prop_assert_eq!(board.entry("nobody")?, None);
    prop_assert_eq!(board.percentile("nobody")?, None);
    // Every third end as `lo` against every end as `hi`: each kind of
    // range (inside, across an end of the board, outside) at a third of
    // the reads.
    for &lo in ends.iter().step_by(3) {
        for &hi in ends.iter().filter(|&&hi| hi >= lo) {
            let want = between(o, lo, hi);
            let count = board.count_between(lo..=hi)?;
            prop_assert_eq!(count, want.len() as u64, "count_between({}..={})", lo, hi);
            for limit in [0, 2, u64::MAX] {
                let got = board.between(lo..=hi, limit)?;
                let want = &want[..want.len().min(limit as usize)];
                prop_assert_eq!(&got, want, "between({}..={}, {})", lo, hi, limit);
            }
        }
    }
    for p in [0.0, 0.1, 12.5, 25.0, 33.3, 50.0, 66.7, 99.99, 100.0] {
        let want = score_at_percentile(o, p);
        prop_assert_eq!(
            board.score_at_percentile(p)?,
            want,
            "score_at_percentile({})",
            p
        );
    }
    let n = entries.len();
    for size in [1, 3] {
        prop_assert_eq!(board.page_count(size)?, n.div_ceil(size as usize) as u64);
        for page in 1..=n.div_ceil(size as usize) as u64 + 1 {
            let from = ((page - 1) * size) as usize;
            let want = &entries[from.min(n)..(from + size as usize).min(n)];
            let got = board.page_number(page, size)?;
            prop_assert_eq!(&got, want, "page_number({}, {})", page, size);
        }
    }
    Ok(())
}

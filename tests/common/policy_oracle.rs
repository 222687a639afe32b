//! A brute-force model of a board with an update policy and a score order
//! (issue 10): every player's score and the moment they reached it, ranked
//! the slow way, and every query checked against it.
#![allow(dead_code)] // each suite uses its own part of this

use autoshard::ranking::{Entry, Policy, Ranking, ScoreOrder, Tie};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::HashMap;

/// What a board does with submitted values. The default is the board of
/// `RankingConfig::new(i64::MIN..i64::MAX)`: `Replace`, higher is better.
#[derive(Debug, Clone)]
pub struct Oracle {
    pub policy: Policy,
    pub order: ScoreOrder,
    pub min: i64,
    pub max: i64,
    /// player -> (score, the moment they reached it).
    pub players: HashMap<String, (i64, u64)>,
    /// player -> entry data.
    pub data: HashMap<String, Vec<u8>>,
    clock: u64,
}

/// What `submit` should report: old score, new score, old rank, new rank,
/// new best.
pub type Report = (Option<i64>, i64, Option<u64>, u64, bool);

impl Default for Oracle {
    fn default() -> Self {
        Oracle::new(
            Policy::Replace,
            ScoreOrder::HigherIsBetter,
            i64::MIN,
            i64::MAX,
        )
    }
}

impl Oracle {
    pub fn new(policy: Policy, order: ScoreOrder, min: i64, max: i64) -> Self {
        Oracle {
            policy,
            order,
            min,
            max,
            players: HashMap::new(),
            data: HashMap::new(),
            clock: 0,
        }
    }

    fn better(&self, a: i64, b: i64) -> bool {
        match self.order {
            ScoreOrder::HigherIsBetter => a > b,
            ScoreOrder::LowerIsBetter => a < b,
        }
    }

    /// The score a player at `current` ends at when `value` is submitted;
    /// `None` if the board refuses it (out of range).
    pub fn next(&self, current: Option<i64>, value: i64) -> Option<i64> {
        let in_range = |s: i64| (self.min..self.max).contains(&s).then_some(s);
        match (self.policy, current) {
            (Policy::Increment, _) => in_range(current.unwrap_or(0).checked_add(value)?),
            (_, None) | (Policy::Replace, _) => in_range(value),
            (Policy::Best, Some(c)) => {
                in_range(value).map(|v| if self.better(v, c) { v } else { c })
            }
            (Policy::Worst, Some(c)) => {
                in_range(value).map(|v| if self.better(c, v) { v } else { c })
            }
        }
    }

    /// Puts `player` at `score` (in range), as a write of it would.
    pub fn set(&mut self, player: &str, score: i64) {
        if self.players.get(player).map(|p| p.0) != Some(score) {
            self.clock += 1;
            self.players.insert(player.into(), (score, self.clock));
        }
    }

    /// `set_scores` of absolute scores (in range) on a `Replace` board.
    pub fn set_all(&mut self, sets: &[(&str, i64)]) {
        let updates: Vec<_> = sets.iter().map(|&(p, s)| (p, Some(s))).collect();
        assert!(self.batch(&updates, false).is_empty(), "scores in range");
    }

    pub fn remove(&mut self, player: &str) -> bool {
        self.data.remove(player);
        self.players.remove(player).is_some()
    }

    /// `remove_data`: the player keeps their score and place; whether they
    /// are on the board.
    pub fn remove_data(&mut self, player: &str) -> bool {
        self.data.remove(player);
        self.players.contains_key(player)
    }

    /// `remove_between(lo..=hi)`: every player whose score lies in the
    /// range; how many.
    pub fn remove_between(&mut self, lo: i64, hi: i64) -> u64 {
        let gone: Vec<String> = self
            .players
            .iter()
            .filter(|(_, p)| (lo..=hi).contains(&p.0))
            .map(|(name, _)| name.clone())
            .collect();
        for p in &gone {
            self.remove(p);
        }
        gone.len() as u64
    }

    /// `keep_top(n)`: every player after the first `n` in ranking order;
    /// how many.
    pub fn keep_top(&mut self, n: u64) -> u64 {
        let below: Vec<Entry> = self.entries().into_iter().skip(n as usize).collect();
        for e in &below {
            self.remove(&e.player);
        }
        below.len() as u64
    }

    /// A batch by its net effect (values in order under the policy; players
    /// move in the order of their last change), skipping the updates the
    /// board refuses when `skip` (the queue's worker), else refusing it all
    /// (direct writes). The indices refused.
    pub fn batch(&mut self, updates: &[(&str, Option<i64>)], skip: bool) -> Vec<usize> {
        let mut net: HashMap<&str, (usize, Option<i64>)> = HashMap::new();
        let mut refused = Vec::new();
        for (i, &(player, value)) in updates.iter().enumerate() {
            let current = match net.get(player) {
                Some(n) => n.1,
                None => self.players.get(player).map(|p| p.0),
            };
            let next = match value {
                None => None,
                Some(v) => match self.next(current, v) {
                    Some(s) => Some(s),
                    None => {
                        refused.push(i);
                        current
                    }
                },
            };
            if next != current {
                net.insert(player, (i, next));
            }
        }
        if !refused.is_empty() && !skip {
            return refused;
        }
        // A removal drops the player's entry data, also when a later update
        // of the batch brings them back (`policy::store_entry_data`).
        for &(player, value) in updates {
            if value.is_none() {
                self.data.remove(player);
            }
        }
        let mut moves: Vec<_> = net.into_iter().collect();
        moves.sort_by_key(|m| m.1 .0);
        for (player, (_, score)) in moves {
            match score {
                Some(s) => self.set(player, s),
                None => {
                    self.remove(player);
                }
            }
        }
        refused
    }

    /// `submit`: what it should report, or `None` if it is refused.
    pub fn submit(&mut self, player: &str, value: i64) -> Option<Report> {
        let old = self.players.get(player).map(|p| p.0);
        let new = self.next(old, value)?;
        let old_rank = old.map(|o| self.rank_of_score(o));
        self.set(player, new);
        let new_best = old.is_none_or(|o| self.better(new, o));
        Some((old, new, old_rank, self.rank_of_score(new), new_best))
    }

    /// `submit_with` on a board that keeps entry data: the data is the
    /// player's when the submission is what their entry stands for.
    pub fn submit_with(&mut self, player: &str, value: i64, data: &[u8]) -> Option<Report> {
        let report = self.submit(player, value)?;
        let taken = match self.policy {
            Policy::Replace | Policy::Increment => true,
            Policy::Best | Policy::Worst => report.0 != Some(report.1),
        };
        if taken {
            self.data.insert(player.to_owned(), data.to_vec());
        }
        Some(report)
    }

    /// Ranking order: better score first, then who reached it first.
    pub fn entries(&self) -> Vec<Entry> {
        let mut sorted: Vec<_> = self.players.iter().collect();
        sorted.sort_by(
            |(_, a), (_, b)| match (self.better(a.0, b.0), self.better(b.0, a.0)) {
                (true, _) => Ordering::Less,
                (_, true) => Ordering::Greater,
                _ => a.1.cmp(&b.1),
            },
        );
        let mut out: Vec<Entry> = Vec::new();
        for (i, (player, &(score, _))) in sorted.into_iter().enumerate() {
            let (rank, dense) = match out.last() {
                Some(prev) if prev.score == score => (prev.rank, prev.dense),
                Some(prev) => (i as u64 + 1, prev.dense + 1),
                None => (1, 1),
            };
            out.push(Entry {
                player: player.clone(),
                score,
                rank,
                dense,
                position: i as u64 + 1,
                data: self.data.get(player.as_str()).cloned(),
            });
        }
        out
    }

    pub fn rank_of_score(&self, score: i64) -> u64 {
        1 + self
            .players
            .values()
            .filter(|p| self.better(p.0, score))
            .count() as u64
    }
}

/// Issue 21's reads, the slow way (the other engineer's proptests and
/// `verify` compare every store with these).
impl Oracle {
    /// `player`'s entry.
    pub fn entry(&self, player: &str) -> Option<Entry> {
        self.entries().into_iter().find(|e| e.player == player)
    }

    /// Players with a score in `scores`.
    pub fn count_between(&self, scores: std::ops::RangeInclusive<i64>) -> u64 {
        let held = self.players.values();
        held.filter(|p| scores.contains(&p.0)).count() as u64
    }

    /// The first `limit` entries with a score in `scores`, ranking order.
    pub fn between(&self, scores: std::ops::RangeInclusive<i64>, limit: u64) -> Vec<Entry> {
        let inside = self.entries().into_iter();
        let inside = inside.filter(|e| scores.contains(&e.score));
        inside.take(limit.min(usize::MAX as u64) as usize).collect()
    }

    /// The share of players no better than `player`, in percent.
    pub fn percentile(&self, player: &str) -> Option<f64> {
        let score = self.players.get(player)?.0;
        let values = self.players.values();
        let no_better = values.filter(|p| !self.better(p.0, score)).count();
        Some(no_better as f64 * 100.0 / self.players.len() as f64)
    }

    /// Nearest rank: scores worst first, the least place `k` whose share
    /// `100 k / n` reaches `p`.
    pub fn score_at_percentile(&self, p: f64) -> Option<i64> {
        let worst_first: Vec<i64> = self.entries().iter().rev().map(|e| e.score).collect();
        let n = worst_first.len();
        let k = (1..=n).find(|&k| k as f64 * 100.0 / n as f64 >= p)?;
        Some(worst_first[k - 1])
    }

    /// Page `n` (1-based) of pages of `size`.
    pub fn page_number(&self, n: u64, size: u64) -> Vec<Entry> {
        let skip = (n - 1).saturating_mul(size).min(usize::MAX as u64) as usize;
        let all = self.entries().into_iter().skip(skip);
        all.take(size.min(usize::MAX as u64) as usize).collect()
    }

    /// Pages of `size` the board fills.
    pub fn page_count(&self, size: u64) -> u64 {
        (self.players.len() as u64).div_ceil(size)
    }
}

/// Issue 21's reads against the oracle: each player's entry and
/// percentile, ranges between the probes, percentiles and pages.
pub fn verify_issue_21_reads(
    board: &Ranking,
    oracle: &Oracle,
    probes: &[i64],
) -> Result<(), TestCaseError> {
    for e in oracle.entries() {
        prop_assert_eq!(board.entry(&e.player)?, Some(e.clone()));
        prop_assert_eq!(board.percentile(&e.player)?, oracle.percentile(&e.player));
    }
    prop_assert_eq!(board.entry("nobody")?, None);
    prop_assert_eq!(board.percentile("nobody")?, None);
    // A few ranges: each read is a round trip on a server.
    let probes = &probes[..probes.len().min(5)];
    for &lo in probes {
        for &hi in probes.iter().filter(|&&hi| hi >= lo) {
            let want = oracle.count_between(lo..=hi);
            prop_assert_eq!(board.count_between(lo..=hi)?, want, "{}..={}", lo, hi);
            for limit in [1, 3, u64::MAX] {
                let want = oracle.between(lo..=hi, limit);
                let got = board.between(lo..=hi, limit)?;
                prop_assert_eq!(got, want, "between({}..={}, {})", lo, hi, limit);
            }
        }
    }
    let all = i64::MIN..=i64::MAX;
    prop_assert_eq!(board.count_between(all.clone())?, oracle.count_between(all));
    for p in [0.0, 0.5, 25.0, 33.3, 50.0, 99.9, 100.0] {
        let want = oracle.score_at_percentile(p);
        prop_assert_eq!(board.score_at_percentile(p)?, want, "p {}", p);
    }
    for size in [1, 3, 10] {
        prop_assert_eq!(board.page_count(size)?, oracle.page_count(size));
        let count = oracle.page_count(size);
        for n in [1, 2, count.max(1), count + 1] {
            let want = oracle.page_number(n, size);
            prop_assert_eq!(board.page_number(n, size)?, want, "page {} of {}", n, size);
        }
    }
    Ok(())
}

/// Asserts that every query agrees with the oracle, under every tie rule;
/// `probes` are scores in range for `rank_of_score`.
pub fn verify(board: &Ranking, oracle: &Oracle, probes: &[i64]) -> Result<(), TestCaseError> {
    let entries = oracle.entries();
    let n = entries.len() as u64;
    prop_assert_eq!(board.len()?, n);
    for &score in probes {
        prop_assert_eq!(
            board.rank_of_score(score)?,
            oracle.rank_of_score(score),
            "rank_of_score({})",
            score
        );
    }
    for e in &entries {
        prop_assert_eq!(board.score(&e.player)?, Some(e.score));
        prop_assert_eq!(
            board.rank(&e.player, Tie::Standard)?,
            Some(e.rank),
            "{:?}",
            e
        );
        prop_assert_eq!(board.rank(&e.player, Tie::Dense)?, Some(e.dense), "{:?}", e);
        prop_assert_eq!(
            board.rank(&e.player, Tie::Ordinal)?,
            Some(e.position),
            "{:?}",
            e
        );
        prop_assert_eq!(board.score_at_rank(e.position)?, Some(e.score));
        for k in [0, 1, 3] {
            let at = e.position as usize - 1;
            let window = &entries[at.saturating_sub(k)..(at + k + 1).min(entries.len())];
            prop_assert_eq!(
                &board.around(&e.player, k as u64)?,
                window,
                "around({}, {})",
                e.player,
                k
            );
        }
    }
    prop_assert_eq!(board.score_at_rank(0)?, None);
    prop_assert_eq!(board.score_at_rank(n + 1)?, None);
    prop_assert_eq!(board.score("nobody")?, None);
    prop_assert_eq!(board.rank("nobody", Tie::Ordinal)?, None);
    prop_assert!(board.around("nobody", 2)?.is_empty());
    prop_assert_eq!(&board.page(1, n.max(1) + 2)?, &entries);
    for t in [0, 1, 2, n / 2, n] {
        prop_assert_eq!(&board.top(t)?, &entries[..t.min(n) as usize]);
    }
    for from in 1..=n + 1 {
        for to in [from, from + 1, from + 4] {
            let want = &entries[(from - 1).min(n) as usize..to.min(n) as usize];
            prop_assert_eq!(&board.page(from, to)?, want, "page({}, {})", from, to);
        }
    }
    verify_issue_21_reads(board, oracle, probes)?;
    board.check_integrity()?;
    Ok(())
}

/// Every update policy.
pub fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::Replace),
        Just(Policy::Best),
        Just(Policy::Worst),
        Just(Policy::Increment),
    ]
}

/// Either score order.
pub fn order() -> impl Strategy<Value = ScoreOrder> {
    prop_oneof![
        Just(ScoreOrder::HigherIsBetter),
        Just(ScoreOrder::LowerIsBetter)
    ]
}

/// Score ranges from width 1 to the whole of `i64`, at both ends of it.
pub fn range() -> impl Strategy<Value = (i64, i64)> {
    prop_oneof![
        Just((0, 1)),
        (-50i64..50, 1i64..40).prop_map(|(min, w)| (min, min + w)),
        Just((i64::MIN, i64::MAX)),
        (1i64..5000).prop_map(|w| (i64::MIN, i64::MIN + w)),
        (1i64..5000).prop_map(|w| (i64::MAX - w, i64::MAX)),
        (any::<i64>(), any::<i64>())
            .prop_filter_map("empty range", |(a, b)| (a < b).then_some((a, b))),
    ]
}

//! A brute-force model of a composite board (issue 10, item 3): every
//! player's tuple and the moment they reached it, compared dimension by
//! dimension under each one's order (never through the library's
//! encoding), and every query checked against it.
#![allow(dead_code)] // each suite uses its own part of this

use autoshard::ranking::{Dim, Policy, Ranking, ScoreOrder, Submission, Tie};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::HashMap;

pub type Tuple = Vec<i64>;

/// What `submit_dims` should report: old tuple, new tuple, old rank, new
/// rank, new best.
pub type Report = (Option<Tuple>, Tuple, Option<u64>, u64, bool);

/// One entry as the model ranks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub player: String,
    pub tuple: Tuple,
    pub rank: u64,
    pub dense: u64,
    pub position: u64,
}

#[derive(Debug, Clone)]
pub struct Oracle {
    pub policy: Policy,
    pub dims: Vec<Dim>,
    /// player -> (tuple, the moment they reached it).
    pub players: HashMap<String, (Tuple, u64)>,
    clock: u64,
}

impl Oracle {
    pub fn new(policy: Policy, dims: Vec<Dim>) -> Self {
        Oracle {
            policy,
            dims,
            players: HashMap::new(),
            clock: 0,
        }
    }

    /// `Less` when `a` ranks before `b`: the first dimension that differs
    /// decides, under its own order.
    pub fn cmp(&self, a: &[i64], b: &[i64]) -> Ordering {
        for (d, (x, y)) in self.dims.iter().zip(a.iter().zip(b)) {
            let o = match d.order() {
                ScoreOrder::HigherIsBetter => y.cmp(x),
                ScoreOrder::LowerIsBetter => x.cmp(y),
            };
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    }

    fn better(&self, a: &[i64], b: &[i64]) -> bool {
        self.cmp(a, b) == Ordering::Less
    }

    /// Whether the board accepts `t`: one value per dimension, each in its
    /// range.
    pub fn accepts(&self, t: &[i64]) -> bool {
        t.len() == self.dims.len() && self.dims.iter().zip(t).all(|(d, v)| d.range().contains(v))
    }

    /// The tuple a player at `current` ends at when `value` (accepted) is
    /// submitted.
    pub fn next(&self, current: Option<&Tuple>, value: &[i64]) -> Tuple {
        match (self.policy, current) {
            (Policy::Best, Some(c)) if !self.better(value, c) => c.clone(),
            (Policy::Worst, Some(c)) if !self.better(c, value) => c.clone(),
            _ => value.to_vec(),
        }
    }

    fn set(&mut self, player: &str, tuple: Tuple) {
        if self.players.get(player).map(|p| &p.0) != Some(&tuple) {
            self.clock += 1;
            self.players.insert(player.into(), (tuple, self.clock));
        }
    }

    pub fn remove(&mut self, player: &str) -> bool {
        self.players.remove(player).is_some()
    }

    /// A batch of accepted updates (`None`: a removal) by its net effect:
    /// values in order under the policy, players moving in the order of
    /// their last change.
    pub fn batch(&mut self, updates: &[(&str, Option<Tuple>)]) {
        let mut net: HashMap<&str, (usize, Option<Tuple>)> = HashMap::new();
        for (i, (player, value)) in updates.iter().enumerate() {
            let current = match net.get(player) {
                Some(n) => n.1.clone(),
                None => self.players.get(*player).map(|p| p.0.clone()),
            };
            let next = value.as_ref().map(|v| self.next(current.as_ref(), v));
            if next != current {
                net.insert(player, (i, next));
            }
        }
        let mut moves: Vec<_> = net.into_iter().collect();
        moves.sort_by_key(|m| m.1 .0);
        for (player, (_, tuple)) in moves {
            match tuple {
                Some(t) => self.set(player, t),
                None => {
                    self.remove(player);
                }
            }
        }
    }

    pub fn submit(&mut self, player: &str, value: &[i64]) -> Report {
        let old = self.players.get(player).map(|p| p.0.clone());
        let new = self.next(old.as_ref(), value);
        let old_rank = old.as_ref().map(|o| self.rank_of(o));
        self.set(player, new.clone());
        let new_best = old.as_ref().is_none_or(|o| self.better(&new, o));
        let new_rank = self.rank_of(&new);
        (old, new, old_rank, new_rank, new_best)
    }

    /// 1 + the players whose tuple ranks strictly before `t`.
    pub fn rank_of(&self, t: &[i64]) -> u64 {
        1 + self
            .players
            .values()
            .filter(|p| self.better(&p.0, t))
            .count() as u64
    }

    /// Ranking order: better tuple first, then who reached it first.
    pub fn rows(&self) -> Vec<Row> {
        let mut sorted: Vec<_> = self.players.iter().collect();
        sorted.sort_by(|(_, a), (_, b)| self.cmp(&a.0, &b.0).then(a.1.cmp(&b.1)));
        let mut out: Vec<Row> = Vec::new();
        for (i, (player, (tuple, _))) in sorted.into_iter().enumerate() {
            let (rank, dense) = match out.last() {
                Some(prev) if &prev.tuple == tuple => (prev.rank, prev.dense),
                Some(prev) => (i as u64 + 1, prev.dense + 1),
                None => (1, 1),
            };
            out.push(Row {
                player: player.clone(),
                tuple: tuple.clone(),
                rank,
                dense,
                position: i as u64 + 1,
            });
        }
        out
    }
}

/// A submission as the board reported it, its scores decoded.
pub fn report(board: &Ranking, s: Submission) -> autoshard::Result<Report> {
    Ok((
        s.old_score.map(|o| board.decode(o)).transpose()?,
        board.decode(s.new_score)?,
        s.old_rank,
        s.new_rank,
        s.new_best,
    ))
}

/// The board's entries as rows, tuples decoded.
pub fn rows(
    board: &Ranking,
    entries: Vec<autoshard::ranking::Entry>,
) -> autoshard::Result<Vec<Row>> {
    entries
        .into_iter()
        .map(|e| {
            Ok(Row {
                tuple: board.decode(e.score)?,
                player: e.player,
                rank: e.rank,
                dense: e.dense,
                position: e.position,
            })
        })
        .collect()
}

/// Asserts that every query agrees with the model, under every tie rule;
/// `probes` are accepted tuples for `rank_of_dims`.
pub fn verify(board: &Ranking, oracle: &Oracle, probes: &[Tuple]) -> Result<(), TestCaseError> {
    let want = oracle.rows();
    let n = want.len() as u64;
    prop_assert_eq!(board.len()?, n);
    for t in probes {
        prop_assert_eq!(
            board.rank_of_dims(t)?,
            oracle.rank_of(t),
            "rank_of_dims({:?})",
            t
        );
    }
    for r in &want {
        prop_assert_eq!(board.dims(&r.player)?, Some(r.tuple.clone()));
        prop_assert_eq!(
            board.rank(&r.player, Tie::Standard)?,
            Some(r.rank),
            "{:?}",
            r
        );
        prop_assert_eq!(board.rank(&r.player, Tie::Dense)?, Some(r.dense), "{:?}", r);
        prop_assert_eq!(
            board.rank(&r.player, Tie::Ordinal)?,
            Some(r.position),
            "{:?}",
            r
        );
        prop_assert_eq!(board.dims_at_rank(r.position)?, Some(r.tuple.clone()));
        for k in [0u64, 2] {
            let at = r.position as usize - 1;
            let window =
                &want[at.saturating_sub(k as usize)..(at + k as usize + 1).min(want.len())];
            prop_assert_eq!(&rows(board, board.around(&r.player, k)?)?, window);
        }
    }
    prop_assert_eq!(board.dims_at_rank(n + 1)?, None);
    prop_assert_eq!(board.dims("nobody")?, None);
    prop_assert_eq!(&rows(board, board.page(1, n.max(1) + 2)?)?, &want);
    for t in [1, n / 2, n] {
        prop_assert_eq!(&rows(board, board.top(t)?)?, &want[..t.min(n) as usize]);
    }
    for from in 1..=n {
        let want = &want[(from - 1) as usize..(from + 2).min(n) as usize];
        prop_assert_eq!(&rows(board, board.page(from, from + 2)?)?, want);
    }
    board.check_integrity()?;
    Ok(())
}

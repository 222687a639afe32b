//! The trims (`ranking/trim.rs`) on a memory board against the brute-force
//! oracle: `remove_between` and `keep_top` batch by batch, as `Ranking`
//! runs them, after random batches of updates. The stores run the same
//! calls against `tests/common/policy_oracle.rs`
//! (`tests/suites/stores_ranking_new_calls.rs`).
//!
//! A batch finds its players and then locks them in one write transaction
//! (it cannot know whom to lock before it looks), which the memory
//! storage's locking protocol refuses; the real stores need no such order
//! for reads (PostgreSQL re-reads each row once locked, `still_there`), so
//! the trims run in unchecked transactions here.
//!
//! Control: with `find` taking players from rank `n` instead of `n + 1`
//! (`Pick::Below`), `trims_agree_with_the_oracle` failed at once
//! (`keep_top` removed one player more than the oracle: "left: 3, right:
//! 2").

use super::super::policy::Rules;
use super::super::trim::{batch_in, Pick};
use super::harness::{board_shape, op, run, verify, Board, Oracle};
use crate::error::Result;
use proptest::prelude::*;

impl Board {
    fn trim(&self, pick: Pick) -> Result<u64> {
        let mut removed = 0;
        loop {
            let g = self.g().clone();
            let done = self
                .st
                .write_unchecked(|tx| batch_in(tx, &g, Rules::default(), 0, pick))?;
            removed += done.removed;
            if done.last() {
                return Ok(removed);
            }
        }
    }

    /// `Ranking::remove_between` on a board of scores in range.
    pub fn remove_between(&self, lo: i64, hi: i64) -> Result<u64> {
        self.trim(Pick::Between(lo, hi))
    }

    /// `Ranking::keep_top`.
    pub fn keep_top(&self, n: u64) -> Result<u64> {
        self.trim(Pick::Below(n))
    }
}

impl Oracle {
    /// Every player with a score in `lo..=hi`; how many.
    pub fn remove_between(&mut self, lo: i64, hi: i64) -> u64 {
        let before = self.players.len();
        self.players.retain(|_, p| !(lo..=hi).contains(&p.0));
        (before - self.players.len()) as u64
    }

    /// Every player after the first `n` in ranking order; how many.
    pub fn keep_top(&mut self, n: u64) -> u64 {
        let below: Vec<_> = self.entries().into_iter().skip(n as usize).collect();
        for e in &below {
            self.players.remove(&e.player);
        }
        below.len() as u64
    }
}

proptest! {
    #[test]
    fn trims_agree_with_the_oracle(
        (range, b, shards, pool) in board_shape(),
        ops in prop::collection::vec(op(), 1..12),
        trims in prop::collection::vec((any::<bool>(), 0usize..8, 0usize..8, 1u64..6), 1..6),
    ) {
        let board = Board::new(range, b, shards);
        let mut oracle = Oracle::default();
        for (i, op) in ops.iter().enumerate() {
            run(&board, &mut oracle, &pool, op)?;
            let Some(&(between, a, z, n)) = trims.get(i) else { continue };
            let (x, y) = (pool[a % pool.len()], pool[z % pool.len()]);
            let (lo, hi) = (x.min(y), x.max(y));
            match between {
                true => prop_assert_eq!(board.remove_between(lo, hi)?, oracle.remove_between(lo, hi)),
                false => prop_assert_eq!(board.keep_top(n)?, oracle.keep_top(n)),
            }
            verify(&board, &oracle, &pool)?;
        }
    }
}

//! A split board's writes: each routes to the player's tree (whose own
//! shape is one tree) or runs on every tree (`Split`, `trees/mod.rs`).

use super::queries::{split, Trees};
use super::tree_of;
use crate::error::Result;
use crate::ranking::shape::Writes;
use crate::ranking::trim;
use crate::ranking::trim::batch;
use crate::ranking::{Ranking, Submission};
use crate::seam::DeadLetter;
use std::time::Duration;

impl Writes for Trees {
    fn set_score(&self, b: &Ranking, player: &str, score: i64) -> Result<()> {
        split(b).set_score(player, score)
    }

    fn set_scores(&self, b: &Ranking, scores: &[(&str, i64)]) -> Result<()> {
        split(b).set_scores(scores)
    }

    fn remove(&self, b: &Ranking, player: &str) -> Result<bool> {
        split(b).remove(player)
    }

    fn submission(
        &self,
        b: &Ranking,
        player: &str,
        score: i64,
        data: Option<&[u8]>,
    ) -> Result<Submission> {
        split(b).submission(player, score, data)
    }

    fn enqueue(
        &self,
        b: &Ranking,
        player: &str,
        score: Option<i64>,
        data: Option<Vec<u8>>,
    ) -> Result<()> {
        split(b).enqueue(player, score, data)
    }

    fn queued(&self, b: &Ranking) -> Result<u64> {
        split(b).queued()
    }

    fn backlog(&self, b: &Ranking) -> Result<u64> {
        split(b).backlog()
    }

    fn flush_within(&self, b: &Ranking, timeout: Duration) -> Result<()> {
        split(b).flush_within(timeout)
    }

    fn dead_letters(&self, b: &Ranking) -> Result<Vec<DeadLetter>> {
        split(b).dead_letters()
    }

    fn dead_letter_count(&self, b: &Ranking) -> Result<u64> {
        split(b).dead_letter_count()
    }

    fn oldest_queued_age(&self, b: &Ranking) -> Result<Option<Duration>> {
        split(b).oldest_queued_age()
    }

    fn delete_dead_letter(&self, b: &Ranking, id: i64) -> Result<bool> {
        split(b).delete_dead_letter(id)
    }

    fn reset(&self, b: &Ranking) -> Result<()> {
        split(b).reset()
    }

    fn remove_data(&self, b: &Ranking, player: &str) -> Result<bool> {
        let split = split(b);
        let k = split.trees.len();
        split.trees[tree_of(player, k)].remove_data(player)
    }

    /// A player's tree is fixed by their name, so each tree's players in
    /// the range are the board's.
    fn remove_between(&self, b: &Ranking, lo: i64, hi: i64) -> Result<u64> {
        split(b)
            .trees
            .iter()
            .map(|t| t.remove_between(lo..=hi))
            .sum()
    }

    fn keep_top(&self, b: &Ranking, n: u64) -> Result<u64> {
        keep_top(b, n)
    }

    fn queue_boards(&self, b: &Ranking) -> Vec<Ranking> {
        split(b).trees.to_vec()
    }
}

/// `keep_top` on a split board: a batch reads the players below `n`
/// in the merged order (one snapshot per tree), then removes them tree
/// by tree, each only if still at the score it was read at.
fn keep_top(b: &Ranking, n: u64) -> Result<u64> {
    let split = split(b);
    let (rules, g) = (b.inner.rules(), b.inner.geometry());
    let mut removed = 0;
    loop {
        let below = b.page(n + 1, n + batch())?;
        let mut per_tree = vec![Vec::new(); split.trees.len()];
        for e in &below {
            let tree = rules.tree_score(g, e.score)?;
            per_tree[tree_of(&e.player, split.trees.len())].push((e.player.clone(), tree));
        }
        let mut done = 0;
        for (tree, found) in split.trees.iter().zip(&per_tree) {
            if !found.is_empty() {
                done += trim::remove_if_at(tree, found)?;
            }
        }
        removed += done;
        if (below.len() as u64) < batch() && done == below.len() as u64 {
            return Ok(removed);
        }
    }
}

//! The writes of a board of one tree, count tree or stored natively (which
//! one is known only inside the write's transaction, `Storage::native`):
//! the engine's own write paths, where an approximate board's writes end too.

use super::one::OneTree;
use super::writes::Writes;
use crate::error::Result;
use crate::ranking::{Ranking, Submission};
use crate::seam::DeadLetter;
use std::time::Duration;

impl Writes for OneTree {
    fn set_score(&self, b: &Ranking, player: &str, score: i64) -> Result<()> {
        b.one_tree_set_score(player, score)
    }

    fn set_scores(&self, b: &Ranking, scores: &[(&str, i64)]) -> Result<()> {
        b.one_tree_set_scores(scores)
    }

    fn remove(&self, b: &Ranking, player: &str) -> Result<bool> {
        b.one_tree_remove(player)
    }

    fn submission(
        &self,
        b: &Ranking,
        player: &str,
        score: i64,
        data: Option<&[u8]>,
    ) -> Result<Submission> {
        b.one_tree_submission(player, score, data)
    }

    fn enqueue(
        &self,
        b: &Ranking,
        player: &str,
        score: Option<i64>,
        data: Option<Vec<u8>>,
    ) -> Result<()> {
        b.one_tree_enqueue(player, score, data)
    }

    fn queued(&self, b: &Ranking) -> Result<u64> {
        b.one_tree_queued()
    }

    fn backlog(&self, b: &Ranking) -> Result<u64> {
        b.one_tree_backlog()
    }

    fn flush_within(&self, b: &Ranking, timeout: Duration) -> Result<()> {
        b.one_tree_flush_within(timeout)
    }

    fn dead_letters(&self, b: &Ranking) -> Result<Vec<DeadLetter>> {
        b.one_tree_dead_letters()
    }

    fn dead_letter_count(&self, b: &Ranking) -> Result<u64> {
        b.one_tree_dead_letter_count()
    }

    fn oldest_queued_age(&self, b: &Ranking) -> Result<Option<Duration>> {
        b.one_tree_oldest_queued_age()
    }

    fn delete_dead_letter(&self, b: &Ranking, id: i64) -> Result<bool> {
        b.one_tree_delete_dead_letter(id)
    }

    fn reset(&self, b: &Ranking) -> Result<()> {
        b.one_tree_reset()
    }

    fn remove_data(&self, b: &Ranking, player: &str) -> Result<bool> {
        b.one_tree_remove_data(player)
    }

    fn remove_between(&self, b: &Ranking, lo: i64, hi: i64) -> Result<u64> {
        b.one_tree_remove_between(lo, hi)
    }

    fn keep_top(&self, b: &Ranking, n: u64) -> Result<u64> {
        b.one_tree_keep_top(n)
    }

    fn queue_boards(&self, b: &Ranking) -> Vec<Ranking> {
        vec![b.clone()]
    }
}

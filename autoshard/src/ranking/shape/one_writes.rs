//! The writes of a board of one tree, count tree or stored natively (which
//! one is known only inside the write's transaction, `Storage::native`):
//! the engine's own write paths, where an approximate board's writes end too.

use super::one::OneTree;
use super::writes::Writes;
use crate::error::Result;
use crate::ranking::lifecycle;
use crate::ranking::policy;
use crate::ranking::queue;
use crate::ranking::trim;
use crate::ranking::write;
use crate::ranking::{Ranking, Submission};
use crate::seam::DeadLetter;
use std::time::Duration;

impl Writes for OneTree {
    fn set_score(&self, b: &Ranking, player: &str, score: i64) -> Result<()> {
        write::one_tree_set_score(b, player, score)
    }

    fn set_scores(&self, b: &Ranking, scores: &[(&str, i64)]) -> Result<()> {
        write::one_tree_set_scores(b, scores)
    }

    fn remove(&self, b: &Ranking, player: &str) -> Result<bool> {
        write::one_tree_remove(b, player)
    }

    fn submission(
        &self,
        b: &Ranking,
        player: &str,
        score: i64,
        data: Option<&[u8]>,
    ) -> Result<Submission> {
        policy::one_tree_submission(b, player, score, data)
    }

    fn enqueue(
        &self,
        b: &Ranking,
        player: &str,
        score: Option<i64>,
        data: Option<Vec<u8>>,
    ) -> Result<()> {
        queue::one_tree_enqueue(b, player, score, data)
    }

    fn queued(&self, b: &Ranking) -> Result<u64> {
        queue::one_tree_queued(b)
    }

    fn backlog(&self, b: &Ranking) -> Result<u64> {
        queue::one_tree_backlog(b)
    }

    fn flush_within(&self, b: &Ranking, timeout: Duration) -> Result<()> {
        queue::one_tree_flush_within(b, timeout)
    }

    fn dead_letters(&self, b: &Ranking) -> Result<Vec<DeadLetter>> {
        queue::one_tree_dead_letters(b)
    }

    fn dead_letter_count(&self, b: &Ranking) -> Result<u64> {
        queue::one_tree_dead_letter_count(b)
    }

    fn oldest_queued_age(&self, b: &Ranking) -> Result<Option<Duration>> {
        queue::one_tree_oldest_queued_age(b)
    }

    fn delete_dead_letter(&self, b: &Ranking, id: i64) -> Result<bool> {
        queue::one_tree_delete_dead_letter(b, id)
    }

    fn reset(&self, b: &Ranking) -> Result<()> {
        lifecycle::one_tree_reset(b)
    }

    fn remove_data(&self, b: &Ranking, player: &str) -> Result<bool> {
        trim::one_tree_remove_data(b, player)
    }

    fn remove_between(&self, b: &Ranking, lo: i64, hi: i64) -> Result<u64> {
        trim::one_tree_remove_between(b, lo, hi)
    }

    fn keep_top(&self, b: &Ranking, n: u64) -> Result<u64> {
        trim::one_tree_keep_top(b, n)
    }

    fn queue_boards(&self, b: &Ranking) -> Vec<Ranking> {
        vec![b.clone()]
    }
}

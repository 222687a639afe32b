//! The writes of one board shape, the counterpart of [`Shape`](super::Shape)'s
//! reads: every public write (`write.rs`, `policy.rs`, `queue/`, `trim.rs`,
//! `lifecycle.rs`) checks its input and then calls
//! [`Ranking::shape`]`().writes().<write>(..)`.
//!
//! [`Writes`] has no provided methods, and `Shape::writes` no default, so a
//! new write does not compile until every shape (one tree, split trees;
//! an approximate board's are one tree's) answers it: before, each
//! write branched on `self.split()` by hand, 15 times in 5 files, the way
//! `among` once forgot the split board among the reads (issue 21).
//!
//! ```compile_fail
//! // A shape that does not answer a write does not compile: there is no
//! // default to fall back on (the trait is crate-private, so this example
//! // only shows the rule).
//! trait Writes { fn reset(&self) -> Result<(), ()>; }
//! struct NewShape;
//! impl Writes for NewShape {}
//! ```

use crate::error::Result;
use crate::ranking::{Ranking, Submission};
use crate::seam::DeadLetter;
use std::time::Duration;

/// The writes (and the queue calls that follow the board's trees) of one
/// board shape. Inputs are checked by the caller before a shape sees them;
/// an approximate board's refusals (`Ranking::exact_only`) too.
pub(in crate::ranking) trait Writes: Sync {
    fn set_score(&self, b: &Ranking, player: &str, score: i64) -> Result<()>;
    /// `scores` checked and not empty.
    fn set_scores(&self, b: &Ranking, scores: &[(&str, i64)]) -> Result<()>;
    fn remove(&self, b: &Ranking, player: &str) -> Result<bool>;
    /// `data` only on a board that keeps entry data, within its limit.
    fn submission(
        &self,
        b: &Ranking,
        player: &str,
        score: i64,
        data: Option<&[u8]>,
    ) -> Result<Submission>;
    fn enqueue(
        &self,
        b: &Ranking,
        player: &str,
        score: Option<i64>,
        data: Option<Vec<u8>>,
    ) -> Result<()>;
    fn queued(&self, b: &Ranking) -> Result<u64>;
    fn backlog(&self, b: &Ranking) -> Result<u64>;
    fn flush_within(&self, b: &Ranking, timeout: Duration) -> Result<()>;
    fn dead_letters(&self, b: &Ranking) -> Result<Vec<DeadLetter>>;
    /// Dead letters kept, by one count per queue (not a read of each).
    fn dead_letter_count(&self, b: &Ranking) -> Result<u64>;
    /// The age of the oldest update not applied yet, by the store's clock.
    fn oldest_queued_age(&self, b: &Ranking) -> Result<Option<Duration>>;
    fn delete_dead_letter(&self, b: &Ranking, id: i64) -> Result<bool>;
    fn reset(&self, b: &Ranking) -> Result<()>;
    fn remove_data(&self, b: &Ranking, player: &str) -> Result<bool>;
    /// `lo <= hi`, in the caller's scores.
    fn remove_between(&self, b: &Ranking, lo: i64, hi: i64) -> Result<u64>;
    /// `1 <= n <= i64::MAX`.
    fn keep_top(&self, b: &Ranking, n: u64) -> Result<u64>;
    /// The boards whose queues hold this board's queued updates, each
    /// drained by a worker of its own (`queue/worker.rs`): the board
    /// itself, or each of its trees.
    fn queue_boards(&self, b: &Ranking) -> Vec<Ranking>;
}

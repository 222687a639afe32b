//! Where a worker's loop ([`BoardWorker::run_in`](super::BoardWorker), and the
//! family worker's) runs: the [`Env`] trait and its thread implementation;
//! the task's is `task.rs`.

use super::drain::{Bound, Drained};
use super::group::{QueueState, Signal};
use crate::deadline::Deadline;
use crate::error::Result;
use crate::ranking::cache::NodeCache;
use crate::ranking::Ranking;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where a worker's loop runs: what its batches, trims, pauses and waits
/// are. On a thread ([`OnThread`]) each runs in place and none pends, so
/// one poll runs the loop to its end; in a tokio task (`task.rs`) batches
/// and trims run on the store's threads and the waits are on tokio's
/// timer and the queue's `changed` notify.
pub(in crate::ranking) trait Env {
    fn drain(
        &self,
        ranking: &Ranking,
        args: (Bound, u32, bool, bool),
        cache: &mut Option<NodeCache>,
    ) -> impl Future<Output = Result<Drained>>;
    fn keep_top(&self, ranking: &Ranking, n: u64) -> impl Future<Output = Result<u64>>;
    /// Runs store work that is not a board's batch (a family's batch):
    /// in place, or on the store's threads.
    fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> impl Future<Output = Result<R>>;
    fn pause(&self, pause: Duration) -> impl Future<Output = ()>;
    /// Sleeps up to `timeout`, waking early on a stop or when `wake` holds.
    fn wait(
        &self,
        state: &QueueState,
        stop: &AtomicBool,
        wake: impl Fn(&Signal) -> bool,
        timeout: Duration,
    ) -> impl Future<Output = ()>;

    /// [`QueueState::wait_enqueued`] in this env: up to `timeout`, until an
    /// enqueue after `seen` committed in this process or a stop.
    fn wait_enqueued(
        &self,
        state: &QueueState,
        stop: &AtomicBool,
        seen: u64,
        timeout: Duration,
    ) -> impl Future<Output = ()> {
        self.wait(state, stop, move |s| s.enqueued != seen, timeout)
    }
}

/// The loop on a thread of its own.
pub(in crate::ranking) struct OnThread;

impl Env for OnThread {
    async fn drain(
        &self,
        ranking: &Ranking,
        args: (Bound, u32, bool, bool),
        cache: &mut Option<NodeCache>,
    ) -> Result<Drained> {
        super::drain::drain_batch(ranking, args, cache.as_mut())
    }

    async fn keep_top(&self, ranking: &Ranking, n: u64) -> Result<u64> {
        ranking.keep_top(n)
    }

    async fn run<R: Send + 'static>(&self, job: impl FnOnce() -> R + Send + 'static) -> Result<R> {
        Ok(job())
    }

    async fn pause(&self, pause: Duration) {
        std::thread::sleep(pause);
    }

    async fn wait(
        &self,
        state: &QueueState,
        stop: &AtomicBool,
        wake: impl Fn(&Signal) -> bool,
        timeout: Duration,
    ) {
        if timeout.is_zero() {
            return;
        }
        let deadline = Deadline::after(timeout);
        let mut signal = state.signal();
        loop {
            // The stop flag is set before the signal mutex is taken to
            // notify, so checking it under the mutex cannot miss the wake-up.
            if stop.load(Ordering::Acquire) || wake(&signal) {
                return;
            }
            signal = match deadline.left() {
                Some(left) if left.is_zero() => return,
                Some(left) => {
                    state
                        .signalled
                        .wait_timeout(signal, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => state
                    .signalled
                    .wait(signal)
                    .unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

//! The board queue worker as a tokio task (feature `tokio`, issue 19 item
//! 3): the same loop as the thread's ([`BoardWorker::run_in`]), over an [`Env`]
//! whose batches and trims run where an [`Offload`] sends them (the async
//! store's threads, so the task never blocks a runtime worker) and whose
//! waits are on tokio's timer and the queue's `changed` notify, which is
//! notified wherever the threads' condition variable is.

use super::drain::{Bound, Drained};
use super::env::Env;
use super::group::{QueueState, Signal};
use super::worker::{BoardWorker, BoardWorkerHandle, BoardWorkerStats};
use crate::compactor::Offload;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::job::Live;
use crate::ranking::cache::NodeCache;
use crate::ranking::Ranking;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The loop in a tokio task: its store work sent where `O` sends it.
pub(in crate::ranking) struct InTask<O>(pub(in crate::ranking) O);

impl<O: Offload> Env for InTask<O> {
    async fn drain(
        &self,
        ranking: &Ranking,
        args: (Bound, u32, bool, bool),
        cache: &mut Option<NodeCache>,
    ) -> Result<Drained> {
        // The cache travels with the batch and back: one batch at a time.
        let (ranking, mut lent) = (ranking.clone(), cache.take());
        let (drained, back) = self
            .0
            .offload(move || {
                (
                    super::drain::drain_batch(&ranking, args, lent.as_mut()),
                    lent,
                )
            })
            .await?;
        *cache = back;
        drained
    }

    async fn keep_top(&self, ranking: &Ranking, n: u64) -> Result<u64> {
        let ranking = ranking.clone();
        self.0.offload(move || ranking.keep_top(n)).await?
    }

    async fn run<R: Send + 'static>(&self, job: impl FnOnce() -> R + Send + 'static) -> Result<R> {
        self.0.offload(job).await
    }

    async fn pause(&self, pause: Duration) {
        tokio::time::sleep(pause).await;
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
        loop {
            // Registered before the flag and the signal are read, so a
            // change between the read and the await still wakes it.
            let changed = state.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            let done = {
                let signal = state.signal();
                stop.load(Ordering::Acquire) || wake(&signal)
            };
            if done {
                return;
            }
            match deadline.left() {
                Some(left) if left.is_zero() => return,
                Some(left) => {
                    if tokio::time::timeout(left, changed).await.is_err() {
                        return;
                    }
                }
                None => changed.await,
            }
        }
    }
}

impl BoardWorker {
    /// What a task needs, made on the store's threads (the first call may
    /// create the queue's tables): per tree of a split board, or the board.
    pub(crate) fn task_parts(self) -> Result<Vec<(BoardWorker, Arc<QueueState>)>> {
        self.queue_boards()
            .iter()
            .map(|board| Ok((self.for_queue(board), super::queue_state(board)?)))
            .collect()
    }

    /// Starts the workers of [`task_parts`](BoardWorker::task_parts) as tasks on
    /// the current tokio runtime, under one handle.
    pub(crate) fn spawn_tasks(
        parts: Vec<(BoardWorker, Arc<QueueState>)>,
        offload: impl Offload + Clone,
    ) -> BoardWorkerHandle {
        let mut handles: Vec<BoardWorkerHandle> = parts
            .into_iter()
            .map(|(worker, state)| {
                let stop = Arc::new(AtomicBool::new(false));
                let live = Live::new(BoardWorkerStats::default());
                let env = InTask(offload.clone());
                let task = tokio::spawn({
                    let (state, stop, live) = (state.clone(), stop.clone(), live.clone());
                    async move { worker.run_in(&env, &state, &stop, &live).await }
                });
                BoardWorkerHandle::of_task(state, stop, live, task)
            })
            .collect();
        if handles.len() == 1 {
            return handles.pop().expect("one");
        }
        BoardWorkerHandle::of_trees(handles)
    }
}

impl BoardWorkerHandle {
    /// Whether the worker runs as tokio tasks ([`BoardWorker::spawn_tasks`]).
    pub(crate) fn is_task(&self) -> bool {
        self.task.is_some() || self.trees.iter().any(BoardWorkerHandle::is_task)
    }

    /// [`stop`](BoardWorkerHandle::stop) for a worker running as tasks: awaits
    /// them instead of joining a thread.
    pub(crate) async fn stop_task(mut self) -> Result<BoardWorkerStats> {
        self.request_stop();
        let mut tasks: Vec<_> = self.task.take().into_iter().collect();
        for tree in &mut self.trees {
            tasks.extend(tree.task.take());
        }
        // Every tree's task is awaited, the first error reported.
        let mut total = Ok(BoardWorkerStats::default());
        for task in tasks {
            let outcome = match task.await {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Cancelled: its runtime shut down; what it applied is
                // committed, its counts are lost with it.
                Err(_) => Ok(BoardWorkerStats::default()),
            };
            match (outcome, &mut total) {
                (Ok(stats), Ok(sum)) => sum.add(stats),
                (Err(e), Ok(_)) => total = Err(e),
                (_, Err(_)) => {}
            }
        }
        total
    }
}

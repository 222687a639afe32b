//! The compactor as a tokio task (feature `tokio`, issue 19 item 3): the
//! same loop as the thread's (`Job::run`), over an [`Env`] whose batches
//! run where an [`Offload`] sends them (the async store's threads, so the
//! task never blocks a runtime worker) and whose waits are on tokio's
//! timer, cut short by a stop as the thread's condition variable is.

use super::{Compactor, CompactorStats, Env, Job, Shared};
use crate::error::Result;
use crate::seam::{BatchPlan, Resume};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

/// Somewhere to run the task's store calls off the runtime: the async
/// store's threads (`nonblocking/threads.rs`).
pub(crate) trait Offload: Send + Sync + 'static {
    fn offload<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> impl Future<Output = Result<R>> + Send;
}

struct InTask<O> {
    shared: Arc<Shared>,
    offload: O,
}

impl<O: Offload> Env for InTask<O> {
    fn batch(&self, job: &Job, from: &Resume) -> impl Future<Output = Result<BatchPlan>> {
        let (store, kind, from) = (job.store.clone(), job.kind, from.clone());
        let sent = self.offload.offload(move || {
            crate::seam::compaction::traced_batch(&kind, || store.compact_batch(&kind, &from))
        });
        async move { sent.await? }
    }

    async fn sleep_until(&self, deadline: Instant) {
        // Registered before the flag is read, so a stop between the two
        // still wakes it.
        let stopped = self.shared.stopped.notified();
        let mut stopped = std::pin::pin!(stopped);
        stopped.as_mut().enable();
        if self.shared.stopping() {
            return;
        }
        let _ = tokio::time::timeout_at(deadline.into(), stopped).await;
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl<T> Compactor<T> {
    /// Starts the compactor as a task on the current tokio runtime, its
    /// batches sent to `offload`.
    pub(crate) fn spawn_task(self, offload: impl Offload) -> CompactorTask {
        let shared = Arc::new(Shared::new());
        let env = InTask {
            shared: shared.clone(),
            offload,
        };
        let job = self.job;
        let task = tokio::spawn(async move {
            let result = job.run(&env).await;
            env.shared.lock().ended = Some(Instant::now());
            result
        });
        CompactorTask {
            shared,
            task: Some(task),
        }
    }
}

/// A compactor running as a tokio task, from
/// [`AsyncStore::spawn_compactor`](crate::AsyncStore::spawn_compactor):
/// [`CompactorHandle`](super::CompactorHandle)'s calls for async code.
/// Dropping it stops the compactor after its current batch without
/// waiting for it; [`stop`](CompactorTask::stop) waits.
#[must_use = "dropping the handle stops the compactor"]
pub struct CompactorTask {
    shared: Arc<Shared>,
    task: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl CompactorTask {
    /// What the compactor did so far (while it runs, or after it ended).
    pub fn stats(&self) -> CompactorStats {
        self.shared.stats()
    }

    /// Whether the compactor has ended: only an error ends it by itself.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the compactor after its current batch (a batch is never cut
    /// short; a pause or the wait for the next pass is) and returns what it
    /// did.
    ///
    /// # Errors
    ///
    /// The error that had stopped the compactor, as
    /// [`Compactor::run_once`] describes. A panic in the compactor (in a
    /// user's fold) is resumed here.
    pub async fn stop(mut self) -> Result<CompactorStats> {
        self.shared.request_stop();
        self.finish().await
    }

    /// Waits for the compactor to end by itself, which only an error does,
    /// then as [`stop`](CompactorTask::stop): the same lifecycle as the
    /// thread's [`CompactorHandle::join`](crate::CompactorHandle::join).
    ///
    /// # Errors
    ///
    /// As [`stop`](CompactorTask::stop).
    pub async fn join(mut self) -> Result<CompactorStats> {
        self.finish().await
    }

    async fn finish(&mut self) -> Result<CompactorStats> {
        let task = self.task.take().expect("stopped once");
        match task.await {
            Ok(result) => result.map(|()| self.shared.stats()),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: its runtime shut down; it did what it reported.
            Err(_) => Ok(self.shared.stats()),
        }
    }
}

impl Drop for CompactorTask {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.shared.request_stop();
        }
    }
}

impl std::fmt::Debug for CompactorTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactorTask")
            .field("stats", &self.stats())
            .field("finished", &self.is_finished())
            .finish()
    }
}

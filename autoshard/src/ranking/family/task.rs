//! The family queue worker as a tokio task (feature `tokio`, issue 19 item
//! 3): [`FamilyWorker`]'s one loop over the board worker's task env
//! ([`InTask`]), so each batch runs on the store's threads and the idle
//! wait is on the queue's `changed` notify, which every enqueue of this
//! process and every stop notifies.

use super::worker::{FamilyWorker, FamilyWorkerStats};
use super::worker_handle::FamilyWorkerHandle;
use crate::compactor::Offload;
use crate::error::Result;
use crate::job::Live;
use crate::ranking::queue;
use crate::ranking::queue::{InTask, QueueState};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

impl FamilyWorker {
    /// The queue state a task waits on, made on the store's threads (the
    /// first call may create the queue's tables).
    pub(crate) fn task_state(&self) -> Result<Arc<QueueState>> {
        queue::queue_state(&self.family().inner.players)
    }

    /// Starts the worker as a task on the current tokio runtime, its
    /// batches sent where `offload` sends them.
    pub(crate) fn spawn_task(
        self,
        state: Arc<QueueState>,
        offload: impl Offload,
    ) -> FamilyWorkerHandle {
        let stop = Arc::new(AtomicBool::new(false));
        let live = Live::new(FamilyWorkerStats::default());
        let task = tokio::spawn({
            let (state, stop, live) = (state.clone(), stop.clone(), live.clone());
            async move {
                let env = InTask(offload);
                self.run_in(&env, &state, &stop, &live, false).await
            }
        });
        FamilyWorkerHandle::of_task(state, stop, live, task)
    }
}

impl FamilyWorkerHandle {
    /// Whether the worker runs as a tokio task ([`FamilyWorker::spawn_task`]).
    pub(crate) fn is_task(&self) -> bool {
        self.task.is_some()
    }

    /// [`stop`](FamilyWorkerHandle::stop) for a worker running as a task:
    /// awaits it instead of joining a thread.
    pub(crate) async fn stop_task(mut self) -> Result<FamilyWorkerStats> {
        self.request_stop();
        let task = self.task.take().expect("stopped once");
        match task.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: its runtime shut down; what it applied is
            // committed, its counts are lost with it.
            Err(_) => Ok(FamilyWorkerStats::default()),
        }
    }
}

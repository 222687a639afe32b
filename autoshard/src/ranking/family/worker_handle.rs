//! A running [`FamilyWorker`](super::FamilyWorker): the lifecycle every
//! background job has (`crate::job`), on a thread or as a tokio task.

use super::worker::FamilyWorkerStats;
use crate::error::Result;
use crate::job::{JobThread, Live};
use crate::ranking::queue::QueueState;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A running [`FamilyWorker`](super::FamilyWorker). Dropping it stops the
/// worker after its current batch and waits for it.
#[derive(Debug)]
#[must_use = "dropping the handle stops the worker"]
pub struct FamilyWorkerHandle {
    pub(super) state: Arc<QueueState>,
    pub(super) stop: Arc<AtomicBool>,
    live: Arc<Live<FamilyWorkerStats>>,
    thread: JobThread<FamilyWorkerStats>,
    /// A worker running as a tokio task instead (`task.rs`).
    #[cfg(feature = "tokio")]
    pub(super) task: Option<tokio::task::JoinHandle<Result<FamilyWorkerStats>>>,
}

impl FamilyWorkerHandle {
    pub(super) fn of_thread(
        state: Arc<QueueState>,
        stop: Arc<AtomicBool>,
        live: Arc<Live<FamilyWorkerStats>>,
        thread: JobThread<FamilyWorkerStats>,
    ) -> Self {
        FamilyWorkerHandle {
            state,
            stop,
            live,
            thread,
            #[cfg(feature = "tokio")]
            task: None,
        }
    }

    #[cfg(feature = "tokio")]
    pub(super) fn of_task(
        state: Arc<QueueState>,
        stop: Arc<AtomicBool>,
        live: Arc<Live<FamilyWorkerStats>>,
        task: tokio::task::JoinHandle<Result<FamilyWorkerStats>>,
    ) -> Self {
        let mut handle = Self::of_thread(state, stop, live, JobThread::absent());
        handle.task = Some(task);
        handle
    }

    /// What the worker did so far, while it runs and after it ended.
    pub fn stats(&self) -> FamilyWorkerStats {
        self.live.get()
    }

    /// Stops the worker after its current batch: what it did, or the error
    /// that had stopped it.
    ///
    /// # Errors
    ///
    /// As [`FamilyWorker::drain`](super::FamilyWorker::drain). A panic of
    /// the worker is resumed here.
    pub fn stop(mut self) -> Result<FamilyWorkerStats> {
        self.request_stop();
        self.finish()
    }

    /// Waits for the worker to end by itself (at its first error that is
    /// not a busy store), then as [`stop`](FamilyWorkerHandle::stop).
    ///
    /// # Errors
    ///
    /// As [`stop`](FamilyWorkerHandle::stop).
    pub fn join(mut self) -> Result<FamilyWorkerStats> {
        self.finish()
    }

    /// Whether the worker has ended (at an error).
    pub fn is_finished(&self) -> bool {
        #[cfg(feature = "tokio")]
        if let Some(task) = &self.task {
            return task.is_finished();
        }
        self.thread.is_finished()
    }

    pub(super) fn request_stop(&self) {
        signal_stop(&self.stop, &self.state);
    }

    fn finish(&mut self) -> Result<FamilyWorkerStats> {
        self.thread.join().expect("joined once")
    }
}

crate::job::impl_job!(FamilyWorkerHandle, FamilyWorkerStats);

impl Drop for FamilyWorkerHandle {
    fn drop(&mut self) {
        #[cfg(feature = "tokio")]
        let task = self.task.is_some();
        #[cfg(not(feature = "tokio"))]
        let task = false;
        let (stop, state) = (&self.stop, &self.state);
        self.thread.stop_dropped(task, || signal_stop(stop, state));
    }
}

/// Sets the worker's stop flag and wakes its idle wait.
fn signal_stop(stop: &AtomicBool, state: &QueueState) {
    stop.store(true, Ordering::Release);
    state.wake();
}

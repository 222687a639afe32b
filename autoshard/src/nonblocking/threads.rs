//! The dedicated OS threads the async API runs the sync core on (the
//! tokio-rusqlite / deadpool pattern): a job is an owned closure, sent over
//! a channel, run to its end on one of the threads, and its result sent
//! back on a oneshot channel the caller's future awaits.
//!
//! Why not tokio's blocking pool: it is shared with everything else the
//! application blocks on, grows to 512 threads, and its threads carry the
//! runtime's context, so PostgreSQL's driver, which starts a runtime of its
//! own per connection, must not meet it there (`docs/design/async.md`).

use crate::error::{Error, Result};
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

type Job = Box<dyn FnOnce() + Send>;
type Outcome<R> = std::result::Result<R, Box<dyn Any + Send>>;

/// Jobs that may wait for a thread, per thread, before a caller waits for a
/// permit instead: a bound on the queue that makes a flood of callers wait
/// in their own futures, where dropping one costs nothing.
const QUEUED_PER_THREAD: usize = 64;

/// A fixed set of threads running jobs in arrival order. Cloning shares
/// them; they end once every clone is dropped and the queued jobs are run,
/// so a job whose caller went away still runs (a write still lands).
#[derive(Clone)]
pub(crate) struct Threads {
    jobs: Sender<Job>,
    permits: Arc<Semaphore>,
}

impl Threads {
    /// Starts `count` threads (at least one) named `name`.
    pub(crate) fn start(count: usize, name: &str) -> Result<Self> {
        let count = count.max(1);
        let (jobs, receiver) = channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for n in 0..count {
            let receiver = receiver.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{n}"))
                .spawn(move || serve(&receiver))
                .map_err(gone)?;
        }
        Ok(Threads {
            jobs,
            permits: Arc::new(Semaphore::new(count * QUEUED_PER_THREAD)),
        })
    }

    /// Runs `job` on one of the threads and returns its result; a panic in
    /// `job` resumes on the caller, as it would in the sync call.
    ///
    /// Cancellation: dropping the future before the job was sent (while
    /// it waits for a permit) runs nothing; once sent, the job runs to its
    /// end whether or not anyone awaits it.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R> {
        let permit = self.permits.clone().acquire_owned().await.map_err(gone)?;
        let (tx, rx) = oneshot::channel::<Outcome<R>>();
        self.send(permit, move || {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(job)));
        })?;
        match rx.await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(panic)) => resume_unwind(panic),
            Err(e) => Err(gone(e)),
        }
    }

    /// Sends `value` to a thread to be dropped there: the stores' handles
    /// end on these threads, never on a runtime's (PostgreSQL's driver
    /// drops a runtime of its own with each connection, which panics on a
    /// runtime's thread).
    pub(crate) fn drop_there<T: Send + 'static>(&self, value: T) {
        // Without the channel (threads gone), dropping here is all we can do.
        let _ = self.jobs.send(Box::new(move || drop(value)));
    }

    fn send(
        &self,
        permit: OwnedSemaphorePermit,
        job: impl FnOnce() + Send + 'static,
    ) -> Result<()> {
        let job: Job = Box::new(move || {
            job();
            drop(permit);
        });
        self.jobs
            .send(job)
            .map_err(|_| gone(std::io::Error::other("the store's threads have stopped")))
    }
}

/// The compactor's task sends its batches here (`compactor/task.rs`).
impl crate::compactor::Offload for Threads {
    fn offload<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> impl std::future::Future<Output = Result<R>> + Send {
        let threads = self.clone();
        async move { threads.run(job).await }
    }
}

fn serve(receiver: &Mutex<Receiver<Job>>) {
    loop {
        // One thread waits on the channel, the others on the lock; the
        // lock is released before the job runs.
        let job = match receiver.lock() {
            Ok(receiver) => receiver.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// The threads are gone: only if they could not be started, since jobs'
/// panics are caught.
fn gone(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Unavailable {
        attempts: 1,
        source: Box::new(e),
    }
}

/// A handle whose last copy must end on the store's threads (see
/// [`Threads::drop_there`]).
pub(crate) struct OnThreads<T: Send + 'static> {
    value: Option<T>,
    pub(crate) threads: Threads,
}

impl<T: Send + 'static> OnThreads<T> {
    pub(crate) fn new(value: T, threads: Threads) -> Self {
        OnThreads {
            value: Some(value),
            threads,
        }
    }

    pub(crate) fn get(&self) -> &T {
        self.value.as_ref().expect("taken only in drop")
    }
}

impl<T: Send + 'static> Drop for OnThreads<T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            self.threads.drop_there(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_job_runs_off_the_runtime_and_its_panic_resumes_on_the_caller() {
        let threads = Threads::start(2, "autoshard-test").unwrap();
        let name = threads
            .run(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap();
        assert!(name.unwrap().starts_with("autoshard-test-"));
        let t = threads.clone();
        let panicked = tokio::spawn(async move { t.run(|| panic!("in a job")).await }).await;
        assert!(panicked.unwrap_err().is_panic());
        // The thread that ran the panicking job still serves.
        assert_eq!(threads.run(|| 7).await.unwrap(), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_sent_job_runs_though_its_future_was_dropped() {
        let threads = Threads::start(1, "autoshard-test").unwrap();
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Hold the one thread so the next job is queued, not running.
        let held = threads.clone();
        let blocker = tokio::spawn(async move { held.run(move || gate_rx.recv().unwrap()).await });
        tokio::task::yield_now().await;
        let flag = ran.clone();
        let job = threads.run(move || flag.store(true, std::sync::atomic::Ordering::SeqCst));
        // Poll once (the job is sent), then drop the future.
        let mut job = Box::pin(job);
        let waker = std::task::Waker::noop();
        let polled = job
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker));
        assert!(polled.is_pending());
        drop(job);
        gate_tx.send(()).unwrap();
        blocker.await.unwrap().unwrap();
        threads.run(|| ()).await.unwrap();
        assert!(ran.load(std::sync::atomic::Ordering::SeqCst));
    }

    use std::future::Future;
}

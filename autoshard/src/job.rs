//! The one lifecycle of the background jobs: the [`Compactor`](crate::Compactor),
//! a board's queue [`BoardWorker`](crate::ranking::BoardWorker), a family's
//! [`FamilyWorker`](crate::ranking::FamilyWorker) and an approximate board's
//! [`Refresher`](crate::ranking::Refresher).
//!
//! Each is built by a call of what it works on, configured by builder
//! methods, and started by `spawn()`, which returns its handle or
//! [`Error::Spawn`] when no thread can be started. Every handle has the
//! same four calls, also through the [`Job`] trait:
//!
//! | call | what it does |
//! |---|---|
//! | `stats()` | what the job did so far, while it runs and after it ended |
//! | `is_finished()` | whether it ended by itself (its first error that is not retryable, or a worker made to exit when idle) |
//! | `stop()` | ends it after its current batch, waits, and returns its stats or the error that had ended it |
//! | `join()` | waits for it to end by itself, then as `stop` |
//!
//! Dropping a handle stops the job as `stop` does, without a report. A
//! panic inside the job (a user's fold) is resumed by `stop` and `join`.
//! From async code the same jobs run as tokio tasks (feature `tokio`).
//!
//! Only the threads and the live stats are shared here: what a job does
//! in a batch stays with the job.

use crate::error::{Error, Result};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

mod sealed {
    pub trait Sealed {}
}

/// A running background job's handle: [`CompactorHandle`](crate::CompactorHandle),
/// [`BoardWorkerHandle`](crate::ranking::BoardWorkerHandle),
/// [`FamilyWorkerHandle`](crate::ranking::FamilyWorkerHandle) or
/// [`RefresherHandle`](crate::ranking::RefresherHandle). Sealed: for code
/// that starts and stops several jobs alike, as a service's shutdown does.
///
/// ```
/// use autoshard::ranking::{Ranking, RankingConfig};
/// use autoshard::{Job, Sqlite};
///
/// /// Stops any job the same way and says what it did.
/// fn stop_and_report<J: Job>(what: &str, job: J) -> autoshard::Result<J::Stats> {
///     let stats = job.stop()?;
///     println!("{what}: {stats:?}");
///     Ok(stats)
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let db = Sqlite::open(dir.path().join("game.db"))?;
/// let board = Ranking::create(&db, "season", RankingConfig::new(0..1_000))?;
/// let worker = board.worker().spawn()?;
/// board.enqueue("ann", 10)?;
/// board.flush()?;
/// // Live while it runs: published after each batch's bookkeeping, so it
/// // may trail what `flush` already saw applied.
/// let so_far = worker.stats();
/// let stats = stop_and_report("season worker", worker)?;
/// assert!(so_far.updates <= stats.updates);
/// assert_eq!(stats.updates, 1);
/// # Ok(())
/// # }
/// ```
pub trait Job: sealed::Sealed + Send {
    /// What the job reports: its counters.
    type Stats: Clone + std::fmt::Debug + Send + 'static;

    /// What the job did so far.
    fn stats(&self) -> Self::Stats;

    /// Whether the job has ended by itself.
    fn is_finished(&self) -> bool;

    /// Ends the job after its current batch and returns what it did.
    ///
    /// # Errors
    ///
    /// The error that had ended the job.
    fn stop(self) -> Result<Self::Stats>
    where
        Self: Sized;

    /// Waits for the job to end by itself, then as [`stop`](Job::stop).
    ///
    /// # Errors
    ///
    /// As [`stop`](Job::stop).
    fn join(self) -> Result<Self::Stats>
    where
        Self: Sized;
}

/// Implements [`Job`] for a handle whose inherent methods have the
/// lifecycle's names, so both ways of calling agree by construction.
macro_rules! impl_job {
    ($handle:ty, $stats:ty) => {
        impl $crate::job::Sealed for $handle {}
        impl $crate::job::Job for $handle {
            type Stats = $stats;
            fn stats(&self) -> $stats {
                <$handle>::stats(self)
            }
            fn is_finished(&self) -> bool {
                <$handle>::is_finished(self)
            }
            fn stop(self) -> $crate::error::Result<$stats> {
                <$handle>::stop(self)
            }
            fn join(self) -> $crate::error::Result<$stats> {
                <$handle>::join(self)
            }
        }
    };
}
pub(crate) use impl_job;
#[doc(hidden)]
pub(crate) use sealed::Sealed;

/// A job's counters, shared between its loop (which publishes after each
/// batch) and its handle (which reads them any time).
#[derive(Debug, Default)]
pub(crate) struct Live<S>(Mutex<S>);

impl<S: Clone> Live<S> {
    pub(crate) fn new(stats: S) -> Arc<Self> {
        Arc::new(Live(Mutex::new(stats)))
    }

    pub(crate) fn publish(&self, stats: &S) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone_from(stats);
    }

    pub(crate) fn get(&self) -> S {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A job's thread.
#[derive(Debug)]
pub(crate) struct JobThread<S> {
    thread: Option<JoinHandle<Result<S>>>,
}

impl<S: Send + 'static> JobThread<S> {
    /// Starts `body` on a thread called `name`.
    pub(crate) fn spawn(
        job: &'static str,
        name: String,
        body: impl FnOnce() -> Result<S> + Send + 'static,
    ) -> Result<Self> {
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(body)
            .map_err(|e| Error::Spawn {
                job,
                reason: e.to_string(),
            })?;
        Ok(JobThread {
            thread: Some(thread),
        })
    }

    /// No thread: a handle over other handles, or over a tokio task.
    pub(crate) fn absent() -> Self {
        JobThread { thread: None }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Waits for the thread: its result, a panic in it resumed here, or
    /// `None` when it was joined before.
    pub(crate) fn join(&mut self) -> Option<Result<S>> {
        let thread = self.thread.take()?;
        Some(
            thread
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        )
    }

    /// What dropping a handle does: asks the job to stop (`request_stop`)
    /// if it still runs, on this thread or as a tokio task (`task`, which a
    /// drop cannot await), and waits for the thread, its outcome dropped:
    /// a dropped handle has nobody to tell, and must not panic while
    /// unwinding.
    pub(crate) fn stop_dropped(&mut self, task: bool, request_stop: impl FnOnce()) {
        if task || self.thread.is_some() {
            request_stop();
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

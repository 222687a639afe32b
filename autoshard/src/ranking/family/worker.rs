//! The family worker: applies queued family submissions, each batch in ONE
//! transaction over the players board (whose queue holds the rows and
//! whose marks say what is applied) and every member the batch writes.
//!
//! A batch first looks at the queue outside any transaction (the peek) to
//! learn which members its rows write and leave, creating members of new
//! periods as a direct submission does; then opens the transaction on the
//! players board and those members, takes the rows again above the marks,
//! and works each row's members out again from the stored filter values
//! it reads there. A row whose members are not all in the transaction
//! (the values or the queue changed since the peek) ends its queue shard's
//! part of the batch; the next batch peeks again. The batch itself is
//! `batch.rs`; this file is the loop that runs batches.

use super::worker_handle::FamilyWorkerHandle;
use super::Family;
use crate::counters;
use crate::error::{Error, Result};
use crate::job::{JobThread, Live};
use crate::ranking::queue;
use crate::ranking::queue::{Env, OnThread, QueueState};
use crate::trace;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long the worker waits after a busy store or a queue shard another
/// worker holds.
const PAUSE: Duration = Duration::from_millis(2);

/// Applies a family's queued submissions ([`FamilyUpdate::enqueue`]): made
/// by [`Family::worker`]; [`spawn`](FamilyWorker::spawn) runs it on a
/// thread, [`drain`](FamilyWorker::drain) on the caller's until the queue
/// is empty. Each batch is one write transaction over every member its
/// submissions write and the family's players board, so any number of
/// workers, in any number of processes, may run at once.
///
/// [`FamilyUpdate::enqueue`]: super::FamilyUpdate::enqueue
///
/// ```
/// use autoshard::ranking::{Family, FamilyConfig, Period, RankingConfig, Window};
/// # fn main() -> autoshard::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = autoshard::Sqlite::open(dir.path().join("game.db"))?;
/// let config = FamilyConfig::new(RankingConfig::new(0..100)).window(Window::Week);
/// let game = Family::create(&db, "game", config)?;
/// let worker = game.worker().batch_size(100).spawn()?;
/// game.submission("ann", 42).at(0).enqueue()?;
/// while game.queued()? > 0 {
///     std::thread::sleep(std::time::Duration::from_millis(5));
/// }
/// assert_eq!(worker.stop()?.submissions, 1);
/// let week = game.board(Window::Week, Period::At(0), None)?.unwrap();
/// assert_eq!(week.score("ann")?, Some(42));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FamilyWorker {
    family: Family,
    batch_size: usize,
    idle_timeout: Duration,
}

/// What a family worker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FamilyWorkerStats {
    /// Transactions that applied at least one submission.
    pub batches: u64,
    /// Submissions applied (each to every member it writes).
    pub submissions: u64,
    /// Rows moved to the family's [dead letters](Family::dead_letters).
    pub dead_letters: u64,
    /// Transactions tried again: a busy store, or members that changed
    /// between a batch's peek and its transaction.
    pub retries: u64,
}

impl Family {
    /// A worker for the family's queued submissions (batches of up to 1,000).
    pub fn worker(&self) -> FamilyWorker {
        FamilyWorker {
            family: self.clone(),
            batch_size: 1_000,
            idle_timeout: Duration::from_millis(20),
        }
    }

    /// Submissions queued and not applied yet.
    ///
    /// # Errors
    ///
    /// A store error.
    pub fn queued(&self) -> Result<u64> {
        self.inner.players.queued().map_err(|e| self.named(e))
    }
}

impl FamilyWorker {
    #[cfg(feature = "tokio")]
    pub(super) fn family(&self) -> &Family {
        &self.family
    }

    /// Most submissions applied per transaction (default 1,000, at least 1).
    /// A submission writes one row per member, so a batch writes up to
    /// this many times the members of a period.
    pub fn batch_size(mut self, submissions: usize) -> Self {
        self.batch_size = submissions.max(1);
        self
    }

    /// How long an idle spawned worker sleeps before it looks at the queue
    /// again (default 20 ms): an enqueue of this process wakes it at once,
    /// one of another process is seen within this long.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Applies queued submissions on this thread until the queue is empty.
    ///
    /// # Errors
    ///
    /// The first error that is not a busy store: a store error,
    /// [`Error::RankingNotFound`] once the family is deleted, or
    /// [`Error::Conflict`] if a batch's members kept changing under it.
    /// Batches committed before stay applied.
    pub fn drain(self) -> Result<FamilyWorkerStats> {
        let state = queue::queue_state(&self.family.inner.players)?;
        let (stop, live) = (
            AtomicBool::new(false),
            Live::new(FamilyWorkerStats::default()),
        );
        crate::compactor::run_to_end(self.run_in(&OnThread, &state, &stop, &live, true))
    }

    /// Starts the worker on a thread of its own; it runs until the handle
    /// is stopped or dropped, or its first error that is not a busy store.
    ///
    /// # Errors
    ///
    /// A store error creating the queue tables on first use.
    pub fn spawn(self) -> Result<FamilyWorkerHandle> {
        let state = queue::queue_state(&self.family.inner.players)?;
        let stop = Arc::new(AtomicBool::new(false));
        let live = Live::new(FamilyWorkerStats::default());
        let thread = JobThread::spawn(
            "family worker",
            format!("autoshard-family-worker-{}", self.family.name()),
            {
                let (state, stop, live) = (state.clone(), stop.clone(), live.clone());
                move || {
                    crate::compactor::run_to_end(
                        self.run_in(&OnThread, &state, &stop, &live, false),
                    )
                }
            },
        )?;
        Ok(FamilyWorkerHandle::of_thread(state, stop, live, thread))
    }

    /// The worker's one loop, on a thread ([`OnThread`]) or in a tokio
    /// task (`task.rs`), whose `RankingNotFound` (met on the players
    /// board, a member, or the queue, wherever the delete caught the
    /// worker) names the family: the one name the caller gave.
    pub(super) async fn run_in(
        &self,
        env: &impl Env,
        state: &QueueState,
        stop: &AtomicBool,
        live: &Live<FamilyWorkerStats>,
        exit_when_idle: bool,
    ) -> Result<FamilyWorkerStats> {
        let worked = async {
            let queues = self.family.inner.players.inner.queues().max(1);
            let mut stats = FamilyWorkerStats::default();
            let (mut first, mut sweep) = (0, true);
            while !stop.load(Ordering::Acquire) {
                live.publish(&stats);
                let seen = state.enqueued();
                // The batch's counts travel with it and back: one at a time.
                let (family, max) = (self.family.clone(), self.batch_size);
                let (done, back) = env
                    .run(move || {
                        let mut stats = stats;
                        (family.traced_batch((max, first, sweep), &mut stats), stats)
                    })
                    .await?;
                stats = back;
                let done = match done {
                    Err(e) if e.is_retryable() => {
                        stats.retries += 1;
                        {
                            // Closed before the pause: an entered span cannot
                            // cross an await.
                            let _retry = trace::retry!(family = self.family.name(),
                            attempt = stats.retries, error = %e);
                        }
                        env.pause(PAUSE).await;
                        continue;
                    }
                    done => done?,
                };
                counters::WORKER_BATCHES.add(u64::from(done.applied > 0));
                counters::UPDATES_APPLIED.add(done.applied as u64);
                counters::DEAD_LETTERED.add(done.dead_letters as u64);
                sweep = false;
                first = (first + 1) % queues;
                if done.taken > 0 {
                    stats.batches += u64::from(done.applied > 0);
                    stats.submissions += done.applied as u64;
                    stats.dead_letters += done.dead_letters as u64;
                    continue;
                }
                if done.contended {
                    env.pause(PAUSE).await;
                } else if exit_when_idle {
                    break;
                } else {
                    env.wait_enqueued(state, stop, seen, self.idle_timeout)
                        .await;
                }
            }
            live.publish(&stats);
            Ok::<_, Error>(stats)
        };
        match worked.await {
            Err(Error::RankingNotFound { .. }) => Err(self.family.not_found()),
            other => other,
        }
    }
}

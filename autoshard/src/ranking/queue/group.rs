//! Group commit: concurrent `enqueue` calls of one process share one
//! transaction (see the module docs of `queue`), and the signals workers and
//! flushers wait on.

use super::GATHER;
use crate::counters;
use crate::error::{Error, Result};
use crate::ranking::Ranking;
use crate::seam::QueuedUpdate;
use crate::trace;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// What this process's enqueuers, workers and flushers of one board share.
pub(crate) struct QueueState {
    group: parking_lot::Mutex<Group>,
    /// Batches below this number have an outcome. Read without the lock,
    /// so a woken follower whose batch is done returns without queueing for
    /// the mutex behind the other followers.
    finished: AtomicU64,
    /// Batches that failed so far: while none did, a follower learns its
    /// outcome from `finished` alone.
    failures: AtomicU64,
    /// A gathering leader waits here for more updates.
    arrived: parking_lot::Condvar,
    signal: Mutex<Signal>,
    /// Workers wait here for new updates (or a stop); flushers for applied
    /// batches.
    pub(super) signalled: Condvar,
    /// What `signalled` tells threads, for worker tasks (which must not
    /// block on a condition variable): notified with it, always.
    #[cfg(feature = "tokio")]
    pub(super) changed: tokio::sync::Notify,
    /// Group-commit transactions, for the test that shows calls are grouped.
    pub(super) commits: AtomicU64,
}

#[derive(Default)]
struct Group {
    /// Updates of batch `open`, in the order their callers arrived.
    pending: Vec<QueuedUpdate>,
    /// Parked followers and the batch each waits for.
    waiters: Vec<(u64, Thread)>,
    /// The batch now collecting updates.
    open: u64,
    /// Whether a caller leads a batch right now (gathering or committing).
    leading: bool,
    /// Whether the leader waits for more updates of the open batch.
    gathering: bool,
    /// How many updates the last batch held: the leader of a smaller batch
    /// waits (up to [`GATHER`]) for callers of the last one to come back.
    target: usize,
    /// Failed batches: the error and how many followers have yet to read it.
    failed: HashMap<u64, (Error, usize)>,
}

#[derive(Default)]
pub(in crate::ranking) struct Signal {
    /// Group commits so far: a worker that saw a change has work.
    pub(super) enqueued: u64,
    /// Updates those group commits held: a lingering worker stops waiting
    /// once a full batch is there.
    pub(super) items: u64,
    /// Worker batches applied so far: a flusher that saw a change looks again.
    pub(super) applied: u64,
    /// Flushes in progress: workers skip their linger while any waits.
    pub(super) urgent: usize,
    /// Flushes started so far: wakes an idle worker, which may not have
    /// seen updates enqueued by another process yet.
    pub(super) flushes: u64,
}

impl QueueState {
    pub(super) fn new() -> Self {
        QueueState {
            group: parking_lot::Mutex::new(Group::default()),
            finished: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            arrived: parking_lot::Condvar::new(),
            signal: Mutex::new(Signal::default()),
            signalled: Condvar::new(),
            #[cfg(feature = "tokio")]
            changed: tokio::sync::Notify::new(),
            commits: AtomicU64::new(0),
        }
    }

    /// Wakes the threads waiting on `signalled` and the tasks on `changed`.
    pub(super) fn notify_all(&self) {
        self.signalled.notify_all();
        #[cfg(feature = "tokio")]
        self.changed.notify_waiters();
    }

    pub(super) fn signal(&self) -> MutexGuard<'_, Signal> {
        self.signal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Group commit: returns once `item` is committed, or with the error of
    /// the transaction that tried to commit it.
    ///
    /// Followers park instead of waiting on a condition variable: the
    /// leader then wakes all of them at once, and each returns on its own
    /// core without taking the mutex. With a condition variable they would
    /// be handed the mutex one after another, and on a small machine that
    /// chain of wake-ups, not the commit, bounded the rate.
    pub(in crate::ranking) fn commit(&self, ranking: &Ranking, item: QueuedUpdate) -> Result<()> {
        let mut group = self.group.lock();
        let batch = group.open;
        group.pending.push(item);
        if group.gathering && group.pending.len() >= group.target {
            self.arrived.notify_one();
        }
        loop {
            if self.finished.load(Ordering::Acquire) > batch {
                drop(group);
                return self.outcome(batch);
            }
            if !group.leading {
                // Our batch is the open one: only a leader closes a batch,
                // and it finishes that batch before anyone else can lead.
                debug_assert_eq!(group.open, batch);
                return self.lead(ranking, group);
            }
            group.waiters.push((batch, std::thread::current()));
            drop(group);
            // Woken when our batch is done, or (first in line of the open
            // batch) when the leader left and someone must take over; any
            // other wake-up just looks again.
            std::thread::park();
            if self.finished.load(Ordering::Acquire) > batch {
                return self.outcome(batch);
            }
            group = self.group.lock();
        }
    }

    /// The outcome of a finished batch, for one of its followers.
    fn outcome(&self, batch: u64) -> Result<()> {
        if self.failures.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        let mut group = self.group.lock();
        let Some((error, readers)) = group.failed.get_mut(&batch) else {
            return Ok(());
        };
        *readers -= 1;
        let copy = copy_error(error);
        if *readers == 0 {
            group.failed.remove(&batch);
        }
        Err(copy)
    }

    /// Commits the open batch for every caller in it.
    fn lead(&self, ranking: &Ranking, mut group: parking_lot::MutexGuard<'_, Group>) -> Result<()> {
        group.leading = true;
        if group.pending.len() < group.target {
            // The callers of the last batch are on their way back with their
            // next update, but a woken thread takes a while to run: without
            // this wait, whoever comes back first commits alone and batches
            // stay near one update.
            group.gathering = true;
            let deadline = Instant::now() + GATHER;
            while group.pending.len() < group.target {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    break;
                };
                self.arrived.wait_for(&mut group, left);
            }
            group.gathering = false;
        }
        let batch = group.open;
        let items = std::mem::take(&mut group.pending);
        group.open += 1;
        group.target = items.len();
        drop(group);
        // If the write panics, the followers must still be released.
        let mut guard = Leading {
            state: self,
            batch,
            members: items.len(),
            outcome: None,
        };
        let span = trace::span!(
            DEBUG,
            "autoshard.group_commit",
            board = ranking.name(),
            batch = items.len(),
            error = tracing::field::Empty
        );
        let outcome = ranking
            .inner
            .boards
            .append_queue(ranking.inner.board(), &items);
        match &outcome {
            Ok(()) => {
                counters::GROUP_COMMITS.add(1);
                counters::ENQUEUED.add(items.len() as u64);
            }
            Err(e) => span.record("error", trace::display(e)),
        }
        drop(span);
        self.commits.fetch_add(1, Ordering::Relaxed);
        guard.outcome = Some(outcome.as_ref().map(|_| ()).map_err(copy_error));
        drop(guard);
        if outcome.is_ok() {
            let mut signal = self.signal();
            signal.enqueued += 1;
            signal.items += items.len() as u64;
            self.notify_all();
        }
        outcome
    }

    /// Enqueue commits of this process so far: what a family worker reads
    /// before a batch and waits past with `Env::wait_enqueued`.
    pub(in crate::ranking) fn enqueued(&self) -> u64 {
        self.signal().enqueued
    }

    /// Wakes every waiter (after a stop flag was set).
    pub(in crate::ranking) fn wake(&self) {
        let _signal = self.signal();
        self.notify_all();
    }

    pub(super) fn urgent(self: &Arc<Self>) -> Urgent {
        let mut signal = self.signal();
        signal.urgent += 1;
        signal.flushes += 1;
        drop(signal);
        self.notify_all();
        Urgent(self.clone())
    }

    /// Batches this process's workers applied so far.
    pub(crate) fn applied_batches(&self) -> u64 {
        self.signal().applied
    }

    /// Resolves at this process's next queue event (an append, a batch
    /// applied, a flush, a stop), for an async flush; call
    /// [`Notified::enable`](tokio::sync::futures::Notified::enable) before
    /// looking at what it waits for, so an event in between is not missed.
    #[cfg(feature = "tokio")]
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    pub(super) fn wait_applied(&self, seen: u64, timeout: Duration) {
        let signal = self.signal();
        if signal.applied == seen {
            let _ = self.signalled.wait_timeout(signal, timeout);
        }
    }

    pub(super) fn note_applied(&self) {
        self.signal().applied += 1;
        self.notify_all();
    }
}

/// Releases the followers of a batch with its outcome, also when the leader
/// unwinds.
struct Leading<'a> {
    state: &'a QueueState,
    batch: u64,
    members: usize,
    outcome: Option<Result<(), Error>>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let outcome = self.outcome.take().unwrap_or_else(|| {
            Err(Error::GroupCommit {
                reason: "the caller that ran the group's transaction panicked".into(),
                retryable: false,
            })
        });
        let state = self.state;
        let mut group = state.group.lock();
        if let Err(error) = outcome {
            let followers = self.members - 1;
            if followers > 0 {
                group.failed.insert(self.batch, (error, followers));
                state.failures.fetch_add(1, Ordering::Release);
            }
        }
        // Under the lock: a follower checks `finished` under it before it
        // parks, so it either sees this or is in `waiters` below.
        state.finished.store(self.batch + 1, Ordering::Release);
        group.leading = false;
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut group.waiters)
            .into_iter()
            .partition(|(batch, _)| *batch <= self.batch);
        let next = waiting.first().map(|(_, thread)| thread.clone());
        group.waiters = waiting;
        drop(group);
        for (_, thread) in done {
            thread.unpark();
        }
        if let Some(thread) = next {
            thread.unpark();
        }
    }
}

/// Marks a flush in progress for as long as it lives.
pub(crate) struct Urgent(Arc<QueueState>);

impl Drop for Urgent {
    fn drop(&mut self) {
        self.0.signal().urgent -= 1;
    }
}

/// The same error again, for every caller of a failed group commit. The
/// errors a queue append is expected to meet (a busy store, a conflict, an
/// unreachable server, a commit in doubt) keep their variant, so retryable
/// stays retryable; anything else becomes [`Error::GroupCommit`] with its
/// message and retryability.
fn copy_error(error: &Error) -> Error {
    type Source = Box<dyn std::error::Error + Send + Sync>;
    let message = |e: &Source| -> Source { e.to_string().into() };
    match error {
        // A stale handle's append after a delete: every caller of the group
        // gets the same typed refusal, not a `GroupCommit`.
        Error::RankingNotFound { name } => Error::RankingNotFound { name: name.clone() },
        Error::Busy { attempts } => Error::Busy {
            attempts: *attempts,
        },
        Error::Conflict { attempts } => Error::Conflict {
            attempts: *attempts,
        },
        Error::Unavailable { attempts, source } => Error::Unavailable {
            attempts: *attempts,
            source: message(source),
        },
        Error::InDoubt {
            writer,
            seq,
            source,
        } => Error::InDoubt {
            writer: *writer,
            seq: *seq,
            source: message(source),
        },
        other => Error::GroupCommit {
            reason: other.to_string(),
            retryable: other.is_retryable(),
        },
    }
}

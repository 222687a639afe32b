//! What this process did, counted where it happens (the shared code paths
//! of every store) and read by [`StoreMetrics`](crate::StoreMetrics): one
//! relaxed atomic add per event, so they cost nothing worth measuring and
//! need no feature. This module imports nothing of the crate, so every
//! layer may count into it.

use std::sync::atomic::{AtomicU64, Ordering};

/// One process-wide count.
pub(crate) struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }

    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Saves and `save_delta`s that committed.
pub(crate) static SAVES: Counter = Counter::new();
/// Saves that gave up on contention ([`Error::Conflict`](crate::Error::Conflict),
/// [`Error::Busy`](crate::Error::Busy)).
pub(crate) static SAVE_CONFLICTS: Counter = Counter::new();
/// Attempts retried anywhere: store transactions, worker batches and
/// compaction batches (each retry point of `trace::retry!`).
pub(crate) static RETRIES: Counter = Counter::new();
/// Automatic shard counts raised by saves.
pub(crate) static COUNTS_RAISED: Counter = Counter::new();
/// Automatic shard counts lowered by committed compaction batches.
pub(crate) static COUNTS_LOWERED: Counter = Counter::new();
/// Committed compaction batches.
pub(crate) static COMPACTION_BATCHES: Counter = Counter::new();
/// Shard rows compaction folded into another and deleted.
pub(crate) static ROWS_MERGED: Counter = Counter::new();
/// Committed worker batches that applied at least one update.
pub(crate) static WORKER_BATCHES: Counter = Counter::new();
/// Queued updates workers applied.
pub(crate) static UPDATES_APPLIED: Counter = Counter::new();
/// Queued rows workers moved to their board's dead letters.
pub(crate) static DEAD_LETTERED: Counter = Counter::new();
/// Group-commit transactions that appended to a queue.
pub(crate) static GROUP_COMMITS: Counter = Counter::new();
/// Updates those group commits appended.
pub(crate) static ENQUEUED: Counter = Counter::new();

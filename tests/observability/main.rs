//! Observability (issue 19 item 4): the spans of feature `tracing`, seen by
//! a real subscriber (`capture.rs`), and `StoreMetrics`, on every store
//! where the code path is shared; the retries each store makes on its own
//! are provoked for real (a SQLite file locked by another connection, a
//! PostgreSQL row updated under an optimistic save).
//!
//! The process counters are process-wide, so the tests of this binary take
//! one lock ([`serial`]) and check exact differences.

#[path = "../common/stores.rs"]
mod stores;

mod capture;
mod metrics;
mod retries;
mod spans;

use autoshard::{shard_method, Pending, Shardable};
use std::sync::{Mutex, MutexGuard};

/// A counter with one static shard row (every save of `hits` writes the
/// same row, so two writers meet there) and a dynamic `views`.
#[derive(Shardable, Debug)]
#[shard(kind = "Tally")]
pub struct Tally {
    #[shard(id)]
    pub id: u64,
    #[shard(neutral = 0, shards = 1, fold = autoshard::fold::checked_sum)]
    pub hits: i64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum)]
    pub views: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl Tally {
    pub fn new(id: u64) -> Self {
        Tally {
            id,
            hits: 0,
            views: 0,
            pending: Pending::default(),
        }
    }
    #[shard_method]
    pub fn hit(&mut self) {
        self.hits += 1;
    }
    #[shard_method]
    pub fn view(&mut self) {
        self.views += 1;
    }
}

/// Held by every test of this binary: the counters they check are the
/// process's.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

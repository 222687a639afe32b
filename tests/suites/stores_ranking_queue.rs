//! The job-aggregation queue (`enqueue`, workers, `flush`), written once and
//! run against every store (see `common/stores.rs`): SQLite, PostgreSQL in
//! locking mode and in optimistic mode (queue transactions pick their own
//! isolation, so the mode must change nothing). Each test has its own SQLite
//! file or PostgreSQL schema, so they run in parallel.
//!
//! Also here (`pg_crash`): a PostgreSQL worker killed with SIGKILL
//! mid-batch, 20 times (`AUTOSHARD_KILLS` for another count; a round fills
//! and drains a queue through a new process and costs about a second, so it
//! stays below the 100 kills of the cheaper crash tests), and the queue's
//! PostgreSQL-only checks (`pg_only`). Tests that need SQLite files by hand
//! stay in `ranking_queue/`.
//!
//! One module per concern; the store-neutral ones list their tests in
//! `every_store_tests!`, or in `store_tests!` and `redis_cluster_tests!`.
//! The stores' boards and the seed are here.
#![cfg(unix)]

use autoshard::ranking::RankingStore;
use autoshard::Sqlite;

use crate::stores;
use stores::TestStore;

#[cfg(feature = "postgres")]
use crate::child;
use crate::queue_oracle as oracle;

// On Redis Cluster the queue shards are streams in the board's slot and a
// worker batch is one optimistic transaction (docs/design/store-redis.md, "Ranking
// boards on Redis Cluster"); the guarantees are the same.
mod life_cycle;
mod mixed_writers;
#[cfg(feature = "postgres")]
mod pg_crash;
#[cfg(feature = "postgres")]
mod pg_only;
mod several_workers;

/// A store under test that can hold boards.
trait Boards: TestStore {
    type Db: RankingStore;
    fn db(&self) -> &Self::Db;
    /// Players each writer thread owns in the mixed-writers test: a
    /// PostgreSQL write is several round trips, and 8 writer threads with
    /// their 8 server processes share 2 cores in CI.
    const OWN: usize;
}

impl Boards for Sqlite {
    type Db = Sqlite;
    fn db(&self) -> &Sqlite {
        self
    }
    const OWN: usize = 120;
}

#[cfg(feature = "postgres")]
impl Boards for autoshard::Postgres {
    type Db = autoshard::Postgres;
    fn db(&self) -> &autoshard::Postgres {
        self
    }
    const OWN: usize = 30;
}

#[cfg(feature = "redis")]
impl Boards for autoshard::RedisCluster {
    type Db = autoshard::RedisCluster;
    fn db(&self) -> &autoshard::RedisCluster {
        self
    }
    const OWN: usize = 30;
}

#[cfg(feature = "postgres")]
impl Boards for stores::pg::Optimistic {
    type Db = autoshard::Postgres;
    fn db(&self) -> &autoshard::Postgres {
        &self.0
    }
    const OWN: usize = 30;
}

fn seed() -> u64 {
    std::env::var("AUTOSHARD_RQ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let seed = rand::random::<u64>();
            eprintln!("AUTOSHARD_RQ_SEED={seed}");
            seed
        })
}

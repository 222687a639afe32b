//! The store-specific tests, one module per store: `tests/sqlite`,
//! `tests/postgres`, `tests/redis`. What every store must do alike is in
//! `tests/suites`; what a kill -9 must not lose is in `tests/crash`.
//!
//! One binary rather than three because libtest runs a binary's tests on a
//! shared pool while cargo runs binaries one after another: the Redis
//! failover rounds spend most of a minute waiting for a replica's promotion,
//! and here that wait overlaps the SQLite tests' CPU work instead of adding
//! to the run (BENCHMARKS.md, "Test time").
//! `cargo test --test store_specific redis::` runs one store's module.

#[path = "common/child.rs"]
mod child;
#[path = "common/mod.rs"]
mod common;
#[path = "common/entities.rs"]
mod entities;
#[path = "common/hammer.rs"]
mod hammer;
#[path = "common/ledger.rs"]
mod ledger;
#[path = "common/proxy.rs"]
mod proxy;
#[path = "common/queue_oracle.rs"]
mod queue_oracle;
#[path = "common/redis_proxy.rs"]
mod redis_proxy;
#[macro_use]
#[path = "common/stores.rs"]
mod stores;

// The Redis Cluster's master kills, named to sort (and so start) first:
// see the file's docs.
#[path = "redis/redis_failover.rs"]
mod failover;
#[path = "postgres/mod.rs"]
mod postgres;
#[path = "redis/mod.rs"]
mod redis;
#[path = "sqlite/mod.rs"]
mod sqlite;

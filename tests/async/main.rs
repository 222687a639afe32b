//! The async API (feature `tokio`): `AsyncStore` on every store and both
//! runtime flavors, the sync API inside a runtime, the queue worker as a
//! tokio task. (The voting service's tests are in the example,
//! `examples/service/tests.rs`: its modules name each other from its crate
//! root.)
//! `cargo test --test async async_stores::`.

#[path = "../common/probe.rs"]
mod probe;

mod async_stores;
mod async_sync_api;
mod async_workers;
mod scratch;

//! What only the PostgreSQL store has: identifier and server limits, the
//! two concurrency modes meeting real transactions, boards at the engine's
//! own pace, exactly-once saves through a breaking connection.
//! `cargo test --test postgres pg_store::`.

#[path = "../common/proxy.rs"]
mod proxy;
#[macro_use]
#[path = "../common/stores.rs"]
mod stores;

mod pg_boards;
mod pg_exactly_once;
mod pg_limits;
mod pg_store;

//! What only the PostgreSQL store has: identifier and server limits, the
//! two concurrency modes meeting real transactions, boards at the engine's
//! own pace, exactly-once saves through a breaking connection.
//! `cargo test --test store_specific postgres::pg_store::`.

mod pg_boards;
mod pg_exactly_once;
mod pg_fold;
mod pg_limits;
mod pg_optimistic_boards;
mod pg_store;

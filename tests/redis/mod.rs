//! What only the Redis Cluster store has: its guarantees where they differ
//! from SQLite and PostgreSQL, entity boards paid after a save's pieces, exactly-once saves
//! through a breaking connection, kill -9 of a master, its boards (split
//! boards read across masters included).
//! `cargo test --test store_specific redis::`; the kills of masters
//! (`redis_failover.rs`) are the binary's `failover::` module.

mod redis_cluster;
mod redis_entity_board;
mod redis_exactly_once;
mod redis_ranking;
mod redis_split_boards;
mod redis_split_random;

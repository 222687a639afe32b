//! The suites written once and run on every store: each module instantiates
//! its generic tests per store with `store_tests!` (SQLite, PostgreSQL in
//! locking and optimistic mode) and `redis_cluster_tests!` /
//! `every_store_tests!` (Redis Cluster), so a test's path names its module
//! and its store: `cargo test --test suites stores_query::postgres::`.
//! One module per former test binary, named as that binary was.

#[path = "../common/boards.rs"]
mod boards;
#[path = "../common/child.rs"]
mod child;
#[path = "../common/mod.rs"]
mod common;
#[path = "../common/composite_cases.rs"]
mod composite_cases;
#[path = "../common/composite_oracle.rs"]
mod composite_oracle;
#[path = "../common/entities.rs"]
mod entities;
#[path = "../common/family.rs"]
mod family;
#[path = "../common/hammer.rs"]
mod hammer;
#[path = "../common/ledger.rs"]
mod ledger;
#[path = "../common/policy_oracle.rs"]
mod policy_oracle;
#[path = "../common/queue_oracle.rs"]
mod queue_oracle;
#[macro_use]
#[path = "../common/stores.rs"]
mod stores;

mod access_denied;
mod auto_shards;
mod bad_input;
mod board_delete_cost;
mod stores_compactor;
mod stores_concurrency;
mod stores_entity_board;
mod stores_mapper;
mod stores_query;
mod stores_query_oracle;
mod stores_ranking;
mod stores_ranking_among;
mod stores_ranking_approx;
mod stores_ranking_composite;
mod stores_ranking_family;
mod stores_ranking_family_composite;
mod stores_ranking_family_oracle;
mod stores_ranking_family_queue;
mod stores_ranking_family_writers;
mod stores_ranking_lifecycle;
mod stores_ranking_new_calls;
mod stores_ranking_policy;
mod stores_ranking_queue;
mod stores_ranking_queued_data;
mod stores_ranking_trees;
mod stores_stats;

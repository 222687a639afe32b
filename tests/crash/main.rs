//! The crash tests: a child process (this binary run again on one
//! `#[ignore]`d test, named by its full path, see `child::test_path`) is
//! SIGKILLed while it saves, compacts, drains a queue, refreshes or deletes
//! a board, and the parent checks that every acknowledged write survived
//! and none counted twice. `AUTOSHARD_KILLS` sets every loop's kill count.
//! `cargo test --test crash pg_crash::`.

#[path = "../common/child.rs"]
mod child;
#[path = "../common/ledger.rs"]
mod ledger;
#[macro_use]
#[path = "../common/stores.rs"]
mod stores;

mod approx_crash;
mod board_delete_crash;
mod compactor_crash;
mod crash;
mod entity_board_crash;
mod family_crash;
mod family_queue_crash;
mod pg_crash;
mod ranking_trees_crash;

//! The ranking tree (issue 3) against a brute-force oracle, written once and
//! run against every store (see `common/stores.rs`): SQLite, PostgreSQL in
//! locking mode and PostgreSQL in optimistic mode (ranking writes lock
//! whatever the mode; the run shows the mode changes nothing). Tests that
//! damage SQLite rows by hand stay in `ranking.rs`.
//!
//! One module per concern, each listing its tests in `every_store_tests!`
//! (also on Redis Cluster: a board is one slot there, its transactions
//! optimistic; docs/design/store-redis.md, "Ranking boards on Redis Cluster"), but
//! `any_store`, which goes through `autoshard::open(url)`.

use autoshard::ranking::{Ranking, RankingConfig};

use crate::boards;
use boards::Boards;

mod any_store;
mod bad_input;
mod cases;
mod oracle;
mod threads;

fn create<S: Boards>(store: &S, name: &str, config: RankingConfig) -> Ranking {
    Ranking::create(store.db(), name, config).unwrap()
}

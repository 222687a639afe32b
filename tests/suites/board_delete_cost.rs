//! What a board delete costs after many earlier deletes, on every store
//! (issue 21: on SQLite it grew with every board ever deleted). A
//! measurement, not a check (the check of the shape is SQLite's unit test
//! `a_delete_purges_its_own_board_however_many_were_deleted_before`):
//!
//! ```text
//! cargo test --test suites board_delete_cost:: -- --ignored --nocapture --test-threads 1
//! ```
//!
//! Every earlier delete is a real one (create, three players, a queued
//! update, delete); then 21 deletes of such boards are timed, and the
//! median and the slowest printed, at 0, 100, 1,000 and 10,000 earlier
//! deletes. `AUTOSHARD_DELETE_COST_MOST` lowers the last step.

use autoshard::ranking::{Ranking, RankingConfig};
use std::time::{Duration, Instant};

use crate::boards;
use boards::Boards;

fn board<S: Boards>(db: &S, name: &str) {
    let config = RankingConfig::new(0..1_000).branching(10).queues(2);
    let board = Ranking::create(db.db(), name, config).unwrap();
    board.set_scores(&[("a", 1), ("b", 2), ("c", 3)]).unwrap();
    board.enqueue("d", 4).unwrap();
}

fn measure<S: Boards>() {
    let db = S::fresh();
    let most: u64 = std::env::var("AUTOSHARD_DELETE_COST_MOST")
        .map(|v| v.parse().unwrap())
        .unwrap_or(10_000);
    let mut deleted = 0;
    for earlier in [0, 100, 1_000, 10_000].into_iter().filter(|&n| n <= most) {
        while deleted < earlier {
            let name = format!("old{deleted}");
            board(&*db, &name);
            assert!(Ranking::delete(db.db(), &name).unwrap());
            deleted += 1;
        }
        let mut times: Vec<Duration> = (0..21)
            .map(|i| {
                let name = format!("timed{earlier}-{i}");
                board(&*db, &name);
                let start = Instant::now();
                assert!(Ranking::delete(db.db(), &name).unwrap());
                start.elapsed()
            })
            .collect();
        deleted += 21;
        times.sort();
        println!(
            "{}: after {earlier:>6} earlier deletes: median {:.2} ms, slowest {:.2} ms (21 deletes)",
            S::NAME,
            times[10].as_secs_f64() * 1e3,
            times[20].as_secs_f64() * 1e3
        );
    }
}

#[test]
#[ignore = "a measurement, not a check"]
fn sqlite() {
    measure::<autoshard::Sqlite>();
}

#[cfg(feature = "postgres")]
#[test]
#[ignore = "a measurement, not a check"]
fn postgres() {
    measure::<autoshard::Postgres>();
}

#[cfg(feature = "redis")]
#[test]
#[ignore = "a measurement, not a check"]
fn redis_cluster() {
    measure::<autoshard::RedisCluster>();
}

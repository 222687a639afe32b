//! `boards.rs` against the in-memory reference board, on the test run's cluster.

use super::*;
use crate::ranking::memory::conformance;
use proptest::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};

/// The test cluster's nodes: `AUTOSHARD_REDIS_CLUSTER_URL`'s, else
/// those of a cluster the run starts. This test once returned early
/// when the variable was unset, so it passed without a cluster; now a
/// cluster that cannot be started fails it (with `redis-server` off
/// the PATH: "AUTOSHARD_REDIS_CLUSTER_URL is not set and no Redis
/// Cluster could be started for the tests: install Redis 7 ...").
fn nodes() -> Vec<String> {
    super::super::parse_url(&autoshard_test_servers::redis_cluster_url())
        .expect("a redis-cluster:// URL")
        .0
}

/// Unlinks every key under `pattern` on every master when dropped.
struct Cleanup(Vec<String>, String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Ok(mut first) =
            redis::Client::open(format!("redis://{}", self.0[0])).and_then(|c| c.get_connection())
        else {
            return;
        };
        let listing: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut first)
            .unwrap_or_default();
        for line in listing.lines().filter(|l| l.contains("master")) {
            let Some(addr) = line.split(' ').nth(1).and_then(|a| a.split('@').next()) else {
                continue;
            };
            let Ok(mut conn) =
                redis::Client::open(format!("redis://{addr}")).and_then(|c| c.get_connection())
            else {
                continue;
            };
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(&self.1)
                .query(&mut conn)
                .unwrap_or_default();
            for key in keys {
                let _: redis::RedisResult<i64> = redis::cmd("UNLINK").arg(key).query(&mut conn);
            }
        }
    }
}

#[test]
fn holds_the_rows_the_reference_holds() {
    let nodes = nodes();
    let base = format!(
        "conformance_{}_{}",
        std::process::id(),
        crate::random::range(0..u32::MAX)
    );
    let _cleanup = Cleanup(nodes.clone(), format!("{base}_*"));
    let case = AtomicU32::new(0);
    let config = ProptestConfig::with_cases(16);
    proptest!(config, |((shape, ops) in conformance::cases())| {
        // A prefix per case: each case creates its board afresh.
        let n = case.fetch_add(1, Ordering::Relaxed);
        let db = RedisCluster::builder(&nodes).prefix(format!("{base}_{n}")).open()?;
        // The count-tree layout (`stored_natively`), which approximate
        // boards and split boards' older trees keep.
        crate::stores::redis::boards::COUNT_TREE.set(true);
        let shown = conformance::check(&db, "board", shape, &ops);
        crate::stores::redis::boards::COUNT_TREE.set(false);
        let shown = shown?;
        prop_assert!(shown.is_none(), "{}", shown.unwrap_or_default());
    });
    assert!(case.load(Ordering::Relaxed) >= 16, "every case ran");
}

/// A native board answers as the reference after every batch: its
/// whole order with ranks, each player's place, the counts above every
/// score, and its own integrity check.
///
/// Control, reverted: with `ranking/native.rs` moving a player who
/// submits the score they hold (a new arrival), this failed with
/// `range: got [.. ("player-11", -9, 3, 3, 3), ("player-2", -9, 3, 3,
/// 4) ..], want [.. ("player-2", -9, 3, 3, 3), ("player-11", -9, 3, 3,
/// 4) ..]`.
#[test]
fn a_native_board_answers_as_the_reference() {
    let nodes = nodes();
    let base = format!(
        "native_{}_{}",
        std::process::id(),
        crate::random::range(0..u32::MAX)
    );
    let _cleanup = Cleanup(nodes.clone(), format!("{base}_*"));
    let case = AtomicU32::new(0);
    let config = ProptestConfig::with_cases(24);
    proptest!(config, |((shape, ops) in conformance::cases())| {
        let n = case.fetch_add(1, Ordering::Relaxed);
        let db = RedisCluster::builder(&nodes).prefix(format!("{base}_{n}")).open()?;
        let shown = conformance::check_native(&db, "board", shape, &ops)?;
        prop_assert!(shown.is_none(), "{}", shown.unwrap_or_default());
    });
    assert!(case.load(Ordering::Relaxed) >= 24, "every case ran");
}

#[test]
fn a_board_keeps_all_its_keys_in_one_slot() {
    let keys = BoardKeys::new("app", 12345);
    let mut all = keys.data();
    all.extend([
        keys.version(),
        keys.heads(),
        keys.queue(0),
        keys.queue(1023),
    ]);
    for key in all {
        assert_eq!(key_slot(key.as_bytes()), keys.slot, "{key}");
    }
    assert_ne!(BoardKeys::new("app", 12346).base, keys.base);
}

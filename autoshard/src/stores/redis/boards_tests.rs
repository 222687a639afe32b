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

/// A split board whose trees were stored before split boards were native
/// (each a count tree) still reads and writes through the count-tree merge,
/// and answers as a split board of native trees given the same writes:
/// the records say which layout each tree has, and the merge follows them
/// (`ranking/trees/snapshot.rs`).
#[test]
fn a_split_board_of_count_trees_reads_as_one_of_native_trees() {
    use crate::ranking::{Ranking, RankingConfig, Tie};
    let nodes = nodes();
    let base = format!(
        "oldsplit_{}_{}",
        std::process::id(),
        crate::random::range(0..u32::MAX)
    );
    let _cleanup = Cleanup(nodes.clone(), format!("{base}*"));
    let db = RedisCluster::builder(&nodes).prefix(&base).open().unwrap();
    let config = RankingConfig::new(0..50).trees(3);
    COUNT_TREE.set(true);
    let old = Ranking::create(&db, "old", config.clone());
    COUNT_TREE.set(false);
    let (old, new) = (old.unwrap(), Ranking::create(&db, "new", config).unwrap());
    let players: Vec<String> = (0..300).map(|i| format!("p{i}")).collect();
    for board in [&old, &new] {
        let batch: Vec<(&str, i64)> = players
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_str(), (i * 7 % 50) as i64))
            .collect();
        board.set_scores(&batch).unwrap();
        for p in players.iter().step_by(9) {
            board.set_score(p, 20).unwrap();
        }
    }
    for (name, native) in [("old", false), ("new", true)] {
        let stored: Vec<bool> = (0..3)
            .map(|t| {
                let tree = format!("{name}{}{t}", crate::seam::PART_SEPARATOR);
                let (id, _) = db.open_board(&tree).unwrap().expect("the tree");
                db.board_spec(id).unwrap().1
            })
            .collect();
        assert_eq!(stored, vec![native; 3], "{name}");
    }
    assert_eq!(old.page(1, 300).unwrap(), new.page(1, 300).unwrap());
    for p in players.iter().step_by(13) {
        for tie in [Tie::Standard, Tie::Dense, Tie::Ordinal] {
            assert_eq!(old.rank(p, tie).unwrap(), new.rank(p, tie).unwrap(), "{p}");
        }
    }
    old.check_integrity().unwrap();
    new.check_integrity().unwrap();
}

/// A floor lifts the board's arrival counter (`native_scripts::MOVES`):
/// writes after one without a floor take later arrivals, so they rank
/// after the players who reached the same score before them, whether the
/// floored write was a single move or several (a single move and a batch
/// go different ways). Floors come from a clock (`ranking/trees/arrival.rs`),
/// so a process whose clock is behind another's writes without lifting
/// the counter past the other's numbers unless this holds.
///
/// Controls, reverted: with the batch's floored counter not stored back
/// (`SET` of the arrivals key removed), `"c"` and `"d"` ranked ahead of
/// `"a"` and `"b"`; with a single move's not stored back, `"e"` ranked
/// last.
#[test]
fn a_floor_lifts_the_arrival_counter() {
    use crate::ranking::{Ranking, RankingConfig};
    use crate::seam::{Board, BoardStore};
    let nodes = nodes();
    let base = format!(
        "floors_{}_{}",
        std::process::id(),
        crate::random::range(0..u32::MAX)
    );
    let _cleanup = Cleanup(nodes.clone(), format!("{base}*"));
    let db = RedisCluster::builder(&nodes).prefix(&base).open().unwrap();
    let board = Ranking::create(&db, "f", RankingConfig::new(0..10)).unwrap();
    let (id, _) = db.open_board("f").unwrap().expect("the board");
    let at = Board { id, name: "f" };
    let write = |updates: &[(&str, u64)]| {
        let updates: Vec<_> = updates
            .iter()
            .map(|&(p, floor)| (p, crate::seam::NativeValue::Score(5), None, floor))
            .collect();
        db.write_native(at, "replace", &updates)
            .unwrap()
            .expect("native")
            .unwrap();
    };
    write(&[("a", 1_000), ("b", 1_001)]);
    write(&[("c", 0), ("d", 0)]);
    write(&[("e", 5_000)]);
    write(&[("f", 0)]);
    write(&[("g", 0), ("h", 0)]);
    let order: Vec<String> = board
        .page(1, 10)
        .unwrap()
        .into_iter()
        .map(|e| e.player)
        .collect();
    assert_eq!(order, ["a", "b", "c", "d", "e", "f", "g", "h"]);
    board.check_integrity().unwrap();
}

//! A transaction over several boards of one slot against the real test
//! cluster: its commit checks every board's version, not only the first's.

use crate::error::Result;
use crate::seam::{Board, BoardSpec, BoardStore, Placement, Storage};
use crate::stores::redis::RedisCluster;
use std::cell::Cell;

fn spec() -> BoardSpec {
    BoardSpec {
        min: 0,
        max: 1_000,
        branching: 16,
        shards: 1,
        queues: 1,
        policy: "replace".into(),
        order: "higher_is_better".into(),
        entry_data: 8,
        dims: Vec::new(),
        trees: 1,
        buckets: 0,
        exact_top: 0,
    }
}

/// Adds one to the count kept as player `n`'s entry data.
fn bump(st: &dyn Storage) -> Result<()> {
    let mut n = 0u32;
    st.players_data(&["n"], &mut |_, data| {
        n = std::str::from_utf8(data).unwrap().parse().unwrap();
        Ok(())
    })?;
    st.put_player_data("n", Some((n + 1).to_string().as_bytes()))
}

/// A write to boards `a` and `c` reads `c`, then another writer commits to
/// `b` and `c`; the first write's commit finds `c` moved, although `a`, the
/// first board, did not, and runs again: `c` counts both. Control: with
/// the commit script checking only its first board's version
/// (`for b = 0, 0`), this fails with `left: (1, "1")`: the first run
/// committed over the other writer's count. Every family suite on Redis
/// Cluster still passed that way (their concurrent writers share their
/// first board), hence this test.
#[test]
fn a_write_to_several_boards_runs_again_when_any_of_them_moved() {
    let nodes = crate::stores::redis::parse_url(&autoshard_test_servers::redis_cluster_url())
        .expect("a redis-cluster:// URL")
        .0;
    let prefix = format!(
        "multi_{}_{}",
        std::process::id(),
        crate::random::range(0..u32::MAX)
    );
    let db = RedisCluster::builder(&nodes)
        .prefix(prefix)
        .pool_size(4)
        .open()
        .expect("the test cluster");
    let family = db
        .create_board("family", &spec(), Placement::Anywhere)
        .unwrap();
    let member = |name: &str| {
        let id = db
            .create_board(name, &spec(), Placement::With(family))
            .unwrap();
        Board { name: "member", id }
    };
    let (a, b, c) = (member("a"), member("b"), member("c"));
    let runs = Cell::new(0);
    db.write_boards(&[a, c], &mut |sts| {
        runs.set(runs.get() + 1);
        bump(sts[1])?;
        if runs.get() == 1 {
            db.write_boards(&[b, c], &mut |sts| bump(sts[1]))?;
        }
        bump(sts[0])
    })
    .unwrap();
    let mut count = String::new();
    db.read_board(c, &mut |st| {
        st.players_data(&["n"], &mut |_, data| {
            count = String::from_utf8_lossy(data).into_owned();
            Ok(())
        })
    })
    .unwrap();
    assert_eq!((runs.get(), count.as_str()), (2, "2"));
    for name in db.list().unwrap() {
        db.delete(&name).unwrap();
    }
}

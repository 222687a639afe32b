//! The batch's unit tests, on the reference storage: net effect, shards,
//! arrival trees, and damaged rows reported rather than written over.

use crate::error::Error;
use crate::ranking::memory::harness::{self, damage, inflict, Board, Oracle};
use crate::ranking::memory::Tables;
use crate::ranking::storage::{self, Part};
use crate::ranking::Tie;
use proptest::prelude::*;

fn enc(v: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    storage::encode(v, &mut out);
    out
}

fn order(board: &Board) -> Vec<(String, i64)> {
    let top = board.top(u64::MAX).unwrap();
    top.into_iter().map(|e| (e.player, e.score)).collect()
}

/// A re-applied batch changes nothing, not even the order among ties
/// (not a byte of any row), and a player who leaves a score and comes
/// back within one batch keeps their place: readers never saw them
/// leave.
#[test]
fn a_batch_is_applied_by_its_net_effect() {
    let board = Board::new(0..1000, 10, 4);
    board.set_scores(0, &[("v", 5), ("x", 6)]).unwrap();
    let batch = [
        ("x", 5),
        ("y", 5),
        ("z", 900),
        ("x", 6),
        ("w", 5),
        ("v", 7),
        ("v", 5),
    ];
    board.set_scores(1, &batch).unwrap();
    let expected = [("z", 900), ("x", 6), ("v", 5), ("y", 5), ("w", 5)];
    assert_eq!(order(&board), expected.map(|(p, s)| (p.to_string(), s)));
    let rows = board.st.tables().clone();
    board.set_scores(2, &batch).unwrap();
    board.set_scores(3, &batch[3..]).unwrap();
    board.set_scores(0, &[("y", 5), ("z", 900)]).unwrap();
    assert_eq!(*board.st.tables(), rows);
    board.check_integrity().unwrap();
}

/// `apply_updates` says, per update, whether the player was on the
/// board just before it (earlier updates of the batch included).
#[test]
fn each_update_says_whether_its_player_was_there() {
    let board = Board::new(0..10, 2, 1);
    board.set("a", 1).unwrap();
    let had = board
        .apply(
            0,
            &[
                ("b", Some(1)),
                ("b", None),
                ("b", None),
                ("a", None),
                ("a", Some(2)),
                ("c", None),
            ],
        )
        .unwrap();
    assert_eq!(had, [false, true, false, true, false, false]);
    assert_eq!(order(&board), [("a".to_string(), 2)]);
    assert!(board.remove("a").unwrap());
    assert!(!board.remove("a").unwrap());
}

/// Arrival trees grow a new root each time the counter passes a power
/// of B, the same whether the players come one by one or in one batch.
#[test]
fn an_arrival_tree_grows_a_root_past_each_power() {
    let names: Vec<String> = (0..9).map(|i| format!("p{i}")).collect();
    let one_by_one = Board::new(0..4, 2, 1);
    for p in &names {
        one_by_one.set(p, 1).unwrap();
    }
    let batch = Board::new(0..4, 2, 1);
    let scores: Vec<_> = names.iter().map(|p| (p.as_str(), 1)).collect();
    batch.set_scores(0, &scores).unwrap();
    assert_eq!(*one_by_one.st.tables(), *batch.st.tables());

    // Arrivals 0..=8 in a binary tree of height 4 (2^3 < 9 <= 2^4).
    let arrivals: Vec<_> = batch
        .st
        .tables()
        .arrivals
        .iter()
        .map(|(&(score, h, idx), v)| (score, h, idx, storage::entries(v).collect::<Vec<_>>()))
        .collect();
    let expected = [
        (1, 1, 0, vec![1, 1]),
        (1, 1, 1, vec![1, 1]),
        (1, 1, 2, vec![1, 1]),
        (1, 1, 3, vec![1, 1]),
        (1, 1, 4, vec![1]),
        (1, 2, 0, vec![2, 2]),
        (1, 2, 1, vec![2, 2]),
        (1, 2, 2, vec![1]),
        (1, 3, 0, vec![4, 4]),
        (1, 3, 1, vec![1]),
        (1, 4, 0, vec![8, 1]),
    ];
    assert_eq!(arrivals, expected);

    // The first four leave: the tree keeps its height (the counter
    // stays at 9), the emptied nodes are deleted, ranks follow.
    for p in &names[..4] {
        assert!(batch.remove(p).unwrap());
    }
    assert_eq!(batch.rank("p4", Tie::Ordinal).unwrap(), Some(1));
    assert_eq!(batch.rank("p8", Tie::Ordinal).unwrap(), Some(5));
    let t = batch.st.tables();
    assert!(!t.arrivals.contains_key(&(1, 1, 0)) && !t.arrivals.contains_key(&(1, 2, 0)));
    assert_eq!(t.arrivals[&(1, 4, 0)], enc(&[4, 1]));
    assert_eq!(t.nodes[&(1, 0, Part::B, 0)], enc(&[0, 9]));
    drop(t);
    batch.check_integrity().unwrap();
}

/// Inner-node deltas go to the transaction's shard; leaves and arrival
/// trees stay in shard 0; a node's shards may be negative, its sum not.
#[test]
fn inner_deltas_go_to_the_given_shard() {
    let board = Board::new(0..100, 10, 4);
    board.set_scores(3, &[("a", 5), ("b", 50)]).unwrap();
    let shards = |t: &Tables| -> Vec<(u32, u32)> {
        t.nodes.keys().map(|&(h, _, _, shard)| (h, shard)).collect()
    };
    assert_eq!(
        shards(&board.st.tables()),
        [(1, 0), (1, 0), (1, 0), (1, 0), (2, 3), (2, 3)]
    );
    board.apply(1, &[("a", Some(51))]).unwrap();
    let t = board.st.tables();
    assert_eq!(t.nodes[&(2, 0, Part::A, 3)], enc(&[1, 0, 0, 0, 0, 1]));
    assert_eq!(t.nodes[&(2, 0, Part::A, 1)], enc(&[-1, 0, 0, 0, 0, 1]));
    assert_eq!(t.nodes[&(2, 0, Part::B, 1)], enc(&[-1, 0, 0, 0, 0, 1]));
    drop(t);
    board.check_integrity().unwrap();
    // Moving back in shard 1 cancels its rows out: deleted, not stored
    // as zeros.
    board.apply(1, &[("a", Some(5))]).unwrap();
    let t = board.st.tables();
    assert!(!t.nodes.keys().any(|k| k.3 == 1), "{:?}", t.nodes);
}

/// A batch that holds the board alone moves the counts of every other
/// shard row of the inner nodes it changes into its own and deletes those
/// rows: the node's sums stay, one row per part is left. The control is
/// the test above: not alone, other shards stay.
#[test]
fn a_batch_alone_folds_the_shard_rows_it_changes() {
    let board = Board::new(0..100, 10, 4);
    board.set_scores(3, &[("a", 5), ("b", 50)]).unwrap();
    board.set_scores(1, &[("c", 6)]).unwrap();
    let inner = |t: &Tables| -> Vec<(Part, u32)> {
        let rows = t.nodes.keys().filter(|k| k.0 == 2);
        rows.map(|&(_, _, part, shard)| (part, shard)).collect()
    };
    let spread = inner(&board.st.tables());
    assert_eq!(
        spread,
        [(Part::A, 1), (Part::A, 3), (Part::B, 1), (Part::B, 3)]
    );
    board.st.set_alone(true);
    board.set_scores(2, &[("d", 70)]).unwrap();
    board.st.set_alone(false);
    let t = board.st.tables();
    assert_eq!(inner(&t), [(Part::A, 2), (Part::B, 2)]);
    // Players and distinct scores per child: {5, 6}, {50}, {70}.
    let sums = enc(&[2, 0, 0, 0, 0, 1, 0, 1]);
    assert_eq!(t.nodes[&(2, 0, Part::A, 2)], sums);
    assert_eq!(t.nodes[&(2, 0, Part::B, 2)], sums);
    drop(t);
    board.check_integrity().unwrap();
    assert_eq!(board.rank("c", Tie::Standard).unwrap(), Some(3));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever happened before, once everyone has left, no leaf, arrival
    /// node or player row is left and every inner node sums to zero; with
    /// one shard, not a single row is left (all-zero rows are deleted).
    #[test]
    fn everyone_leaving_leaves_no_rows(
        (range, branching, shards, pool) in harness::board_shape(),
        ops in prop::collection::vec(harness::op(), 1..15),
        shard in any::<u32>(),
    ) {
        let board = Board::new(range, branching, shards);
        let mut oracle = Oracle::default();
        for op in &ops {
            harness::run(&board, &mut oracle, &pool, op)?;
        }
        let everyone: Vec<_> = (0..12).map(|p| (p, None)).collect();
        harness::run(&board, &mut oracle, &pool, &harness::Op { updates: everyone, shard, alone: false })?;
        let t = board.st.tables();
        prop_assert!(t.players().is_empty() && t.arrivals.is_empty());
        prop_assert!(t.nodes.keys().all(|k| k.0 > 1), "{:?}", t.nodes);
        let mut sums = std::collections::BTreeMap::<_, Vec<i64>>::new();
        for (&(h, idx, part, _), v) in &t.nodes {
            let sum = sums.entry((h, idx, part)).or_insert_with(|| vec![0; board.g().b()]);
            storage::add_into(v, sum).unwrap();
        }
        prop_assert!(sums.values().flatten().all(|&n| n == 0), "{:?}", sums);
        if shards == 1 {
            prop_assert!(t.nodes.is_empty(), "{:?}", t.nodes);
        }
    }

    /// A batch on damaged rows is refused as corruption (and writes
    /// nothing) or applied; it never panics. Until `arrive` checked its
    /// additions (see `an_arrival_count_of_i64_max_is_corruption`),
    /// arrival rows with entries near `i64::MAX` had to be left out here.
    #[test]
    fn a_batch_on_damaged_rows_fails_cleanly_or_applies(
        (range, branching, shards, pool) in harness::board_shape(),
        ops in prop::collection::vec(harness::op(), 1..10),
        damages in prop::collection::vec(damage(), 1..4),
        after in prop::collection::vec(harness::op(), 1..4),
    ) {
        let board = Board::new(range, branching, shards);
        let mut oracle = Oracle::default();
        for op in &ops {
            harness::run(&board, &mut oracle, &pool, op)?;
        }
        for d in &damages {
            inflict(&mut board.st.tables_mut(), d);
        }
        for op in &after {
            let names = op.names();
            let updates = op.updates(&names, &pool);
            let before = board.st.tables().clone();
            match board.apply(op.shard % shards, &updates) {
                Ok(_) => {}
                Err(Error::Corrupt { .. }) => prop_assert!(*board.st.tables() == before),
                Err(other) => prop_assert!(false, "{}", other),
            }
        }
    }
}

/// Damage a batch trips over is reported, and the batch writes nothing.
#[test]
fn a_batch_on_damaged_rows_reports_it() {
    let board = Board::new(0..100, 10, 1);
    board
        .set_scores(0, &[("a", 5), ("b", 5), ("c", 50)])
        .unwrap();
    let pristine = board.st.tables().clone();
    // What the error says, the damage, a batch that trips over it.
    type Case = (
        &'static str,
        fn(&mut Tables),
        &'static [(&'static str, i64)],
    );
    let cases: [Case; 5] = [
        (
            "holds 0 players",
            |t| drop(t.nodes.remove(&(1, 0, Part::A, 0))),
            &[("a", 6)],
        ),
        (
            "no player counted for arrival 1",
            |t| {
                t.arrivals.insert((5, 1, 0), enc(&[1]));
            },
            &[("b", 6)],
        ),
        (
            "outside the board's range",
            |t| t.put_player("a", 100, 0),
            &[("a", 6)],
        ),
        (
            "malformed vector",
            |t| {
                t.nodes.get_mut(&(1, 5, Part::B, 0)).unwrap().pop();
            },
            &[("d", 51)],
        ),
        (
            "malformed or overflowing",
            |t| {
                t.nodes.insert((2, 0, Part::A, 0), enc(&[i64::MAX]));
            },
            &[("d", 1)],
        ),
    ];
    for (reason, damage, batch) in cases {
        let mut t = pristine.clone();
        damage(&mut t);
        *board.st.tables_mut() = t.clone();
        match board.set_scores(0, batch) {
            Err(Error::Corrupt { reason: r, .. }) if r.contains(reason) => {}
            other => panic!("{other:?}: expected corruption saying {reason:?}"),
        }
        assert_eq!(*board.st.tables(), t, "{reason}: a refused batch wrote");
    }
}

/// Regression: `Batch::arrive` added to arrival counts unchecked, so
/// an arrival row holding `i64::MAX` at the next slot panicked in debug
/// builds ("attempt to add with overflow" at `node.a[slot] += 1`, which
/// this test showed before the fix) and wrapped in release, storing
/// `i64::MIN`, where every other count a batch reads is checked.
#[test]
fn an_arrival_count_of_i64_max_is_corruption() {
    let board = Board::new(0..100, 10, 1);
    board.set("a", 5).unwrap();
    board
        .st
        .tables_mut()
        .arrivals
        .insert((5, 1, 0), enc(&[1, i64::MAX]));
    let got = board.set("b", 5);
    assert!(matches!(got, Err(Error::Corrupt { .. })), "{got:?}");
}

/// The same when the tree grows: the new root's first child is the old
/// root's total, which was summed unchecked (`.iter().sum()`: "attempt
/// to add with overflow" before the fix).
#[test]
fn an_arrival_root_total_past_i64_max_is_corruption() {
    let board = Board::new(0..100, 10, 1);
    let ten: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    let scores: Vec<_> = ten.iter().map(|p| (p.as_str(), 5)).collect();
    board.set_scores(0, &scores).unwrap();
    let mut damaged = vec![1; 10];
    damaged[0] = i64::MAX;
    board
        .st
        .tables_mut()
        .arrivals
        .insert((5, 1, 0), enc(&damaged));
    // Arrival 10 needs a root of height 2.
    let got = board.set("b", 5);
    assert!(matches!(got, Err(Error::Corrupt { .. })), "{got:?}");
}

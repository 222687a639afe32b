//! The descents' unit tests, on the reference storage: every query against
//! a sorted list, the worked examples, the extremes of the range, and
//! damaged rows or overflowing counts reported by the queries that read
//! them.

use crate::error::Error;
use crate::ranking::memory::harness::{self, verify, Board, Oracle};
use crate::ranking::storage::{self, Part};
use crate::ranking::Tie;
use proptest::prelude::*;

fn enc(v: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    storage::encode(v, &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random batches on random board shapes (width 1 to all of i64,
    /// branching 2 to 1000, 1 to 4 shards, deltas to any shard), every
    /// query checked against a sorted list after every write. Controls,
    /// each reverted: with the memory storage's `entries_below` taking
    /// one player too many, this failed at once (`around(player-7, 1)`
    /// one entry too long); with `place_of` counting a leaf's empty
    /// scores as distinct (`n >= 0` for `n > 0`), on a dense rank (29
    /// for 3), which neither named example below notices.
    #[test]
    fn every_query_agrees_with_a_sorted_list(
        (range, branching, shards, pool) in harness::board_shape(),
        ops in prop::collection::vec(harness::op(), 1..20),
    ) {
        let board = Board::new(range, branching, shards);
        let mut oracle = Oracle::default();
        for op in &ops {
            harness::run(&board, &mut oracle, &pool, op)?;
            verify(&board, &oracle, &pool)?;
        }
    }
}

/// The article's figure 5: a ternary tree over 0..81 needs four levels,
/// and the player with score 30 has 22 players above, so ranks 23rd.
#[test]
fn code_jam_example() {
    let board = Board::new(0..81, 3, 1);
    // 22 players above 30, spread so that every level of the path
    // contributes: 31 and 32 share 30's leaf, 33..35 is the next leaf,
    // 36..=53 are further right under the same root child, 54.. is the
    // root's last child.
    let above = [31, 32, 33, 34, 35, 36, 40, 44, 44, 45, 50, 53]
        .into_iter()
        .chain([54, 60, 61, 70, 72, 75, 78, 79, 80, 80]);
    let mut players: Vec<(String, i64)> = above
        .enumerate()
        .map(|(i, s)| (format!("a{i}"), s))
        .collect();
    assert_eq!(players.len(), 22);
    players.extend((0..10).map(|i| (format!("b{i}"), i * 3)));
    players.push(("me".into(), 30));
    players.push(("tied".into(), 30));
    let batch: Vec<_> = players.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    board.set_scores(0, &batch).unwrap();

    assert_eq!(board.rank_of_score(30).unwrap(), 23);
    assert_eq!(board.rank("me", Tie::Standard).unwrap(), Some(23));
    assert_eq!(board.rank("tied", Tie::Standard).unwrap(), Some(23));
    assert_eq!(board.rank("tied", Tie::Ordinal).unwrap(), Some(24));
    // 20 distinct scores above 30 (44 and 80 are held twice).
    assert_eq!(board.rank("me", Tie::Dense).unwrap(), Some(21));

    // Four levels, and the root counts 0-26, 27-53 and 54-80 as in the
    // figure: 0,3..24 | 27,30,30,31..53 | 54..
    let t = board.st.tables();
    assert_eq!(t.nodes.keys().map(|k| k.0).max(), Some(4));
    assert_eq!(t.nodes[&(4, 0, Part::A, 0)], enc(&[9, 15, 10]));
    // Distinct scores: 27 and 30 are in the middle child, 44 and 80
    // are held twice.
    assert_eq!(t.nodes[&(4, 0, Part::B, 0)], enc(&[9, 13, 9]));
    drop(t);
    board.check_integrity().unwrap();
}

// The Redis article's tie example runs on every store in
// `tests/suites/stores_ranking/cases.rs`.

#[test]
fn full_i64_range_ranks_the_extremes() {
    let board = Board::new(i64::MIN..i64::MAX, 2, 3);
    let scores = [
        ("lo", i64::MIN),
        ("hi", i64::MAX - 1),
        ("zero", 0),
        ("neg", -1),
    ];
    board.set_scores(2, &scores).unwrap();
    let order: Vec<_> = board
        .top(10)
        .unwrap()
        .into_iter()
        .map(|e| (e.player, e.score))
        .collect();
    assert_eq!(
        order,
        [
            ("hi".into(), i64::MAX - 1),
            ("zero".into(), 0),
            ("neg".into(), -1),
            ("lo".into(), i64::MIN)
        ]
    );
    assert_eq!(board.rank_of_score(i64::MIN).unwrap(), 4);
    assert_eq!(board.rank_of_score(i64::MAX - 1).unwrap(), 1);
    assert_eq!(board.score_at_rank(4).unwrap(), Some(i64::MIN));
    assert_eq!(board.st.tables().nodes.keys().map(|k| k.0).max(), Some(64));
    board.check_integrity().unwrap();
}

fn corrupt(r: crate::Result<impl std::fmt::Debug>, reason: &str) {
    match r {
        Err(Error::Corrupt { reason: r, .. }) if r.contains(reason) => {}
        other => panic!("{other:?}: expected corruption saying {reason:?}"),
    }
}

/// Reads check what they sum: a damaged row is reported, never turned
/// into a huge rank or a score outside the board.
#[test]
fn damaged_rows_are_reported_by_the_queries_that_read_them() {
    let board = Board::new(0..100, 10, 2);
    board
        .set_scores(0, &[("a", 5), ("b", 50), ("c", 50)])
        .unwrap();
    let pristine = board.st.tables().clone();
    let reset = || *board.st.tables_mut() = pristine.clone();

    // The root's shards sum to a negative count.
    let minus = [0, 0, 0, 0, 0, 0, 0, 0, 0, -5];
    board
        .st
        .tables_mut()
        .nodes
        .insert((2, 0, Part::A, 1), enc(&minus));
    corrupt(board.rank_of_score(0), "negative or too large");
    corrupt(board.len(), "negative or too large");
    corrupt(board.score_at_rank(3), "negative count");

    // A leaf row outside shard 0.
    reset();
    board
        .st
        .tables_mut()
        .nodes
        .insert((1, 0, Part::A, 1), enc(&[1]));
    corrupt(board.rank("a", Tie::Standard), "misplaced shard row 1");
    // A vector that is not whole i64s.
    reset();
    board
        .st
        .tables_mut()
        .nodes
        .insert((2, 0, Part::B, 0), vec![1, 2, 3]);
    corrupt(board.rank("a", Tie::Dense), "malformed");
    // More than B entries.
    reset();
    board
        .st
        .tables_mut()
        .nodes
        .insert((2, 0, Part::A, 0), enc(&[1; 11]));
    corrupt(board.len(), "malformed");

    // A held score whose arrival counter is 0.
    reset();
    board.st.tables_mut().nodes.remove(&(1, 5, Part::B, 0));
    corrupt(board.rank("b", Tie::Ordinal), "arrival counter is 0");
    corrupt(board.around("c", 1), "arrival counter is 0");

    // An arrival tree that lost a player: the page starting there
    // cannot find them.
    reset();
    board.st.tables_mut().arrivals.insert((50, 1, 0), enc(&[1]));
    corrupt(board.page(2, 3), "holds fewer than 2 players");

    // Players counted under a child past the score range (a board of
    // 0..5 in one leaf of 10 children).
    let small = Board::new(0..5, 10, 1);
    small.set("x", 4).unwrap();
    small
        .st
        .tables_mut()
        .nodes
        .insert((1, 0, Part::A, 0), enc(&[0, 0, 0, 0, 1, 0, 0, 1]));
    corrupt(small.score_at_rank(1), "past the score range");
    assert_eq!(small.score_at_rank(2).unwrap(), Some(4));
}

/// A board whose root's part B sums to `2^64 - 1` at child 9, above
/// its only player, over three shards.
fn distinct_count_of_u64_max() -> Board {
    let board = Board::new(0..100, 10, 3);
    board.set("a", 5).unwrap();
    let row = |first, last| {
        let mut v = [0; 10];
        (v[0], v[9]) = (first, last);
        enc(&v)
    };
    let mut t = board.st.tables_mut();
    t.nodes.insert((2, 0, Part::B, 0), row(1, i64::MAX));
    t.nodes.insert((2, 0, Part::B, 1), row(0, i64::MAX));
    t.nodes.insert((2, 0, Part::B, 2), row(0, 1));
    drop(t);
    board
}

/// Regression: counts summed over shard rows were checked to fit a
/// `u64`, but a sum of exactly `u64::MAX` passed, and the `+ 1` that
/// makes it a rank overflowed: a debug build panicked ("attempt to add
/// with overflow" at `page`'s `dense = first.place.distinct_above + 1`,
/// which this test showed before the fix), a release build answered
/// dense rank 0. Counts are now at most `i64::MAX`.
#[test]
fn a_page_under_a_count_of_u64_max_reports_corruption() {
    corrupt(distinct_count_of_u64_max().page(1, 1), "too large");
}

/// The same in `Ranking::rank` (read.rs, `Tie::Dense =>
/// place.distinct_above + 1`; likewise `above + 1` for the standard
/// rank and `rank_of_score`), which `Board::rank` repeats: it panicked
/// the same way before the fix.
#[test]
fn a_dense_rank_under_a_count_of_u64_max_reports_corruption() {
    corrupt(
        distinct_count_of_u64_max().rank("a", Tie::Dense),
        "too large",
    );
}

/// Just past the bound: a count of `i64::MAX + 1` (two shard rows of
/// 2^62) is corruption, `i64::MAX` itself is a count (and its rank,
/// `i64::MAX + 1`, fits).
#[test]
fn counts_stop_at_i64_max() {
    let board = Board::new(0..100, 10, 2);
    board.set("a", 5).unwrap();
    let row = |a, last| {
        let mut v = [0; 10];
        (v[0], v[9]) = (a, last);
        enc(&v)
    };
    let mut t = board.st.tables_mut();
    t.nodes.insert((2, 0, Part::A, 0), row(1, 1 << 62));
    t.nodes.insert((2, 0, Part::A, 1), row(0, (1 << 62) - 1));
    drop(t);
    assert_eq!(board.rank_of_score(50).unwrap(), 1 << 63);
    let mut t = board.st.tables_mut();
    t.nodes.insert((2, 0, Part::A, 1), row(0, 1 << 62));
    drop(t);
    corrupt(board.rank_of_score(50), "too large");
    corrupt(board.rank("a", Tie::Standard), "too large");
}

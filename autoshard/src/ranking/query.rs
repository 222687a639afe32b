//! Read algorithms: each descends the score tree once (and an arrival tree
//! for ordinal ties), reading one node per height.
//!
//! Sums are taken in `i128`: a single shard row may hold any net delta
//! (static sharding spreads `+1` and `-1` over shards), but the sum over a
//! node's shards is a count, and a negative count is reported as corruption
//! rather than wrapped into a huge rank.

use super::storage::{self, Part, Storage};
use super::tree::{self, Geometry};
use super::Entry;
use crate::error::Result;
use std::ops::RangeInclusive;

/// Where a score sits in the score tree.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScorePlace {
    /// Players with a strictly higher score.
    pub above: u64,
    /// Distinct scores strictly higher (only when asked for).
    pub distinct_above: u64,
    /// Arrival counter of the score, 0 when nobody holds it (only when
    /// asked for).
    pub counter: u64,
}

/// What [`place_of`] should compute beyond `above`: each costs reading the
/// B vectors (part B rows) of the path.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Want {
    pub distinct: bool,
    pub counter: bool,
}

/// A count read from the store, checked to be a count: between 0 and
/// `i64::MAX`. A board cannot hold more players than that (an arrival
/// number is below `2^63`, and so is every stored count), and the bound
/// makes a rank's arithmetic safe: `count + 1`, and the ordinal rank
/// `above + before + 1`, fit a `u64` with no check.
fn count(st: &dyn Storage, value: i128, what: impl FnOnce() -> String) -> Result<u64> {
    u64::try_from(value)
        .ok()
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(|| st.corrupt(what(), format!("count {value} is negative or too large")))
}

fn node_name(h: u32, idx: u64) -> String {
    format!("score-tree node (height {h}, idx {idx})")
}

/// Checks that a row a store answered a read with has a height the read
/// asked for (`heights`): a damaged store can answer with a row from
/// elsewhere, and a height outside the tree would overflow the geometry's
/// arithmetic (`B^(h-1)` at height 0).
fn asked_height(st: &dyn Storage, h: u32, heights: RangeInclusive<u32>, tree: &str) -> Result<()> {
    if heights.contains(&h) {
        Ok(())
    } else {
        Err(st.corrupt(
            format!("{tree} row at height {h}"),
            format!("read for heights {heights:?}"),
        ))
    }
}

/// Checks one stored row before it is summed.
fn check_row(st: &dyn Storage, g: &Geometry, h: u32, idx: u64, shard: u32, v: &[u8]) -> Result<()> {
    if storage::well_formed(v, g.b()) && (h > 1 || shard == 0) {
        Ok(())
    } else {
        Err(st.corrupt(
            node_name(h, idx),
            format!("malformed or misplaced shard row {shard}"),
        ))
    }
}

/// Descends from the root to the leaf holding `offset`. Reads: the
/// `depth` nodes of the path, in one statement.
pub(crate) fn place_of(
    st: &dyn Storage,
    g: &Geometry,
    offset: u64,
    want: Want,
) -> Result<ScorePlace> {
    let mut path = [(0u32, 0u64, false); MAX_DEPTH];
    let depth = g.depth() as usize;
    for (slot, h) in path.iter_mut().zip((1..=g.depth()).rev()) {
        let with_b = if h == 1 { want.counter } else { want.distinct };
        *slot = (h, g.node(offset, h), with_b);
    }
    let (mut above, mut distinct, mut counter) = (0i128, 0i128, 0i64);
    st.path_rows(&path[..depth], &mut |h, part, shard, v| {
        asked_height(st, h, 1..=g.depth(), "score-tree")?;
        check_row(st, g, h, g.node(offset, h), shard, v)?;
        let c = g.child(offset, h);
        match (part, h) {
            (Part::A, 1) => {
                above += storage::sum_from(v, c + 1);
                if want.distinct {
                    // At the leaf a child is one score: held or not.
                    distinct += storage::entries(v).skip(c + 1).filter(|&n| n > 0).count() as i128;
                }
            }
            (Part::A, _) => above += storage::sum_from(v, c + 1),
            (Part::B, 1) => counter = storage::get(v, c),
            (Part::B, _) => distinct += storage::sum_from(v, c + 1),
        }
        Ok(())
    })?;
    Ok(ScorePlace {
        above: count(st, above, || format!("players above offset {offset}"))?,
        distinct_above: count(st, distinct, || format!("scores above offset {offset}"))?,
        counter: count(st, counter.into(), || {
            format!("arrival counter at offset {offset}")
        })?,
    })
}

/// Deepest score tree (B = 2 over `2^64` scores) or arrival tree.
const MAX_DEPTH: usize = 64;

/// Players on the board: the root's total. Reads: 1 node.
pub(crate) fn len(st: &dyn Storage, g: &Geometry) -> Result<u64> {
    let mut total = 0i128;
    st.path_rows(&[(g.depth(), 0, false)], &mut |h, _, shard, v| {
        asked_height(st, h, g.depth()..=g.depth(), "score-tree")?;
        check_row(st, g, h, 0, shard, v)?;
        total += storage::sum_from(v, 0);
        Ok(())
    })?;
    count(st, total, || node_name(g.depth(), 0))
}

/// Players at `score` that arrived before `arrival`. Reads: the path of
/// that score's arrival tree (its height), in one statement.
pub(crate) fn arrived_before(
    st: &dyn Storage,
    g: &Geometry,
    score: i64,
    counter: u64,
    arrival: u64,
) -> Result<u64> {
    let bf = g.branching();
    let height = tree::height_for(bf, counter);
    let mut path = [(0u32, 0u64); MAX_DEPTH];
    for (slot, h) in path.iter_mut().zip((1..=height).rev()) {
        *slot = (h, tree::node(bf, arrival, h));
    }
    let mut before = 0i128;
    st.arrival_path(score, &path[..height as usize], &mut |h, v| {
        asked_height(st, h, 1..=height, "arrival-tree")?;
        before += storage::sum_to(v, tree::child(bf, arrival, h));
        Ok(())
    })?;
    count(st, before, || {
        format!("arrivals before {arrival} at score {score}")
    })
}

/// Which player holds a given ordinal position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Located {
    pub score: i64,
    pub place: ScorePlace,
    /// 0-based position among the players at `score`, by arrival.
    pub within: u64,
}

/// Sums every shard row of a node into `a` and `b` (zeroed first).
pub(crate) fn node_sums(
    st: &dyn Storage,
    g: &Geometry,
    h: u32,
    idx: u64,
    a: &mut [i128],
    b: &mut [i128],
) -> Result<()> {
    a.fill(0);
    b.fill(0);
    st.path_rows(&[(h, idx, true)], &mut |at, part, shard, v| {
        asked_height(st, at, h..=h, "score-tree")?;
        check_row(st, g, h, idx, shard, v)?;
        let sums = match part {
            Part::A => &mut *a,
            Part::B => &mut *b,
        };
        for (slot, x) in sums.iter_mut().zip(storage::entries(v)) {
            *slot += i128::from(x);
        }
        Ok(())
    })?;
    if let Some(bad) = a.iter().chain(b.iter()).find(|&&x| x < 0) {
        return Err(st.corrupt(node_name(h, idx), format!("negative count {bad}")));
    }
    Ok(())
}

/// The score and place of the player at 1-based ordinal `position`, or
/// `None` past the end. Reads: one node per height (`depth`).
pub(crate) fn locate(st: &dyn Storage, g: &Geometry, position: u64) -> Result<Option<Located>> {
    if position == 0 {
        return Ok(None);
    }
    let mut a = vec![0i128; g.b()];
    let mut b = vec![0i128; g.b()];
    let mut remaining = i128::from(position);
    let (mut above, mut distinct) = (0i128, 0i128);
    let mut idx = 0u64;
    for h in (1..=g.depth()).rev() {
        node_sums(st, g, h, idx, &mut a, &mut b)?;
        // Children from the highest scores down.
        let Some(c) = (0..g.b()).rev().find(|&c| {
            if remaining <= a[c] {
                return true;
            }
            remaining -= a[c];
            above += a[c];
            distinct += if h == 1 { i128::from(a[c] > 0) } else { b[c] };
            false
        }) else {
            return Ok(None);
        };
        // A count under a child the range does not reach is corruption;
        // checking here keeps `score` and the next index in range.
        let next = u128::from(idx) * u128::from(g.branching()) + c as u128;
        if next >= g.nodes_at(h - 1) {
            return Err(st.corrupt(
                node_name(h, idx),
                format!("count under child {c}, past the score range"),
            ));
        }
        if h == 1 {
            let score = g.score(next as u64);
            let place = ScorePlace {
                above: count(st, above, || format!("players above position {position}"))?,
                distinct_above: count(st, distinct, || {
                    format!("scores above position {position}")
                })?,
                counter: count(st, b[c], || node_name(1, idx))?,
            };
            let within = count(st, remaining - 1, || node_name(1, idx))?;
            return Ok(Some(Located {
                score,
                place,
                within,
            }));
        }
        idx = next as u64;
    }
    unreachable!("the loop returns at height 1")
}

/// The arrival number of the `n`-th (0-based) player present at `score`.
/// Reads: one arrival node per height of that score's arrival tree.
pub(crate) fn nth_arrival(
    st: &dyn Storage,
    g: &Geometry,
    score: i64,
    counter: u64,
    n: u64,
) -> Result<u64> {
    let bf = g.branching();
    let mut remaining = i128::from(n);
    let mut idx = 0u64;
    for h in (1..=tree::height_for(bf, counter)).rev() {
        let mut found = None;
        st.arrival_path(score, &[(h, idx)], &mut |_, a| {
            for (c, v) in storage::entries(a).enumerate() {
                if remaining < i128::from(v) {
                    found = Some(c);
                    return Ok(());
                }
                remaining -= i128::from(v);
            }
            Ok(())
        })?;
        let Some(c) = found else {
            return Err(st.corrupt(
                format!("arrival tree of score {score}"),
                format!("holds fewer than {} players", n + 1),
            ));
        };
        idx = idx
            .checked_mul(bf.into())
            .and_then(|i| i.checked_add(c as u64))
            .ok_or_else(|| {
                st.corrupt(format!("arrival tree of score {score}"), "too deep".into())
            })?;
    }
    Ok(idx)
}

/// Entries at ordinal positions `from..=to` (`1 <= from <= to`). Reads:
/// `depth` score nodes + the arrival tree height + one index range scan
/// (two statements when the page crosses from the first score to lower ones).
pub(crate) fn page(st: &dyn Storage, g: &Geometry, from: u64, to: u64) -> Result<Vec<Entry>> {
    let Some(first) = locate(st, g, from)? else {
        return Ok(Vec::new());
    };
    let arrival = nth_arrival(st, g, first.score, first.place.counter, first.within)?;
    let want = to - from + 1;
    let mut found = Vec::with_capacity(want.min(1024) as usize);
    st.entries_at(first.score, arrival, want, &mut found)?;
    let got = found.len() as u64;
    if got < want {
        st.entries_below(first.score, want - got, &mut found)?;
    }
    // Counts are at most `i64::MAX` (`count`), so neither `+ 1` nor the
    // increments below (one per entry) can overflow; positions stop at
    // `to`, which an open range (`from..`) would step past at `u64::MAX`.
    let mut rank = first.place.above + 1;
    let mut dense = first.place.distinct_above + 1;
    let mut previous = first.score;
    Ok(found
        .into_iter()
        .zip(from..=to)
        .map(|((player, score), position)| {
            if score != previous {
                // The first player at a lower score starts its standard rank.
                rank = position;
                dense += 1;
                previous = score;
            }
            Entry {
                player,
                score,
                rank,
                dense,
                position,
                data: None,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::memory::harness::{self, verify, Board, Oracle};
    use super::super::storage::{self, Part};
    use super::super::Tie;
    use crate::error::Error;
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

    /// The Redis article's tie example: 18, 15, 15, 7, 7, 7, 3.
    #[test]
    fn redis_tie_example() {
        let board = Board::new(0..100, 4, 1);
        let scores = [
            ("a", 18),
            ("b", 15),
            ("c", 15),
            ("d", 7),
            ("e", 7),
            ("f", 7),
            ("g", 3),
        ];
        for (p, s) in scores {
            board.set(p, s).unwrap();
        }
        let ranks = |tie| -> Vec<u64> {
            scores
                .iter()
                .map(|(p, _)| board.rank(p, tie).unwrap().unwrap())
                .collect()
        };
        assert_eq!(ranks(Tie::Standard), [1, 2, 2, 4, 4, 4, 7]);
        assert_eq!(ranks(Tie::Dense), [1, 2, 2, 3, 3, 3, 4]);
        assert_eq!(ranks(Tie::Ordinal), [1, 2, 3, 4, 5, 6, 7]);

        // Setting the same score again keeps the place; leaving and coming
        // back puts the player behind everyone who holds it now.
        board.set("d", 7).unwrap();
        assert_eq!(board.rank("d", Tie::Ordinal).unwrap(), Some(4));
        board.set("d", 8).unwrap();
        board.set("d", 7).unwrap();
        assert_eq!(ranks(Tie::Ordinal), [1, 2, 3, 6, 4, 5, 7]);
        let page: Vec<_> = board
            .page(4, 6)
            .unwrap()
            .into_iter()
            .map(|e| (e.player, e.rank, e.dense, e.position))
            .collect();
        assert_eq!(
            page,
            [
                ("e".into(), 4, 3, 4),
                ("f".into(), 4, 3, 5),
                ("d".into(), 4, 3, 6)
            ]
        );
        board.check_integrity().unwrap();
    }

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
}

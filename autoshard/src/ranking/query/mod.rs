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
mod tests;

//! Merging the trees of a split board: one snapshot per tree, all open at
//! once, and the ordinal order across trees.
//!
//! Players tied at a score are ordered by `(arrival, tree)`: arrival
//! numbers are board-wide (`arrival.rs`), and equal ones in two trees go by
//! tree index. Every query here uses that one order, so ranks, pages and
//! `score_at_rank` agree with each other.

use super::super::query::{self, Want};
use super::super::storage::{self, Storage};
use super::super::tree::Geometry;
use super::super::{Entry, Ranking};
use super::dense;
use crate::error::Result;
use crate::seam::Board;
use std::sync::Arc;

/// A benchmark's diagnostic (`ranking-trees`, `AUTOSHARD_BENCH_LOCAL_ARRIVALS`):
/// trees hand out arrival numbers from their scores' counters alone, as a
/// board of one tree does, which orders ties across trees wrongly but
/// shows what the board-wide numbers cost. Only with `failpoints`.
#[cfg(feature = "failpoints")]
pub(crate) static LOCAL_ARRIVALS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

// The control lives with the order it breaks (`among.rs`), which a
// board of one tree sorts sets by too.
/// Which tree a player is in, for a test that fills one tree only.
#[cfg(feature = "failpoints")]
pub(crate) use super::tree_of;
use crate::ranking::among::concatenate_ties;
#[cfg(feature = "failpoints")]
pub(crate) use crate::ranking::among::CONCATENATE_TIES;
pub(in crate::ranking) use crate::ranking::among::{sort, Found};

/// See `LOCAL_ARRIVALS`.
#[cfg(feature = "failpoints")]
pub(crate) fn local_arrivals() -> bool {
    LOCAL_ARRIVALS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Without `failpoints`, arrival numbers are always board-wide.
#[cfg(not(feature = "failpoints"))]
pub(crate) fn local_arrivals() -> bool {
    false
}

/// Runs `f` over one read transaction of every tree, all open at once:
/// each tree is read at one point in time. Trees in one store are read
/// through its [`read_boards`](crate::seam::BoardStore::read_boards)
/// (PostgreSQL: one connection, one snapshot, whatever the pool's size);
/// trees in stores of their own (SQLite's files) one transaction each.
pub(super) fn read_all<R>(
    trees: &[Ranking],
    f: &mut dyn FnMut(&[&dyn Storage]) -> Result<R>,
) -> Result<R> {
    let Some(first) = trees.first() else {
        return f(&[]);
    };
    let store = &first.inner.boards;
    let mut out = None;
    let mut run = |sts: &[&dyn Storage]| -> Result<()> {
        out = Some(f(sts)?);
        Ok(())
    };
    if trees.iter().all(|t| Arc::ptr_eq(&t.inner.boards, store)) {
        let boards: Vec<Board<'_>> = trees.iter().map(|t| t.inner.board()).collect();
        store.read_boards(&boards, &mut run)?;
    } else {
        nest(trees, &[], &mut run)?;
    }
    Ok(out.expect("set by a successful transaction"))
}

fn nest(
    trees: &[Ranking],
    held: &[&dyn Storage],
    f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
) -> Result<()> {
    let Some((first, rest)) = trees.split_first() else {
        return f(held);
    };
    first
        .inner
        .boards
        .read_board(first.inner.board(), &mut |st| {
            let mut more: Vec<&dyn Storage> = held.to_vec();
            more.push(st);
            nest(rest, &more, f)
        })
}

/// Where a held (tree) score sits: its offset, or corruption.
pub(super) fn offset_of(st: &dyn Storage, g: &Geometry, score: i64) -> Result<u64> {
    g.offset(score).ok_or_else(|| {
        st.corrupt(
            format!("player score {score}"),
            "outside the board's range".into(),
        )
    })
}

/// Players at the score of `offset` in one tree: its leaf's count.
fn held(st: &dyn Storage, g: &Geometry, offset: u64) -> Result<u64> {
    let c = g.child(offset, 1);
    let mut n = 0i128;
    st.path_rows(&[(1, g.node(offset, 1), false)], &mut |_, _, _, v| {
        n += i128::from(storage::get(v, c));
        Ok(())
    })?;
    u64::try_from(n).map_err(|_| {
        st.corrupt(
            format!("leaf of offset {offset}"),
            format!("count {n} is negative"),
        )
    })
}

/// Players of one tree at `score` whose arrival is below `bound`.
fn arrivals_below(st: &dyn Storage, g: &Geometry, score: i64, bound: u64) -> Result<u64> {
    let offset = offset_of(st, g, score)?;
    let want = Want {
        distinct: false,
        counter: true,
    };
    let counter = query::place_of(st, g, offset, want)?.counter;
    match counter {
        0 => Ok(0),
        // Every arrival there is below the counter: the whole score.
        c if bound >= c => held(st, g, offset),
        c => query::arrived_before(st, g, score, c, bound),
    }
}

/// Players with a better (tree) score than `score`, in all trees.
pub(super) fn above(sts: &[&dyn Storage], g: &Geometry, offset: u64) -> Result<u64> {
    let mut above = 0;
    for st in sts {
        above += query::place_of(*st, g, offset, Want::default())?.above;
    }
    Ok(above)
}

/// The 1-based ordinal position of the player of tree `t` at `(score,
/// arrival)`: players above, plus those tied who come first by
/// `(arrival, tree)`.
pub(super) fn position_of(
    sts: &[&dyn Storage],
    g: &Geometry,
    t: usize,
    (score, arrival): (i64, u64),
) -> Result<u64> {
    let offset = offset_of(sts[t], g, score)?;
    let mut position = 1 + above(sts, g, offset)?;
    for (j, st) in sts.iter().enumerate() {
        position += arrivals_below(*st, g, score, tie_bound(j, t, arrival))?;
    }
    Ok(position)
}

/// The players of tree `j` at a score who come before the player of tree
/// `t` there with `arrival` are those whose arrival is below this bound:
/// tree `j`'s players tied with an equal arrival come first if `j < t`.
pub(super) fn tie_bound(j: usize, t: usize, arrival: u64) -> u64 {
    match concatenate_ties() {
        false => arrival.saturating_add(u64::from(j < t)),
        true if j < t => u64::MAX,
        true if j > t => 0,
        true => arrival,
    }
}

/// Which score holds ordinal `position` across the trees.
pub(super) struct Located {
    /// The tree score.
    pub score: i64,
    /// Players above it, in all trees.
    pub above: u64,
    /// 0-based place among the players at `score`, by `(arrival, tree)`.
    pub within: u64,
}

/// The score holding ordinal `position` (1-based), `None` past the end:
/// `query::locate` over the sum of the trees' nodes. Reads: `k` nodes per
/// height.
pub(super) fn locate(sts: &[&dyn Storage], g: &Geometry, position: u64) -> Result<Option<Located>> {
    if position == 0 {
        return Ok(None);
    }
    let (mut a, mut b, mut sum) = (vec![0; g.b()], vec![0; g.b()], vec![0i128; g.b()]);
    let (mut remaining, mut above) = (i128::from(position), 0i128);
    let mut idx = 0u64;
    for h in (1..=g.depth()).rev() {
        sum.fill(0);
        for st in sts {
            query::node_sums(*st, g, h, idx, &mut a, &mut b)?;
            sum.iter_mut().zip(&a).for_each(|(s, x)| *s += x);
        }
        // Children from the highest scores down.
        let Some(c) = (0..g.b()).rev().find(|&c| {
            if remaining <= sum[c] {
                return true;
            }
            remaining -= sum[c];
            above += sum[c];
            false
        }) else {
            return Ok(None);
        };
        let next = u128::from(idx) * u128::from(g.branching()) + c as u128;
        if next >= g.nodes_at(h - 1) {
            return Err(sts[0].corrupt(
                format!("score-tree node (height {h}, idx {idx})"),
                format!("count under child {c}, past the score range"),
            ));
        }
        if h == 1 {
            // Sums of counts each below 2^63 in at most 64 trees: these fit.
            return Ok(Some(Located {
                score: g.score(next as u64),
                above: above as u64,
                within: (remaining - 1) as u64,
            }));
        }
        idx = next as u64;
    }
    unreachable!("the loop returns at height 1")
}

/// Players' arrivals, for merging `(player, score)` lists of tree `t`.
fn with_arrivals(st: &dyn Storage, t: usize, found: Vec<(String, i64)>) -> Result<Vec<Found>> {
    found
        .into_iter()
        .map(|(player, score)| {
            let (_, arrival) = st.player(&player)?.ok_or_else(|| {
                st.corrupt(
                    format!("player {player:?}"),
                    "listed in the ranking index, but has no row".into(),
                )
            })?;
            Ok((score, arrival, t, player))
        })
        .collect()
}

/// Entries at ordinal positions `from..=to` (`1 <= from <= to`), each with
/// its tree, scores still tree scores. Reads: `k` nodes per height, the
/// dense rank of the first score (`dense.rs`), and from each tree the
/// players tied at the first score up to the page's end (`within + page`
/// rows, each with its player row for the arrival) and up to a page of
/// lower ones.
pub(super) fn page(
    sts: &[&dyn Storage],
    g: &Geometry,
    from: u64,
    to: u64,
) -> Result<Vec<(Entry, usize)>> {
    let Some(first) = locate(sts, g, from)? else {
        return Ok(Vec::new());
    };
    let want = to - from + 1;
    let mut tied = Vec::new();
    for (t, st) in sts.iter().enumerate() {
        let mut found = Vec::new();
        st.entries_at(
            first.score,
            0,
            first.within.saturating_add(want),
            &mut found,
        )?;
        tied.extend(with_arrivals(*st, t, found)?);
    }
    sort(&mut tied);
    let mut found: Vec<Found> = tied
        .into_iter()
        .skip(first.within as usize)
        .take(want as usize)
        .collect();
    let got = found.len() as u64;
    if got < want {
        let mut lower = Vec::new();
        for (t, st) in sts.iter().enumerate() {
            let mut below = Vec::new();
            st.entries_below(first.score, want - got, &mut below)?;
            lower.extend(with_arrivals(*st, t, below)?);
        }
        sort(&mut lower);
        found.extend(lower.into_iter().take((want - got) as usize));
    }
    let dense = dense::distinct_above(sts, g, offset_of(sts[0], g, first.score)?)?;
    Ok(ranked(found, from, first.above, dense))
}

/// The entries of `found`, the players at ordinal positions `from..` in
/// order, with their ranks: `above` players and `dense` distinct scores
/// better than the first one's.
pub(super) fn ranked(found: Vec<Found>, from: u64, above: u64, dense: u64) -> Vec<(Entry, usize)> {
    let Some(&(mut previous, ..)) = found.first() else {
        return Vec::new();
    };
    let (mut rank, mut dense) = (above + 1, dense + 1);
    found
        .into_iter()
        .zip(from..)
        .map(|((score, _, t, player), position)| {
            if score != previous {
                rank = position;
                dense += 1;
                previous = score;
            }
            let entry = Entry {
                player,
                score,
                rank,
                dense,
                position,
                data: None,
            };
            (entry, t)
        })
        .collect()
}

//! Dense ranks across trees: distinct scores held in any tree.
//!
//! A tree's inner nodes count its distinct scores per child, but the
//! distinct scores of a union are not the sum of the trees' (a score held
//! in two trees counts once), and no per-tree count says which scores two
//! trees share. So the union is counted by descending the trees together,
//! right of the path of the score: a child held by players of one tree
//! only counts that tree's distinct scores (one read, already made); a
//! child every score of which some tree holds counts its width; only a
//! child where two or more trees hold players, with gaps, is descended
//! into, reading its node in those trees.
//!
//! Cost: `k` nodes per height when the trees' scores do not interleave
//! (the best case, O(k log n)); in the worst case, every node above the
//! score in every tree that shares its subtree with another: a dense rank
//! near the bottom of a board whose trees interleave everywhere (random
//! players, sparse scores) reads about `k * (distinct scores above) / B`
//! leaves. A top-of-board dense rank stays cheap. The measured cost is in
//! docs/design/sharded-trees.md, "Sharded trees".

use super::super::query;
use super::super::storage::Storage;
use super::super::tree::{self, Geometry};
use crate::error::Result;

/// A node of each tree: players (`a`) and distinct scores (`b`; arrival
/// counters at a leaf) per child, zeros where the tree holds nothing.
type Nodes = Vec<(Vec<i128>, Vec<i128>)>;

fn read_nodes(
    sts: &[&dyn Storage],
    g: &Geometry,
    h: u32,
    idx: u64,
    only: &[bool],
) -> Result<Nodes> {
    sts.iter()
        .zip(only)
        .map(|(st, &read)| {
            let (mut a, mut b) = (vec![0; g.b()], vec![0; g.b()]);
            if read {
                query::node_sums(*st, g, h, idx, &mut a, &mut b)?;
            }
            Ok((a, b))
        })
        .collect()
}

/// Distinct (tree) scores better than the score at `offset`, held by a
/// player of any tree.
pub(super) fn distinct_above(sts: &[&dyn Storage], g: &Geometry, offset: u64) -> Result<u64> {
    let all = vec![true; sts.len()];
    let mut total = 0i128;
    for h in (1..=g.depth()).rev() {
        let idx = g.node(offset, h);
        let nodes = read_nodes(sts, g, h, idx, &all)?;
        for c in g.child(offset, h) + 1..g.b() {
            total += union_under(sts, g, &nodes, (h, idx), c)?;
        }
    }
    // At most 2^64 scores: fits.
    Ok(total as u64)
}

/// Distinct scores under child `c` of node `(h, idx)`, held in any tree.
fn union_under(
    sts: &[&dyn Storage],
    g: &Geometry,
    nodes: &Nodes,
    (h, idx): (u32, u64),
    c: usize,
) -> Result<i128> {
    let present: Vec<bool> = nodes.iter().map(|(a, _)| a[c] > 0).collect();
    let holders = present.iter().filter(|&&p| p).count();
    if h == 1 {
        // A leaf's child is one score.
        return Ok(i128::from(holders > 0));
    }
    let most = nodes.iter().map(|(_, b)| b[c]).max().unwrap_or(0);
    if holders <= 1 || most as u128 == tree::pow(g.branching(), h - 1) {
        // One tree alone, or one tree holding every score there.
        return Ok(match holders {
            0 => 0,
            _ => most,
        });
    }
    let child = u128::from(idx) * u128::from(g.branching()) + c as u128;
    if child >= g.nodes_at(h - 1) {
        return Err(sts[0].corrupt(
            format!("score-tree node (height {h}, idx {idx})"),
            format!("count under child {c}, past the score range"),
        ));
    }
    let below = read_nodes(sts, g, h - 1, child as u64, &present)?;
    let mut total = 0;
    for c in 0..g.b() {
        total += union_under(sts, g, &below, (h - 1, child as u64), c)?;
    }
    Ok(total)
}

//! `check_integrity`: recomputes every tree node from the player table and
//! compares it with what is stored.
//!
//! Both sides are streamed in key order and merged, so memory is the player
//! list (16 bytes a player) plus one node, however many nodes there are.
//!
//! Checked: every player's score is in range and `(score, arrival)` is
//! unique; every score-tree node's shard sum equals the recount (players and
//! distinct scores per child), so no count is negative and the root total is
//! the number of players; leaves live in shard 0 only and every shard index
//! is below the board's shard count; a score's arrival counter is 0 exactly
//! when nobody holds it and otherwise above every arrival there; each arrival
//! tree matches its players; no stored row is all zeros.

use super::storage::{self, Part, Storage};
use super::tree::{self, Geometry};
use crate::error::Result;
use std::iter::Peekable;

/// A node as recomputed from the players.
struct Expected {
    key: (u32, u64),
    a: Vec<i64>,
    /// Inner nodes: distinct scores per child. Leaves: the smallest valid
    /// arrival counter per score (highest arrival + 1).
    b: Vec<i64>,
}

pub(crate) fn check(st: &dyn Storage, g: &Geometry, shards: u32) -> Result<()> {
    let mut players = Vec::new();
    st.scan_players(&mut |score, arrival| {
        players.push((score, arrival));
        Ok(())
    })?;
    players.sort_unstable();
    if let Some(w) = players.windows(2).find(|w| w[0] == w[1]) {
        return Err(st.corrupt(
            format!("players at score {}", w[0].0),
            format!("two share arrival {}", w[0].1),
        ));
    }
    if let Some(&(score, _)) = players.iter().find(|(s, _)| g.offset(*s).is_none()) {
        return Err(st.corrupt(
            format!("player score {score}"),
            "outside the board's range".into(),
        ));
    }
    // A score's counter (an `i64`) must exceed every arrival held there.
    if let Some(&(score, arrival)) = players.iter().find(|p| p.1 >= i64::MAX as u64) {
        return Err(st.corrupt(
            format!("players at score {score}"),
            format!("arrival {arrival} leaves no room for the arrival counter"),
        ));
    }
    let counters = check_score_tree(st, g, shards, &players)?;
    check_arrival_trees(st, g, &players, &counters)
}

/// Score-tree nodes recomputed from `players` (sorted), by `(height, idx)`.
fn expected_score_nodes<'p>(
    g: &'p Geometry,
    players: &'p [(i64, u64)],
) -> impl Iterator<Item = Expected> + 'p {
    let offset = move |score: i64| g.offset(score).expect("checked in range");
    (1..=g.depth()).flat_map(move |h| {
        players
            .chunk_by(move |x, y| g.node(offset(x.0), h) == g.node(offset(y.0), h))
            .map(move |chunk| {
                let mut node = Expected {
                    key: (h, g.node(offset(chunk[0].0), h)),
                    a: vec![0; g.b()],
                    b: vec![0; g.b()],
                };
                let mut previous = None;
                for &(score, arrival) in chunk {
                    let c = g.child(offset(score), h);
                    node.a[c] += 1;
                    if h == 1 {
                        node.b[c] = node.b[c].max(arrival as i64 + 1);
                    } else if previous != Some(score) {
                        node.b[c] += 1;
                    }
                    previous = Some(score);
                }
                node
            })
    })
}

/// Compares the stored score tree with the recount; returns each held
/// score's stored arrival counter, by score.
fn check_score_tree(
    st: &dyn Storage,
    g: &Geometry,
    shards: u32,
    players: &[(i64, u64)],
) -> Result<Vec<(i64, u64)>> {
    let b = g.b();
    let mut expected = expected_score_nodes(g, players).peekable();
    let mut counters = Vec::new();
    // The node being summed: key, part A sums, part B sums.
    type Group = ((u32, u64), Vec<i128>, Vec<i128>);
    let mut group: Option<Group> = None;
    let name = score_node_name;

    st.scan_nodes(&mut |key, part, shard, v| {
        if !storage::well_formed(v, b) || shard >= shards || (key.0 == 1 && shard != 0) {
            return Err(st.corrupt(
                name(key),
                format!("malformed or misplaced shard row {shard}"),
            ));
        }
        if all_zero(v) {
            return Err(st.corrupt(name(key), format!("shard row {shard} is stored all zero")));
        }
        if group.as_ref().is_some_and(|(k, ..)| *k != key) {
            let (k, a, bv) = group.take().expect("checked");
            finish_node(st, g, k, &a, &bv, &mut expected, &mut counters)?;
        }
        let (_, a, bv) = group.get_or_insert_with(|| (key, vec![0; b], vec![0; b]));
        let sums = match part {
            Part::A => a,
            Part::B => bv,
        };
        for (slot, x) in sums.iter_mut().zip(storage::entries(v)) {
            *slot += i128::from(x);
        }
        Ok(())
    })?;
    if let Some((k, a, bv)) = group.take() {
        finish_node(st, g, k, &a, &bv, &mut expected, &mut counters)?;
    }
    if let Some(missing) = expected.next() {
        return Err(st.corrupt(
            name(missing.key),
            "missing, yet players are under it".into(),
        ));
    }
    Ok(counters)
}

/// Whether a (well-formed) vector holds no nonzero entry: empty, or
/// explicit zeros a writer should have trimmed and deleted.
fn all_zero(v: &[u8]) -> bool {
    storage::entries(v).all(|x| x == 0)
}

fn score_node_name((h, idx): (u32, u64)) -> String {
    format!("score-tree node (height {h}, idx {idx})")
}

/// Compares one stored node (its shard rows summed) with the recount.
fn finish_node(
    st: &dyn Storage,
    g: &Geometry,
    key: (u32, u64),
    a: &[i128],
    bv: &[i128],
    expected: &mut Peekable<impl Iterator<Item = Expected>>,
    counters: &mut Vec<(i64, u64)>,
) -> Result<()> {
    let (b, name) = (g.b(), score_node_name);
    let (h, idx) = key;
    if !(1..=g.depth()).contains(&h) || u128::from(idx) >= g.nodes_at(h) {
        return Err(st.corrupt(name(key), "outside the tree".into()));
    }
    if let Some(bad) = a.iter().chain(bv).find(|&&x| x < 0) {
        return Err(st.corrupt(name(key), format!("negative count {bad}")));
    }
    skip_missing(st, expected, key, |e: &Expected| e.key, name)?;
    let zero = (vec![0; b], vec![0; b]);
    let (ea, eb) = match expected.next_if(|e: &Expected| e.key == key) {
        Some(e) => (e.a, e.b),
        None => zero,
    };
    for c in 0..b {
        if a[c] != i128::from(ea[c]) {
            return Err(st.corrupt(
                name(key),
                format!(
                    "child {c} counts {} players, the player table {}",
                    a[c], ea[c]
                ),
            ));
        }
        if h > 1 && bv[c] != i128::from(eb[c]) {
            return Err(st.corrupt(
                name(key),
                format!(
                    "child {c} counts {} scores, the player table {}",
                    bv[c], eb[c]
                ),
            ));
        }
        if h == 1 {
            let counter_ok = if ea[c] == 0 {
                bv[c] == 0
            } else {
                bv[c] >= i128::from(eb[c]) && bv[c] <= i128::from(i64::MAX)
            };
            if !counter_ok {
                let reason = if ea[c] == 0 {
                    format!(
                        "child {c}: arrival counter {} at a score nobody holds",
                        bv[c]
                    )
                } else {
                    format!(
                        "child {c}: arrival counter {} for {} players, highest arrival {}",
                        bv[c],
                        ea[c],
                        eb[c] - 1
                    )
                };
                return Err(st.corrupt(name(key), reason));
            }
            if ea[c] > 0 {
                let offset = tree::child_start(g.branching(), idx, 1, c) as u64;
                counters.push((g.score(offset), bv[c] as u64));
            }
        }
    }
    Ok(())
}

/// Fails if the next expected node sorts before `key`: it is not stored.
fn skip_missing<E, K: Ord + Copy>(
    st: &dyn Storage,
    expected: &mut Peekable<impl Iterator<Item = E>>,
    key: K,
    key_of: impl Fn(&E) -> K,
    name: impl Fn(K) -> String,
) -> Result<()> {
    match expected.peek() {
        Some(e) if key_of(e) < key => {
            Err(st.corrupt(name(key_of(e)), "missing, yet players are under it".into()))
        }
        _ => Ok(()),
    }
}

/// Arrival-tree nodes recomputed from `players`, by `(score, height, idx)`.
fn expected_arrival_nodes<'p>(
    g: &'p Geometry,
    players: &'p [(i64, u64)],
    counters: &'p [(i64, u64)],
) -> impl Iterator<Item = (i64, Expected)> + 'p {
    let bf = g.branching();
    players.chunk_by(|x, y| x.0 == y.0).zip(counters).flat_map(
        move |(at_score, &(score, counter))| {
            debug_assert_eq!(at_score[0].0, score);
            (1..=tree::height_for(bf, counter)).flat_map(move |h| {
                at_score
                    .chunk_by(move |x, y| tree::node(bf, x.1, h) == tree::node(bf, y.1, h))
                    .map(move |chunk| {
                        let mut a = vec![0; g.b()];
                        for &(_, arrival) in chunk {
                            a[tree::child(bf, arrival, h)] += 1;
                        }
                        let key = (h, tree::node(bf, chunk[0].1, h));
                        (
                            score,
                            Expected {
                                key,
                                a,
                                b: Vec::new(),
                            },
                        )
                    })
            })
        },
    )
}

fn check_arrival_trees(
    st: &dyn Storage,
    g: &Geometry,
    players: &[(i64, u64)],
    counters: &[(i64, u64)],
) -> Result<()> {
    let mut expected = expected_arrival_nodes(g, players, counters).peekable();
    let name = |(score, h, idx): (i64, u32, u64)| {
        format!("arrival node (score {score}, height {h}, idx {idx})")
    };
    let mut stored = vec![0; g.b()];
    st.scan_arrival_nodes(&mut |score, h, idx, va| {
        let key = (score, h, idx);
        if !storage::well_formed(va, g.b()) || all_zero(va) {
            return Err(st.corrupt(name(key), "malformed or stored all zero".into()));
        }
        let key_of = |(s, e): &(i64, Expected)| (*s, e.key.0, e.key.1);
        skip_missing(st, &mut expected, key, key_of, name)?;
        let Some((_, e)) = expected.next_if(|x| key_of(x) == key) else {
            return Err(st.corrupt(
                name(key),
                "counts players the player table does not have".into(),
            ));
        };
        stored.fill(0);
        storage::add_into(va, &mut stored).expect("zeros plus values");
        if stored != e.a {
            return Err(st.corrupt(
                name(key),
                format!("counts {stored:?}, the player table {:?}", e.a),
            ));
        }
        Ok(())
    })?;
    if let Some((score, e)) = expected.next() {
        return Err(st.corrupt(
            name((score, e.key.0, e.key.1)),
            "missing, yet players are under it".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

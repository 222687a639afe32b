//! Ranks among an explicit set of players: Strava's "following" and club
//! boards, a friends list. The set is the caller's, so it has no board of
//! its own and no tree: its members' stored scores are read in one read
//! transaction (one statement where the store can) and ordered in memory,
//! which for a few thousand players costs less than any count the tree
//! could give (each count is a root-to-leaf walk per member).

use super::storage::Storage;
use super::tree::Geometry;
use super::Entry;
use crate::error::Result;

/// Most players [`Ranking::among`](super::Ranking::among) ranks in one call.
pub const MAX_AMONG: usize = 10_000;

/// The stored places of `names` in the tree `t` read by `st`: tree scores,
/// arrivals and the tree, as the split board's merge orders them.
pub(in crate::ranking) fn found_in(
    st: &dyn Storage,
    g: &Geometry,
    t: usize,
    names: &[&str],
) -> Result<Vec<Found>> {
    let mut found = Vec::with_capacity(names.len());
    st.players(names, &mut |player, score, arrival| {
        if g.offset(score).is_none() {
            return Err(st.corrupt(
                format!("player {player:?}"),
                format!("score {score} is outside the board's range"),
            ));
        }
        found.push((score, arrival, t, player.to_owned()));
        Ok(())
    })?;
    Ok(found)
}

/// Ranks a set's places among themselves, in the one order every query
/// uses (better tree score first, then who reached it first, then the
/// tree): entries with tree scores and no data yet, each with its tree.
pub(in crate::ranking) fn rank_set(found: &mut [Found]) -> Vec<(Entry, usize)> {
    sort(found);
    let mut entries: Vec<(Entry, usize)> = Vec::with_capacity(found.len());
    let (mut rank, mut dense) = (0, 0);
    for (i, (score, _, t, player)) in found.iter_mut().enumerate() {
        let position = i as u64 + 1;
        if entries.last().is_none_or(|(e, _)| e.score != *score) {
            (rank, dense) = (position, dense + 1);
        }
        let entry = Entry {
            player: std::mem::take(player),
            score: *score,
            rank,
            dense,
            position,
            data: None,
        };
        entries.push((entry, *t));
    }
    entries
}

#[cfg(feature = "failpoints")]
thread_local! {
    /// The control of the oracle tests (`tests/suites/stores_ranking_trees.rs`):
    /// ties ordered tree after tree, the merge that ignores who reached the
    /// score first. Per thread, so only the control's queries break.
    pub(crate) static CONCATENATE_TIES: std::cell::Cell<bool> =
        const { std::cell::Cell::new(false) };
}

/// See `CONCATENATE_TIES`.
#[cfg(feature = "failpoints")]
pub(in crate::ranking) fn concatenate_ties() -> bool {
    CONCATENATE_TIES.get()
}

/// Without `failpoints`, ties always merge by arrival.
#[cfg(not(feature = "failpoints"))]
pub(in crate::ranking) fn concatenate_ties() -> bool {
    false
}

/// One player as a merge sees it: `(tree score, arrival, tree, name)`.
pub(in crate::ranking) type Found = (i64, u64, usize, String);

/// Ranking order across trees: better (higher tree) score first, then
/// `(arrival, tree)` (a board of one tree has tree 0 only).
pub(in crate::ranking) fn sort(found: &mut [Found]) {
    if concatenate_ties() {
        found.sort_unstable_by(|x, y| y.0.cmp(&x.0).then((x.2, x.1).cmp(&(y.2, y.1))));
        return;
    }
    found.sort_unstable_by(|x, y| y.0.cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
}

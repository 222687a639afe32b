//! Updates on an approximate board: player rows only, no tree.

use super::super::policy::{Refused, Rules, Step};
use super::super::storage::Storage;
use super::super::tree::Geometry;
use crate::error::Result;
use std::collections::HashMap;

/// An arrival for ties: the writer's clock in nanoseconds (below `2^63`
/// until the year 2262), plus the update's index in its batch, so later
/// changes rank behind earlier ones at the same score. Clocks of different
/// writers are not ordered exactly, so on an approximate board
/// "first to reach the score ranks higher" holds up to clock skew.
fn clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        & (i64::MAX as u64 >> 1)
}

/// `policy::apply_updates` for an approximate board: the same net effect
/// per player (values taken in order under the policy; a player whose final
/// score is the one they had keeps their row untouched), written as player
/// rows only.
pub(crate) fn apply_updates(
    st: &dyn Storage,
    g: &Geometry,
    rules: Rules,
    updates: &[(&str, Option<i64>)],
    mut refused: Option<&mut Refused>,
) -> Result<Vec<Step>> {
    let players: Vec<&str> = updates.iter().map(|&(player, _)| player).collect();
    st.lock_players(&players)?;
    // Per player: (stored tree score, index of the last change, final).
    let mut net: HashMap<&str, (Option<i64>, usize, Option<i64>)> = HashMap::new();
    // Read (and below, write) in key order: neighbouring keys share b-tree
    // pages, which a big random batch then reads and dirties once each.
    let mut sorted = players.clone();
    sorted.sort_unstable();
    sorted.dedup();
    for player in sorted {
        let stored = st.player(player)?.map(|(score, _)| score);
        net.insert(player, (stored, usize::MAX, stored));
    }
    let mut steps = Vec::with_capacity(updates.len());
    for (i, &(player, value)) in updates.iter().enumerate() {
        let current = net.get(player).expect("read above").2;
        let next = match value {
            None => Ok(None),
            Some(value) => {
                if let Some(c) = current.filter(|&c| g.offset(c).is_none()) {
                    rules.checked_score(st, g, c)?;
                }
                rules.next(g, current, value).map(Some)
            }
        };
        let next = match (next, refused.as_deref_mut()) {
            (Ok(next), _) => next,
            (Err(e), Some(refused)) => {
                refused.push((i, e));
                current
            }
            (Err(e), None) => return Err(e),
        };
        steps.push(Step {
            before: current,
            after: next,
        });
        if current != next {
            let entry = net.get_mut(player).expect("inserted above");
            (entry.1, entry.2) = (i, next);
        }
    }
    let base = clock();
    let mut moves: Vec<_> = net.into_iter().collect();
    moves.sort_unstable_by_key(|&(player, _)| player);
    for (player, (stored, i, score)) in moves {
        match score {
            _ if score == stored => {}
            Some(score) => st.put_player(player, score, base + i as u64)?,
            None => st.delete_player(player)?,
        }
    }
    Ok(steps)
}

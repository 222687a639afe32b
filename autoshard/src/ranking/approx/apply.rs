//! Updates on an approximate board: player rows only, no tree.

use super::super::apply::{net_effect, Refused, Step};
use super::super::policy::Rules;
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

/// `apply::apply_updates` for an approximate board: the same net effect
/// per player (values taken in order under the policy; a player whose final
/// score is the one they had keeps their row untouched), written as player
/// rows only.
pub(crate) fn apply_updates(
    st: &dyn Storage,
    g: &Geometry,
    rules: Rules,
    updates: &[(&str, Option<i64>)],
    refused: Option<&mut Refused>,
) -> Result<Vec<Step>> {
    let players: Vec<&str> = updates.iter().map(|&(player, _)| player).collect();
    st.lock_players(&players)?;
    // Read (and below, write) in key order: neighbouring keys share b-tree
    // pages, which a big random batch then reads and dirties once each.
    let mut sorted = players.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let mut stored: HashMap<&str, Option<i64>> = HashMap::with_capacity(sorted.len());
    for &player in &sorted {
        stored.insert(player, st.player(player)?.map(|(score, _)| score));
    }
    let (steps, net) = net_effect(st, g, rules, updates, |p| Ok(stored[p]), refused)?;
    let base = clock();
    for player in sorted {
        let Some(&(i, score)) = net.get(player) else {
            continue;
        };
        match score {
            _ if score == stored[player] => {}
            Some(score) => st.put_player(player, score, base + i as u64)?,
            None => st.delete_player(player)?,
        }
    }
    Ok(steps)
}

//! Boards a store orders natively (`seam::NativeBoard`): the write plan
//! the tree's batches use (policy, net effect), handed to the store as
//! player moves, and the exact reads answered by the store's own order
//! statistics, one call each. `apply/` and `read.rs` come here when the
//! transaction's storage has a native board; nothing else changes for
//! the callers (queue drain, entry data, dead letters, reset).

use super::apply::{net_effect, Refused, Step};
use super::policy::Rules;
use super::storage::Storage;
use super::tree::Geometry;
use super::{Entry, Tie};
use crate::error::Result;
use crate::seam::{NativeBoard, NativeEntry, RankKind};
use std::collections::HashMap;

/// [`apply_updates_from`](super::apply::apply_updates_from) on a native
/// board: the same plan (`net_effect`), from the players' rows read in one
/// call; each player whose final score differs from the stored one moves
/// once, in the order of their last change (so players arriving at one
/// score are ordered as the batch orders them), with an arrival of at
/// least `floor` of that change's index (a tree of a split board); a
/// player back at their stored score keeps their place.
pub(crate) fn apply(
    st: &dyn Storage,
    native: &dyn NativeBoard,
    g: &Geometry,
    rules: Rules,
    updates: &[(&str, Option<i64>)],
    refused: Option<&mut Refused>,
    floor: &dyn Fn(usize) -> u64,
) -> Result<Vec<Step>> {
    let mut names: Vec<&str> = updates.iter().map(|&(player, _)| player).collect();
    names.sort_unstable();
    names.dedup();
    let mut stored: HashMap<String, (i64, u64)> = HashMap::with_capacity(names.len());
    st.players(&names, &mut |player, score, arrival| {
        stored.insert(player.to_owned(), (score, arrival));
        Ok(())
    })?;
    let (steps, net) = net_effect(
        st,
        g,
        rules,
        updates,
        |p| Ok(stored.get(p).map(|&(score, _)| score)),
        refused,
    )?;
    let mut moves: Vec<_> = net.into_iter().collect();
    moves.sort_unstable_by_key(|&(_, (i, _))| i);
    for (player, (i, to)) in moves {
        let from = stored.get(player).copied();
        if from.map(|(score, _)| score) != to {
            native.place(player, from, to, floor(i))?;
        }
    }
    Ok(steps)
}

/// `player`'s rank under `tie`.
pub(super) fn rank(native: &dyn NativeBoard, player: &str, tie: Tie) -> Result<Option<u64>> {
    let kind = match tie {
        Tie::Standard => RankKind::Standard,
        Tie::Dense => RankKind::Dense,
        Tie::Ordinal => RankKind::Ordinal,
    };
    native.rank_of(player, kind)
}

/// The store's entries as the ranking's, tree scores and no data yet (as
/// `query::page` finds them).
pub(super) fn entries(found: Vec<NativeEntry>) -> Vec<Entry> {
    found
        .into_iter()
        .map(|e| Entry {
            player: e.player,
            score: e.score,
            rank: e.rank,
            dense: e.dense,
            position: e.position,
            data: None,
        })
        .collect()
}

/// The standard ranks a submission reports, from counts of the state
/// before it (the store's reads do not see the transaction's own move):
/// the old rank as it was, the new one once the player left `before`.
pub(super) fn submission_ranks(
    native: &dyn NativeBoard,
    before: Option<i64>,
    after: i64,
) -> Result<(Option<u64>, u64)> {
    let scores: Vec<i64> = [Some(after), before].into_iter().flatten().collect();
    let above = native.above_each(&scores)?;
    let [above_new, ..] = above[..] else {
        return Err(crate::Error::SchemaMismatch {
            kind: "ranking".into(),
            reason: format!("{} counts for {} scores", above.len(), scores.len()),
        });
    };
    // Counted among the players above `after` while still at a better
    // `before`; not once moved.
    let new_rank = above_new - u64::from(before.is_some_and(|b| b > after)) + 1;
    let old_rank = above.get(1).map(|n| n + 1);
    Ok((old_rank, new_rank))
}

//! Applying score updates: a batch is applied by its net effect, read
//! once into an in-memory overlay and written once (job aggregation: a
//! batch of 1,000 updates near the same scores writes the root once, not
//! 1,000 times). Direct writes, `submit`, the queue's drain, families and
//! entity boards all apply their updates here.
//!
//! The steps, one file each: `plan.rs` takes the batch's values in order
//! under the board's policy to each player's net move; `batch.rs` applies
//! the moves in the overlay, reading every node they touch once; `flush.rs`
//! writes each changed row once at the end. This file runs them, and
//! stores the entry data the batch's updates came with.

mod batch;
mod flush;
mod plan;
#[cfg(test)]
mod tests;

use self::batch::Batch;

/// The hash map of the apply's overlay and the worker's cache: one entry per
/// player and row a batch touches, so hashing is on the worker's hot path.
/// foldhash, seeded per process (keys are player names a client chose), is
/// several times cheaper than std's SipHash there.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub(crate) use self::plan::{net_effect, Refused, Step};
use super::policy::{Policy, Rules};
use super::storage::Storage;
use super::tree::Geometry;
use crate::error::{Error, Result};
use crate::seam::Prefetch;

/// Stores the entry data submitted with a batch's updates (`data`, one per
/// update, `None` for none) that the entries now stand for: always under
/// `Replace` and `Increment`, under `Best` and `Worst` only when the update
/// changed the score (a slower effort leaves the record's data); never for
/// a refused update. Per player the last such data wins; a removal drops
/// the data before it, also when a later score of the batch brings the
/// player back (the batch's net effect rewrites the row, not its data).
pub(crate) fn store_entry_data<'a>(
    st: &dyn Storage,
    rules: Rules,
    updates: &[(&str, Option<i64>)],
    data: impl IntoIterator<Item = Option<&'a [u8]>>,
    steps: &[Step],
    refused: &[(usize, Error)],
) -> Result<()> {
    use std::collections::HashMap;
    // Per player: the data to store, or `None` to clear it (a removal).
    let mut latest: HashMap<&str, Option<&[u8]>> = HashMap::new();
    for (i, ((&(player, value), data), step)) in updates.iter().zip(data).zip(steps).enumerate() {
        if refused.iter().any(|&(r, _)| r == i) {
            continue;
        }
        let taken = match rules.policy {
            Policy::Replace | Policy::Increment => true,
            Policy::Best | Policy::Worst => step.after != step.before,
        };
        match (value, data) {
            (None, _) => {
                latest.insert(player, None);
            }
            (Some(_), Some(data)) if taken => {
                latest.insert(player, Some(data));
            }
            (Some(_), _) => {}
        }
    }
    for (i, &(player, value)) in updates.iter().enumerate().rev() {
        let Some(data) = latest.remove(player) else {
            continue;
        };
        // The player's last update of the batch says whether they are on
        // the board; a removed player's row (and data) is gone already.
        if value.is_some() && steps[i].after.is_some() {
            st.put_player_data(player, data)?;
        }
    }
    Ok(())
}

/// Applies validated updates (`None`: a removal) as one batch under
/// `rules`; each update's tree scores before and after it.
///
/// A batch is applied by its net effect, which is what a reader (who never
/// sees inside a batch) can tell apart: the values are taken in order under
/// the policy (so increments of one player add up), each player ends where
/// the last of their updates left them; a player whose final score is the
/// one they had before the batch keeps their place among ties, even if
/// they left it in between; and players who arrive at a score are ordered
/// by their last change in the slice. This makes re-applying a batch of
/// absolute scores a no-op, place among ties included.
///
/// An update the policy refuses (an increment past the range) fails the
/// whole batch before anything is written, or, with `refused`, is listed
/// there and skipped.
#[cfg_attr(not(test), allow(dead_code))] // callers without a floor: tests
pub(crate) fn apply_updates(
    st: &dyn Storage,
    g: &Geometry,
    rules: Rules,
    shard: u32,
    updates: &[(&str, Option<i64>)],
    refused: Option<&mut Refused>,
) -> Result<Vec<Step>> {
    apply_updates_from(st, g, rules, shard, updates, refused, &|_| 0)
}

/// [`apply_updates`] where the player whose last change is update `i`
/// arrives with an arrival number of at least `floor(i)`
/// (`Batch::arrivals_from`; 0 leaves it to the score's counter): a tree of
/// a split board hands out board-wide numbers (`trees/arrival.rs`).
pub(crate) fn apply_updates_from(
    st: &dyn Storage,
    g: &Geometry,
    rules: Rules,
    shard: u32,
    updates: &[(&str, Option<i64>)],
    refused: Option<&mut Refused>,
    floor: &dyn Fn(usize) -> u64,
) -> Result<Vec<Step>> {
    if rules.approx {
        return super::shape::approx_apply(st, g, rules, updates, refused);
    }
    // A board the store orders natively has no tree to write.
    if let Some(native) = st.native() {
        return super::native::apply(st, native, g, rules, updates, refused, floor);
    }
    let mut batch = Batch::new(st, g, shard);
    let players: Vec<&str> = updates.iter().map(|&(player, _)| player).collect();
    st.lock_players(&players)?;
    let prefetch = Prefetch {
        players: &players,
        shard,
        ..Prefetch::default()
    };
    st.prefetch(&prefetch)?;
    let (steps, net) = net_effect(st, g, rules, updates, |p| batch.stored_score(p), refused)?;
    let mut moves: Vec<_> = net.into_iter().collect();
    moves.sort_unstable_by_key(|&(_, (i, _))| i);
    // A move changes the leaves of the score it leaves and of the one it
    // reaches, nothing else it must read exactly. Out-of-range stored
    // scores are reported as corruption by the update itself.
    let (mut leaves, mut inner, mut scores) = (Vec::new(), Vec::new(), Vec::new());
    for &(player, (_, score)) in &moves {
        for s in [batch.stored_score(player)?, score].into_iter().flatten() {
            let Some(offset) = g.offset(s) else { continue };
            leaves.push(g.node(offset, 1));
            inner.extend((2..=g.depth()).map(|h| (h, g.node(offset, h))));
            scores.push(s);
        }
    }
    st.lock_leaves(&leaves)?;
    // Alone, a batch folds every shard row of the inner nodes it changes
    // into its own: readers then sum one row per node where they summed
    // up to `shards` (the worker's batches hold a PostgreSQL board alone).
    let fold = if st.writes_alone() { rules.shards } else { 0 };
    batch.fold_shards(fold);
    leaves.sort_unstable();
    leaves.dedup();
    inner.sort_unstable();
    inner.dedup();
    scores.sort_unstable();
    scores.dedup();
    let prefetch = Prefetch {
        leaves: &leaves,
        inner: &inner,
        shard,
        fold,
        scores: &scores,
        ..Prefetch::default()
    };
    st.prefetch(&prefetch)?;
    for (player, (i, score)) in moves {
        batch.arrivals_from(floor(i));
        batch.update(player, score)?;
    }
    batch.flush()?;
    st.flush_writes()?;
    Ok(steps)
}

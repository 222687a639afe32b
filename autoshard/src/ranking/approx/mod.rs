//! Approximate boards (the Code Jam article's "Buckets with Global Query"):
//! an update writes only the player's row; a background
//! [`refresh`](Ranking::refresh) summarizes the score index into buckets
//! and publishes them as a snapshot; [`approx_rank`](Ranking::approx_rank)
//! interpolates inside the bucket holding a score. docs/design/approximate-boards.md
//! ("Approximate boards") has the data model, the snapshot protocol and
//! the measured error.

mod apply;
pub(in crate::ranking) mod refresh;
mod shape;
mod snapshot;

pub(crate) use self::apply::apply_updates;
#[cfg(feature = "failpoints")]
pub(crate) use self::refresh::hooks;
pub use self::refresh::{Refresh, Refresher, RefresherHandle, RefresherStats};
pub(super) use self::shape::SHAPE;
pub use self::snapshot::{ApproxBucket, ApproxSnapshot};

use super::{Entry, Ranking, MAX_BUCKETS, MAX_EXACT_TOP};
use crate::error::{Error, Result};
use crate::seam::ApproxStore;
use std::sync::{Arc, RwLock};

/// Why an approximate configuration is invalid, if it is.
pub(super) fn check_config(buckets: Option<u32>, top: u32, entry_data: u32) -> Option<String> {
    if buckets.is_none() && top > 0 {
        return Some("exact_top needs an approximate board".into());
    }
    if top > MAX_EXACT_TOP {
        return Some(format!("exact_top {top} is over {MAX_EXACT_TOP}"));
    }
    match buckets? {
        0 => Some("an approximate board needs at least 1 bucket".into()),
        b if b > MAX_BUCKETS => Some(format!("buckets {b} is over {MAX_BUCKETS}")),
        _ if entry_data > 0 => Some("an approximate board keeps no entry data".into()),
        _ => None,
    }
}

/// This process's copy of the board's published snapshot, keyed by its
/// number: a reader that finds the pointer unchanged reads no bucket row.
#[derive(Default)]
pub(super) struct Cache(RwLock<Option<Arc<ApproxSnapshot>>>);

const EXACT_ONLY: &str =
    "needs the exact tree, which an approximate board does not keep: use approx_rank";
const APPROX_ONLY: &str = "needs an approximate board (RankingConfig::approximate)";

/// [`Error::ApproximateBoard`] if this board is approximate.
pub(in crate::ranking) fn exact_only(ranking: &Ranking, call: &'static str) -> Result<()> {
    match ranking.inner.rules().approx {
        false => Ok(()),
        true => Err(exact_refused(ranking, call)),
    }
}

/// The refusal of `call`, which needs the exact tree.
fn exact_refused(ranking: &Ranking, call: &'static str) -> Error {
    Error::ApproximateBoard {
        name: ranking.inner.name.clone(),
        call,
        reason: EXACT_ONLY,
    }
}

/// The store's snapshot operations, or [`Error::ApproximateBoard`] if
/// this board is exact.
pub(in crate::ranking) fn approx_store<'a>(
    ranking: &'a Ranking,
    call: &'static str,
) -> Result<&'a dyn ApproxStore> {
    if !ranking.inner.rules().approx {
        return Err(Error::ApproximateBoard {
            name: ranking.inner.name.clone(),
            call,
            reason: APPROX_ONLY,
        });
    }
    ranking.inner.boards.approx()
}

/// [`Ranking::approx_rank`].
pub(in crate::ranking) fn approx_rank(ranking: &Ranking, score: i64) -> Result<u64> {
    let store = approx_store(ranking, "approx_rank")?;
    let tree = ranking
        .inner
        .rules()
        .tree_score(ranking.inner.geometry(), score)?;
    let current = store.approx_current(ranking.inner.id)?;
    Ok(snapshot_at(ranking, store, current)?.rank_tree(tree))
}

/// [`Ranking::approx_snapshot`].
pub(in crate::ranking) fn approx_snapshot(ranking: &Ranking) -> Result<Arc<ApproxSnapshot>> {
    let store = approx_store(ranking, "approx_snapshot")?;
    let current = store.approx_current(ranking.inner.id)?;
    snapshot_at(ranking, store, current)
}

/// The snapshot numbered `current`, from the cache or else the store.
fn snapshot_at(
    ranking: &Ranking,
    store: &dyn ApproxStore,
    current: Option<i64>,
) -> Result<Arc<ApproxSnapshot>> {
    let no_snapshot = || Error::NoSnapshot {
        name: ranking.inner.name.clone(),
    };
    let current = current.ok_or_else(no_snapshot)?;
    let cache = &ranking.inner.approx.0;
    if let Some(s) = &*cache.read().unwrap_or_else(|p| p.into_inner())
        && s.id() == current
    {
        return Ok(s.clone());
    }
    // Pointer and rows in one transaction: maybe newer than `current`,
    // never a mix.
    let stored = store
        .approx_snapshot(ranking.inner.id)?
        .ok_or_else(no_snapshot)?;
    let fresh = Arc::new(ApproxSnapshot::new(
        stored,
        ranking.inner.rules(),
        ranking.inner.geometry().clone(),
    ));
    let mut cached = cache.write().unwrap_or_else(|p| p.into_inner());
    if cached.as_ref().is_none_or(|c| c.id() < fresh.id()) {
        *cached = Some(fresh.clone());
    }
    Ok(fresh)
}

/// [`Ranking::page`] of an approximate board: exact, from the score index
/// (an `OFFSET` scan, so O(`to`) rows read); ties by arrival, then name.
pub(super) fn page(ranking: &Ranking, from: u64, to: u64) -> Result<Vec<Entry>> {
    let store = approx_store(ranking, "page")?;
    let rows = store.approx_page(ranking.inner.id, 0, to)?;
    let (rules, g) = (ranking.inner.rules(), ranking.inner.geometry());
    let mut out = Vec::new();
    let (mut rank, mut dense, mut last) = (0u64, 0u64, None);
    for (i, (player, tree)) in rows.into_iter().enumerate() {
        let position = i as u64 + 1;
        if last != Some(tree) {
            (rank, dense, last) = (position, dense + 1, Some(tree));
        }
        if position >= from {
            let score = rules.score(g, tree).ok_or_else(|| Error::Corrupt {
                kind: "ranking",
                id: ranking.inner.name.clone(),
                field: format!("player score {tree}"),
                reason: "outside the board's range".into(),
            })?;
            out.push(Entry {
                player,
                score,
                rank,
                dense,
                position,
                data: None,
            });
        }
    }
    Ok(out)
}

/// [`Ranking::len`] of an approximate board: counted from the score index.
pub(super) fn len(ranking: &Ranking) -> Result<u64> {
    approx_store(ranking, "len")?.approx_len(ranking.inner.id)
}

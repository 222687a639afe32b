//! Approximate boards (the Code Jam article's "Buckets with Global Query"):
//! an update writes only the player's row; a background
//! [`refresh`](Ranking::refresh) summarizes the score index into buckets
//! and publishes them as a snapshot; [`approx_rank`](Ranking::approx_rank)
//! interpolates inside the bucket holding a score. docs/design/approximate-boards.md
//! ("Approximate boards") has the data model, the snapshot protocol and
//! the measured error.

mod apply;
mod refresh;
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

impl Ranking {
    /// [`Error::ApproximateBoard`] if this board is approximate.
    pub(super) fn exact_only(&self, call: &'static str) -> Result<()> {
        match self.rules().approx {
            false => Ok(()),
            true => Err(self.exact_refused(call)),
        }
    }

    /// The refusal of `call`, which needs the exact tree.
    fn exact_refused(&self, call: &'static str) -> Error {
        Error::ApproximateBoard {
            name: self.inner.name.clone(),
            call,
            reason: EXACT_ONLY,
        }
    }

    /// The store's snapshot operations, or [`Error::ApproximateBoard`] if
    /// this board is exact.
    pub(super) fn approx_store(&self, call: &'static str) -> Result<&dyn ApproxStore> {
        if !self.rules().approx {
            return Err(Error::ApproximateBoard {
                name: self.inner.name.clone(),
                call,
                reason: APPROX_ONLY,
            });
        }
        self.inner.boards.approx()
    }

    /// The approximate standard rank of `score` on an approximate board
    /// ([`RankingConfig::approximate`](super::RankingConfig::approximate)):
    /// 1 + the players with a better score, estimated from the bucket
    /// snapshot the last [`refresh`](Ranking::refresh) published.
    ///
    /// Reads: the snapshot pointer (one small row); the bucket rows only
    /// when another refresh has published since this handle last read them
    /// (the snapshot is cached in the process, keyed by its number).
    /// [`approx_snapshot`](Ranking::approx_snapshot) answers with no read.
    ///
    /// **Error bound.** Against the exact rank among the players as the
    /// refresh read them, the estimate is exact at each bucket's best and
    /// worst score, just below its best, and between buckets; inside a
    /// bucket it is off by at most the bucket's interior players (neither
    /// at its best nor at its worst score), which is below `ceil(n / b) -
    /// 1` for `n` players and `b` buckets
    /// ([`ApproxSnapshot::error_bound`]). Each update since the refresh
    /// can move the exact rank of a score by one more. A better score never
    /// gets a worse estimate.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::new(0..10_000).approximate(4))?;
    /// let scores: Vec<(String, i64)> = (0..100).map(|i| (format!("p{i}"), i * 100)).collect();
    /// let scores: Vec<(&str, i64)> = scores.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    /// board.set_scores(&scores)?; // only player rows
    /// board.refresh()?;
    /// assert_eq!(board.approx_rank(9_900)?, 1); // a bucket's best: exact
    /// assert_eq!(board.approx_rank(5_000)?, 50); // inside: interpolated
    /// assert_eq!(board.approx_snapshot()?.error_bound(), 23); // at most ceil(100 / 4) - 2
    /// assert!(board.rank("p3", autoshard::ranking::Tie::Standard).is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::ApproximateBoard`] on an exact board,
    /// [`Error::NoSnapshot`] before the first refresh,
    /// [`Error::ScoreOutOfRange`], or a store error.
    pub fn approx_rank(&self, score: i64) -> Result<u64> {
        let store = self.approx_store("approx_rank")?;
        let tree = self.rules().tree_score(self.geometry(), score)?;
        let current = store.approx_current(self.inner.id)?;
        Ok(self.snapshot_at(store, current)?.rank_tree(tree))
    }

    /// The published snapshot, read (or taken from this process's cache
    /// when unchanged) now: its [`rank`](ApproxSnapshot::rank) reads
    /// nothing, for callers that rank many scores, or that accept the
    /// snapshot they hold until they ask again.
    ///
    /// # Errors
    ///
    /// As [`approx_rank`](Ranking::approx_rank).
    pub fn approx_snapshot(&self) -> Result<Arc<ApproxSnapshot>> {
        let store = self.approx_store("approx_snapshot")?;
        let current = store.approx_current(self.inner.id)?;
        self.snapshot_at(store, current)
    }

    /// The snapshot numbered `current`, from the cache or else the store.
    fn snapshot_at(
        &self,
        store: &dyn ApproxStore,
        current: Option<i64>,
    ) -> Result<Arc<ApproxSnapshot>> {
        let no_snapshot = || Error::NoSnapshot {
            name: self.inner.name.clone(),
        };
        let current = current.ok_or_else(no_snapshot)?;
        let cache = &self.inner.approx.0;
        if let Some(s) = &*cache.read().unwrap_or_else(|p| p.into_inner())
            && s.id() == current
        {
            return Ok(s.clone());
        }
        // Pointer and rows in one transaction: maybe newer than `current`,
        // never a mix.
        let stored = store
            .approx_snapshot(self.inner.id)?
            .ok_or_else(no_snapshot)?;
        let fresh = Arc::new(ApproxSnapshot::new(
            stored,
            self.rules(),
            self.geometry().clone(),
        ));
        let mut cached = cache.write().unwrap_or_else(|p| p.into_inner());
        if cached.as_ref().is_none_or(|c| c.id() < fresh.id()) {
            *cached = Some(fresh.clone());
        }
        Ok(fresh)
    }
}

/// [`Ranking::page`] of an approximate board: exact, from the score index
/// (an `OFFSET` scan, so O(`to`) rows read); ties by arrival, then name.
pub(super) fn page(ranking: &Ranking, from: u64, to: u64) -> Result<Vec<Entry>> {
    let store = ranking.approx_store("page")?;
    let rows = store.approx_page(ranking.inner.id, 0, to)?;
    let (rules, g) = (ranking.rules(), ranking.geometry());
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
    ranking.approx_store("len")?.approx_len(ranking.inner.id)
}

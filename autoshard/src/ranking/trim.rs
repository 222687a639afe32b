//! Trimming a board (issue 21, item 3), and dropping one player's entry
//! data (item 1): [`Ranking::remove_data`], [`Ranking::remove_between`],
//! [`Ranking::keep_top`].
//!
//! A trim removes in batches of at most [`TRIM_BATCH`] players, each its own
//! short write transaction that finds its players and removes them through
//! the same apply as `remove` (`apply/`), so a board's other writers wait
//! for one batch at most, never for the whole trim. A batch finds its
//! players in its own transaction and, once it holds their rows, removes
//! only those still where it found them (on PostgreSQL, whose board writes
//! run at `READ COMMITTED` under per-player locks, a player may move
//! between the find and the lock). `docs/design/ranking-tree.md`
//! ("Trimming") states what a concurrent writer sees.

use super::apply::apply_updates_from;
use super::handle::check_player;
use super::policy::Rules;
use super::query::{self, Want};
use super::shape;
use super::storage::Storage;
use super::tree::Geometry;
use super::Ranking;
use crate::error::{Error, Result};
use crate::seam::NativeTrim;
use std::ops::RangeInclusive;

/// Most players one trim batch (one write transaction) removes.
pub const TRIM_BATCH: u64 = 1_000;

#[cfg(feature = "failpoints")]
pub(crate) mod hooks {
    use std::cell::Cell;

    thread_local! {
        /// The batch of this thread's trims: [`TRIM_BATCH`](super::TRIM_BATCH)
        /// but in tests (`__private::trim_hooks`), which cross batches with
        /// few players.
        pub(crate) static BATCH: Cell<u64> = const { Cell::new(super::TRIM_BATCH) };
        /// Batches this thread's trims ran as one store step each
        /// (`BoardStore::trim_native`), for tests that bound them.
        pub(crate) static NATIVE_BATCHES: Cell<u64> = const { Cell::new(0) };
    }
}

/// This thread's trim batch.
#[cfg(feature = "failpoints")]
pub(in crate::ranking) fn batch() -> u64 {
    hooks::BATCH.get()
}

/// Without `failpoints`, always [`TRIM_BATCH`].
#[cfg(not(feature = "failpoints"))]
pub(in crate::ranking) fn batch() -> u64 {
    TRIM_BATCH
}

/// What a batch looks for, in tree scores (better is higher).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pick {
    /// Tree scores in `lo..=hi`.
    Between(i64, i64),
    /// Ordinal ranks after the first `n`.
    Below(u64),
}

/// One batch's outcome: players found, and those removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trimmed {
    pub found: u64,
    pub removed: u64,
}

impl Trimmed {
    /// Whether the batch found fewer than a full batch and removed all of
    /// them: at its snapshot nothing more was left to remove.
    pub(crate) fn last(self) -> bool {
        self.found < batch() && self.removed == self.found
    }
}

/// [`Ranking::remove_data`].
pub(in crate::ranking) fn remove_data(ranking: &Ranking, player: &str) -> Result<bool> {
    check_player(player)?;
    shape::of(ranking).writes().remove_data(ranking, player)
}

pub(in crate::ranking) fn one_tree_remove_data(ranking: &Ranking, player: &str) -> Result<bool> {
    let keeps = ranking.config().entry_data() > 0;
    ranking.inner.write_with(|st| {
        st.lock_players(&[player])?;
        let on_board = st.player(player)?.is_some();
        if on_board && keeps {
            st.put_player_data(player, None)?;
        }
        Ok(on_board)
    })
}

/// [`Ranking::remove_between`].
pub(in crate::ranking) fn remove_between(
    ranking: &Ranking,
    scores: RangeInclusive<i64>,
) -> Result<u64> {
    let (lo, hi) = (*scores.start(), *scores.end());
    if lo > hi {
        return Err(Error::InvalidRanking {
            reason: format!("score range {lo}..={hi} is empty: it ends before it starts"),
        });
    }
    shape::exact_only(ranking, "remove_between")?;
    shape::of(ranking).writes().remove_between(ranking, lo, hi)
}

/// [`remove_between`](Ranking::remove_between) on a board of one tree,
/// `lo <= hi`.
pub(in crate::ranking) fn one_tree_remove_between(
    ranking: &Ranking,
    lo: i64,
    hi: i64,
) -> Result<u64> {
    let g = ranking.inner.geometry();
    let last = g.max().wrapping_sub(1);
    let (lo, hi) = (lo.max(g.min()), hi.min(last));
    if lo > hi {
        return Ok(0);
    }
    let rules = ranking.inner.rules();
    let (a, b) = (rules.tree_score(g, lo)?, rules.tree_score(g, hi)?);
    trim(ranking, Pick::Between(a.min(b), a.max(b)))
}

/// [`Ranking::keep_top`].
pub(in crate::ranking) fn keep_top(ranking: &Ranking, n: u64) -> Result<u64> {
    if n == 0 {
        return Err(Error::InvalidRanking {
            reason: "keep_top(0): keep at least one player (reset empties a board)".into(),
        });
    }
    shape::exact_only(ranking, "keep_top")?;
    // No board holds more than `i64::MAX` players.
    let n = n.min(i64::MAX as u64);
    shape::of(ranking).writes().keep_top(ranking, n)
}

pub(in crate::ranking) fn one_tree_keep_top(ranking: &Ranking, n: u64) -> Result<u64> {
    trim(ranking, Pick::Below(n))
}

/// Batches until one finds fewer than a full batch and removes all it
/// found: then the board held nothing more to remove at its snapshot.
fn trim(ranking: &Ranking, pick: Pick) -> Result<u64> {
    let mut removed = 0;
    loop {
        let done = match trim_native(ranking, pick)? {
            Some(done) => done,
            None => trim_batch(ranking, pick)?,
        };
        removed += done.removed;
        if done.last() {
            return Ok(removed);
        }
    }
}

/// One batch as one store step where the store orders this board
/// natively and trims it itself (`BoardStore::trim_native`: on Redis
/// Cluster one script, never retried for another writer's commit);
/// `None` if it does not, and nothing was written. Asked for a tree of
/// a split board too: a removal draws no arrival, so the board-wide
/// arrivals (`trees/arrival.rs`) that keep a tree's direct writes in
/// the transaction do not matter here (on Redis those trees keep the
/// count tree today, and the store answers `None`).
fn trim_native(ranking: &Ranking, pick: Pick) -> Result<Option<Trimmed>> {
    let pick = match pick {
        Pick::Between(lo, hi) => NativeTrim::Between { lo, hi },
        Pick::Below(n) => NativeTrim::Below(n),
    };
    let done = ranking
        .inner
        .boards
        .trim_native(ranking.inner.board(), pick, batch())?;
    Ok(done.map(|(found, removed)| {
        #[cfg(feature = "failpoints")]
        hooks::NATIVE_BATCHES.set(hooks::NATIVE_BATCHES.get() + 1);
        Trimmed { found, removed }
    }))
}

/// One batch in one write transaction.
fn trim_batch(ranking: &Ranking, pick: Pick) -> Result<Trimmed> {
    let (rules, shard) = (ranking.inner.rules(), ranking.inner.random_shard());
    ranking
        .inner
        .write_with(|st| batch_in(st, ranking.inner.geometry(), rules, shard, pick))
}

/// Removes each of `found` (player, tree score) still at that score,
/// in one write transaction; how many.
pub(in crate::ranking) fn remove_if_at(ranking: &Ranking, found: &[(String, i64)]) -> Result<u64> {
    let (rules, shard) = (ranking.inner.rules(), ranking.inner.random_shard());
    ranking.inner.write_with(|st| {
        let names: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        let still = still_there(st, &names, |i, score| score == found[i].1)?;
        let updates: Vec<(&str, Option<i64>)> = still.iter().map(|&p| (p, None)).collect();
        if !updates.is_empty() {
            apply_updates_from(
                st,
                ranking.inner.geometry(),
                rules,
                shard,
                &updates,
                None,
                &|_| 0,
            )?;
        }
        Ok(updates.len() as u64)
    })
}

/// One trim batch in the write transaction `st`: finds up to
/// [`TRIM_BATCH`] players and removes those still where it found them once
/// their rows are locked.
pub(crate) fn batch_in(
    st: &dyn Storage,
    g: &Geometry,
    rules: Rules,
    shard: u32,
    pick: Pick,
) -> Result<Trimmed> {
    let found = find(st, g, pick)?;
    let names: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    let still = still_there(st, &names, |i, score| match pick {
        Pick::Between(lo, hi) => (lo..=hi).contains(&score),
        Pick::Below(_) => score == found[i].1,
    })?;
    let updates: Vec<(&str, Option<i64>)> = still.iter().map(|&p| (p, None)).collect();
    if !updates.is_empty() {
        apply_updates_from(st, g, rules, shard, &updates, None, &|_| 0)?;
    }
    Ok(Trimmed {
        found: found.len() as u64,
        removed: updates.len() as u64,
    })
}

/// Up to [`TRIM_BATCH`] players `pick` names, with their tree scores, in
/// ranking order.
fn find(st: &dyn Storage, g: &Geometry, pick: Pick) -> Result<Vec<(String, i64)>> {
    let (from, lo) = match pick {
        Pick::Below(n) => (n.saturating_add(1), None),
        Pick::Between(lo, hi) => {
            let above = match st.native() {
                Some(native) => native.above(hi, false)?.0,
                None => {
                    let offset = g.checked_offset(hi)?;
                    query::place_of(st, g, offset, Want::default())?.above
                }
            };
            (above + 1, Some(lo))
        }
    };
    let to = from.saturating_add(batch() - 1);
    let entries: Vec<(String, i64)> = match st.native() {
        Some(native) => native
            .range(from, to)?
            .into_iter()
            .map(|e| (e.player, e.score))
            .collect(),
        None => query::page(st, g, from, to)?
            .into_iter()
            .map(|e| (e.player, e.score))
            .collect(),
    };
    Ok(match lo {
        Some(lo) => entries.into_iter().take_while(|e| e.1 >= lo).collect(),
        None => entries,
    })
}

/// The players of `names` (distinct) whose stored tree score, read once
/// their rows are locked, passes `keep(index in names, score)`.
fn still_there<'a>(
    st: &dyn Storage,
    names: &[&'a str],
    keep: impl Fn(usize, i64) -> bool,
) -> Result<Vec<&'a str>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    st.lock_players(names)?;
    let index: std::collections::HashMap<&str, usize> =
        names.iter().enumerate().map(|(i, &p)| (p, i)).collect();
    let mut keep_at = vec![false; names.len()];
    st.players(names, &mut |player, score, _| {
        if let Some(&i) = index.get(player) {
            keep_at[i] = keep(i, score);
        }
        Ok(())
    })?;
    Ok(names
        .iter()
        .zip(keep_at)
        .filter_map(|(&p, k)| k.then_some(p))
        .collect())
}

//! Boards split into trees (`RankingConfig::trees`): the seed's "three
//! trees, three times the throughput".
//!
//! A split board is a board row holding the configuration (and no players)
//! plus `k` boards of one tree each, the board's trees, named
//! `<name>\u{1f}<t>` (a name `create` refuses, so no user board can take it)
//! in the store's tree `t` ([`BoardStore::tree_store`]: on SQLite the file
//! `<database>-tree<t>`, elsewhere the store itself). A player lives in tree
//! `hash(player) % k`, so every write and every queued update of a player
//! goes to one tree, through all of today's single-tree code: each tree has
//! its own queue shards, worker, cache and integrity check. Only two things
//! are new: arrival numbers are board-wide (`arrival.rs`), and queries merge
//! the trees (`merge.rs`, `dense.rs`).
//!
//! Writes are atomic per tree: `set_scores` on a split board commits one
//! transaction per tree it touches. Each query reads every tree in one
//! snapshot of that tree (all `k` read transactions open at once), so it
//! sees each tree at one point in time; two trees may be seen at different
//! points while writers run (docs/design/sharded-trees.md, "Sharded trees").

mod arrival;
mod dense;
pub(crate) mod merge;
mod native;
mod queries;
mod snapshot;
mod writes;

pub(crate) use self::arrival::reserve as reserve_arrivals;
pub(crate) use self::merge as hooks;
pub(super) use self::queries::SHAPE;

use super::{BoardConfig, Ranking, RankingConfig, Submission, MAX_TREES};
use crate::error::{Error, Result};
use crate::hash::{fnv, FNV_OFFSET};
use crate::ranking::handle;
use crate::ranking::policy;
use crate::ranking::queue;
use crate::ranking::write;
use crate::seam::{BoardStore, DeadLetter, Placement, PART_SEPARATOR};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) fn check_trees(trees: u32) -> Result<()> {
    if (1..=MAX_TREES).contains(&trees) {
        Ok(())
    } else {
        Err(Error::InvalidRanking {
            reason: format!("trees {trees} is outside 1..={MAX_TREES}"),
        })
    }
}

/// The stored name of tree `t` of board `name`.
fn tree_name(name: &str, t: u32) -> String {
    format!("{name}{PART_SEPARATOR}{t}")
}

/// Whether `name` is a tree's stored name (hidden from `Ranking::list`).
pub(super) fn is_tree_name(name: &str) -> bool {
    name.contains(PART_SEPARATOR)
}

/// The tree of `player` among `k`: FNV-1a, salted and then mixed (the
/// MurmurHash3 finalizer), so that it is independent of the queue shard's
/// hash (`queue_of`, plain FNV-1a modulo the shards): FNV-1a's low bits
/// depend only on the low bits of its input, so a salt alone left tree and
/// queue shard tied (with 4 and 4, each tree's players all in one shard).
/// Stable across processes and versions.
pub(crate) fn tree_of(player: &str, k: usize) -> usize {
    let salted = fnv(FNV_OFFSET, b"autoshard-tree\0");
    let mut h = fnv(salted, player.as_bytes());
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h = (h ^ (h >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h % k as u64) as usize
}

fn tree_store(boards: &Arc<dyn BoardStore>, t: u32) -> Result<Arc<dyn BoardStore>> {
    Ok(boards.tree_store(t)?.unwrap_or_else(|| boards.clone()))
}

/// A tree's configuration: the board's, in one tree.
fn tree_config(config: &BoardConfig) -> BoardConfig {
    RankingConfig::from(config.clone()).trees(1).into()
}

/// Creates the trees of the new board `name` (its row is committed): a tree
/// left by a crash in an earlier delete of a board of that name is deleted
/// first, so the new board starts empty.
pub(super) fn create(
    boards: &Arc<dyn BoardStore>,
    name: &str,
    config: &BoardConfig,
) -> Result<Vec<Ranking>> {
    let (one, k) = (tree_config(config), config.trees());
    (0..k)
        .map(|t| {
            let store = tree_store(boards, t)?;
            store.delete_board(&tree_name(name, t))?;
            let placement = Placement::Tree { board: name, t, k };
            handle::create_tree(store, &tree_name(name, t), one.clone(), placement)
        })
        .collect()
}

/// The tree count of board `name` as stored, `None` without a board.
fn config_trees(boards: &Arc<dyn BoardStore>, name: &str) -> Result<Option<u32>> {
    let stored = boards.open_board(name)?;
    Ok(stored.map(|(_, spec)| BoardConfig::from_spec(spec).map_or(1, |c| c.trees())))
}

/// Opens the trees of board `name`; a tree missing (a crash between the
/// board's row and its trees) is created, empty.
pub(super) fn open(
    boards: &Arc<dyn BoardStore>,
    name: &str,
    config: &BoardConfig,
) -> Result<Vec<Ranking>> {
    let (one, k) = (tree_config(config), config.trees());
    (0..k)
        .map(|t| {
            let store = tree_store(boards, t)?;
            let tree = tree_name(name, t);
            match handle::open_tree(store.clone(), &tree) {
                Err(Error::RankingNotFound { .. }) => {
                    let placement = Placement::Tree { board: name, t, k };
                    match handle::create_tree(store.clone(), &tree, one.clone(), placement) {
                        Err(Error::RankingExists { .. }) => handle::open_tree(store, &tree),
                        created => created,
                    }
                }
                opened => opened,
            }
        })
        .collect()
}

/// Deletes the trees of board `name`, whose row is deleted (`delete`
/// deletes the row first: a crash in between leaves trees nobody opens,
/// which the next `create` of that name deletes).
pub(super) fn delete(boards: &Arc<dyn BoardStore>, name: &str, k: u32) -> Result<()> {
    for t in 0..k {
        tree_store(boards, t)?.delete_board(&tree_name(name, t))?;
    }
    Ok(())
}

/// The tree count of board `name`, for `delete` (1 without a board).
pub(super) fn trees_of(boards: &Arc<dyn BoardStore>, name: &str) -> Result<u32> {
    Ok(config_trees(boards, name)?.unwrap_or(1))
}

/// A split board's operations: each routes to the player's tree or merges
/// the trees.
pub(super) struct Split<'a> {
    pub(super) board: &'a Ranking,
    pub(super) trees: &'a [Ranking],
}

impl Split<'_> {
    fn tree(&self, player: &str) -> &Ranking {
        &self.trees[tree_of(player, self.trees.len())]
    }

    pub(super) fn set_score(&self, player: &str, score: i64) -> Result<()> {
        self.tree(player).set_score(player, score)
    }

    pub(super) fn remove(&self, player: &str) -> Result<bool> {
        self.tree(player).remove(player)
    }

    pub(super) fn score(&self, player: &str) -> Result<Option<i64>> {
        self.tree(player).score(player)
    }

    /// One transaction per tree, in tree order; all input checked first.
    /// One block of arrival numbers for the whole batch, numbered by place
    /// in it, so ties across trees are ordered as in a board of one tree.
    pub(super) fn set_scores(&self, scores: &[(&str, i64)]) -> Result<()> {
        for &(player, score) in scores {
            policy::check_input(self.board, player, Some(score))?;
        }
        let mut per_tree = vec![(Vec::new(), Vec::new()); self.trees.len()];
        for (i, &(player, score)) in scores.iter().enumerate() {
            let (updates, index) = &mut per_tree[tree_of(player, self.trees.len())];
            updates.push((player, Some(score)));
            index.push(i);
        }
        let base = reserve_arrivals(scores.len());
        for (tree, (updates, index)) in self.trees.iter().zip(per_tree) {
            if !updates.is_empty() {
                write::write_scores_at(tree, &updates, (base, &index))?;
            }
        }
        Ok(())
    }

    /// The tree's submission, with its ranks made board-wide: the other
    /// trees' counts are read right after the write, not in its
    /// transaction.
    pub(super) fn submission(
        &self,
        player: &str,
        score: i64,
        data: Option<&[u8]>,
    ) -> Result<Submission> {
        let t = tree_of(player, self.trees.len());
        let mut done = policy::submission(&self.trees[t], player, score, data)?;
        let others = |score: i64| -> Result<u64> {
            let mut above = 0;
            for (j, tree) in self.trees.iter().enumerate() {
                if j != t {
                    above += tree.rank_of_score(score)? - 1;
                }
            }
            Ok(above)
        };
        done.new_rank += others(done.new_score)?;
        if let (Some(rank), Some(old)) = (done.old_rank.as_mut(), done.old_score) {
            *rank += others(old)?;
        }
        Ok(done)
    }

    pub(super) fn enqueue(
        &self,
        player: &str,
        score: Option<i64>,
        data: Option<Vec<u8>>,
    ) -> Result<()> {
        write::check_update(self.board, player, score)?;
        // A deleted board's tree refuses the append: the error names the
        // board the caller named, not the tree's hidden name.
        match queue::enqueue_item(self.tree(player), player, score, data) {
            Err(Error::RankingNotFound { .. }) => Err(Error::RankingNotFound {
                name: self.board.name().into(),
            }),
            other => other,
        }
    }

    pub(super) fn queued(&self) -> Result<u64> {
        self.trees.iter().map(Ranking::queued).sum()
    }

    pub(super) fn backlog(&self) -> Result<u64> {
        self.trees.iter().map(Ranking::backlog).sum()
    }

    pub(super) fn dead_letter_count(&self) -> Result<u64> {
        self.trees.iter().map(Ranking::dead_letter_count).sum()
    }

    /// The oldest over the trees.
    pub(super) fn oldest_queued_age(&self) -> Result<Option<Duration>> {
        let mut oldest = None;
        for tree in self.trees {
            oldest = oldest.max(tree.oldest_queued_age()?);
        }
        Ok(oldest)
    }

    /// Flushes tree by tree within one time limit.
    pub(super) fn flush_within(&self, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        for tree in self.trees {
            let left = timeout.saturating_sub(started.elapsed());
            tree.flush_within(left)?;
        }
        Ok(())
    }

    /// Every tree's dead letters, ids made board-wide: `id * k + tree`.
    pub(super) fn dead_letters(&self) -> Result<Vec<DeadLetter>> {
        let k = self.trees.len() as i64;
        let mut all = Vec::new();
        for (t, tree) in self.trees.iter().enumerate() {
            all.extend(tree.dead_letters()?.into_iter().map(|mut d| {
                d.id = d.id * k + t as i64;
                d
            }));
        }
        Ok(all)
    }

    pub(super) fn delete_dead_letter(&self, id: i64) -> Result<bool> {
        let k = self.trees.len() as i64;
        if id < 0 {
            return Ok(false);
        }
        self.trees[(id % k) as usize].delete_dead_letter(id / k)
    }

    pub(super) fn reset(&self) -> Result<()> {
        self.trees.iter().try_for_each(Ranking::reset)
    }

    pub(super) fn check_integrity(&self) -> Result<()> {
        self.trees.iter().try_for_each(Ranking::check_integrity)
    }

    pub(super) fn len(&self) -> Result<u64> {
        self.trees.iter().map(Ranking::len).sum()
    }
}

/// The board's trees, if it is split.
pub(in crate::ranking) fn split(ranking: &Ranking) -> Option<Split<'_>> {
    (!ranking.inner.trees.is_empty()).then(|| Split {
        board: ranking,
        trees: &ranking.inner.trees,
    })
}

/// The lowest arrival number a write transaction of this board may hand
/// out for `n` updates: board-wide numbers for a tree of a split board,
/// 0 (the score's counter alone decides) for any other board.
pub(in crate::ranking) fn arrival_floor(ranking: &Ranking, n: usize) -> u64 {
    let local = hooks::local_arrivals();
    if ranking.inner.tree_member && !local {
        reserve_arrivals(n)
    } else {
        0
    }
}

/// [`Ranking::tree_worker`].
pub(in crate::ranking) fn tree_worker(ranking: &Ranking, tree: u32) -> Result<super::BoardWorker> {
    let k = ranking.inner.config.trees();
    match split(ranking) {
        _ if tree >= k => Err(Error::InvalidRanking {
            reason: format!("tree {tree} of a board of {k} trees"),
        }),
        Some(split) => Ok(split.trees[tree as usize].worker()),
        None => Ok(ranking.worker()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn players_spread_over_every_tree_and_every_queue_shard() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..1_000 {
            let player = format!("player-{i}");
            let queue = fnv(FNV_OFFSET, player.as_bytes()) % 4;
            seen.insert((tree_of(&player, 4), queue));
        }
        // Tree and queue shard independent: all 16 pairs. Control: with
        // the salt alone (no mixing) this found 4.
        assert_eq!(seen.len(), 16);
    }
}

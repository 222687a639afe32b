//! A split board's queries: the trees read together (`merge.rs`), then
//! scores turned back from tree scores and entry data read, per tree.

use super::merge::{self, read_all};
use super::{dense, tree_of, Split};
use crate::error::Result;
use crate::ranking::query::{self, Want};
use crate::ranking::storage::Storage;
use crate::ranking::{among, Entry, Tie};

impl Split<'_> {
    /// 1 + players better than the tree score at `offset`: each tree read
    /// on its own (a sum needs no common snapshot).
    pub(in crate::ranking) fn rank_of_offset(&self, offset: u64) -> Result<u64> {
        let mut above = 0;
        for tree in self.trees {
            above +=
                tree.read(|st, g| Ok(query::place_of(st, g, offset, Want::default())?.above))?;
        }
        Ok(above + 1)
    }

    pub(in crate::ranking) fn rank(&self, player: &str, tie: Tie) -> Result<Option<u64>> {
        let t = tree_of(player, self.trees.len());
        let g = self.board.geometry();
        read_all(self.trees, &mut |sts| {
            let Some(place) = sts[t].player(player)? else {
                return Ok(None);
            };
            let offset = merge::offset_of(sts[t], g, place.0)?;
            Ok(Some(match tie {
                Tie::Standard => merge::above(sts, g, offset)? + 1,
                Tie::Dense => dense::distinct_above(sts, g, offset)? + 1,
                Tie::Ordinal => merge::position_of(sts, g, t, place)?,
            }))
        })
    }

    pub(in crate::ranking) fn score_at_rank(&self, rank: u64) -> Result<Option<i64>> {
        let (g, rules) = (self.board.geometry(), self.board.rules());
        read_all(self.trees, &mut |sts| match merge::locate(sts, g, rank)? {
            Some(l) => Ok(Some(rules.checked_score(sts[0], g, l.score)?)),
            None => Ok(None),
        })
    }

    pub(in crate::ranking) fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
        let g = self.board.geometry();
        read_all(self.trees, &mut |sts| {
            let found = merge::page(sts, g, from, to)?;
            self.entries(sts, found)
        })
    }

    pub(in crate::ranking) fn around(&self, player: &str, k: u64) -> Result<Vec<Entry>> {
        let t = tree_of(player, self.trees.len());
        let g = self.board.geometry();
        read_all(self.trees, &mut |sts| {
            let Some(place) = sts[t].player(player)? else {
                return Ok(Vec::new());
            };
            let position = merge::position_of(sts, g, t, place)?;
            let (from, to) = (
                position.saturating_sub(k).max(1),
                position.saturating_add(k),
            );
            let found = merge::page(sts, g, from, to)?;
            self.entries(sts, found)
        })
    }

    /// `among` over the trees: each name read in its own tree, all trees
    /// in one snapshot each, ranked in the merge's order.
    pub(in crate::ranking) fn among(&self, names: &[&str]) -> Result<Vec<Entry>> {
        let k = self.trees.len();
        let mut per_tree = vec![Vec::new(); k];
        for &name in names {
            per_tree[tree_of(name, k)].push(name);
        }
        let g = self.board.geometry();
        read_all(self.trees, &mut |sts| {
            let mut found = Vec::with_capacity(names.len());
            for (t, names) in per_tree.iter().enumerate() {
                if !names.is_empty() {
                    found.extend(among::found_in(sts[t], g, t, names)?);
                }
            }
            let ranked = among::rank_set(&mut found);
            self.entries(sts, ranked)
        })
    }

    /// Entries as the merge found them, finished by each one's tree (its
    /// score back from the tree score, its entry data), in order.
    fn entries(&self, sts: &[&dyn Storage], found: Vec<(Entry, usize)>) -> Result<Vec<Entry>> {
        let g = self.board.geometry();
        let mut per_tree = vec![Vec::new(); self.trees.len()];
        let order: Vec<usize> = found.iter().map(|&(_, t)| t).collect();
        for (entry, t) in found {
            per_tree[t].push(entry);
        }
        let mut finished = Vec::with_capacity(per_tree.len());
        for (t, entries) in per_tree.into_iter().enumerate() {
            let done = match entries.is_empty() {
                true => entries,
                false => self.trees[t].entries(sts[t], g, entries)?,
            };
            finished.push(done.into_iter());
        }
        Ok(order
            .into_iter()
            .map(|t| finished[t].next().expect("one entry per tree index"))
            .collect())
    }
}

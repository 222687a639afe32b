//! The look outside the snapshot (peeks): where a split board's page or
//! position lies, found before the one read of each tree that confirms it
//! (`mod.rs`).

use super::super::snapshot::Snapshot;
use super::{tie_bound, NativeTrees};
use crate::error::Result;
use crate::ranking::among::{sort, Found};
use crate::seam::NativeBoard;

/// The windows are read whole once all of them hold at most this many
/// players together: one read per tree, instead of more narrowing rounds
/// (each a read per tree).
const WINDOW: u64 = 2_048;

/// Below this position (`WINDOW / k` in practice) a look selects: the
/// windows are small from the start, so it costs no more than pivots.
fn pivots_pay(look: u64, k: u64) -> bool {
    look > WINDOW / k
}

/// The pivots every tree is asked for, as eighths of the spread back
/// from the tree rank at which position `look` is expected.
const PIVOT_STEPS: [u64; 5] = [0, 1, 2, 4, 8];

/// Turns a snapshot's native reads into peeks while it lives.
pub(super) struct Peeking<'a>(&'a [&'a dyn NativeBoard]);

impl<'a> Peeking<'a> {
    pub(super) fn on(trees: &'a [&'a dyn NativeBoard]) -> Self {
        trees.iter().for_each(|t| t.peeking(true));
        Peeking(trees)
    }
}

impl Drop for Peeking<'_> {
    fn drop(&mut self) {
        self.0.iter().for_each(|t| t.peeking(false));
    }
}

impl NativeTrees<'_> {
    /// The players at ordinal positions `from..from + want` (fewer past the
    /// end), in order.
    ///
    /// Each tree `j` keeps a window `lo[j]..hi[j]` of its ranks (0-based)
    /// holding its players that may be at position `from`: everyone
    /// below `lo[j]` is ahead of it and everyone from `hi[j]` on behind.
    /// A round takes a pivot in the widest window, alternately where the
    /// windows' sizes say position `from` should be (the trees are hash
    /// samples of the board, so this lands close) and the window's
    /// middle (so no order of players makes it slow), counts the players
    /// ahead of the pivot in every tree, and cuts every window there.
    /// Then the windows, each extended by `want - 1`, are read and merged:
    /// the players ahead of position `from` that they hold are its
    /// position minus the players below the windows.
    fn select(&self, from: u64, want: u64) -> Result<Vec<Found>> {
        let k = self.trees.len();
        let mut lens = Vec::with_capacity(k);
        for tree in &self.trees {
            lens.push(tree.len()?);
        }
        let target = from - 1;
        let mut lo = vec![0u64; k];
        let mut hi: Vec<u64> = lens.iter().map(|&n| n.min(from)).collect();
        let mut round = 0u32;
        loop {
            let widths: Vec<u64> = (0..k).map(|j| hi[j].saturating_sub(lo[j])).collect();
            let total: u64 = widths.iter().sum();
            if total <= WINDOW {
                break;
            }
            let t = (0..k)
                .max_by_key(|&j| widths[j])
                .expect("a split board has trees");
            let ahead = target.saturating_sub(lo.iter().sum::<u64>());
            let step = match round % 2 {
                0 => (u128::from(widths[t]) * u128::from(ahead) / u128::from(total)) as u64,
                _ => widths[t] / 2,
            };
            round += 1;
            let m = lo[t] + step.min(widths[t] - 1);
            let Some(pivot) = self.trees[t].range(m + 1, m + 1)?.pop() else {
                // The tree is shorter than its length said: only reads
                // outside one snapshot (peeks) see that. Past its end.
                hi[t] = m;
                continue;
            };
            let mut counts = self.before_all(t, (pivot.score, pivot.arrival))?;
            counts[t] = m;
            let position: u64 = counts.iter().sum();
            for j in 0..k {
                let c = counts[j];
                match position.cmp(&target) {
                    // The pivot is the player at `from`: every window is
                    // cut to nothing, the pivot's to the pivot.
                    std::cmp::Ordering::Equal => {
                        lo[j] = c;
                        hi[j] = c + u64::from(j == t);
                    }
                    std::cmp::Ordering::Less => lo[j] = lo[j].max(c + u64::from(j == t)),
                    std::cmp::Ordering::Greater => hi[j] = hi[j].min(c),
                }
                // Only a snapshot that disagrees with itself crosses them.
                lo[j] = lo[j].min(hi[j]);
            }
            if position == target {
                break;
            }
        }
        let mut found = Vec::new();
        for (j, tree) in self.trees.iter().enumerate() {
            let end = hi[j].saturating_add(want - 1).min(lens[j]);
            if lo[j] < end {
                for e in tree.range(lo[j] + 1, end)? {
                    found.push((e.score, e.arrival, j, e.player));
                }
            }
        }
        sort(&mut found);
        let skip = target.saturating_sub(lo.iter().sum::<u64>());
        Ok(found
            .into_iter()
            .skip(skip as usize)
            .take(want as usize)
            .collect())
    }

    /// A player at position `look` or a little before it, and that
    /// position, as peeks find them: the anchor of a page's one read.
    ///
    /// The trees are hash samples of the board, so each tree's member at
    /// rank `(look - 1) / k` lies near position `look`, a few standard
    /// deviations (`sqrt(look)`) either side. So every tree is asked for
    /// its members at a few ranks from there back by three of them (one
    /// read, the same for all trees), then counts the players ahead of
    /// each of those pivots (one more): the last pivot at or before `look`
    /// is the anchor. Two round trips on Redis Cluster, where narrowing
    /// took one per tree and round. Near the top, or when no pivot lands
    /// at or before `look` (trees far from equal, as a hostile set of
    /// names could make them), it narrows by selection ([`select`]).
    ///
    /// [`select`]: NativeTrees::select
    pub(super) fn locate(&self, look: u64) -> Result<Option<(Found, u64)>> {
        let k = self.trees.len() as u64;
        if !pivots_pay(look, k) {
            return Ok(self.select(look, 1)?.pop().map(|f| (f, look)));
        }
        let base = (look - 1) / k;
        let spread = 3 * look.isqrt() / k + 1;
        let mut ranks: Vec<u64> = PIVOT_STEPS
            .iter()
            .map(|&s| base.saturating_sub(spread * s / 8))
            .collect();
        ranks.dedup();
        let mut pivots: Vec<Found> = Vec::new();
        for (j, tree) in self.trees.iter().enumerate() {
            let (_, members) = tree.members_at(&ranks)?;
            pivots.extend(members.into_iter().map(|(s, a, p)| (s, a, j, p)));
        }
        let tie = |j: usize, &(s, a, t, _): &Found| (s, tie_bound(j, t, a));
        let mut places: Vec<(i64, u64)> = (0..self.trees.len())
            .flat_map(|j| pivots.iter().map(move |p| tie(j, p)))
            .collect();
        places.sort_unstable();
        places.dedup();
        let mut positions = vec![1u64; pivots.len()];
        for (j, tree) in self.trees.iter().enumerate() {
            let counts = tree.before_each(&places)?;
            for (position, pivot) in positions.iter_mut().zip(&pivots) {
                let at = places.binary_search(&tie(j, pivot)).ok();
                *position += at
                    .and_then(|at| counts.get(at).copied())
                    .ok_or_else(|| self.corrupt("no count"))?;
            }
        }
        let best = (0..pivots.len())
            .filter(|&i| positions[i] <= look)
            .max_by_key(|&i| positions[i]);
        Ok(match best {
            Some(i) => Some((pivots.swap_remove(i), positions[i])),
            None => self.select(look, 1)?.pop().map(|f| (f, look)),
        })
    }

    /// The board's size, read in the snapshot: a percentile of an empty
    /// board is `None` only if it is.
    pub(super) fn peek_len(&self) -> Result<u64> {
        let n = {
            let _peeking = Peeking::on(&self.trees);
            self.len()?
        };
        match n {
            0 => self.len(),
            n => Ok(n),
        }
    }
}

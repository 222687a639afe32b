//! The merged order of a split board whose trees the store orders
//! natively (Redis sorted sets, `seam::NativeBoard`): no nodes to sum, so
//! counts are summed over the trees and a position is found by selection.
//!
//! Every tree orders its players by `(score, arrival)`, arrivals being
//! board-wide (`arrival.rs`), and the board by `(score, arrival, tree)`
//! (`merge::tie_bound`). So the players ahead of a place are, in each
//! tree, one count of its order (`NativeBoard::before_each`), and a
//! position is found by narrowing a window of ranks in each tree
//! ([`NativeTrees::select`]) until the windows are small enough to read and
//! merge. A dense rank counts the union of the trees' distinct scores:
//! its cost grows with the distinct scores above, as a split count tree's
//! does where its trees interleave (`dense.rs`).
//!
//! **Each tree read once.** A snapshot reads a tree at one point in time
//! by checking that the tree's version did not move between its reads;
//! with writers committing to every tree all the time, a query of several
//! reads per tree almost never finds that, and ran again and again (a
//! `rank` beside 12 writers took 309 ms at p50, a page 2 s). So `rank`,
//! `entry`, `page` and `score_at_rank` look first outside the snapshot (peeks:
//! the player's place; the anchor of a page, by `select`) and then read
//! each tree once, the same read for all, confirming what the look found:
//! a snapshot whose trees are each read once is never stale, and the look
//! only decides where to read (`place`, for `rank` and `entry`, and
//! [`NativeTrees::anchored`]). A score range needs no look: its one read
//! per tree starts at the range's top. A percentile is a rank and the
//! board's size in one read; only `score_at_percentile` (a size, then a
//! position) still reads a tree twice and runs again while it moves.

use super::super::among::{sort, Found};
use super::super::shape::Span;
use super::super::storage::Storage;
use super::super::Entry;
use super::merge::{ranked, tie_bound};
use super::snapshot::{Asked, Looked, Placing, Snapshot};
use crate::error::{Error, Result};
use crate::seam::{NativeBoard, Placed};

/// The windows are read whole once all of them hold at most this many
/// players together: one read per tree, instead of more narrowing rounds
/// (each a read per tree).
const WINDOW: u64 = 2_048;

/// Distinct scores read per call while counting a dense rank.
const DISTINCT_CHUNK: u64 = 10_000;

/// One snapshot of every tree, in tree order.
pub(super) struct NativeTrees<'a> {
    trees: Vec<&'a dyn NativeBoard>,
    /// Tree 0's transaction, which names the board in errors.
    first: &'a dyn Storage,
}

impl<'a> NativeTrees<'a> {
    pub(super) fn new(trees: Vec<&'a dyn NativeBoard>, first: &'a dyn Storage) -> Self {
        NativeTrees { trees, first }
    }

    fn corrupt(&self, reason: &str) -> Error {
        self.first.corrupt("split board".into(), reason.into())
    }

    /// Players of each tree ahead of the player of tree `t` at `place`.
    /// Every tree is asked the same counts (each bound some tree needs),
    /// so a store that sends alike reads of its boards together (Redis
    /// Cluster: `board_tx::Ahead`) asks all the trees in one round trip.
    fn before_all(&self, t: usize, (score, arrival): (i64, u64)) -> Result<Vec<u64>> {
        let k = self.trees.len();
        let bounds = tie_bounds(k, t, arrival);
        let places: Vec<(i64, u64)> = bounds.iter().map(|&b| (score, b)).collect();
        (0..k)
            .map(|j| {
                let counts = self.trees[j].before_each(&places)?;
                let at = bounds.binary_search(&tie_bound(j, t, arrival));
                at.ok()
                    .and_then(|at| counts.get(at).copied())
                    .ok_or_else(|| self.corrupt("no count"))
            })
            .collect()
    }

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
}

/// How far before a page the anchor of its one read is taken, at first:
/// the players who move across it between the look and the read may not
/// outnumber it (else the read is made again, twice as far before).
const SLACK: u64 = 64;

/// The tie bounds (`merge::tie_bound`) of every tree of `k` against the
/// player of tree `t` with `arrival`, ascending, each once: the counts one
/// read asks of every tree alike.
fn tie_bounds(k: usize, t: usize, arrival: u64) -> Vec<u64> {
    let mut bounds: Vec<u64> = (0..k).map(|j| tie_bound(j, t, arrival)).collect();
    bounds.sort_unstable();
    bounds.dedup();
    bounds
}

/// Turns a snapshot's native reads into peeks while it lives.
struct Peeking<'a>(&'a [&'a dyn NativeBoard]);

impl<'a> Peeking<'a> {
    fn on(trees: &'a [&'a dyn NativeBoard]) -> Self {
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
    /// end), in order, with the players and (with `ranks`) the distinct
    /// scores better than the first one's, in a snapshot that reads each
    /// tree once (so writers never make it stale).
    ///
    /// A look outside the snapshot (peeks, `select`) finds the player a
    /// little before `from`, the anchor. Then one read per tree, the same
    /// read for all (one pipelined round on Redis Cluster), counts the
    /// players ahead of the anchor (each tree with its own tie bound,
    /// `merge::tie_bound`) and of its score, and lists the tree's next
    /// members from the anchor's place: the anchor's exact position is
    /// the sum of the counts, and the merged lists are the board's order
    /// from there. Should the board have moved between the look and the
    /// read so that the anchor now lies past `from`, or the lists fall
    /// short of the page, it is read again from an anchor twice as far
    /// before (that second read may find the snapshot stale; the store
    /// then runs the query again).
    fn anchored(&self, from: u64, want: u64, ranks: bool) -> Result<(Vec<Found>, u64, u64)> {
        let k = self.trees.len();
        let mut slack = SLACK;
        loop {
            let look = from.saturating_sub(slack).max(1);
            let anchor = {
                let _peeking = Peeking::on(&self.trees);
                self.select(look, 1)?.pop()
            };
            // Nothing at the look's position when it looked: the page is
            // past the end.
            let Some((score, arrival, at, _)) = anchor else {
                return Ok((Vec::new(), 0, 0));
            };
            let bound = |j: usize| tie_bound(j, at, arrival);
            let bounds = tie_bounds(k, at, arrival);
            let mut places: Vec<(i64, Option<u64>)> =
                bounds.iter().map(|&b| (score, Some(b))).collect();
            places.push((score, None));
            let n = (from - look).saturating_add(want).saturating_add(slack);
            let (mut ahead, mut better) = (0u64, 0u64);
            let (mut merged, mut exact) = (Vec::new(), usize::MAX);
            let mut distinct = Vec::new();
            for (j, tree) in self.trees.iter().enumerate() {
                let read = tree.read_from((score, bounds[0]), n, &places, ranks)?;
                let at = bounds.binary_search(&bound(j)).ok();
                ahead += at
                    .and_then(|at| read.counts.get(at).copied())
                    .ok_or_else(|| self.corrupt("no count"))?;
                better += read.counts.last().copied().unwrap_or(0);
                let cut = read.members.len() as u64 == n;
                let mine: Vec<Found> = read
                    .members
                    .into_iter()
                    .filter(|&(s, a, _)| (s, a) != (score, a) || a >= bound(j))
                    .map(|(s, a, p)| (s, a, j, p))
                    .collect();
                if cut {
                    exact = exact.min(mine.len());
                }
                merged.extend(mine);
                distinct.extend(read.distinct);
            }
            if ahead > from - 1 {
                slack = slack.saturating_mul(2);
                continue;
            }
            let skip = (from - 1 - ahead) as usize;
            if skip.saturating_add(want as usize) > exact {
                slack = slack.saturating_mul(2);
                continue;
            }
            sort(&mut merged);
            let found: Vec<Found> = merged
                .iter()
                .skip(skip)
                .take(want as usize)
                .cloned()
                .collect();
            let Some(&(first, ..)) = found.first() else {
                return Ok((found, 0, 0));
            };
            if !ranks {
                return Ok((found, 0, 0));
            }
            let before: Vec<&Found> = merged[..skip].iter().filter(|f| f.0 > first).collect();
            let above = match first == score {
                true => better,
                false => ahead + before.len() as u64,
            };
            distinct.extend(before.iter().map(|f| f.0));
            // Players at the anchor's score ahead of it hold that score
            // too, though none of them is listed.
            if first < score && ahead > better {
                distinct.push(score);
            }
            distinct.sort_unstable();
            distinct.dedup();
            return Ok((found, above, distinct.len() as u64));
        }
    }
}

impl Snapshot for NativeTrees<'_> {
    fn above(&self, score: i64) -> Result<u64> {
        let mut above = 0;
        for tree in &self.trees {
            above += tree.above(score, false)?.0;
        }
        Ok(above)
    }

    /// The trees' distinct scores above, read whole and deduplicated.
    fn distinct_above(&self, score: i64) -> Result<u64> {
        let mut all = Vec::new();
        for tree in &self.trees {
            let mut after = None;
            loop {
                let chunk = tree.distinct_better(score, after, DISTINCT_CHUNK)?;
                after = chunk.last().copied();
                let done = (chunk.len() as u64) < DISTINCT_CHUNK;
                all.extend(chunk);
                if done {
                    break;
                }
            }
        }
        all.sort_unstable();
        all.dedup();
        Ok(all.len() as u64)
    }

    fn position_of(&self, t: usize, place: (i64, u64)) -> Result<u64> {
        Ok(1 + self.before_all(t, place)?.iter().sum::<u64>())
    }

    fn score_at(&self, position: u64) -> Result<Option<i64>> {
        if position == 0 {
            return Ok(None);
        }
        Ok(self.anchored(position, 1, false)?.0.first().map(|f| f.0))
    }

    fn page(&self, from: u64, to: u64) -> Result<Vec<(Entry, usize)>> {
        let (found, above, dense) = self.anchored(from, to - from + 1, true)?;
        Ok(ranked(found, from, above, dense))
    }

    fn len(&self) -> Result<u64> {
        let mut n = 0;
        for tree in &self.trees {
            n += tree.len()?;
        }
        Ok(n)
    }

    /// One read per tree, the same for all: the players above `hi` and at
    /// or above `lo` (below `(lo, u64::MAX)`, a place no arrival reaches),
    /// the first `limit` members from `hi` down, and the distinct scores
    /// above `hi`. The first listed player has nobody between them and
    /// `hi`, so the players above `hi` give their ranks.
    fn between(&self, span: Span, limit: u64) -> Result<(u64, Vec<(Entry, usize)>)> {
        let places = [(span.hi, None), (span.lo, Some(u64::MAX))];
        let (mut above, mut upto) = (0u64, 0u64);
        let (mut merged, mut distinct) = (Vec::new(), Vec::new());
        for (j, tree) in self.trees.iter().enumerate() {
            let read = tree.read_from((span.hi, 0), limit, &places, limit > 0)?;
            let [over, from_lo] = read.counts[..] else {
                return Err(self.corrupt("no count"));
            };
            above += over;
            upto += from_lo;
            merged.extend(
                read.members
                    .into_iter()
                    .filter(|&(s, ..)| s >= span.lo)
                    .map(|(s, a, p)| (s, a, j, p)),
            );
            distinct.extend(read.distinct);
        }
        let n = upto.saturating_sub(above);
        // Each tree listed its first `limit` in the span: the merged first
        // `limit` are the board's.
        sort(&mut merged);
        merged.truncate(n.min(limit) as usize);
        distinct.sort_unstable();
        distinct.dedup();
        Ok((n, ranked(merged, above + 1, above, distinct.len() as u64)))
    }

    /// The player's place is looked up outside the snapshot
    /// (`peek_place`), then every tree is read once, the same read for
    /// each, one pipelined round on Redis Cluster: the players ahead of
    /// the place (each tree with its tie bound) and of its score, and the
    /// distinct scores above if asked; the player's tree confirms the
    /// place in that same read. A snapshot whose trees are each read once
    /// cannot find one of them moved between its reads, so writers never
    /// make it run again; only the player's own move between the look-up
    /// and the read does (`Looked::Moved`).
    fn place(&self, t: usize, player: &str, asked: Asked) -> Result<Looked> {
        let Some((score, arrival)) = self.trees[t].peek_place(player)? else {
            return Ok(Looked::Absent);
        };
        let bound = |j: usize| tie_bound(j, t, arrival);
        let bounds = tie_bounds(self.trees.len(), t, arrival);
        let mut places: Vec<(i64, Option<u64>)> =
            bounds.iter().map(|&b| (score, Some(b))).collect();
        places.push((score, None));
        // Before the last place any player can hold: every player.
        places.push((i64::MIN, Some(u64::MAX)));
        let (mut ahead, mut better, mut len, mut distinct) = (0, 0, 0, Vec::new());
        for (j, tree) in self.trees.iter().enumerate() {
            let (placed, read) = tree.counts_at(player, (score, arrival), &places, asked.dense)?;
            if j == t {
                match placed {
                    Placed::There => {}
                    Placed::Absent => return Ok(Looked::Absent),
                    Placed::Elsewhere => return Ok(Looked::Moved),
                }
            }
            let at = bounds.binary_search(&bound(j)).ok();
            ahead += at
                .and_then(|at| read.counts.get(at).copied())
                .ok_or_else(|| self.corrupt("no count"))?;
            let [.., over, all] = read.counts[..] else {
                return Err(self.corrupt("no count"));
            };
            (better, len) = (better + over, len + all);
            distinct.extend(read.distinct);
        }
        distinct.sort_unstable();
        distinct.dedup();
        Ok(Looked::At(Placing {
            score,
            rank: better + 1,
            position: Some(ahead + 1),
            dense: asked.dense.then_some(distinct.len() as u64 + 1),
            len: Some(len),
        }))
    }
}

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
//! board's size in one read; `score_at_percentile` peeks at the size too
//! and counts it again in its one read per tree.
//!
//! **Few round trips.** The looks are peeks the trees make alike where
//! they can (the same read of every tree, sent in one pipeline on Redis
//! Cluster), and a page's anchor is found from pivots at the ranks where
//! each tree should hold it ([`NativeTrees::locate`]): a page or
//! `score_at_rank` is three round trips, where narrowing took 9–22.

use super::super::among::{sort, Found};
use super::super::shape::Span;
use super::super::storage::Storage;
use super::super::Entry;
use super::merge::{ranked, tie_bound};
use super::snapshot::{Asked, Looked, Placing, Snapshot};
use crate::error::{Error, Result};
use crate::seam::{NativeBoard, Placed};
use look::Peeking;

mod look;

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
}

/// Members each of `k` trees lists for a merged run of `need` of them:
/// a tree's share of consecutive players is binomial (the trees are hash
/// samples), so its mean and four deviations; a tree that holds more makes
/// the run short, and the read is made again, longer.
fn share(need: u64, k: u64) -> u64 {
    let mean = need / k.max(1);
    mean.saturating_add(4 * mean.isqrt() + 16).min(need)
}

/// Where a look lands: an ordinal position, or the one the board's size
/// gives (a percentile's place, `ranges::nearest_rank`).
#[derive(Clone, Copy)]
enum Target<'a> {
    At(u64),
    OfLen(&'a dyn Fn(u64) -> u64),
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
    ///
    /// With a target of the board's size, the size comes from a peek and
    /// is counted again in the one read; should it have changed the
    /// target, the page is read again for the new one.
    fn anchored(
        &self,
        target: Target<'_>,
        want: u64,
        ranks: bool,
    ) -> Result<(Vec<Found>, u64, u64)> {
        let k = self.trees.len();
        let mut slack = SLACK;
        let mut len = match target {
            Target::At(_) => None,
            Target::OfLen(_) => Some(self.peek_len()?),
        };
        loop {
            let from = match (target, len) {
                (Target::At(from), _) => from,
                (Target::OfLen(_), Some(0)) => return Ok((Vec::new(), 0, 0)),
                (Target::OfLen(place), n) => place(n.unwrap_or(0)),
            };
            let look = from.saturating_sub(slack).max(1);
            let anchor = {
                let _peeking = Peeking::on(&self.trees);
                self.locate(look)?
            };
            // Nothing at the look's position when it looked: the page is
            // past the end.
            let Some(((score, arrival, at, _), found_at)) = anchor else {
                return Ok((Vec::new(), 0, 0));
            };
            let bound = |j: usize| tie_bound(j, at, arrival);
            let bounds = tie_bounds(k, at, arrival);
            let mut places: Vec<(i64, Option<u64>)> =
                bounds.iter().map(|&b| (score, Some(b))).collect();
            // Then the players of better scores, and every player (before
            // the last place any player can hold).
            places.push((score, None));
            places.push((i64::MIN, Some(u64::MAX)));
            let need = (from - found_at.min(from))
                .saturating_add(want)
                .saturating_add(slack);
            let n = share(need, k as u64);
            let (mut ahead, mut better, mut counted) = (0u64, 0u64, 0u64);
            let (mut merged, mut lasts) = (Vec::new(), Vec::new());
            let mut distinct = Vec::new();
            for (j, tree) in self.trees.iter().enumerate() {
                let read = tree.read_from((score, bounds[0]), n, &places, ranks)?;
                let at = bounds.binary_search(&bound(j)).ok();
                ahead += at
                    .and_then(|at| read.counts.get(at).copied())
                    .ok_or_else(|| self.corrupt("no count"))?;
                let [.., over, all] = read.counts[..] else {
                    return Err(self.corrupt("no count"));
                };
                (better, counted) = (better + over, counted + all);
                let cut = read.members.len() as u64 == n;
                let mine: Vec<Found> = read
                    .members
                    .into_iter()
                    .filter(|&(s, a, _)| (s, a) != (score, a) || a >= bound(j))
                    .map(|(s, a, p)| (s, a, j, p))
                    .collect();
                if cut {
                    lasts.push(mine.last().map(|&(s, a, ..)| (s, a, j)));
                }
                merged.extend(mine);
                distinct.extend(read.distinct);
            }
            if let (Target::OfLen(place), Some(_)) = (target, len)
                && (counted == 0 || place(counted) != from)
            {
                len = Some(counted);
                continue;
            }
            if ahead > from - 1 {
                slack = slack.saturating_mul(2);
                continue;
            }
            sort(&mut merged);
            // A tree whose list was cut may hold players past its last
            // one listed: the merged list is whole up to the first such
            // last one (and, with none cut, to the board's end).
            let mut exact = usize::MAX;
            for last in &lasts {
                exact = exact.min(match *last {
                    Some((s, a, j)) => merged
                        .iter()
                        .position(|f| (f.0, f.1, f.2) == (s, a, j))
                        .map_or(0, |i| i + 1),
                    None => 0,
                });
            }
            let skip = (from - 1 - ahead) as usize;
            if skip.saturating_add(want as usize) > exact {
                slack = slack.saturating_mul(2);
                continue;
            }
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
        Ok(self
            .anchored(Target::At(position), 1, false)?
            .0
            .first()
            .map(|f| f.0))
    }

    /// The size and the place in the same read of each tree (after peeks),
    /// so writers do not make it run again.
    fn score_at_len(&self, place: &dyn Fn(u64) -> u64) -> Result<Option<i64>> {
        let found = self.anchored(Target::OfLen(place), 1, false)?.0;
        Ok(found.first().map(|f| f.0))
    }

    fn page(&self, from: u64, to: u64) -> Result<Vec<(Entry, usize)>> {
        let (found, above, dense) = self.anchored(Target::At(from), to - from + 1, true)?;
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

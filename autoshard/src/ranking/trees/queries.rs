//! A split board's queries: the trees read together (`merge.rs`), then
//! scores turned back from tree scores and entry data read, per tree. The
//! board's [`Shape`] (its every read) and the merged snapshot's [`View`]
//! (the reads of `shape/ranges.rs`).

use super::merge::read_all;
use super::snapshot::{self, held, Asked, Looked, Placing, Snapshot};
use super::{tree_of, Split};
use crate::error::Result;
use crate::ranking::shape;
use crate::ranking::shape::{ranges, Shape, Span, View, Writes};
use crate::ranking::storage::Storage;
use crate::ranking::tree::Geometry;
use crate::ranking::{among, Entry, Ranking, Tie};

/// A read of a player's place in one snapshot of every tree, and what
/// else it made of it.
type LookIn<'f, R> = dyn FnMut(&[&dyn Storage]) -> Result<(Looked, R)> + 'f;

/// How many times a rank is read before it gives up with
/// [`Error::Conflict`](crate::Error::Conflict): each time, the player moved
/// between the look-up of their place and the snapshot that counts it.
const RANK_ATTEMPTS: u32 = 1_000;

/// The shape of a board split into trees.
pub(in crate::ranking) struct Trees;

pub(in crate::ranking) static SHAPE: &Trees = &Trees;

pub(super) fn split(b: &Ranking) -> Split<'_> {
    super::split(b).expect("the shape of a split board")
}

impl Shape for Trees {
    fn writes(&self) -> &'static dyn Writes {
        SHAPE
    }

    fn rank_of_score(&self, b: &Ranking, score: i64) -> Result<u64> {
        let tree = b.inner.rules().tree_score(b.inner.geometry(), score)?;
        let offset = b.inner.geometry().checked_offset(tree)?;
        split(b).rank_of_offset(offset)
    }

    fn rank(&self, b: &Ranking, player: &str, tie: Tie) -> Result<Option<u64>> {
        split(b).rank(player, tie)
    }

    fn score(&self, b: &Ranking, player: &str) -> Result<Option<i64>> {
        split(b).score(player)
    }

    fn score_at_rank(&self, b: &Ranking, rank: u64) -> Result<Option<i64>> {
        split(b).score_at_rank(rank)
    }

    fn page(&self, b: &Ranking, from: u64, to: u64) -> Result<Vec<Entry>> {
        split(b).page(from, to)
    }

    fn around(&self, b: &Ranking, player: &str, k: u64) -> Result<Vec<Entry>> {
        split(b).around(player, k)
    }

    fn among(&self, b: &Ranking, names: &[&str]) -> Result<Vec<Entry>> {
        split(b).among(names)
    }

    fn len(&self, b: &Ranking) -> Result<u64> {
        split(b).len()
    }

    fn check_integrity(&self, b: &Ranking) -> Result<()> {
        split(b).check_integrity()
    }

    fn entry(&self, b: &Ranking, player: &str) -> Result<Option<Entry>> {
        split(b).entry(player)
    }

    fn count_between(&self, b: &Ranking, span: Option<Span>) -> Result<u64> {
        let Some(span) = span else { return Ok(0) };
        let g = b.inner.geometry();
        split(b).merged(&mut |v| ranges::count_between(v, g, span))
    }

    fn between(&self, b: &Ranking, span: Option<Span>, limit: u64) -> Result<Vec<Entry>> {
        let Some(span) = span else {
            return Ok(Vec::new());
        };
        let g = b.inner.geometry();
        split(b).merged(&mut |v| ranges::between(v, g, span, limit))
    }

    fn percentile(&self, b: &Ranking, player: &str) -> Result<Option<f64>> {
        split(b).percentile(player)
    }

    fn score_at_percentile(&self, b: &Ranking, p: f64) -> Result<Option<i64>> {
        split(b).merged(&mut |v| ranges::score_at_percentile(v, p))
    }
}

/// One snapshot of every tree, as one board's order.
struct Merged<'a> {
    split: &'a Split<'a>,
    sts: &'a [&'a dyn Storage],
    g: &'a Geometry,
    order: Box<dyn Snapshot + 'a>,
}

impl View for Merged<'_> {
    fn above(&self, tree: i64) -> Result<u64> {
        self.g.checked_offset(tree)?;
        self.order.above(tree)
    }

    fn len(&self) -> Result<u64> {
        self.order.len()
    }

    fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
        let found = self.order.page(from, to)?;
        self.split.entries(self.sts, found)
    }

    fn entry(&self, player: &str) -> Result<Option<Entry>> {
        let (sts, g, order) = (self.sts, self.g, &self.order);
        let t = tree_of(player, sts.len());
        let Some(place) = held(sts, g, t, player)? else {
            return Ok(None);
        };
        let entry = Entry {
            player: player.to_owned(),
            score: place.0,
            rank: order.above(place.0)? + 1,
            dense: order.distinct_above(place.0)? + 1,
            position: order.position_of(t, place)?,
            data: None,
        };
        Ok(self.split.entries(sts, vec![(entry, t)])?.pop())
    }

    /// The snapshot's own (on native trees, one read per tree).
    fn between(&self, _: &Geometry, span: Span, limit: u64) -> Result<(u64, Vec<Entry>)> {
        let (n, found) = self.order.between(span, limit)?;
        Ok((n, self.split.entries(self.sts, found)?))
    }

    fn score_at(&self, position: u64) -> Result<Option<i64>> {
        let found = self.order.score_at(position)?;
        self.caller_score(found)
    }

    /// The snapshot's own (on native trees, one read per tree).
    fn score_at_len(&self, place: &dyn Fn(u64) -> u64) -> Result<Option<i64>> {
        let found = self.order.score_at_len(place)?;
        self.caller_score(found)
    }
}

impl Merged<'_> {
    /// A tree score found, as the caller's score.
    fn caller_score(&self, found: Option<i64>) -> Result<Option<i64>> {
        let rules = self.split.board.inner.rules();
        match found {
            Some(score) => Ok(Some(rules.checked_score(self.sts[0], self.g, score)?)),
            None => Ok(None),
        }
    }
}

impl Split<'_> {
    /// 1 + players better than the tree score at `offset`: each tree's
    /// count, in one snapshot of every tree.
    pub(in crate::ranking) fn rank_of_offset(&self, offset: u64) -> Result<u64> {
        let g = self.board.inner.geometry();
        let score = g.score(offset);
        read_all(self.trees, &mut |sts| {
            Ok(snapshot::of(sts, g)?.above(score)? + 1)
        })
    }

    /// A player who moves while their rank is read is read again, in a
    /// new snapshot (`snapshot::Looked::Moved`: a split board of native
    /// trees looks up the player's place before its snapshot, so that it
    /// reads each tree once).
    pub(in crate::ranking) fn rank(&self, player: &str, tie: Tie) -> Result<Option<u64>> {
        let t = tree_of(player, self.trees.len());
        let g = self.board.inner.geometry();
        let asked = Asked {
            position: tie == Tie::Ordinal,
            dense: tie == Tie::Dense,
            len: false,
        };
        let found = self.place(&mut |sts| {
            let looked = snapshot::of(sts, g)?.place(t, player, asked)?;
            Ok((looked, ()))
        })?;
        Ok(found.map(|(p, ())| match tie {
            Tie::Standard => p.rank,
            Tie::Ordinal => p.position.expect("asked"),
            Tie::Dense => p.dense.expect("asked"),
        }))
    }

    /// `player`'s entry: their place and all three ranks, read as `rank`
    /// reads them.
    pub(in crate::ranking) fn entry(&self, player: &str) -> Result<Option<Entry>> {
        let t = tree_of(player, self.trees.len());
        let g = self.board.inner.geometry();
        let found = self.place(&mut |sts| {
            let asked = Asked {
                position: true,
                dense: true,
                len: false,
            };
            let looked = snapshot::of(sts, g)?.place(t, player, asked)?;
            let Looked::At(p) = looked else {
                return Ok((looked, None));
            };
            let entry = Entry {
                player: player.to_owned(),
                score: p.score,
                rank: p.rank,
                dense: p.dense.expect("asked"),
                position: p.position.expect("asked"),
                data: None,
            };
            Ok((looked, self.entries(sts, vec![(entry, t)])?.pop()))
        })?;
        Ok(found.and_then(|(_, entry)| entry))
    }

    /// `player`'s percentile (`ranges::percent`): their standard rank and
    /// the board's size, read as `rank` reads them.
    pub(in crate::ranking) fn percentile(&self, player: &str) -> Result<Option<f64>> {
        let t = tree_of(player, self.trees.len());
        let g = self.board.inner.geometry();
        let asked = Asked {
            position: false,
            dense: false,
            len: true,
        };
        let found = self.place(&mut |sts| {
            let looked = snapshot::of(sts, g)?.place(t, player, asked)?;
            Ok((looked, ()))
        })?;
        Ok(found.map(|(p, ())| ranges::percent(p.rank, p.len.expect("asked"))))
    }

    /// Runs `f` over one snapshot of every tree until it finds the player
    /// in place or absent: a player who moved between the look-up of their
    /// place and the snapshot (`Looked::Moved`) is read again.
    fn place<R>(&self, f: &mut LookIn<'_, R>) -> Result<Option<(Placing, R)>> {
        for _ in 0..RANK_ATTEMPTS {
            match read_all(self.trees, f)? {
                (Looked::At(p), r) => return Ok(Some((p, r))),
                (Looked::Absent, _) => return Ok(None),
                (Looked::Moved, _) => {}
            }
        }
        Err(crate::Error::Conflict {
            attempts: RANK_ATTEMPTS,
        })
    }

    pub(in crate::ranking) fn score_at_rank(&self, rank: u64) -> Result<Option<i64>> {
        let (g, rules) = (self.board.inner.geometry(), self.board.inner.rules());
        read_all(
            self.trees,
            &mut |sts| match snapshot::of(sts, g)?.score_at(rank)? {
                Some(score) => Ok(Some(rules.checked_score(sts[0], g, score)?)),
                None => Ok(None),
            },
        )
    }

    pub(in crate::ranking) fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
        let g = self.board.inner.geometry();
        read_all(self.trees, &mut |sts| {
            let found = snapshot::of(sts, g)?.page(from, to)?;
            self.entries(sts, found)
        })
    }

    /// The player's ordinal rank, then the page around it, each its own
    /// snapshot (each reads every tree once on native trees, so writers do
    /// not make them run again): the page is the player's neighbourhood in
    /// its snapshot if it holds the player where the rank said, else the
    /// player moved in between and both are read again.
    pub(in crate::ranking) fn around(&self, player: &str, k: u64) -> Result<Vec<Entry>> {
        for _ in 0..RANK_ATTEMPTS {
            let Some(position) = self.rank(player, Tie::Ordinal)? else {
                return Ok(Vec::new());
            };
            let from = position.saturating_sub(k).max(1);
            let page = self.page(from, position.saturating_add(k))?;
            let at = (position - from) as usize;
            if page.get(at).is_some_and(|e| e.player == player) {
                return Ok(page);
            }
        }
        Err(crate::Error::Conflict {
            attempts: RANK_ATTEMPTS,
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
        let g = self.board.inner.geometry();
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

    /// Runs `f` over one snapshot of every tree ([`read_all`]).
    fn merged<R>(&self, f: &mut dyn FnMut(&dyn View) -> Result<R>) -> Result<R> {
        let g = self.board.inner.geometry();
        read_all(self.trees, &mut |sts| {
            f(&Merged {
                split: self,
                sts,
                g,
                order: snapshot::of(sts, g)?,
            })
        })
    }

    /// Entries as the merge found them, finished by each one's tree (its
    /// score back from the tree score, its entry data), in order.
    fn entries(&self, sts: &[&dyn Storage], found: Vec<(Entry, usize)>) -> Result<Vec<Entry>> {
        let g = self.board.inner.geometry();
        let mut per_tree = vec![Vec::new(); self.trees.len()];
        let order: Vec<usize> = found.iter().map(|&(_, t)| t).collect();
        for (entry, t) in found {
            per_tree[t].push(entry);
        }
        let mut finished = Vec::with_capacity(per_tree.len());
        for (t, entries) in per_tree.into_iter().enumerate() {
            let done = match entries.is_empty() {
                true => entries,
                false => shape::entries(&self.trees[t], sts[t], g, entries)?,
            };
            finished.push(done.into_iter());
        }
        Ok(order
            .into_iter()
            .map(|t| finished[t].next().expect("one entry per tree index"))
            .collect())
    }
}

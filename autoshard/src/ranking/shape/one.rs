//! A board of one tree: each read in one read transaction, answered by the
//! count tree's descents (`query/`) or, where the store orders the board
//! itself, by the store's native board (`seam::NativeBoard`). Which of the
//! two is known only inside the transaction ([`Storage::native`]), so
//! [`view`] is this shape's one place that asks.

use super::ranges;
use super::{finish, Shape, Span, View, Writes};
use crate::error::Result;
use crate::ranking::among;
use crate::ranking::policy::Rules;
use crate::ranking::query::{self, Want};
use crate::ranking::storage::Storage;
use crate::ranking::tree::Geometry;
use crate::ranking::{integrity, native, Entry, Ranking, Tie};
use crate::seam::{NativeBoard, ReadPlan};

/// The shape of a board of one tree.
pub(in crate::ranking) struct OneTree;

pub(in crate::ranking) static ONE_TREE: &OneTree = &OneTree;

impl Shape for OneTree {
    fn writes(&self) -> &'static dyn Writes {
        ONE_TREE
    }

    fn rank_of_score(&self, b: &Ranking, score: i64) -> Result<u64> {
        let tree = b.inner.rules().tree_score(b.inner.geometry(), score)?;
        b.inner.geometry().checked_offset(tree)?;
        let plan = plan(b, None, Some(tree), false);
        read_planned(b, &plan, |st, g| Ok(view(b, st, g).above(tree)? + 1))
    }

    fn rank(&self, b: &Ranking, player: &str, tie: Tie) -> Result<Option<u64>> {
        let plan = ReadPlan {
            counters: tie == Tie::Ordinal,
            distinct: tie == Tie::Dense,
            ..plan(b, Some(player), None, tie == Tie::Ordinal)
        };
        read_planned(b, &plan, |st, g| {
            if let Some(native) = st.native() {
                return native::rank(native, player, tie);
            }
            tree_rank(st, g, player, tie)
        })
    }

    fn score(&self, b: &Ranking, player: &str) -> Result<Option<i64>> {
        let rules = b.inner.rules();
        let plan = ReadPlan {
            depth: 0,
            ..plan(b, Some(player), None, false)
        };
        read_planned(b, &plan, |st, g| match st.player(player)? {
            Some((tree, _)) => Ok(Some(rules.checked_score(st, g, tree)?)),
            None => Ok(None),
        })
    }

    fn score_at_rank(&self, b: &Ranking, rank: u64) -> Result<Option<i64>> {
        b.inner.read(|st, g| view(b, st, g).score_at(rank))
    }

    fn page(&self, b: &Ranking, from: u64, to: u64) -> Result<Vec<Entry>> {
        b.inner.read(|st, g| view(b, st, g).page(from, to))
    }

    fn around(&self, b: &Ranking, player: &str, k: u64) -> Result<Vec<Entry>> {
        b.inner.read(|st, g| {
            if let Some(native) = st.native() {
                return super::entries(b, st, g, native::entries(native.around(player, k)?));
            }
            let Some((score, arrival)) = st.player(player)? else {
                return Ok(Vec::new());
            };
            let want = Want {
                distinct: false,
                counter: true,
            };
            let place = player_place(st, g, score, want)?;
            let position =
                place.above + query::arrived_before(st, g, score, place.counter, arrival)? + 1;
            let (from, to) = (
                position.saturating_sub(k).max(1),
                position.saturating_add(k),
            );
            super::entries(b, st, g, query::page(st, g, from, to)?)
        })
    }

    fn among(&self, b: &Ranking, names: &[&str]) -> Result<Vec<Entry>> {
        b.inner.read(|st, g| {
            let mut found = among::found_in(st, g, 0, names)?;
            let ranked = among::rank_set(&mut found);
            super::entries(b, st, g, ranked.into_iter().map(|(e, _)| e).collect())
        })
    }

    fn len(&self, b: &Ranking) -> Result<u64> {
        b.inner.read(|st, g| view(b, st, g).len())
    }

    fn check_integrity(&self, b: &Ranking) -> Result<()> {
        let shards = b.inner.config.node_shards();
        b.inner.read(|st, g| match st.native() {
            Some(native) => native.check(),
            None => integrity::check(st, g, shards),
        })
    }

    fn entry(&self, b: &Ranking, player: &str) -> Result<Option<Entry>> {
        b.inner.read(|st, g| view(b, st, g).entry(player))
    }

    fn count_between(&self, b: &Ranking, span: Option<Span>) -> Result<u64> {
        let Some(span) = span else { return Ok(0) };
        b.inner
            .read(|st, g| ranges::count_between(&*view(b, st, g), g, span))
    }

    fn between(&self, b: &Ranking, span: Option<Span>, limit: u64) -> Result<Vec<Entry>> {
        let Some(span) = span else {
            return Ok(Vec::new());
        };
        b.inner
            .read(|st, g| ranges::between(&*view(b, st, g), g, span, limit))
    }

    fn percentile(&self, b: &Ranking, player: &str) -> Result<Option<f64>> {
        b.inner
            .read(|st, g| ranges::percentile(&*view(b, st, g), player))
    }

    fn score_at_percentile(&self, b: &Ranking, p: f64) -> Result<Option<i64>> {
        b.inner
            .read(|st, g| ranges::score_at_percentile(&*view(b, st, g), p))
    }
}

/// The view of one tree's transaction: the store's native board if it
/// keeps one, else the count tree.
fn view<'a>(b: &Ranking, st: &'a dyn Storage, g: &'a Geometry) -> Box<dyn View + 'a> {
    let (rules, data) = (b.inner.rules(), b.inner.config.entry_data() > 0);
    match st.native() {
        Some(native) => Box::new(Native {
            native,
            tree: CountTree { st, g, rules, data },
        }),
        None => Box::new(CountTree { st, g, rules, data }),
    }
}

/// One transaction of a board kept in the count tree.
pub(in crate::ranking) struct CountTree<'a> {
    pub st: &'a dyn Storage,
    pub g: &'a Geometry,
    pub rules: Rules,
    /// Whether the board keeps entry data.
    pub data: bool,
}

impl View for CountTree<'_> {
    fn above(&self, tree: i64) -> Result<u64> {
        let offset = self.g.checked_offset(tree)?;
        Ok(query::place_of(self.st, self.g, offset, Want::default())?.above)
    }

    fn len(&self) -> Result<u64> {
        query::len(self.st, self.g)
    }

    fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
        let found = query::page(self.st, self.g, from, to)?;
        finish(self.st, self.g, self.rules, self.data, found)
    }

    fn entry(&self, player: &str) -> Result<Option<Entry>> {
        let (st, g) = (self.st, self.g);
        let Some((score, arrival)) = st.player(player)? else {
            return Ok(None);
        };
        let want = Want {
            distinct: true,
            counter: true,
        };
        let place = player_place(st, g, score, want)?;
        let entry = Entry {
            player: player.to_owned(),
            score,
            rank: place.above + 1,
            dense: place.distinct_above + 1,
            position: place.above
                + query::arrived_before(st, g, score, place.counter, arrival)?
                + 1,
            data: None,
        };
        Ok(finish(st, g, self.rules, self.data, vec![entry])?.pop())
    }

    fn score_at(&self, position: u64) -> Result<Option<i64>> {
        let found = query::locate(self.st, self.g, position)?;
        found
            .map(|l| self.rules.checked_score(self.st, self.g, l.score))
            .transpose()
    }
}

/// One transaction of a board the store orders natively: each statistic
/// one call (one round trip on Redis); entries finished as the count
/// tree's.
struct Native<'a> {
    native: &'a dyn NativeBoard,
    tree: CountTree<'a>,
}

impl View for Native<'_> {
    fn above(&self, tree: i64) -> Result<u64> {
        Ok(self.native.above(tree, false)?.0)
    }

    fn len(&self) -> Result<u64> {
        self.native.len()
    }

    fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
        let found = native::entries(self.native.range(from, to)?);
        let t = &self.tree;
        finish(t.st, t.g, t.rules, t.data, found)
    }

    fn entry(&self, player: &str) -> Result<Option<Entry>> {
        let found = native::entries(self.native.around(player, 0)?);
        let t = &self.tree;
        Ok(finish(t.st, t.g, t.rules, t.data, found)?.pop())
    }

    /// One call (one script on Redis), instead of two counts and a page.
    fn between(&self, g: &Geometry, span: Span, limit: u64) -> Result<(u64, Vec<Entry>)> {
        let below = (span.lo != g.min()).then(|| span.lo - 1);
        let (n, found) = self.native.between(span.hi, below, limit)?;
        let t = &self.tree;
        Ok((
            n,
            finish(t.st, t.g, t.rules, t.data, native::entries(found))?,
        ))
    }

    fn score_at(&self, position: u64) -> Result<Option<i64>> {
        let t = &self.tree;
        match self.native.range(position, position)?.pop() {
            Some(e) => Ok(Some(t.rules.checked_score(t.st, t.g, e.score)?)),
            None => Ok(None),
        }
    }
}

/// A [`ReadPlan`] of this board's geometry: `player`'s row or `score`'s
/// path, with the player's arrival path if `arrivals`.
fn plan<'a>(
    ranking: &Ranking,
    player: Option<&'a str>,
    score: Option<i64>,
    arrivals: bool,
) -> ReadPlan<'a> {
    let g = ranking.inner.geometry();
    ReadPlan {
        player,
        score,
        arrivals,
        counters: false,
        distinct: false,
        min: g.min(),
        branching: g.branching(),
        depth: g.depth(),
    }
}

/// [`read`](Ranking::read) of a read that descends one path, which a
/// store may answer in one statement
/// ([`BoardStore::read_board_planned`](crate::seam::BoardStore::read_board_planned)).
fn read_planned<R>(
    ranking: &Ranking,
    plan: &ReadPlan<'_>,
    f: impl Fn(&dyn Storage, &Geometry) -> Result<R>,
) -> Result<R> {
    if !ranking.inner.trees.is_empty() {
        // Refused there, loudly.
        return ranking.inner.read(f);
    }
    let mut out = None;
    ranking
        .inner
        .boards
        .read_board_planned(ranking.inner.board(), plan, &mut |st| {
            out = Some(f(st, ranking.inner.geometry())?);
            Ok(())
        })?;
    Ok(out.expect("set by a successful read"))
}

/// `player`'s rank under `tie` by the count tree's descents (the memory
/// harness's oracle board answers with this too).
pub(in crate::ranking) fn tree_rank(
    st: &dyn Storage,
    g: &Geometry,
    player: &str,
    tie: Tie,
) -> Result<Option<u64>> {
    let Some((score, arrival)) = st.player(player)? else {
        return Ok(None);
    };
    let want = Want {
        distinct: tie == Tie::Dense,
        counter: tie == Tie::Ordinal,
    };
    let place = player_place(st, g, score, want)?;
    // Counts are at most `i64::MAX` (`query::count`), so none of these sums
    // can overflow, whatever the rows hold.
    Ok(Some(match tie {
        Tie::Standard => place.above + 1,
        Tie::Dense => place.distinct_above + 1,
        Tie::Ordinal => {
            place.above + query::arrived_before(st, g, score, place.counter, arrival)? + 1
        }
    }))
}

/// Where a held score sits: the player row says `score` is held, so a
/// counter of 0 would be corruption.
pub(in crate::ranking) fn player_place(
    st: &dyn Storage,
    g: &Geometry,
    score: i64,
    want: Want,
) -> Result<query::ScorePlace> {
    let offset = g.offset(score).ok_or_else(|| {
        st.corrupt(
            format!("player score {score}"),
            "outside the board's range".into(),
        )
    })?;
    let place = query::place_of(st, g, offset, want)?;
    if want.counter && place.counter == 0 {
        return Err(st.corrupt(
            format!("leaf of score {score}"),
            "a player holds it, but its arrival counter is 0".into(),
        ));
    }
    Ok(place)
}

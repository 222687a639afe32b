//! The exact reads: rank, score, pages and neighbours, size and the
//! integrity check, each in one read transaction (one snapshot) over the
//! descents in `query/`; a split board merges its trees' answers
//! (`trees/`), an approximate board answers from its snapshot (`approx/`).

use super::handle::check_player;
use super::query::{self, Want};
use super::storage::Storage;
use super::tree::Geometry;
use super::{approx, integrity, native, Entry, Ranking, ScoreOrder, Tie};
use crate::error::{Error, Result};
use crate::seam::ReadPlan;

impl Ranking {
    /// 1 + the number of players with a score strictly better than `score`
    /// (higher, or lower on an [`Order::LowerIsBetter`] board), whether or
    /// not anyone holds `score`. Reads: one node per tree level.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`].
    pub fn rank_of_score(&self, score: i64) -> Result<u64> {
        self.exact_only("rank_of_score")?;
        let tree = self.rules().tree_score(self.geometry(), score)?;
        let offset = self.geometry().checked_offset(tree)?;
        if let Some(split) = self.split() {
            return split.rank_of_offset(offset);
        }
        let plan = self.plan(None, Some(tree), false);
        self.read_planned(&plan, |st, g| match st.native() {
            Some(native) => Ok(native.above(tree, false)?.0 + 1),
            None => Ok(query::place_of(st, g, offset, Want::default())?.above + 1),
        })
    }

    /// `player`'s rank under `tie`, or `None` if they are not on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse;
    /// [`Error::Corrupt`] when the stored rows contradict each other; a
    /// store error.
    pub fn rank(&self, player: &str, tie: Tie) -> Result<Option<u64>> {
        check_player(player)?;
        self.exact_only("rank")?;
        if let Some(split) = self.split() {
            return split.rank(player, tie);
        }
        let plan = self.plan(Some(player), None, tie == Tie::Ordinal);
        self.read_planned(&plan, |st, g| {
            if let Some(native) = st.native() {
                return native::rank(native, player, tie);
            }
            let Some((score, arrival)) = st.player(player)? else {
                return Ok(None);
            };
            let want = Want {
                distinct: tie == Tie::Dense,
                counter: tie == Tie::Ordinal,
            };
            let place = player_place(st, g, score, want)?;
            // Counts are at most `i64::MAX` (`query::count`), so none of
            // these sums can overflow, whatever the rows hold.
            Ok(Some(match tie {
                Tie::Standard => place.above + 1,
                Tie::Dense => place.distinct_above + 1,
                Tie::Ordinal => {
                    place.above + query::arrived_before(st, g, score, place.counter, arrival)? + 1
                }
            }))
        })
    }

    /// `player`'s score, or `None` if they are not on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse,
    /// or a store error.
    pub fn score(&self, player: &str) -> Result<Option<i64>> {
        check_player(player)?;
        if let Some(split) = self.split() {
            return split.score(player);
        }
        let rules = self.rules();
        let plan = ReadPlan {
            depth: 0,
            ..self.plan(Some(player), None, false)
        };
        self.read_planned(&plan, |st, g| match st.player(player)? {
            Some((tree, _)) => Ok(Some(rules.checked_score(st, g, tree)?)),
            None => Ok(None),
        })
    }

    /// The score of the player at ordinal rank `rank` (1-based): the score
    /// `s` with `rank_of_score(s) <= rank < rank_of_score(s) + players at s`.
    /// `None` for rank 0 or past the last player.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] when the stored counts contradict each other, or
    /// a store error.
    pub fn score_at_rank(&self, rank: u64) -> Result<Option<i64>> {
        self.exact_only("score_at_rank")?;
        if let Some(split) = self.split() {
            return split.score_at_rank(rank);
        }
        let rules = self.rules();
        self.read(|st, g| {
            let tree = match st.native() {
                Some(native) => native.range(rank, rank)?.pop().map(|e| e.score),
                None => query::locate(st, g, rank)?.map(|l| l.score),
            };
            tree.map(|t| rules.checked_score(st, g, t)).transpose()
        })
    }

    /// The first `n` entries (fewer if the board is smaller).
    ///
    /// # Errors
    ///
    /// As [`page`](Ranking::page).
    pub fn top(&self, n: u64) -> Result<Vec<Entry>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        self.page(1, n)
    }

    /// The entries at ordinal ranks `from..=to` (1-based, inclusive; fewer
    /// or none past the end): "who is ranked 150 through 175?".
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] unless `1 <= from <= to`.
    pub fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
        if from == 0 || from > to {
            return Err(Error::InvalidRanking {
                reason: format!(
                    "page {from}..={to}: ranks start at 1 and a page must not end before it starts"
                ),
            });
        }
        if self.rules().approx {
            return approx::page(self, from, to);
        }
        if let Some(split) = self.split() {
            return split.page(from, to);
        }
        self.read(|st, g| {
            let found = match st.native() {
                Some(native) => native::entries(native.range(from, to)?),
                None => query::page(st, g, from, to)?,
            };
            self.entries(st, g, found)
        })
    }

    /// Entries as a query found them, with their scores back from tree
    /// scores and, on a board that keeps it, their entry data (one more
    /// statement).
    pub(super) fn entries(
        &self,
        st: &dyn Storage,
        g: &Geometry,
        mut found: Vec<Entry>,
    ) -> Result<Vec<Entry>> {
        let rules = self.rules();
        if rules.order != ScoreOrder::HigherIsBetter {
            for e in &mut found {
                e.score = rules.checked_score(st, g, e.score)?;
            }
        }
        if self.inner.config.entry_data_limit() > 0 && !found.is_empty() {
            let mut data = std::collections::HashMap::new();
            let players: Vec<&str> = found.iter().map(|e| e.player.as_str()).collect();
            st.players_data(&players, &mut |player, bytes| {
                data.insert(player.to_owned(), bytes.to_vec());
                Ok(())
            })?;
            for e in &mut found {
                e.data = data.remove(&e.player);
            }
        }
        Ok(found)
    }

    /// `player`'s entry with up to `k` entries above and `k` below, in
    /// ranking order; empty if the player is not on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse;
    /// [`Error::Corrupt`] when the stored rows contradict each other; a
    /// store error.
    pub fn around(&self, player: &str, k: u64) -> Result<Vec<Entry>> {
        check_player(player)?;
        self.exact_only("around")?;
        if let Some(split) = self.split() {
            return split.around(player, k);
        }
        self.read(|st, g| {
            if let Some(native) = st.native() {
                return self.entries(st, g, native::entries(native.around(player, k)?));
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
            self.entries(st, g, query::page(st, g, from, to)?)
        })
    }

    /// How many players are on the board. Reads: the root.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] for a negative stored count, or a store error.
    pub fn len(&self) -> Result<u64> {
        if self.rules().approx {
            return approx::len(self);
        }
        if let Some(split) = self.split() {
            return split.len();
        }
        self.read(|st, g| match st.native() {
            Some(native) => native.len(),
            None => query::len(st, g),
        })
    }

    /// Whether no player is on the board.
    ///
    /// # Errors
    ///
    /// As [`len`](Ranking::len).
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Recomputes every tree node from the player table (O(n), for tests
    /// and after a crash) and compares. Errors with [`Error::Corrupt`] on the
    /// first mismatch: a count that differs or is negative, a shard row out
    /// of place, an arrival tree that disagrees with its players.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] naming the first mismatch, or a store error.
    pub fn check_integrity(&self) -> Result<()> {
        self.exact_only("check_integrity")?;
        if let Some(split) = self.split() {
            return split.check_integrity();
        }
        let shards = self.inner.config.shard_count();
        self.read(|st, g| match st.native() {
            Some(native) => native.check(),
            None => integrity::check(st, g, shards),
        })
    }
}

/// Where a held score sits: the player row says `score` is held, so a
/// counter of 0 would be corruption.
impl Ranking {
    /// A [`ReadPlan`] of this board's geometry: `player`'s row or `score`'s
    /// path, with the player's arrival path if `arrivals`.
    fn plan<'a>(
        &self,
        player: Option<&'a str>,
        score: Option<i64>,
        arrivals: bool,
    ) -> ReadPlan<'a> {
        let g = self.geometry();
        ReadPlan {
            player,
            score,
            arrivals,
            min: g.min(),
            branching: g.branching(),
            depth: g.depth(),
        }
    }

    /// [`read`](Ranking::read) of a read that descends one path, which a
    /// store may answer in one statement
    /// ([`BoardStore::read_board_planned`](crate::seam::BoardStore::read_board_planned)).
    fn read_planned<R>(
        &self,
        plan: &ReadPlan<'_>,
        f: impl Fn(&dyn Storage, &Geometry) -> Result<R>,
    ) -> Result<R> {
        if !self.inner.trees.is_empty() {
            // Refused there, loudly.
            return self.read(f);
        }
        let mut out = None;
        self.inner
            .boards
            .read_board_planned(self.board(), plan, &mut |st| {
                out = Some(f(st, self.geometry())?);
                Ok(())
            })?;
        Ok(out.expect("set by a successful read"))
    }
}

pub(super) fn player_place(
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

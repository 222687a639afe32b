//! Ranks among an explicit set of players: Strava's "following" and club
//! boards, a friends list. The set is the caller's, so it has no board of
//! its own and no tree: its members' stored scores are read in one read
//! transaction (one statement where the store can) and ordered in memory,
//! which for a few thousand players costs less than any count the tree
//! could give (each count is a root-to-leaf walk per member).

use super::handle::check_player;
use super::storage::Storage;
use super::tree::Geometry;
use super::trees::merge::{sort, Found};
use super::{Entry, Ranking};
use crate::error::{Error, Result};

/// Most players [`Ranking::among`] ranks in one call.
pub const MAX_AMONG: usize = 10_000;

impl Ranking {
    /// The entries of `players` who are on the board, ranked among
    /// themselves: `rank`, `dense` and `position` count only members of
    /// the set, with the board's order and tie rules (among tied players,
    /// the one who reached the score first is first). Players not on the
    /// board are left out; a name given twice counts once. All scores come
    /// from one snapshot of the board.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..1_000))?;
    /// board.set_scores(&[("ann", 50), ("ben", 90), ("cat", 70), ("dan", 70)])?;
    /// // Ann follows Cat and Ben; she is third among the three of them.
    /// let friends = board.among(&["ann", "cat", "ben", "eve"])?;
    /// let places: Vec<_> = friends.iter().map(|e| (e.player.as_str(), e.rank)).collect();
    /// assert_eq!(places, [("ben", 1), ("cat", 2), ("ann", 3)]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for more than [`MAX_AMONG`] names,
    /// [`Error::InvalidName`] for a name `set_score` would refuse, a store
    /// error; [`Error::Corrupt`] for a stored score outside the board.
    pub fn among(&self, players: &[&str]) -> Result<Vec<Entry>> {
        if players.len() > MAX_AMONG {
            return Err(Error::InvalidRanking {
                reason: format!(
                    "{} players given to `among`; at most {MAX_AMONG}",
                    players.len()
                ),
            });
        }
        for player in players {
            check_player(player)?;
        }
        let mut names: Vec<&str> = players.to_vec();
        names.sort_unstable();
        names.dedup();
        if let Some(split) = self.split() {
            return split.among(&names);
        }
        self.read(|st, g| {
            let mut found = found_in(st, g, 0, &names)?;
            let ranked = rank_set(&mut found);
            self.entries(st, g, ranked.into_iter().map(|(e, _)| e).collect())
        })
    }
}

/// The stored places of `names` in the tree `t` read by `st`: tree scores,
/// arrivals and the tree, as the split board's merge orders them.
pub(super) fn found_in(
    st: &dyn Storage,
    g: &Geometry,
    t: usize,
    names: &[&str],
) -> Result<Vec<Found>> {
    let mut found = Vec::with_capacity(names.len());
    st.players(names, &mut |player, score, arrival| {
        if g.offset(score).is_none() {
            return Err(st.corrupt(
                format!("player {player:?}"),
                format!("score {score} is outside the board's range"),
            ));
        }
        found.push((score, arrival, t, player.to_owned()));
        Ok(())
    })?;
    Ok(found)
}

/// Ranks a set's places among themselves, in the one order every query
/// uses (better tree score first, then who reached it first, then the
/// tree): entries with tree scores and no data yet, each with its tree.
pub(super) fn rank_set(found: &mut [Found]) -> Vec<(Entry, usize)> {
    sort(found);
    let mut entries: Vec<(Entry, usize)> = Vec::with_capacity(found.len());
    let (mut rank, mut dense) = (0, 0);
    for (i, (score, _, t, player)) in found.iter_mut().enumerate() {
        let position = i as u64 + 1;
        if entries.last().is_none_or(|(e, _)| e.score != *score) {
            (rank, dense) = (position, dense + 1);
        }
        let entry = Entry {
            player: std::mem::take(player),
            score: *score,
            rank,
            dense,
            position,
            data: None,
        };
        entries.push((entry, *t));
    }
    entries
}

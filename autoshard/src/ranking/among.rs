//! Ranks among an explicit set of players: Strava's "following" and club
//! boards, a friends list. The set is the caller's, so it has no board of
//! its own and no tree: its members' stored scores are read in one read
//! transaction (one statement where the store can) and ordered in memory,
//! which for a few thousand players costs less than any count the tree
//! could give (each count is a root-to-leaf walk per member).

use super::handle::check_player;
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
        self.read(|st, g| {
            let mut found: Vec<(i64, u64, String)> = Vec::with_capacity(names.len());
            st.players(&names, &mut |player, score, arrival| {
                found.push((score, arrival, player.to_owned()));
                Ok(())
            })?;
            // Tree scores: higher is better on every board (`policy.rs`).
            found.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut entries = Vec::with_capacity(found.len());
            let (mut rank, mut dense) = (0, 0);
            for (i, (score, _, player)) in found.into_iter().enumerate() {
                if g.offset(score).is_none() {
                    return Err(st.corrupt(
                        format!("player {player:?}"),
                        format!("score {score} is outside the board's range"),
                    ));
                }
                let position = i as u64 + 1;
                if entries.last().is_none_or(|e: &Entry| e.score != score) {
                    (rank, dense) = (position, dense + 1);
                }
                entries.push(Entry {
                    player,
                    score,
                    rank,
                    dense,
                    position,
                    data: None,
                });
            }
            // Back to real scores, with entry data: what every query returns.
            self.entries(st, g, entries)
        })
    }
}

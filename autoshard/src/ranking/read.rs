//! The public reads of a board, its only `impl Ranking` of reads: each
//! checks its input, then asks the board's shape (`shape/`), which runs it
//! in one read transaction (one snapshot) of one tree, of every tree of a
//! split board (`trees/`), or of an approximate board's index (`approx/`).
//! A composite board's tuple reads are these reads through its codec.
//! (Still elsewhere: the approximate board's own estimates, `approx/`, and
//! the queue's `queued` and `dead_letters`, `queue/`.)

use super::handle::check_player;
use super::shape::Span;
use super::{Entry, Ranking, Tie, MAX_AMONG};
use crate::error::{Error, Result};
use std::ops::RangeInclusive;

impl Ranking {
    /// 1 + the number of players with a score strictly better than `score`
    /// (higher, or lower on an [`ScoreOrder::LowerIsBetter`](super::ScoreOrder::LowerIsBetter)
    /// board), whether or not anyone holds `score`. Reads: one node per
    /// tree level.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`].
    pub fn rank_of_score(&self, score: i64) -> Result<u64> {
        self.shape().rank_of_score(self, score)
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
        self.shape().rank(self, player, tie)
    }

    /// `player`'s score, or `None` if they are not on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse,
    /// or a store error.
    pub fn score(&self, player: &str) -> Result<Option<i64>> {
        check_player(player)?;
        self.shape().score(self, player)
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
        self.shape().score_at_rank(self, rank)
    }

    /// The first `n` entries (fewer if the board is smaller). Like every
    /// list, each entry carries all three ranks ([`Entry::rank_for`]); the
    /// list is in ordinal order (`position` 1, 2, 3, ...).
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
    /// or none past the end): "who is ranked 150 through 175?". Pages are
    /// cut by [`Entry::position`], the ordinal rank; each entry carries its
    /// standard and dense ranks too ([`Entry::rank_for`]).
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
        self.shape().page(self, from, to)
    }

    /// `player`'s entry with up to `k` entries above and `k` below, in
    /// ranking order (by [`Entry::position`]); empty if the player is not
    /// on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a player name `set_score` would refuse;
    /// [`Error::Corrupt`] when the stored rows contradict each other; a
    /// store error.
    pub fn around(&self, player: &str, k: u64) -> Result<Vec<Entry>> {
        check_player(player)?;
        self.shape().around(self, player, k)
    }

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
        self.shape().among(self, &names)
    }

    /// How many players are on the board. Reads: the root.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] for a negative stored count, or a store error.
    pub fn len(&self) -> Result<u64> {
        self.shape().len(self)
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
        self.shape().check_integrity(self)
    }

    /// `player`'s entry: their score, all three ranks and their entry data
    /// ([`Ranking::submit_update`]); `None` if they are not on the board. One
    /// read transaction.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig, Tie, Update};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100).entry_data(16))?;
    /// board.set_scores(&[("ann", 50), ("ben", 90), ("cat", 50)])?;
    /// board.submit_update(Update::score("dan", 40).with_data(b"level 3"))?;
    /// let cat = board.entry("cat")?.expect("on the board");
    /// assert_eq!((cat.score, cat.rank, cat.dense, cat.position), (50, 2, 2, 3));
    /// assert_eq!(cat.rank_for(Tie::Ordinal), 3);
    /// assert_eq!(board.entry("dan")?.unwrap().data.as_deref(), Some(&b"level 3"[..]));
    /// assert_eq!(board.entry("eve")?, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a name `set_score` would refuse,
    /// [`Error::ApproximateBoard`] on an approximate board (its ranks are
    /// not kept), [`Error::Corrupt`], or a store error.
    pub fn entry(&self, player: &str) -> Result<Option<Entry>> {
        check_player(player)?;
        self.shape().entry(self, player)
    }

    /// How many players have a score in `scores` (both ends included).
    /// Reads: two descents of the tree, in one read transaction, whatever
    /// the count. The part of `scores` outside the board's range holds
    /// nobody. On a composite board the range is over the encoded score
    /// ([`Ranking::encode`]); on a lower-is-better board it is still
    /// `low..=high` in score values.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("ann", 50), ("ben", 90), ("cat", 50), ("dan", 10)])?;
    /// assert_eq!(board.count_between(50..=90)?, 3);
    /// assert_eq!(board.count_between(-5..=1_000)?, 4);
    /// assert!(board.count_between(90..=50).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for an empty (reversed) range,
    /// [`Error::ApproximateBoard`] on an approximate board, a store error.
    pub fn count_between(&self, scores: RangeInclusive<i64>) -> Result<u64> {
        let span = self.span("count_between", &scores)?;
        self.shape().count_between(self, span)
    }

    /// Up to `limit` entries with a score in `scores` (both ends included),
    /// in ranking order, best first: the page of ordinal ranks those
    /// players hold, so O(log n + k) reads for k entries, in one read
    /// transaction. `limit` 0 gives none. Ranges as in
    /// [`count_between`](Ranking::count_between) (composite boards: the
    /// encoded score).
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("ann", 50), ("ben", 90), ("cat", 50), ("dan", 10)])?;
    /// let mid = board.between(20..=95, 10)?;
    /// let names: Vec<_> = mid.iter().map(|e| (e.player.as_str(), e.position)).collect();
    /// assert_eq!(names, [("ben", 1), ("ann", 2), ("cat", 3)]);
    /// assert_eq!(board.between(20..=95, 1)?[0].player, "ben");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`count_between`](Ranking::count_between).
    pub fn between(&self, scores: RangeInclusive<i64>, limit: u64) -> Result<Vec<Entry>> {
        let span = self.span("between", &scores)?;
        self.shape().between(self, span, limit)
    }

    /// `player`'s percentile, `None` if they are not on the board: the
    /// percentage of the board's players whose score is no better than
    /// theirs, themselves included, `100 × (n − rank + 1) / n` for `n`
    /// players and the standard rank `rank`. The best player is at 100;
    /// tied players share a percentile; it is never 0 for a player on the
    /// board. One read transaction. On a composite board, over the
    /// encoded tuple (its ranking order).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a name `set_score` would refuse,
    /// [`Error::ApproximateBoard`] on an approximate board, a store error.
    pub fn percentile(&self, player: &str) -> Result<Option<f64>> {
        check_player(player)?;
        self.shape().percentile(self, player)
    }

    /// The score at percentile `p` (`0..=100`), by the nearest-rank method:
    /// list the `n` scores worst first, and take the one at place
    /// `⌈p / 100 × n⌉` (place 1 for `p = 0`): the worst score at which
    /// at least `p` percent of the players are no better. `None` on an
    /// empty board. `score_at_percentile(percentile(player))` is the
    /// player's score. One read transaction. On a composite board, the
    /// encoded tuple ([`Ranking::decode`]).
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// // Worst first: 10, 20, 30, 40, 50.
    /// board.set_scores(&[("a", 10), ("b", 20), ("c", 30), ("d", 40), ("e", 50)])?;
    /// assert_eq!(board.score_at_percentile(50.0)?, Some(30)); // place ⌈2.5⌉ = 3
    /// assert_eq!(board.score_at_percentile(40.0)?, Some(20)); // place 2
    /// assert_eq!(board.score_at_percentile(0.0)?, Some(10));
    /// assert_eq!(board.score_at_percentile(100.0)?, Some(50));
    /// assert_eq!(board.percentile("b")?, Some(40.0)); // 2 of 5 are no better
    /// assert!(board.score_at_percentile(100.5).is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for `p` outside `0..=100` or NaN,
    /// [`Error::ApproximateBoard`] on an approximate board, a store error.
    pub fn score_at_percentile(&self, p: f64) -> Result<Option<i64>> {
        if !(0.0..=100.0).contains(&p) {
            return Err(Error::InvalidRanking {
                reason: format!("percentile {p} is outside 0..=100"),
            });
        }
        self.shape().score_at_percentile(self, p)
    }

    /// Page `n` (1-based) of pages of `size` entries: ordinal ranks
    /// `(n - 1) × size + 1 ..= n × size`, as [`page`](Ranking::page) gives
    /// them; empty past the last page.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("a", 10), ("b", 20), ("c", 30), ("d", 40), ("e", 50)])?;
    /// assert_eq!(board.page_count(2)?, 3);
    /// let third: Vec<_> = board.page_number(3, 2)?.into_iter().map(|e| e.player).collect();
    /// assert_eq!(third, ["a"]);
    /// assert!(board.page_number(4, 2)?.is_empty());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for `n` or `size` 0, a store error.
    pub fn page_number(&self, n: u64, size: u64) -> Result<Vec<Entry>> {
        if n == 0 || size == 0 {
            return Err(Error::InvalidRanking {
                reason: format!("page {n} of size {size}: pages start at 1 and hold at least 1"),
            });
        }
        self.shape().page_number(self, n, size)
    }

    /// How many pages of `size` entries the board fills: `⌈len / size⌉`
    /// (0 for an empty board).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRanking`] for `size` 0, a store error.
    pub fn page_count(&self, size: u64) -> Result<u64> {
        if size == 0 {
            return Err(Error::InvalidRanking {
                reason: "pages of size 0".into(),
            });
        }
        self.shape().page_count(self, size)
    }

    // Composite boards' reads: the reads above, through the codec.

    /// 1 + the players whose tuple ranks strictly before `values`, whether
    /// or not anyone holds it.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::dimensions([Dim::higher(0..9), Dim::lower(0..9)]))?;
    /// board.set_dims_batch(&[("ann", [5, 2]), ("bo", [5, 1]), ("cy", [4, 0])])?;
    /// assert_eq!(board.rank_of_dims(&[5, 2])?, 2); // behind bo's fewer retries
    /// assert_eq!(board.rank_of_dims(&[5, 0])?, 1);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`encode`](Ranking::encode).
    pub fn rank_of_dims(&self, values: &[i64]) -> Result<u64> {
        self.rank_of_score(self.encode(values)?)
    }

    /// `player`'s tuple, or `None` if they are not on the board.
    ///
    /// # Errors
    ///
    /// As [`score`](Ranking::score); [`Error::Corrupt`] for a stored score
    /// outside the encoded range.
    pub fn dims(&self, player: &str) -> Result<Option<Vec<i64>>> {
        match self.score(player)? {
            Some(score) => self.decode(score).map(Some),
            None => Ok(None),
        }
    }

    /// The tuple of the player at ordinal rank `rank`, as
    /// [`score_at_rank`](Ranking::score_at_rank).
    ///
    /// # Errors
    ///
    /// As [`score_at_rank`](Ranking::score_at_rank).
    pub fn dims_at_rank(&self, rank: u64) -> Result<Option<Vec<i64>>> {
        match self.score_at_rank(rank)? {
            Some(score) => self.decode(score).map(Some),
            None => Ok(None),
        }
    }

    /// The tree scores of `scores` within the board's range, `None` if none
    /// is; [`Error::InvalidRanking`] for an empty range.
    fn span(&self, call: &str, scores: &RangeInclusive<i64>) -> Result<Option<Span>> {
        let (lo, hi) = (*scores.start(), *scores.end());
        if scores.is_empty() {
            return Err(Error::InvalidRanking {
                reason: format!("{call}({lo}..={hi}): an empty or reversed score range"),
            });
        }
        let g = self.geometry();
        // `max` is one past the last score, and a board's range ends below
        // `i64::MAX`: no overflow.
        let (lo, hi) = (lo.max(g.min()), hi.min(g.max() - 1));
        if lo > hi {
            return Ok(None);
        }
        let rules = self.rules();
        let (a, b) = (rules.tree_score(g, lo)?, rules.tree_score(g, hi)?);
        Ok(Some(Span {
            lo: a.min(b),
            hi: a.max(b),
        }))
    }
}

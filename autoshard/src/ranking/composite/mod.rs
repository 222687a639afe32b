//! Composite scores: 1 to [`MAX_DIMENSIONS`] integer dimensions, each with
//! its own range and [`Order`](super::ScoreOrder), ranked lexicographically (seed 001's
//! trophies higher-better, then retries lower-better, then time
//! lower-better; the Code Jam ranker's multi-dimensional scores).
//!
//! A tuple is stored as one exact integer, its *encoded score*: each
//! dimension's offset in its range, mirrored for a lower-is-better one, is
//! a digit of a mixed-radix number whose radices are the dimensions'
//! widths, first dimension most significant. The encoding is a bijection
//! between the tuples and `0..product of widths`, and a tuple that ranks
//! before another has the larger number, so the board underneath is an
//! ordinary higher-is-better board over that range: its tree, tie rules,
//! policies (`Best` is the larger number, so the lexicographically better
//! tuple), queue and integrity check are the single-dimension ones,
//! unchanged. The cost is the limit: the product of the widths must fit the
//! tree's 64-bit offsets (at most `2^64 - 1` scores), e.g. four dimensions
//! of `2^16 - 1` values, or `2^32` and `2^32 - 1`. docs/design/composite-scores.md
//! ("Composite scores") has the design and what of issue 10's "full `i64` per dimension" is not
//! met.

mod codec;

pub(crate) use self::codec::{check_config, from_stored, stored, Codec};
pub use self::codec::{Dim, MAX_DIMENSIONS};
use super::policy::Submission;
use super::{Ranking, Update};
use crate::error::{Error, Result};

impl Ranking {
    /// The board's codec; on a single-dimension board `None`.
    fn codec(&self) -> Option<Codec<'_>> {
        let dims = self.config().dimensions();
        (!dims.is_empty()).then(|| Codec::new(dims).expect("checked by create and open"))
    }

    /// The encoded score of a tuple: what the single-dimension calls
    /// ([`set_score`](Ranking::set_score), [`rank_of_score`](Ranking::rank_of_score),
    /// [`Entry::score`](super::Entry::score), ...) take and return on a
    /// composite board. A higher encoded score always ranks first. On a
    /// single-dimension board the tuple is one score, encoded as itself.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let config = RankingConfig::dimensions([Dim::higher(0..10), Dim::lower(0..100)]);
    /// let board = Ranking::create(&db, "levels", config)?;
    /// let score = board.encode(&[3, 7])?;
    /// assert_eq!(board.decode(score)?, [3, 7]);
    /// assert!(board.encode(&[3, 6])? > score); // fewer retries rank first
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::DimensionCount`] for a tuple of another length than the
    /// board's dimensions, [`Error::DimensionOutOfRange`] naming the first
    /// value outside its dimension's range (on a single-dimension board,
    /// [`Error::ScoreOutOfRange`]).
    pub fn encode(&self, values: &[i64]) -> Result<i64> {
        match self.codec() {
            Some(codec) => codec.encode(values),
            None => match values {
                &[score] => {
                    self.geometry().checked_offset(score)?;
                    Ok(score)
                }
                _ => Err(Error::DimensionCount {
                    expected: 1,
                    got: values.len(),
                }),
            },
        }
    }

    /// The tuple an encoded score stands for, e.g. an
    /// [`Entry::score`](super::Entry::score) from [`top`](Ranking::top),
    /// [`page`](Ranking::page) or [`around`](Ranking::around), or a
    /// [`Submission`]'s scores; on a single-dimension board `[score]`.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`] for a number outside the encoded range.
    pub fn decode(&self, score: i64) -> Result<Vec<i64>> {
        match self.codec() {
            Some(codec) => codec.decode(score),
            None => {
                self.geometry().checked_offset(score)?;
                Ok(vec![score])
            }
        }
    }

    /// Submits the tuple `values` for `player` under the board's policy, as
    /// [`set_score`](Ranking::set_score) does with one score: under
    /// `Best`, the lexicographically better of the stored tuple and
    /// `values` stays.
    ///
    /// # Errors
    ///
    /// As [`encode`](Ranking::encode) and [`set_score`](Ranking::set_score);
    /// nothing is written on error.
    pub fn set_dims(&self, player: &str, values: &[i64]) -> Result<()> {
        self.write(Update::dims(player, values))
    }

    /// [`set_scores`](Ranking::set_scores) of tuples: one transaction, all
    /// or nothing, applied by its net effect as `set_scores` is.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "b", RankingConfig::dimensions([Dim::higher(0..9), Dim::lower(0..9)]))?;
    /// board.set_dims_batch(&[("ann", [5, 2]), ("bo", [5, 1])])?;
    /// assert_eq!(board.dims_at_rank(1)?, Some(vec![5, 1]));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`set_dims`](Ranking::set_dims) for any entry; nothing is written
    /// on error.
    pub fn set_dims_batch<V: AsRef<[i64]>>(&self, entries: &[(&str, V)]) -> Result<()> {
        let scores = entries
            .iter()
            .map(|(player, values)| Ok((*player, self.encode(values.as_ref())?)))
            .collect::<Result<Vec<_>>>()?;
        self.set_scores(&scores)
    }

    /// [`submit`](Ranking::submit) of a tuple: the report's scores are
    /// encoded ([`decode`](Ranking::decode) them), its ranks and `new_best`
    /// are the tuple's.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Policy, Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// // Trophies (more first), then retries (fewer first).
    /// let config =
    ///     RankingConfig::dimensions([Dim::higher(0..10_000), Dim::lower(0..1_000)]).policy(Policy::Best);
    /// let board = Ranking::create(&db, "season", config)?;
    /// board.set_dims("ann", &[30, 2])?;
    /// let run = board.submit_dims("bo", &[30, 1])?; // same trophies, fewer retries
    /// assert_eq!(run.new_rank, 1);
    /// let worse = board.submit_dims("bo", &[30, 5])?; // Best keeps [30, 1]
    /// assert!(!worse.new_best);
    /// assert_eq!(board.decode(worse.new_score)?, [30, 1]);
    /// assert_eq!(board.dims("bo")?, Some(vec![30, 1]));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`set_dims`](Ranking::set_dims).
    pub fn submit_dims(&self, player: &str, values: &[i64]) -> Result<Submission> {
        self.submit_update(Update::dims(player, values))
    }

    /// [`submit_with`](Ranking::submit_with) of a tuple: entry data (the
    /// run that set the record) stored with it by the same rule.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Policy, Ranking, RankingConfig};
    ///
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let config = RankingConfig::dimensions([Dim::higher(0..100), Dim::lower(0..60_000)])
    ///     .policy(Policy::Best)
    ///     .entry_data(16);
    /// let board = Ranking::create(&db, "levels", config)?;
    /// board.submit_dims_with("ann", &[7, 41_000], b"replay-1")?;
    /// board.submit_dims_with("ann", &[7, 45_000], b"replay-2")?; // slower: not the record
    /// assert_eq!(board.top(1)?[0].data.as_deref(), Some(&b"replay-1"[..]));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`encode`](Ranking::encode) and
    /// [`submit_with`](Ranking::submit_with); nothing is written on error.
    pub fn submit_dims_with(
        &self,
        player: &str,
        values: &[i64],
        data: &[u8],
    ) -> Result<Submission> {
        self.submit_update(Update::dims(player, values).with_data(data))
    }

    /// [`enqueue`](Ranking::enqueue) of a tuple: checked here, applied by a
    /// [`Worker`](super::Worker) under the board's policy.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Policy, Ranking, RankingConfig};
    /// # let dir = tempfile::tempdir()?;
    /// let db = autoshard::Sqlite::open(dir.path().join("game.db"))?;
    /// let config = RankingConfig::dimensions([Dim::higher(0..100), Dim::lower(0..10)]).policy(Policy::Best);
    /// let board = Ranking::create(&db, "levels", config)?;
    /// let worker = board.worker().spawn()?;
    /// board.enqueue_dims("ann", &[7, 3])?;
    /// board.enqueue_dims("ann", &[7, 1])?; // fewer retries: the best
    /// board.flush()?;
    /// assert_eq!(board.dims("ann")?, Some(vec![7, 1]));
    /// worker.stop()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`encode`](Ranking::encode) and [`enqueue`](Ranking::enqueue);
    /// nothing is queued on error.
    pub fn enqueue_dims(&self, player: &str, values: &[i64]) -> Result<()> {
        self.enqueue_update(Update::dims(player, values))
    }

    /// [`enqueue_dims`](Ranking::enqueue_dims) with entry data, stored by
    /// the worker as [`enqueue_with`](Ranking::enqueue_with) stores it.
    ///
    /// # Errors
    ///
    /// As [`encode`](Ranking::encode) and
    /// [`enqueue_with`](Ranking::enqueue_with); nothing is queued on error.
    pub fn enqueue_dims_with(&self, player: &str, values: &[i64], data: &[u8]) -> Result<()> {
        self.enqueue_update(Update::dims(player, values).with_data(data))
    }
}

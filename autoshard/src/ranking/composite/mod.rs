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

use super::Ranking;
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
    /// [`Submission`](super::Submission)'s scores; on a single-dimension board `[score]`.
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
    /// As [`write`](Ranking::write) of an [`Update::dims`](super::Update::dims) for any entry;
    /// nothing is written on error.
    pub fn set_dims_batch<V: AsRef<[i64]>>(&self, entries: &[(&str, V)]) -> Result<()> {
        let scores = entries
            .iter()
            .map(|(player, values)| Ok((*player, self.encode(values.as_ref())?)))
            .collect::<Result<Vec<_>>>()?;
        self.set_scores(&scores)
    }
}

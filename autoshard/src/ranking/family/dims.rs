//! Composite scores on a family: its members share one composite
//! [`RankingConfig`](crate::ranking::RankingConfig), so a tuple is encoded
//! once, before any member exists, and submitted as one score.

use super::Family;
use crate::error::{Error, Result};
use crate::ranking::composite::Codec;

impl Family {
    /// The encoded score of a tuple on this family's boards, as
    /// [`Ranking::encode`](crate::ranking::Ranking::encode) gives it on a
    /// member: what [`submission`](Family::submission) takes. On a single-dimension
    /// family the tuple is one score, encoded as itself.
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Family, FamilyConfig, Period, RankingConfig, Window};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// // Trophies higher-better, then retries lower-better.
    /// let levels = RankingConfig::dimensions([Dim::higher(0..100), Dim::lower(0..10)]);
    /// let daily = Family::create(&db, "levels", FamilyConfig::new(levels).window(Window::Day))?;
    /// daily.submission("ann", daily.encode(&[12, 3])?).submit()?;
    /// daily.submission("bo", daily.encode(&[12, 1])?).submit()?;
    /// let today = daily.board(Window::Day, Period::Current, None)?.unwrap();
    /// let first = &today.top(1)?[0];
    /// assert_eq!((first.player.as_str(), daily.decode(first.score)?), ("bo", vec![12, 1]));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::DimensionCount`] for a tuple of another length than the
    /// family's dimensions, [`Error::DimensionOutOfRange`] for the first
    /// value outside its dimension (on a single-dimension family,
    /// [`Error::ScoreOutOfRange`]).
    pub fn encode(&self, values: &[i64]) -> Result<i64> {
        let board = self.config().board();
        let dims = board.dimensions();
        if !dims.is_empty() {
            return Codec::new(dims)?.encode(values);
        }
        match values {
            &[score] => in_range(board.range(), score),
            _ => Err(Error::DimensionCount {
                expected: 1,
                got: values.len(),
            }),
        }
    }

    /// The tuple an encoded score of a member stands for (an
    /// [`Entry::score`](crate::ranking::Entry::score), a
    /// [`Submission`](crate::ranking::Submission)'s scores); on a
    /// single-dimension family `[score]`.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`] for a number outside the encoded range.
    pub fn decode(&self, score: i64) -> Result<Vec<i64>> {
        let board = self.config().board();
        let dims = board.dimensions();
        if !dims.is_empty() {
            return Codec::new(dims)?.decode(score);
        }
        Ok(vec![in_range(board.range(), score)?])
    }
}

fn in_range(range: std::ops::Range<i64>, score: i64) -> Result<i64> {
    if range.contains(&score) {
        return Ok(score);
    }
    Err(Error::ScoreOutOfRange {
        score,
        min: range.start,
        max: range.end,
    })
}

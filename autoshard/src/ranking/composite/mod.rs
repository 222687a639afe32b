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

pub(crate) use self::codec::{check_config, from_specs, from_stored, specs, stored, Codec};
pub use self::codec::{Dim, MAX_DIMENSIONS};

use super::Ranking;
use crate::error::{Error, Result};

/// The board's codec; on a single-dimension board `None`.
fn codec(ranking: &Ranking) -> Option<Codec<'_>> {
    let dims = ranking.config().dimensions();
    (!dims.is_empty()).then(|| Codec::new(dims).expect("checked by create and open"))
}

/// [`Ranking::encode`].
pub(in crate::ranking) fn encode(ranking: &Ranking, values: &[i64]) -> Result<i64> {
    match codec(ranking) {
        Some(codec) => codec.encode(values),
        None => match values {
            &[score] => {
                ranking.inner.geometry().checked_offset(score)?;
                Ok(score)
            }
            _ => Err(Error::DimensionCount {
                expected: 1,
                got: values.len(),
            }),
        },
    }
}

/// [`Ranking::decode`].
pub(in crate::ranking) fn decode(ranking: &Ranking, score: i64) -> Result<Vec<i64>> {
    match codec(ranking) {
        Some(codec) => codec.decode(score),
        None => {
            ranking.inner.geometry().checked_offset(score)?;
            Ok(vec![score])
        }
    }
}

/// [`Ranking::set_dims_batch`].
pub(in crate::ranking) fn set_dims_batch<V: AsRef<[i64]>>(
    ranking: &Ranking,
    entries: &[(&str, V)],
) -> Result<()> {
    let scores = entries
        .iter()
        .map(|(player, values)| Ok((*player, ranking.encode(values.as_ref())?)))
        .collect::<Result<Vec<_>>>()?;
    ranking.set_scores(&scores)
}

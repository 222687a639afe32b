//! Fold helpers, and what a fold may return.
//!
//! A fold combines two shard values into one. It must be commutative and
//! associative, with the field's `neutral` as identity: shards are folded in
//! whatever order the store returns them, and compaction regroups them.
//!
//! A fold returns either the field's type or `Result<field type, E>`. An
//! `Err` aborts the save (nothing is written, the pending delta is kept) and
//! surfaces as [`Error::Fold`]. The checked folds here use
//! that to refuse integer overflow instead of wrapping (release builds) or
//! panicking (debug builds), which is what a plain `a + b` does.
//!
//! A fold that adds numbers (an integer or `f64` sum, whatever its name:
//! the store probes it) gets exact totals: the rows of such a field are
//! added in `i128` (floats: without overflowing in between), so the total
//! does not depend on the order of the rows, and the fold itself only
//! decides what happens when that total does not fit the field's type.
//! A static save whose new total would not fit is refused; a stored total
//! that does not fit (dynamic appends are not checked) makes `load` return
//! [`OutOfRange`], and a compensating delta brings it back
//! ([`Store::save_delta`](crate::Store::save_delta)). `docs/design/sharding.md`
//! ("Overflow") has the details.
//!
//! ```
//! # use autoshard::{Shardable, Pending, shard_method, shard_fold};
//! #[derive(Shardable)]
//! struct Counter {
//!     #[shard(id)]
//!     id: u64,
//!     #[shard(neutral = 0, shards = 4, fold = autoshard::fold::checked_sum)]
//!     hits: i64,
//!     #[shard(pending)]
//!     pending: Pending<Self>,
//! }
//! ```

use crate::error::Error;
use crate::value::{invalid_value, ValueError};
use std::error::Error as StdError;
use std::fmt;

/// What a fold function may return: the value itself, or a `Result` of it.
pub trait FoldOutput<T> {
    /// The folded value, or the fold's error.
    ///
    /// # Errors
    ///
    /// The fold's own error, boxed.
    fn into_fold_result(self) -> Result<T, Box<dyn StdError + Send + Sync>>;
}

impl<T> FoldOutput<T> for T {
    fn into_fold_result(self) -> Result<T, Box<dyn StdError + Send + Sync>> {
        Ok(self)
    }
}

impl<T, E: Into<Box<dyn StdError + Send + Sync>>> FoldOutput<T> for Result<T, E> {
    fn into_fold_result(self) -> Result<T, Box<dyn StdError + Send + Sync>> {
        self.map_err(Into::into)
    }
}

/// A checked fold overflowed its integer type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow;

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("integer overflow")
    }
}

impl StdError for Overflow {}

/// The exact total of an integer sum's stored rows does not fit the field's
/// type (and the field's fold refuses it): the source of the
/// [`Error::Fold`] that `load` and compaction report
/// for such an entity.
///
/// Saves that the store could check were refused, so this comes from
/// dynamic appends (which read nothing), from concurrent saves on
/// PostgreSQL, or from rows written before the check existed. Every stored
/// delta is still counted exactly: saving a delta that brings the total
/// back into range (for example `i64::MAX as i128 - total`, with
/// [`Store::save_delta`](crate::Store::save_delta)) makes the entity load
/// again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutOfRange {
    /// The exact total of the stored rows.
    pub total: i128,
}

impl fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the stored total {} does not fit the field's type",
            self.total
        )
    }
}

impl StdError for OutOfRange {}

/// Integers that the checked folds work on.
pub trait CheckedInt: Copy {
    /// `a + b`, or `None` on overflow.
    fn checked_add(self, other: Self) -> Option<Self>;
}

macro_rules! checked_int {
    ($($t:ty),*) => {$(
        impl CheckedInt for $t {
            fn checked_add(self, other: Self) -> Option<Self> {
                <$t>::checked_add(self, other)
            }
        }
    )*};
}
checked_int!(i8, i16, i32, i64, i128, u8, u16, u32, u64, u128, usize, isize);

/// Sum that refuses to overflow: use as `#[shard(fold = autoshard::fold::checked_sum)]`.
///
/// # Errors
///
/// [`Overflow`] when the sum does not fit `N`.
pub fn checked_sum<N: CheckedInt>(a: N, b: N) -> Result<N, Overflow> {
    a.checked_add(b).ok_or(Overflow)
}

/// Maximum of two floats. NaN never reaches a fold: the store refuses to
/// write it.
pub fn max_f64(a: f64, b: f64) -> f64 {
    a.max(b)
}

/// Why a fold over stored values failed; stores add kind, id and field.
/// Named by generated code (`__fold`), not part of the API.
#[doc(hidden)]
#[derive(Debug)]
pub enum FoldError {
    /// A stored value did not decode into the field's type.
    Decode(ValueError),
    /// The user's fold returned an error.
    Fold(Box<dyn std::error::Error + Send + Sync>),
    /// The folded value could not be encoded.
    Encode(ValueError),
    /// Generated code was asked for a field index it does not have.
    NoSuchField(usize),
}

impl FoldError {
    pub(crate) fn into_error(self, kind: &'static str, id: &str, field: &'static str) -> Error {
        match self {
            FoldError::Decode(e) => Error::Corrupt {
                kind,
                id: id.to_owned(),
                field: field.to_owned(),
                reason: e.to_string(),
            },
            FoldError::Fold(source) => Error::Fold {
                kind,
                field,
                source,
            },
            FoldError::Encode(e) => invalid_value(kind, field, e),
            FoldError::NoSuchField(i) => no_such_field_error(kind, i),
        }
    }
}

/// A field index generated code does not have (a bug in it).
pub(crate) fn no_such_field_error(kind: &'static str, field: usize) -> Error {
    Error::SchemaMismatch {
        kind: kind.to_owned(),
        reason: format!("no sharded field #{field}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_sum_refuses_overflow() {
        assert_eq!(checked_sum(i64::MAX - 1, 1), Ok(i64::MAX));
        assert_eq!(checked_sum(i64::MAX, 1), Err(Overflow));
        assert_eq!(checked_sum(i64::MIN, -1), Err(Overflow));
        assert_eq!(checked_sum(u8::MAX, 0), Ok(u8::MAX));
    }

    #[test]
    fn fold_output_accepts_values_and_results() {
        assert_eq!(FoldOutput::<i64>::into_fold_result(3i64).unwrap(), 3);
        let err = FoldOutput::<i64>::into_fold_result(checked_sum(i64::MAX, 1)).unwrap_err();
        assert_eq!(err.to_string(), "integer overflow");
    }
}

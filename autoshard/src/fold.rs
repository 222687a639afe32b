//! Fold helpers, and what a fold may return.
//!
//! A fold combines two shard values into one. It must be commutative and
//! associative, with the field's `neutral` as identity: shards are folded in
//! whatever order the store returns them, and compaction regroups them.
//!
//! A fold returns either the field's type or `Result<field type, E>`. An
//! `Err` aborts the save (nothing is written, the pending delta is kept) and
//! surfaces as [`Error::Fold`](crate::Error::Fold). The checked folds here use
//! that to refuse integer overflow instead of wrapping (release builds) or
//! panicking (debug builds), which is what a plain `a + b` does.
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

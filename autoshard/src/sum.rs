//! Exact totals for the folds that add numbers.
//!
//! Folding rows one at a time is only as good as its worst partial result:
//! `checked_sum` refuses `i64::MAX + 1` even when a `-2` comes next, and an
//! `f64` sum that passes infinity stays there. Which partial sums occur
//! depends on the order of the rows, which is arbitrary (fold laws), so a
//! total that fits could be unreadable, and no compensating delta could
//! repair it. For a field whose fold adds numbers, the total here does not
//! depend on the order: integers are added in `i128`, which no number of
//! `i64` rows a store can hold overflows, and floats are added again with
//! every term scaled down when the plain sum overflowed. The field's own
//! fold is consulted only where that total does not fit the field's type:
//! a checked fold refuses it, a wrapping one wraps.
//!
//! The derive cannot tell which folds add (a name proves nothing), so each
//! fold is probed once per process ([`sums_of`]) on small values, where
//! even a plain `a + b` cannot overflow.

use crate::seam::FoldFn;
use crate::value::Value;
use std::collections::HashMap;
use std::sync::{OnceLock, PoisonError, RwLock};

/// How a field's fold combines stored values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sum {
    /// Not a sum this module recognises: rows are folded with the field's
    /// fold, in the order the store read them.
    Other,
    /// Adds integers (of any width or sign).
    Integers,
    /// Adds `f64`s.
    Floats,
}

/// What the probe found out about one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Probed {
    pub sum: Sum,
    /// For an integer sum whose type is a plain interval of integers (every
    /// integer type), that interval: whether a total fits is then a
    /// comparison, not a fold.
    pub range: Option<(i128, i128)>,
}

/// The stored total of a field that adds, as a store read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Total {
    Int(i128),
    Float(f64),
}

impl Total {
    /// The total of `rows`; `None` if a row is not a number.
    pub fn of<'a>(sum: Sum, rows: impl IntoIterator<Item = &'a Value>) -> Option<Total> {
        match sum {
            Sum::Integers => int_total(rows).map(|t| Total::Int(t.sum)),
            Sum::Floats => float_total(rows).map(Total::Float),
            Sum::Other => None,
        }
    }
}

/// The probed [`Sum`] of every field of the kind whose fold is `fold`,
/// computed once per process.
pub(crate) fn sums_of(fold: FoldFn, fields: usize) -> &'static [Probed] {
    type Cache = RwLock<HashMap<(usize, usize), &'static [Probed]>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    // The generated fold function identifies the struct; the field count
    // guards against two (identical) functions the linker merged.
    let key = (fold as usize, fields);
    if let Some(sums) = cache
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return sums;
    }
    let sums: Vec<Probed> = (0..fields)
        .map(|index| {
            let sum = probe(fold, index);
            let range = (sum == Sum::Integers)
                .then(|| int_range(fold, index))
                .flatten();
            Probed { sum, range }
        })
        .collect();
    // One small slice per entity type, for the life of the process.
    let sums: &'static [Probed] = Box::leak(sums.into_boxed_slice());
    cache
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(key)
        .or_insert(sums)
}

/// Whether field `index` of `fold` adds integers or floats. The values are
/// small enough for every integer type from `i8` up, so no fold overflows
/// here; a fold that refuses a value (a type that cannot hold it) is not
/// recognised.
fn probe(fold: FoldFn, index: usize) -> Sum {
    let run = |values: &[Value]| fold(index, &mut values.iter().cloned()).ok();
    match run(&[]) {
        Some(Value::Integer(0)) => {
            let adds = |(a, b): (i64, i64)| {
                run(&[Value::Integer(a), Value::Integer(b)]) == Some(Value::Integer(a + b))
            };
            let unsigned = [(2, 3), (40, 2), (100, 27), (0, 0), (9, 0)];
            // Only a signed type takes -1.
            let signed = run(&[Value::Integer(-1)]).is_none()
                || [(-7, 3), (-100, -28), (5, -5)].into_iter().all(adds);
            if unsigned.into_iter().all(adds) && signed {
                Sum::Integers
            } else {
                Sum::Other
            }
        }
        Some(Value::Real(0.0)) => {
            let adds = |(a, b): (f64, f64)| {
                run(&[Value::Real(a), Value::Real(b)]) == Some(Value::Real(a + b))
            };
            // 1e300 leaves out `f32`, whose sums overflow below f64's.
            let pairs = [(2.5, 0.25), (-1.5, 0.5), (1e300, 1e300), (0.0, 0.0)];
            if pairs.into_iter().all(adds) {
                Sum::Floats
            } else {
                Sum::Other
            }
        }
        _ => Sum::Other,
    }
}

/// The integers an integer sum's type holds, if they are the interval of
/// one of the integer types: its bounds fit, the integers next to them do
/// not. `None` for anything else (a newtype that validates), which then
/// asks the fold about every total.
fn int_range(fold: FoldFn, index: usize) -> Option<(i128, i128)> {
    let fits = |v: i128| fold(index, &mut std::iter::once(int_value(v))).ok() == Some(int_value(v));
    let maxima = [
        i8::MAX as i128,
        u8::MAX as i128,
        i16::MAX as i128,
        u16::MAX as i128,
        i32::MAX as i128,
        u32::MAX as i128,
        i64::MAX as i128,
        u64::MAX as i128,
        i128::MAX,
    ];
    let minima = [
        i128::MIN,
        i64::MIN as i128,
        i32::MIN as i128,
        i16::MIN as i128,
        i8::MIN as i128,
        0,
    ];
    let max = maxima.into_iter().rev().find(|&m| fits(m))?;
    let min = minima.into_iter().find(|&m| fits(m))?;
    let closed = (max == i128::MAX || !fits(max + 1)) && (min == i128::MIN || !fits(min - 1));
    closed.then_some((min, max))
}

/// A stored integer: `Integer`, or a JSON number beyond `i64` (a large
/// `u64` or `i128`).
pub(crate) fn as_int(value: &Value) -> Option<i128> {
    match value {
        Value::Integer(i) => Some(i128::from(*i)),
        Value::Text(json) => json.parse().ok(),
        Value::Real(_) => None,
    }
}

/// How an integer total is stored: natively if it fits `i64`, otherwise
/// as a JSON number, as [`crate::value::encode`] stores a large integer.
pub(crate) fn int_value(total: i128) -> Value {
    i64::try_from(total).map_or_else(|_| Value::Text(total.to_string()), Value::Integer)
}

/// The exact sum of integer rows, with the smallest and largest row; `None`
/// if a row is not an integer (the field's fold then reports it).
pub(crate) fn int_total<'a>(values: impl IntoIterator<Item = &'a Value>) -> Option<IntTotal> {
    let mut total = IntTotal {
        sum: 0,
        min: 0,
        max: 0,
    };
    for (i, value) in values.into_iter().enumerate() {
        let v = as_int(value)?;
        total.sum = total.sum.checked_add(v)?;
        (total.min, total.max) = if i == 0 {
            (v, v)
        } else {
            (total.min.min(v), total.max.max(v))
        };
    }
    Some(total)
}

/// An integer field's rows added up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IntTotal {
    pub sum: i128,
    /// The smallest and largest row (0 without rows): if both fit the
    /// field's type, every row does, since integer types are intervals.
    pub min: i128,
    pub max: i128,
}

pub(crate) fn as_float(value: &Value) -> Option<f64> {
    match value {
        Value::Real(f) => Some(*f),
        // A float field decodes integers too.
        Value::Integer(i) => Some(*i as f64),
        Value::Text(_) => None,
    }
}

/// The sum of float rows, infinite only if the total itself is; `None` if
/// a row is not a number.
pub(crate) fn float_total<'a>(values: impl IntoIterator<Item = &'a Value>) -> Option<f64> {
    let values: Vec<f64> = values.into_iter().map(as_float).collect::<Option<_>>()?;
    let plain: f64 = values.iter().sum();
    if plain.is_finite() {
        return Some(plain);
    }
    // A partial sum overflowed, or the total does. Scaled by 2^-64, no
    // partial sum of fewer than 2^64 finite terms can; the scaling is exact
    // but for subnormal terms, which are lost next to a sum this large.
    const SCALE: f64 = 18_446_744_073_709_551_616.0; // 2^64
    let scaled: f64 = values.iter().map(|v| v / SCALE).sum();
    Some(scaled * SCALE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::__private::{fold_values, FoldError};
    use crate::fold::checked_sum;

    fn int_fold(index: usize, values: &mut dyn Iterator<Item = Value>) -> Result<Value, FoldError> {
        match index {
            0 => fold_values(values, 0i64, checked_sum),
            1 => fold_values(values, 0u8, |a: u8, b: u8| a.wrapping_add(b)),
            2 => fold_values(values, 0i64, |a: i64, b: i64| a.max(b)),
            3 => fold_values(values, 0.0f64, |a: f64, b: f64| a + b),
            4 => fold_values(values, 0.0f32, |a: f32, b: f32| a + b),
            5 => fold_values(values, 1i64, |a: i64, b: i64| a * b),
            6 => fold_values(values, 0i128, |a: i128, b: i128| a + b),
            _ => fold_values(values, 0.0f64, f64::max),
        }
    }

    #[test]
    fn probing_recognises_integer_and_float_sums_only() {
        let sums = sums_of(int_fold, 8);
        use Sum::*;
        assert_eq!(
            sums.iter().map(|p| p.sum).collect::<Vec<_>>(),
            [Integers, Integers, Other, Floats, Other, Other, Integers, Other]
        );
        let range = |min: i128, max: i128| Some((min, max));
        assert_eq!(sums[0].range, range(i64::MIN.into(), i64::MAX.into()));
        assert_eq!(sums[1].range, range(0, 255));
        assert_eq!(sums[6].range, range(i128::MIN, i128::MAX));
        assert_eq!(sums[3].range, None);
        // Cached: the same slice again.
        assert!(std::ptr::eq(sums, sums_of(int_fold, 8)));
    }

    #[test]
    fn integer_totals_are_exact_and_order_free() {
        let rows = [
            Value::Integer(i64::MAX),
            Value::Integer(1),
            Value::Integer(-2),
            Value::Text(u64::MAX.to_string()),
        ];
        let total = int_total(&rows).unwrap();
        let expected = i128::from(i64::MAX) - 1 + i128::from(u64::MAX);
        assert_eq!(
            (total.sum, total.min, total.max),
            (expected, -2, i128::from(u64::MAX))
        );
        assert_eq!(int_total(&[]).unwrap().sum, 0);
        assert_eq!(int_total(&[Value::Real(1.0)]), None);
        assert_eq!(int_total(&[Value::Text("\"7\"".into())]), None);
        assert_eq!(int_value(5), Value::Integer(5));
        assert_eq!(
            int_value(i128::from(i64::MAX) + 1),
            Value::Text("9223372036854775808".into())
        );
    }

    #[test]
    fn float_totals_do_not_overflow_in_between() {
        let max = Value::Real(f64::MAX);
        let min = Value::Real(-f64::MAX);
        assert_eq!(
            float_total(&[max.clone(), max.clone(), min]),
            Some(f64::MAX)
        );
        assert_eq!(float_total(&[max.clone(), max]), Some(f64::INFINITY));
        assert_eq!(
            float_total(&[Value::Real(0.5), Value::Integer(2)]),
            Some(2.5)
        );
        assert_eq!(float_total(&[Value::Text("[]".into())]), None);
    }
}

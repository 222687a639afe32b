//! A save's check of each sharded field: it must hold its base folded with
//! its pending delta, up to floating-point rounding.

use super::support::encode_field;
use crate::error::{Error, Result};
use crate::fold::FoldOutput;
use crate::value::{self, Value};
use crate::value::{invalid_value, ShardValue};
use std::any::TypeId;

/// What a save's check of one sharded field found.
#[derive(Debug, PartialEq)]
pub enum Checked {
    /// The field holds its base and has no delta.
    Unchanged,
    /// The field holds its base folded with its delta: what the store will
    /// hold, and the field's new base (encoded) once the save commits.
    Folded(Value),
    /// Neither: the field was changed outside a shard method.
    Changed,
}

/// Checks one sharded field before a save: `current` must be `base` (the
/// aggregate as loaded, inserted or last saved) folded with the pending
/// `delta`, both as encoded for the store, because that is what the store
/// holds after the save. A fold that refuses them is [`Error::Fold`].
pub fn check_field<T: ShardValue, R: FoldOutput<T>>(
    kind: &'static str,
    field: &'static str,
    current: &T,
    base: &Value,
    delta: Option<&Value>,
    fold: fn(T, T) -> R,
) -> Result<Checked> {
    let decode = |v: &Value| value::decode::<T>(v).map_err(|e| invalid_value(kind, field, e));
    let expected = match delta {
        None => decode(base)?,
        Some(delta) => fold(decode(base)?, decode(delta)?)
            .into_fold_result()
            .map_err(|source| Error::Fold {
                kind,
                field,
                source,
            })?,
    };
    if expected == *current {
        return match delta {
            None => Ok(Checked::Unchanged),
            Some(_) => encode_field(kind, field, current).map(Checked::Folded),
        };
    }
    let tolerance = if TypeId::of::<T>() == TypeId::of::<f32>() {
        F32_TOLERANCE
    } else {
        F64_TOLERANCE
    };
    match (value::encode(current), value::encode(&expected)) {
        (Ok(now), Ok(expected)) if rounding_apart(&now, &expected, tolerance) => Ok(match delta {
            None => Checked::Unchanged,
            Some(_) => Checked::Folded(now),
        }),
        _ => Ok(Checked::Changed),
    }
}

/// Relative differences that floating-point rounding explains. A shard
/// method adds each change to the aggregate in turn while the delta sums
/// the changes first, and float addition is not associative, so the two
/// ways to the same total can differ in their last bits; these allow for
/// some 10^9 (`f64`) and 10^3 (`f32`) additions between saves, and a change
/// made outside a shard method moves the value by far more.
const F64_TOLERANCE: f64 = 1e-6;
const F32_TOLERANCE: f64 = 1e-4;

/// Whether two encoded values differ only in numbers that are within
/// `tolerance` of each other (relative), at the same places.
fn rounding_apart(a: &Value, b: &Value, tolerance: f64) -> bool {
    match (a, b) {
        (Value::Real(x), Value::Real(y)) => close(*x, *y, tolerance),
        (Value::Text(x), Value::Text(y)) => {
            match (serde_json::from_str(x), serde_json::from_str(y)) {
                (Ok(x), Ok(y)) => json_close(&x, &y, tolerance),
                _ => false,
            }
        }
        _ => false,
    }
}

fn json_close(a: &serde_json::Value, b: &serde_json::Value, tolerance: f64) -> bool {
    use serde_json::Value as Json;
    match (a, b) {
        (Json::Number(x), Json::Number(y)) if x.is_f64() || y.is_f64() => {
            matches!((x.as_f64(), y.as_f64()), (Some(x), Some(y)) if close(x, y, tolerance))
        }
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_close(x, y, tolerance))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w, tolerance)))
        }
        _ => a == b,
    }
}

fn close(x: f64, y: f64, tolerance: f64) -> bool {
    (x - y).abs() <= tolerance * x.abs().max(y.abs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashSet};

    fn sum(a: i64, b: i64) -> i64 {
        a + b
    }

    fn check<T: ShardValue>(current: T, base: T, delta: Option<T>, fold: fn(T, T) -> T) -> Checked {
        let base = value::encode(&base).unwrap();
        let delta = delta.map(|d| value::encode(&d).unwrap());
        check_field("K", "f", &current, &base, delta.as_ref(), fold).unwrap()
    }

    #[test]
    fn a_field_must_hold_its_base_folded_with_its_delta() {
        assert_eq!(check(7, 7, None, sum), Checked::Unchanged);
        assert_eq!(
            check(10, 7, Some(3), sum),
            Checked::Folded(Value::Integer(10))
        );
        assert_eq!(check(8, 7, None, sum), Checked::Changed);
        assert_eq!(check(11, 7, Some(3), sum), Checked::Changed);
    }

    #[test]
    fn a_fold_that_refuses_the_delta_is_a_fold_error() {
        let base = Value::Integer(i64::MAX);
        let delta = Value::Integer(1);
        let err = check_field(
            "K",
            "f",
            &0i64,
            &base,
            Some(&delta),
            crate::fold::checked_sum,
        )
        .unwrap_err();
        assert!(matches!(err, Error::Fold { field: "f", .. }), "{err:?}");
    }

    #[test]
    fn collections_compare_by_content_not_by_encoding() {
        fn union(mut a: HashSet<String>, b: HashSet<String>) -> HashSet<String> {
            a.extend(b);
            a
        }
        let set = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<HashSet<_>>();
        let many: Vec<String> = (0..50).map(|i| format!("tag{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        // Sets with the same content may iterate, and so encode, in
        // different orders (each `HashSet` has its own hasher seed).
        let current = set(&many);
        assert!(matches!(
            check(current, set(&many[..25]), Some(set(&many[25..])), union),
            Checked::Folded(_)
        ));
        assert_eq!(
            check(set(&["a", "b"]), set(&["a"]), Some(set(&["c"])), union),
            Checked::Changed
        );
    }

    #[test]
    fn floats_may_differ_by_rounding_only() {
        fn add(a: f64, b: f64) -> f64 {
            a + b
        }
        // The object adds each change in turn, the store the summed delta.
        let (current, delta) = (current_f64(), delta_f64());
        assert_ne!(current, 0.1 + delta);
        assert_eq!(
            check(current, 0.1, Some(delta), add),
            Checked::Folded(Value::Real(current))
        );
        assert_eq!(check(0.7001, 0.1, Some(delta), add), Checked::Changed);
        assert_eq!(check(10.0, 0.1, None, add), Checked::Changed);

        fn add32(a: f32, b: f32) -> f32 {
            a + b
        }
        let mut current = 0.1f32;
        let mut delta = 0.0f32;
        for _ in 0..100 {
            current += 0.013;
            delta += 0.013;
        }
        assert_ne!(current, 0.1 + delta);
        assert!(matches!(
            check(current, 0.1, Some(delta), add32),
            Checked::Folded(_)
        ));
        assert_eq!(
            check(current + 0.01, 0.1, Some(delta), add32),
            Checked::Changed
        );

        // Inside a composite value too, number by number.
        type Stats = (u64, f64, BTreeMap<String, f64>);
        fn merge(a: Stats, b: Stats) -> Stats {
            let mut map = a.2;
            for (k, v) in b.2 {
                *map.entry(k).or_insert(0.0) += v;
            }
            (a.0 + b.0, a.1 + b.1, map)
        }
        let stats = |n, x: f64| (n, x, BTreeMap::from([("k".to_string(), x)]));
        assert!(matches!(
            check(
                stats(3, current_f64()),
                stats(1, 0.1),
                Some(stats(2, delta_f64())),
                merge
            ),
            Checked::Folded(_)
        ));
        assert_eq!(
            check(
                stats(4, current_f64()),
                stats(1, 0.1),
                Some(stats(2, delta_f64())),
                merge
            ),
            Checked::Changed
        );
    }

    /// 0.1 plus the changes 0.1, 0.2 and 0.3, one at a time...
    fn current_f64() -> f64 {
        ((0.1 + 0.1) + 0.2) + 0.3
    }

    /// ...and the changes summed first, as the pending delta holds them.
    fn delta_f64() -> f64 {
        (0.1 + 0.2) + 0.3
    }
}

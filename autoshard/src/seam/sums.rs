//! The seam's side of exact totals (`crate::sum`): how a store loads,
//! compacts and saves a field whose fold adds numbers, so that its total
//! does not depend on the order of its rows and a static save is refused
//! before it takes the total out of the field's type.

use super::entities::Kind;
use crate::error::Result;
use crate::fold::FoldError;
use crate::fold::OutOfRange;
use crate::sum::{self, Sum, Total};
use crate::value::{Value, ValueError};
use std::fmt;

impl Kind {
    /// Whether field `index` adds numbers, and which: a store reads such a
    /// static field's total on save ([`plan_static`](Kind::plan_static)).
    pub fn sum(&self, index: usize) -> Sum {
        self.sums[index].sum
    }

    /// The total of a field that adds: exact if it fits the field's type,
    /// otherwise what the field's own fold makes of the values in order (a
    /// wrapping fold wraps; a refusal becomes [`OutOfRange`] with the
    /// total, which is what a repair needs to know). A float total that is
    /// not finite cannot be stored: [`FoldError::Encode`].
    pub(super) fn total(&self, index: usize, values: &[Value]) -> Result<Value, FoldError> {
        let own = || (self.fold)(index, &mut values.iter().cloned());
        match self.sum(index) {
            Sum::Integers => {
                let Some(total) = sum::int_total(values) else {
                    return own();
                };
                // A row outside the type is corrupt: the fold reports it.
                if self.fits(index, total.min).is_none() || self.fits(index, total.max).is_none() {
                    return own();
                }
                match self.fits(index, total.sum) {
                    Some(value) => Ok(value),
                    None => own()
                        .map_err(|_| FoldError::Fold(Box::new(OutOfRange { total: total.sum }))),
                }
            }
            Sum::Floats => match sum::float_total(values) {
                Some(total) if total.is_finite() => Ok(Value::Real(total)),
                Some(total) => Err(FoldError::Encode(ValueError::NonFinite(total))),
                None => own(),
            },
            Sum::Other => own(),
        }
    }

    /// The rows of field `index` as a load folds them: those of a field
    /// that adds replaced by their total. A float total may be infinite
    /// here: the entity loads with it, so that it stays readable (a static
    /// save or compaction never stores one).
    pub(crate) fn load_rows(
        &self,
        index: usize,
        values: Vec<Value>,
    ) -> Result<Vec<Value>, FoldError> {
        match self.sum(index) {
            Sum::Other => Ok(values),
            Sum::Integers => self.total(index, &values).map(|total| vec![total]),
            Sum::Floats => Ok(match sum::float_total(&values) {
                Some(total) => vec![Value::Real(total)],
                None => values,
            }),
        }
    }

    /// Where a static save of `delta` into field `index` of entity `id`
    /// goes, and the row's new value: `(shard, value)`, given what the
    /// store read in the save's transaction ([`StaticRead`]) about the
    /// shard it picked at random.
    ///
    /// For a field that adds, the delta is refused if the field's new total
    /// would not fit its type, with the error the field's fold gives over
    /// the rows and the delta (a wrapping fold accepts it and wraps the
    /// row); and a delta that does not fit the picked row while the total
    /// does goes, if `may_move`, to the smallest row (a positive delta) or
    /// the largest (a negative one), which always takes it. Other fields
    /// fold the delta into the picked row with their fold. Every row of the
    /// field is read only to refuse or to move a delta.
    pub fn plan_static(
        &self,
        id: &dyn fmt::Display,
        index: usize,
        read: StaticRead<'_>,
        delta: &Value,
        may_move: bool,
    ) -> Result<(i64, Value)> {
        let StaticRead {
            picked,
            stored,
            total,
            rows: read_rows,
        } = read;
        let error = |e: FoldError| self.fold_error(id, index, e);
        let own = || -> Result<(i64, Value)> {
            let value = match &stored {
                Some(stored) => {
                    (self.fold)(index, &mut [stored.clone(), delta.clone()].into_iter())
                        .map_err(error)?
                }
                None => delta.clone(),
            };
            Ok((picked, value))
        };
        let sum = self.sum(index);
        if sum == Sum::Other {
            return own();
        }
        // Read at most once, and only to refuse or move a delta.
        let mut rows: Option<Option<Vec<(i64, Value)>>> = None;
        let mut all_rows = || -> Result<Option<Vec<(i64, Value)>>> {
            match &rows {
                Some(rows) => Ok(rows.clone()),
                None => Ok(rows.insert(read_rows()?).clone()),
            }
        };
        let total = match total {
            Some(total) => total,
            // The store could not sum the rows: a JSON number (a large
            // `u64`), or a row that is no number or does not read. Only
            // the picked row then matters, as for any field.
            None => {
                match all_rows()?.and_then(|rows| Total::of(sum, rows.iter().map(|(_, v)| v))) {
                    Some(total) => total,
                    None => return own(),
                }
            }
        };
        let shards = i64::from(self.fields[index].shards.unwrap_or(1));
        match (total, sum::as_int(delta), sum::as_float(delta)) {
            (Total::Int(total), Some(d), _) => {
                let Some(new_total) = total.checked_add(d) else {
                    return own();
                };
                if self.fits(index, new_total).is_none() {
                    let Some(rows) = all_rows()? else {
                        return own();
                    };
                    let mut all = rows
                        .into_iter()
                        .map(|(_, v)| v)
                        .chain(std::iter::once(delta.clone()));
                    (self.fold)(index, &mut all).map_err(error)?;
                    return own();
                }
                let fits = |stored: Option<&Value>| {
                    stored
                        .map_or(Some(0), sum::as_int)
                        .and_then(|r| r.checked_add(d))
                        .and_then(|v| self.fits(index, v))
                };
                let rows = || if may_move { all_rows() } else { Ok(None) };
                let placed = place(
                    picked,
                    stored.as_ref(),
                    rows,
                    shards,
                    d > 0,
                    sum::as_int,
                    fits,
                )?;
                placed.map_or_else(own, Ok)
            }
            (Total::Float(total), _, Some(d)) => {
                let new_total = match total + d {
                    sum if sum.is_finite() => sum,
                    // The plain sum may overflow where the exact one does
                    // not: add the rows again, scaled.
                    _ => match all_rows()? {
                        Some(rows) => {
                            let values = rows.iter().map(|(_, v)| v).chain(std::iter::once(delta));
                            sum::float_total(values).unwrap_or(f64::INFINITY)
                        }
                        None => return own(),
                    },
                };
                if !new_total.is_finite() {
                    return Err(error(FoldError::Encode(ValueError::NonFinite(new_total))));
                }
                let fits = |stored: Option<&Value>| {
                    stored
                        .map_or(Some(0.0), sum::as_float)
                        .map(|r| r + d)
                        .filter(|v| v.is_finite())
                        .map(Value::Real)
                };
                let rows = || if may_move { all_rows() } else { Ok(None) };
                let placed = place(
                    picked,
                    stored.as_ref(),
                    rows,
                    shards,
                    d > 0.0,
                    sum::as_float,
                    fits,
                )?;
                placed.map_or_else(own, Ok)
            }
            _ => own(),
        }
    }

    /// [`plan_static`](Kind::plan_static) for a store that read every row
    /// of the field anyway (`rows`, any order).
    pub fn plan_static_rows(
        &self,
        id: &dyn fmt::Display,
        index: usize,
        picked: i64,
        rows: &[(i64, Value)],
        delta: &Value,
        may_move: bool,
    ) -> Result<(i64, Value)> {
        let read = StaticRead {
            picked,
            stored: rows
                .iter()
                .find(|(s, _)| *s == picked)
                .map(|(_, v)| v.clone()),
            total: Total::of(self.sum(index), rows.iter().map(|(_, v)| v)),
            rows: &mut || Ok(Some(rows.to_vec())),
        };
        self.plan_static(id, index, read, delta, may_move)
    }

    /// For a store that added a delta to field `index` in SQL and read the
    /// new total back (in the same transaction): refuses a total that does
    /// not fit the field's type, as the field's fold refuses one. The fold
    /// is asked about `i64::MAX + 1` (or `i64::MIN - 1`), which is how a
    /// `bigint` sum leaves the type of a field that adds `i64`s.
    #[allow(dead_code)] // for stores with an SQL sum; not every store has one
    pub fn check_total(&self, id: &dyn fmt::Display, index: usize, total: i128) -> Result<()> {
        if self.fits(index, total).is_some() {
            return Ok(());
        }
        let (a, b) = if total > 0 {
            (i64::MAX, 1)
        } else {
            (i64::MIN, -1)
        };
        (self.fold)(
            index,
            &mut [Value::Integer(a), Value::Integer(b)].into_iter(),
        )
        .map(drop)
        .map_err(|e| self.fold_error(id, index, e))
    }

    /// The integer `value` as field `index` stores it, or `None` if it does
    /// not fit the field's type (the fold of one value is that value, or
    /// its decoding error).
    fn fits(&self, index: usize, value: i128) -> Option<Value> {
        match self.sums[index].range {
            Some((min, max)) => (min..=max).contains(&value).then(|| sum::int_value(value)),
            None => (self.fold)(index, &mut std::iter::once(sum::int_value(value))).ok(),
        }
    }

    /// Whether field `index` [adds integers](Kind::adds_integers) of
    /// exactly `i64`'s range, so that a `bigint` sum in SQL leaves the
    /// field's type exactly where the field's fold does.
    #[allow(dead_code)] // for stores with an SQL sum; not every store has one
    pub fn adds_i64(&self, index: usize) -> bool {
        self.adds_integers(index)
            && self.fits(index, i128::from(i64::MIN)).is_some()
            && self.fits(index, i128::from(i64::MAX) + 1).is_none()
    }
}

/// What a store read for a static save of a field that adds, in the save's
/// transaction: the shard it picked and its row, the field's total if the
/// store could sum it, and how to read every row of the field (needed only
/// to refuse or move a delta).
pub(crate) struct StaticRead<'a> {
    pub picked: i64,
    /// The picked row's value; `None` if there is no such row.
    pub stored: Option<Value>,
    /// The exact total of the field's rows ([`Total::of`] over them);
    /// `None` if the store could not sum them itself.
    pub total: Option<Total>,
    /// Every row, `(shard, value)` in any order; `None` if one does not
    /// read (the total is unknown then, and the delta folded as for any
    /// field).
    pub rows: &'a mut dyn FnMut() -> Result<Option<Vec<(i64, Value)>>>,
}

/// Where a delta whose new total fits goes: the picked row if it takes it
/// (`fits` gives the row's new value), else the row a delta that fits the
/// total always fits in ([`extreme_shard`]), which needs every row of the
/// field (`rows`, read only then; `None`: the delta may not move, or a row
/// does not read). `None` if neither takes it.
fn place<N: PartialOrd + Default>(
    picked: i64,
    stored: Option<&Value>,
    rows: impl FnOnce() -> Result<Option<Vec<(i64, Value)>>>,
    shards: i64,
    positive: bool,
    number: impl Fn(&Value) -> Option<N>,
    fits: impl Fn(Option<&Value>) -> Option<Value>,
) -> Result<Option<(i64, Value)>> {
    if let Some(value) = fits(stored) {
        return Ok(Some((picked, value)));
    }
    let Some(rows) = rows()? else {
        return Ok(None);
    };
    Ok(
        extreme_shard(&rows, shards, positive, number).and_then(|shard| {
            let row = rows.iter().find(|(s, _)| *s == shard).map(|(_, v)| v);
            Some((shard, fits(row)?))
        }),
    )
}

/// The shard in `0..shards` whose value is smallest (`smallest`) or
/// largest, a missing row counting as 0; `None` if a row in range is not a
/// number. A delta that fits the total fits there.
fn extreme_shard<N: PartialOrd + Default>(
    rows: &[(i64, Value)],
    shards: i64,
    smallest: bool,
    number: impl Fn(&Value) -> Option<N>,
) -> Option<i64> {
    let mut present: Vec<(i64, N)> = Vec::new();
    for (shard, value) in rows.iter().filter(|(s, _)| (0..shards).contains(s)) {
        present.push((*shard, number(value)?));
    }
    present.sort_by_key(|(shard, _)| *shard);
    let missing = (0..shards)
        .zip(present.iter().map(|(s, _)| *s).chain(std::iter::repeat(-1)))
        .find(|(expected, found)| expected != found)
        .map(|(shard, _)| (shard, N::default()));
    let better = |a: &N, b: &N| if smallest { a < b } else { a > b };
    present
        .into_iter()
        .chain(missing)
        .reduce(|best, next| if better(&next.1, &best.1) { next } else { best })
        .map(|(shard, _)| shard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::__private::fold_values;
    use crate::entity::FieldSpec;
    use crate::error::Error;
    use crate::fold::{checked_sum, Overflow};

    const FIELDS: &[FieldSpec] = &[
        FieldSpec {
            name: "checked",
            shards: Some(3),
            min_shards: None,
        },
        FieldSpec {
            name: "wrapping",
            shards: Some(1),
            min_shards: None,
        },
        FieldSpec {
            name: "real",
            shards: Some(2),
            min_shards: None,
        },
        FieldSpec {
            name: "max",
            shards: Some(2),
            min_shards: None,
        },
        FieldSpec {
            name: "small",
            shards: None,
            min_shards: None,
        },
    ];

    fn fold(index: usize, values: &mut dyn Iterator<Item = Value>) -> Result<Value, FoldError> {
        match index {
            0 => fold_values(values, 0i64, checked_sum),
            1 => fold_values(values, 0i64, i64::wrapping_add),
            2 => fold_values(values, 0.0f64, |a: f64, b: f64| a + b),
            3 => fold_values(values, 0i64, i64::max),
            _ => fold_values(values, 0u8, u8::wrapping_add),
        }
    }

    fn kind() -> Kind {
        Kind::for_tests(FIELDS, fold)
    }

    fn ints(rows: &[(i64, i64)]) -> Vec<(i64, Value)> {
        rows.iter().map(|&(s, v)| (s, Value::Integer(v))).collect()
    }

    fn source<E: std::error::Error + 'static>(error: &Error) -> Option<&E> {
        match error {
            Error::Fold { source, .. } => source.downcast_ref(),
            _ => None,
        }
    }

    #[test]
    fn integer_totals_are_exact_and_refused_only_when_they_do_not_fit() {
        let k = kind();
        let load = |index: usize, rows: &[i64]| {
            k.load_rows(index, rows.iter().map(|&v| Value::Integer(v)).collect())
        };
        assert_eq!(
            load(0, &[i64::MAX, 1, -2]).unwrap(),
            [Value::Integer(i64::MAX - 1)]
        );
        let err = load(0, &[i64::MAX, 1])
            .unwrap_err()
            .into_error("Test", "1", "checked");
        let total = i128::from(i64::MAX) + 1;
        assert_eq!(source::<OutOfRange>(&err), Some(&OutOfRange { total }));
        // A wrapping fold wraps where the total does not fit.
        assert_eq!(load(1, &[i64::MAX, 1]).unwrap(), [Value::Integer(i64::MIN)]);
        assert_eq!(load(4, &[200, 100]).unwrap(), [Value::Integer(44)]);
        // A row outside the type is corrupt, even if the total would fit.
        let err = load(4, &[300, -100]).unwrap_err();
        assert!(matches!(err, FoldError::Decode(_)), "{err:?}");
        // Not a sum: the rows as they are, for the fold.
        assert_eq!(load(3, &[1, 2]).unwrap().len(), 2);
    }

    #[test]
    fn a_static_delta_is_refused_if_the_total_would_not_fit() {
        let k = kind();
        let rows = ints(&[(0, i64::MAX), (1, -5)]);
        for picked in 0..3 {
            let err = k
                .plan_static_rows(&1, 0, picked, &rows, &Value::Integer(10), true)
                .unwrap_err();
            // The fold's own error, as the rows and the delta give it.
            assert_eq!(source::<Overflow>(&err), Some(&Overflow), "{err:?}");
        }
        // Fits the total: the picked row if it takes it, else the smallest.
        let plan = |picked, delta, may_move| {
            k.plan_static_rows(&1, 0, picked, &rows, &Value::Integer(delta), may_move)
        };
        assert_eq!(plan(2, 5, true).unwrap(), (2, Value::Integer(5)));
        assert_eq!(plan(0, 5, true).unwrap(), (1, Value::Integer(0)));
        assert_eq!(
            plan(0, -5, true).unwrap(),
            (0, Value::Integer(i64::MAX - 5))
        );
        let err = plan(0, 5, false).unwrap_err();
        assert_eq!(source::<Overflow>(&err), Some(&Overflow), "{err:?}");
        let rows = ints(&[(0, i64::MAX), (1, 7)]);
        assert_eq!(
            k.plan_static_rows(&1, 0, 0, &rows, &Value::Integer(-7), true)
                .unwrap(),
            (0, Value::Integer(i64::MAX - 7))
        );
        // Rows beyond `shards` count, but only a row within takes a delta:
        // here a missing one.
        let rows = ints(&[(0, i64::MAX), (1, 2), (5, -10)]);
        let plan = k.plan_static_rows(&1, 0, 0, &rows, &Value::Integer(5), true);
        assert_eq!(plan.unwrap(), (2, Value::Integer(5)));
        let rows = ints(&[(0, i64::MAX), (1, 0)]);
        let plan = k.plan_static_rows(&1, 0, 0, &rows, &Value::Integer(-i64::MAX), true);
        assert_eq!(plan.unwrap(), (0, Value::Integer(0)));
        // A wrapping fold accepts what does not fit, and wraps the row.
        let rows = ints(&[(0, i64::MAX)]);
        let plan = k.plan_static_rows(&1, 1, 0, &rows, &Value::Integer(1), true);
        assert_eq!(plan.unwrap(), (0, Value::Integer(i64::MIN)));
        // Not a sum: folded into the picked row.
        let rows = ints(&[(0, 4)]);
        let plan = k.plan_static_rows(&1, 3, 0, &rows, &Value::Integer(9), true);
        assert_eq!(plan.unwrap(), (0, Value::Integer(9)));
    }

    #[test]
    fn a_float_delta_is_refused_if_the_total_would_not_be_finite() {
        let k = kind();
        let rows = vec![(0, Value::Real(f64::MAX))];
        let err = k
            .plan_static_rows(&1, 2, 1, &rows, &Value::Real(f64::MAX), true)
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidValue { field: "real", .. }),
            "{err:?}"
        );
        let rows = vec![(0, Value::Real(f64::MAX)), (1, Value::Real(-f64::MAX))];
        let half = f64::MAX / 2.0;
        let plan = k.plan_static_rows(&1, 2, 0, &rows, &Value::Real(half), true);
        assert_eq!(plan.unwrap(), (1, Value::Real(-f64::MAX + half)));
    }

    #[test]
    fn an_sql_total_is_checked_as_the_fold_would() {
        let k = kind();
        assert!(k.check_total(&1, 0, i128::from(i64::MAX)).is_ok());
        let err = k.check_total(&1, 0, i128::from(i64::MAX) + 1).unwrap_err();
        assert_eq!(source::<Overflow>(&err), Some(&Overflow));
        let err = k.check_total(&1, 0, i128::from(i64::MIN) - 1).unwrap_err();
        assert_eq!(source::<Overflow>(&err), Some(&Overflow));
        assert!(k.check_total(&1, 1, i128::from(i64::MAX) + 1).is_ok());
        assert!(k.adds_i64(0) && k.adds_i64(1));
        assert!(!k.adds_i64(2) && !k.adds_i64(3) && !k.adds_i64(4));
    }
}

//! What compaction does to one field of one entity, independent of the store.
//!
//! Dynamic fields fold every row into the lowest-numbered one. Static fields
//! keep rows `0..shards` and fold any surplus (left behind when `shards` was
//! lowered, or by a field that used to be dynamic) into shard 0. Either way
//! the fold of all rows is unchanged, which is the invariant every store's
//! compaction must keep.

use crate::__private::{FieldSpec, FoldError};
use crate::value::Value;

/// The rewrite of one (entity, field) group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// Shard row that receives the folded value (created if missing).
    pub target: i64,
    /// The folded value of the target and every removed row.
    pub value: Value,
    /// Shard numbers whose rows are deleted.
    pub removed: Vec<i64>,
}

/// Plans the rewrite of one group, given its rows in shard order; `None` when
/// the group is already compact.
pub(crate) fn plan(
    spec: &FieldSpec,
    rows: Vec<(i64, Value)>,
    fold: impl FnOnce(&mut dyn Iterator<Item = Value>) -> Result<Value, FoldError>,
) -> Result<Option<Plan>, FoldError> {
    let (target, keep_below) = match spec.shards {
        None if rows.len() > 1 => (rows[0].0, rows[0].0 + 1),
        None => return Ok(None),
        Some(n) => (0, i64::from(n)),
    };
    if rows.iter().all(|(shard, _)| *shard < keep_below) {
        return Ok(None);
    }
    let mut removed = Vec::new();
    let mut values = Vec::new();
    for (shard, value) in rows {
        if shard == target || shard >= keep_below {
            if shard != target {
                removed.push(shard);
            }
            values.push(value);
        }
    }
    let value = fold(&mut values.into_iter())?;
    Ok(Some(Plan {
        target,
        value,
        removed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(values: &mut dyn Iterator<Item = Value>) -> Result<Value, FoldError> {
        Ok(Value::Integer(
            values
                .map(|v| match v {
                    Value::Integer(i) => i,
                    _ => unreachable!(),
                })
                .sum(),
        ))
    }

    fn rows(pairs: &[(i64, i64)]) -> Vec<(i64, Value)> {
        pairs.iter().map(|&(s, v)| (s, Value::Integer(v))).collect()
    }

    const DYNAMIC: FieldSpec = FieldSpec {
        name: "f",
        shards: None,
    };
    const STATIC3: FieldSpec = FieldSpec {
        name: "f",
        shards: Some(3),
    };

    #[test]
    fn dynamic_folds_everything_into_the_first_row() {
        let plan = plan(&DYNAMIC, rows(&[(4, 1), (7, 2), (9, 3)]), sum)
            .unwrap()
            .unwrap();
        assert_eq!(plan.target, 4);
        assert_eq!(plan.value, Value::Integer(6));
        assert_eq!(plan.removed, vec![7, 9]);
        assert_eq!(super::plan(&DYNAMIC, rows(&[(4, 1)]), sum).unwrap(), None);
    }

    #[test]
    fn static_folds_only_surplus_into_shard_zero() {
        assert_eq!(
            plan(&STATIC3, rows(&[(0, 1), (1, 1), (2, 1)]), sum).unwrap(),
            None
        );
        let plan = plan(&STATIC3, rows(&[(0, 5), (2, 1), (3, 10), (8, 100)]), sum)
            .unwrap()
            .unwrap();
        assert_eq!(plan.target, 0);
        assert_eq!(plan.value, Value::Integer(115));
        assert_eq!(plan.removed, vec![3, 8]);
    }

    #[test]
    fn static_without_shard_zero_creates_it() {
        let plan = plan(&STATIC3, rows(&[(1, 1), (5, 2)]), sum)
            .unwrap()
            .unwrap();
        assert_eq!(
            (plan.target, plan.value, plan.removed),
            (0, Value::Integer(2), vec![5])
        );
    }
}

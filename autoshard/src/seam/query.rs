//! The query half of the seam: what part of a [`Query`](crate::Query) a
//! store runs in SQL, described without generics.
//!
//! `crate::query` decides what can be pushed down (a [`ScanPlan`]); the store
//! runs it in one read snapshot and returns the matching entities' stored
//! rows in order; `crate::query` assembles them and does the rest in Rust.

use crate::seam::{Kind, Stored, StoredKey};
use crate::value::Value;

/// A value of the class SQL compares it as.
// Public but unnameable outside the crate: `Comparable`'s hidden items
// return them.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Int(i64),
    Real(f64),
    Text(String),
    Bool(bool),
}

/// How a field's values compare in SQL, which fixes how a store reads a
/// document field (`json_extract`, or `->>` and a cast).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Integers that fit `i64`.
    Int,
    /// Integers that may not (`u64`, `i128`): exact in PostgreSQL's
    /// `numeric`, approximated by SQLite's `json_extract` above `i64::MAX`,
    /// so they are filtered in SQL but ordered in Rust.
    Wide,
    Real,
    Text,
    Bool,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub fn sql(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "<>",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// A fold the stores can run as an SQL aggregate over the shard rows of a
/// field, and the field's neutral element (the fold of no rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Aggregate {
    /// `neutral + sum(rows)`; the neutral element is 0.
    Sum,
    /// `max(neutral, max(rows))`.
    Max(i64),
    /// `min(neutral, min(rows))`.
    Min(i64),
}

/// What an SQL expression reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Column {
    /// The entity id.
    Id,
    /// Sharded field `index`, aggregated over its shard rows.
    Sharded {
        index: usize,
        name: &'static str,
        aggregate: Aggregate,
    },
    /// A field of the JSON document.
    Document { name: &'static str, class: Class },
}

/// `column op operand`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Condition {
    pub column: Column,
    pub op: Op,
    pub operand: Operand,
}

/// One key of the order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sort {
    pub column: Column,
    pub descending: bool,
}

/// What a store runs: the entities meeting every condition, ordered by
/// `order` and then by id (ascending), `offset` skipped and at most `limit`
/// returned.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ScanPlan {
    pub conditions: Vec<Condition>,
    pub order: Vec<Sort>,
    pub limit: Option<i64>,
    pub offset: i64,
}

impl ScanPlan {
    /// The sharded fields the plan aggregates, each once, in index order.
    pub fn aggregates(&self) -> Vec<(usize, &'static str, Aggregate)> {
        let columns = self.conditions.iter().map(|c| &c.column);
        let mut found: Vec<_> = columns
            .chain(self.order.iter().map(|s| &s.column))
            .filter_map(|c| match c {
                Column::Sharded {
                    index,
                    name,
                    aggregate,
                } => Some((*index, *name, *aggregate)),
                _ => None,
            })
            .collect();
        found.sort_by_key(|(index, _, _)| *index);
        found.dedup_by_key(|(index, _, _)| *index);
        found
    }
}

/// What a store found.
pub(crate) enum Scanned {
    /// The entities, in the plan's order.
    Rows(Vec<(StoredKey, Stored)>),
    /// An SQL sum left `i64`'s range (SQLite's `sum()` raises on any
    /// intermediate overflow, PostgreSQL's numeric sum on the final cast):
    /// the caller runs the plan again with the sums folded in Rust, which
    /// then does what a load does.
    Overflow,
}

/// The aggregate field `index` of `kind` runs as, if its fold is one the
/// stores know: a sum, max or min over `i64` (probed, as
/// [`Kind::adds_integers`] is).
pub(crate) fn aggregate_of(kind: &Kind, index: usize) -> Option<Aggregate> {
    if kind.adds_integers(index) {
        return Some(Aggregate::Sum);
    }
    let Ok(Value::Integer(neutral)) = kind.raw_fold(index, &mut std::iter::empty()) else {
        return None;
    };
    let pairs = [
        (2, 3),
        (3, 2),
        (-7, 3),
        (5, 5),
        (i64::MIN, i64::MAX),
        (i64::MAX, i64::MIN),
        (0, -1),
    ];
    let folds_like = |f: fn(i64, i64) -> i64| {
        pairs.iter().all(|&(a, b)| {
            let values = [Value::Integer(a), Value::Integer(b)];
            matches!(kind.raw_fold(index, &mut values.into_iter()),
                     Ok(Value::Integer(r)) if r == f(a, b))
        })
    };
    if folds_like(std::cmp::max) {
        Some(Aggregate::Max(neutral))
    } else if folds_like(std::cmp::min) {
        Some(Aggregate::Min(neutral))
    } else {
        None
    }
}

//! Typed queries over sharded and unsharded fields: [`Store::query`].
//!
//! ```
//! use autoshard::{shard_fold, shard_method, Pending, Shardable, Sqlite, Store};
//!
//! #[derive(Shardable, Debug)]
//! struct Question {
//!     #[shard(id)]
//!     id: u64,
//!     topic: String,
//!     #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum)]
//!     votes: i64,
//!     #[shard(pending)]
//!     pending: Pending<Self>,
//! }
//!
//! # fn main() -> autoshard::Result<()> {
//! let db = Sqlite::memory()?;
//! for (id, votes) in [(1, 70), (2, 10), (3, 90), (4, 70)] {
//!     let topic = "schools".to_string();
//!     db.insert(&Question { id, topic, votes, pending: Pending::default() })?;
//! }
//! let top: Vec<Question> = db
//!     .query::<Question>()
//!     .filter(|q| q.votes.ge(50))
//!     .filter(|q| q.topic.eq("schools".to_string()))
//!     .order_by(|q| q.votes.desc())
//!     .limit(2)
//!     .run()?;
//! // Ties are broken by id, ascending.
//! assert_eq!(top.iter().map(|q| q.id).collect::<Vec<_>>(), [3, 1]);
//! # Ok(())
//! # }
//! ```
//!
//! The closures get the entity's field handles (one per field, named like
//! it; see [`Field`]), so `q.vtoes` or `q.votes.ge("50")` do not compile.
//!
//! On SQLite and PostgreSQL a query runs in one read snapshot. What SQL can
//! answer exactly it answers: the id, document fields (JSON functions), and
//! sharded fields whose fold is a sum, max or min over `i64` (probed, like
//! [`fold::checked_sum`](crate::fold::checked_sum) or `std::cmp::max`),
//! aggregated over every shard row, pending dynamic rows included. Any
//! other condition, order or fold runs in Rust on the entities the pushed
//! conditions left, with the same result. `docs/design/queries.md` ("Queries") has
//! the plans and their cost.

mod field;

pub use self::field::{Comparable, Field, Filter, SortKey};

use self::field::Source;
use crate::entity::{EntityId, Shardable};
use crate::error::{Error, Result};
use crate::mapper;
use crate::seam::query::{aggregate_of, Class, Column, Condition, ScanPlan, Scanned, Sort};
use crate::seam::{Backend, Kind, StoredKey};
use std::cmp::Ordering;

/// An entity whose fields a [`Query`] can name: `#[derive(Shardable)]`
/// implements it. `Fields` is a generated struct with one public
/// [`Field`] per field (the pending field aside), each as visible as the
/// field itself.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be queried",
    label = "`{Self}` does not implement `Queryable`",
    note = "add `#[derive(autoshard::Shardable)]` to the declaration of `{Self}`"
)]
pub trait Queryable: Shardable {
    /// The field handles.
    type Fields;
    #[doc(hidden)]
    fn __fields() -> Self::Fields;
}

/// A query of entities of kind `T`, built by [`Store::query`](crate::Store::query):
/// conditions (all must hold), an order, a page; [`run`](Query::run) loads
/// the entities.
///
/// Without [`order_by`](Query::order_by) the entities come by id; with it,
/// by its keys in turn and then by id, so every order is total and a page
/// of it is well defined (an id is compared as the store keys it: integers
/// numerically, strings byte by byte).
#[must_use = "a query does nothing until `run`"]
pub struct Query<'s, S: ?Sized, T: Queryable> {
    store: &'s S,
    fields: T::Fields,
    filters: Vec<Filter<T>>,
    order: Vec<SortKey<T>>,
    limit: Option<usize>,
    offset: usize,
    in_rust: bool,
}

impl<'s, S: ?Sized, T: Queryable + 'static> Query<'s, S, T> {
    pub(crate) fn new(store: &'s S) -> Self {
        Query {
            store,
            fields: T::__fields(),
            filters: Vec::new(),
            order: Vec::new(),
            limit: None,
            offset: 0,
            in_rust: false,
        }
    }

    /// The same query on another store: the async API builds a query
    /// bound to no store (`&()`) and runs it on the store's thread.
    #[cfg(feature = "tokio")]
    pub(crate) fn rebind<'t, S2: ?Sized>(self, store: &'t S2) -> Query<'t, S2, T> {
        Query {
            store,
            fields: self.fields,
            filters: self.filters,
            order: self.order,
            limit: self.limit,
            offset: self.offset,
            in_rust: self.in_rust,
        }
    }

    /// Keeps the entities meeting a condition on one field:
    /// `.filter(|q| q.votes.ge(50))`. Conditions add up (all must hold).
    pub fn filter(mut self, condition: impl FnOnce(&T::Fields) -> Filter<T>) -> Self {
        let filter = condition(&self.fields);
        self.filters.push(filter);
        self
    }

    /// Orders by a field: `.order_by(|q| q.votes.desc())`. A second call
    /// orders the ties of the first, and so on; the id breaks the last ties.
    pub fn order_by(mut self, key: impl FnOnce(&T::Fields) -> SortKey<T>) -> Self {
        let order = key(&self.fields);
        self.order.push(order);
        self
    }

    /// Returns at most `n` entities (at least 1).
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// Skips the first `n` entities of the order: with
    /// [`limit`](Query::limit), a page.
    pub fn offset(mut self, n: usize) -> Self {
        self.offset = n;
        self
    }

    /// Evaluates every condition and order in Rust over all entities, as if
    /// no fold were known to SQL: the reference the SQL plans are tested
    /// against.
    #[doc(hidden)]
    pub fn __in_rust(mut self) -> Self {
        self.in_rust = true;
        self
    }
}

impl<'s, S: Backend + ?Sized, T: Queryable + 'static> Query<'s, S, T> {
    /// Runs the query in one read snapshot and returns the entities, loaded
    /// as [`Store::load`](crate::Store::load) would (they can be changed
    /// and saved).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidQuery`] for a limit of 0, a limit or offset above
    /// `i64::MAX`, a comparison with NaN, or a comparison of a field other
    /// than the id with a string holding NUL (no document holds one);
    /// [`Error::Unsupported`] on Redis Cluster; otherwise what
    /// [`Store::load`](crate::Store::load) returns for an entity that
    /// does not load ([`Error::Corrupt`], [`Error::Fold`]), or a store
    /// error.
    pub fn run(self) -> Result<Vec<T>> {
        self.check()?;
        let kind = Kind::of::<T>();
        let mut plan = match self.in_rust {
            true => Plan::rust_only(&self),
            false => Plan::new(&kind, &self, true),
        };
        let mut scanned = self.store.__entities().0.query(&kind, &plan.scan)?;
        if matches!(scanned, Scanned::Overflow) {
            plan = Plan::new(&kind, &self, false);
            scanned = self.store.__entities().0.query(&kind, &plan.scan)?;
        }
        let Scanned::Rows(rows) = scanned else {
            unreachable!("a plan without SQL sums cannot overflow one");
        };
        let mut found = Vec::with_capacity(rows.len());
        for (key, stored) in rows {
            let id = T::Id::__from_key(key.as_key()).ok_or_else(|| Error::SchemaMismatch {
                kind: T::KIND.to_owned(),
                reason: format!("stored id {key} does not fit the id type"),
            })?;
            let entity: T = mapper::assemble(&kind, &id, key.as_key(), stored)?;
            if plan
                .residual
                .iter()
                .all(|&i| (self.filters[i].test)(&entity))
            {
                found.push((key, entity));
            }
        }
        if !plan.ordered {
            found.sort_by(|(ka, a), (kb, b)| self.compare(a, b).then_with(|| ka.cmp(kb)));
        }
        let found = found.into_iter().map(|(_, entity)| entity);
        Ok(match (plan.paged, self.limit) {
            (true, _) => found.collect(),
            (false, Some(limit)) => found.skip(self.offset).take(limit).collect(),
            (false, None) => found.skip(self.offset).collect(),
        })
    }

    fn compare(&self, a: &T, b: &T) -> Ordering {
        self.order
            .iter()
            .map(|o| (o.compare)(a, b))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }

    fn check(&self) -> Result<()> {
        let invalid = |reason: String| Error::InvalidQuery {
            kind: T::KIND,
            reason,
        };
        if let Some(reason) = self.filters.iter().find_map(|f| f.invalid.clone()) {
            return Err(invalid(reason));
        }
        if self.limit == Some(0) {
            return Err(invalid(
                "a limit of 0 returns nothing; the least is 1".into(),
            ));
        }
        let too_big = |n: usize| i64::try_from(n).is_err();
        if self.limit.is_some_and(too_big) || too_big(self.offset) {
            return Err(invalid(format!(
                "limit {:?} / offset {} beyond i64::MAX, the most SQL can skip or return",
                self.limit, self.offset
            )));
        }
        Ok(())
    }
}

/// What runs where: the store's [`ScanPlan`], and what is left for Rust.
struct Plan {
    scan: ScanPlan,
    /// Filters the store did not apply, by index.
    residual: Vec<usize>,
    /// Whether the store ordered the rows (else Rust sorts them).
    ordered: bool,
    /// Whether the store applied limit and offset.
    paged: bool,
}

impl Plan {
    /// Pushes down what SQL answers exactly; with `sums` false, no sharded
    /// field is aggregated in SQL (the plan after an SQL sum overflowed).
    fn new<S: ?Sized, T: Queryable>(kind: &Kind, query: &Query<'_, S, T>, sums: bool) -> Plan {
        let mut scan = ScanPlan::default();
        let mut residual = Vec::new();
        for (i, filter) in query.filters.iter().enumerate() {
            let column = column(kind, filter.name, filter.source, filter.class, sums);
            match (column, &filter.operand) {
                (Some(column), Some(operand)) => scan.conditions.push(Condition {
                    column,
                    op: filter.op,
                    operand: operand.clone(),
                }),
                _ => residual.push(i),
            }
        }
        let sorts: Option<Vec<Sort>> = query
            .order
            .iter()
            // SQLite reads document integers above i64::MAX as reals,
            // which may tie where Rust would not.
            .filter(|o| !(o.class == Class::Wide && o.source == Source::Document))
            .map(|o| {
                column(kind, o.name, o.source, o.class, sums).map(|column| Sort {
                    column,
                    descending: o.descending,
                })
            })
            .collect();
        let ordered = matches!(&sorts, Some(s) if s.len() == query.order.len());
        if ordered {
            scan.order = sorts.unwrap_or_default();
        }
        let paged = ordered && residual.is_empty();
        if paged {
            // `check` refused values beyond i64::MAX.
            scan.limit = query.limit.map(|n| n as i64);
            scan.offset = query.offset as i64;
        }
        Plan {
            scan,
            residual,
            ordered,
            paged,
        }
    }
}

impl Plan {
    /// Everything in Rust: the reference plan.
    fn rust_only<S: ?Sized, T: Queryable>(query: &Query<'_, S, T>) -> Plan {
        Plan {
            scan: ScanPlan::default(),
            residual: (0..query.filters.len()).collect(),
            ordered: query.order.is_empty(),
            paged: false,
        }
    }
}

/// The SQL column a field reads, if SQL can compute it exactly.
fn column(
    kind: &Kind,
    name: &'static str,
    source: Source,
    class: Class,
    sums: bool,
) -> Option<Column> {
    match source {
        Source::Id => Some(Column::Id),
        Source::Document => Some(Column::Document { name, class }),
        Source::Sharded(index) if sums && matches!(class, Class::Int | Class::Wide) => {
            aggregate_of(kind, index).map(|aggregate| Column::Sharded {
                index,
                name,
                aggregate,
            })
        }
        Source::Sharded(_) => None,
    }
}

impl<S: ?Sized, T: Queryable> std::fmt::Debug for Query<'_, S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query")
            .field("kind", &T::KIND)
            .field("filters", &self.filters)
            .field("order", &self.order)
            .field("limit", &self.limit)
            .field("offset", &self.offset)
            .finish()
    }
}

// `StoredKey`'s order is the stores' id order: integers numerically, text
// byte by byte (SQLite's BINARY collation, PostgreSQL's "C").
const _: fn(&StoredKey, &StoredKey) -> Ordering = Ord::cmp;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seam::query::Aggregate;
    use crate::{Pending, Shardable, Sqlite, Store};

    #[derive(Shardable, Debug)]
    struct Thing {
        #[shard(id)]
        id: i64,
        name: String,
        big: u64,
        #[shard(neutral = 0, shards = 4, fold = crate::fold::checked_sum)]
        sum: i64,
        #[shard(neutral = 7, fold = std::cmp::min)]
        low: i64,
        #[shard(neutral = 0, fold = Self::or)]
        bits: i64,
        #[shard(neutral = 0.0, fold = crate::fold::max_f64)]
        real: f64,
        #[shard(pending)]
        pending: Pending<Self>,
    }

    impl Thing {
        fn or(a: i64, b: i64) -> i64 {
            a | b
        }
    }

    fn plan(query: Query<'_, Sqlite, Thing>) -> Plan {
        Plan::new(&Kind::of::<Thing>(), &query, true)
    }

    #[test]
    fn known_folds_are_aggregated_in_sql_and_the_rest_left_to_rust() {
        let db = Sqlite::memory().unwrap();
        let all = plan(
            db.query::<Thing>()
                .filter(|t| t.sum.ge(1))
                .filter(|t| t.low.lt(3))
                .filter(|t| t.name.eq("x".into()))
                .order_by(|t| t.sum.desc())
                .limit(5),
        );
        assert!(all.residual.is_empty() && all.ordered && all.paged);
        assert_eq!(all.scan.limit, Some(5));
        let aggregates: Vec<_> = all.scan.aggregates().into_iter().map(|a| a.2).collect();
        assert_eq!(aggregates, [Aggregate::Sum, Aggregate::Min(7)]);

        // An unknown fold (or), a float fold, a bound beyond i64: in Rust,
        // and then so are the order (if it needs them) and the page.
        let mixed = plan(
            db.query::<Thing>()
                .filter(|t| t.sum.ge(1))
                .filter(|t| t.bits.ne(0))
                .filter(|t| t.real.gt(0.5))
                .filter(|t| t.big.lt(u64::MAX))
                .order_by(|t| t.sum.desc())
                .limit(5),
        );
        assert_eq!(mixed.residual, [1, 2, 3]);
        assert_eq!(mixed.scan.conditions.len(), 1);
        assert!(mixed.ordered && !mixed.paged);
        assert_eq!(mixed.scan.limit, None);

        let unordered = plan(db.query::<Thing>().order_by(|t| t.bits.asc()).limit(1));
        assert!(!unordered.ordered && !unordered.paged && unordered.scan.order.is_empty());
        // SQLite reads document integers above i64::MAX as reals.
        let wide = plan(db.query::<Thing>().order_by(|t| t.big.asc()));
        assert!(!wide.ordered);
    }

    #[test]
    fn without_sums_no_sharded_field_is_aggregated() {
        let db = Sqlite::memory().unwrap();
        let query = db
            .query::<Thing>()
            .filter(|t| t.sum.ge(1))
            .filter(|t| t.id.gt(0));
        let plan = Plan::new(&Kind::of::<Thing>(), &query, false);
        assert_eq!(plan.residual, [0]);
        assert_eq!(plan.scan.conditions.len(), 1);
    }

    #[test]
    fn the_folds_sql_knows_are_probed() {
        let kind = Kind::of::<Thing>();
        let aggregates: Vec<_> = (0..4).map(|i| aggregate_of(&kind, i)).collect();
        assert_eq!(
            aggregates,
            [Some(Aggregate::Sum), Some(Aggregate::Min(7)), None, None]
        );
    }
}

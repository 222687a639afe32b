//! Checking an entity's folds and shard methods in your own tests (cargo
//! feature `testing`, built on [proptest]).
//!
//! autoshard's totals are exact only if every fold is **commutative** and
//! **associative** with `neutral` as its **identity**, and every shard
//! method changes its sharded fields in a way the fold can **replay**:
//! `method(x) == fold(x, method(neutral))` for every stored value `x`
//! (`docs/design/sharding.md`, "Fold laws" and "Shard methods"). The derive cannot
//! check that; [`laws`] lets a test do it with generated values:
//!
//! ```
//! use autoshard::testing::laws;
//! use autoshard::{shard_fold, shard_method, Pending, Shardable};
//!
//! #[derive(Shardable, Debug)]
//! struct Question {
//!     #[shard(id)]
//!     id: u64,
//!     title: String,
//!     #[shard(neutral = 0, shards = 10)]
//!     votes: i64,
//!     #[shard(pending)]
//!     pending: Pending<Self>,
//! }
//!
//! impl Question {
//!     #[shard_method]
//!     fn vote(&mut self, by: i64) {
//!         self.votes += by;
//!     }
//!     #[shard_fold]
//!     fn fold_votes(a: i64, b: i64) -> i64 {
//!         a + b
//!     }
//! }
//!
//! // In a #[test]:
//! let question = Question { id: 1, title: "Why?".into(), votes: 0, pending: Pending::default() };
//! let laws = laws::<Question>().values("votes", -1_000_000i64..1_000_000);
//! laws.check_folds(); // commutative, associative, 0 is the identity
//! laws.check_shard_method_with(&question, -10i64..10, Question::vote); // the replay rule
//! ```
//!
//! A violation panics with the law, the field and the smallest values
//! proptest found, for example:
//!
//! ```text
//! the fold of `Question.votes` breaks a law: neutral is not its identity:
//!   fold(neutral, 1) = 0, expected 1
//! ```
//!
//! Values are compared with `PartialEq` on the field's type (use
//! [`Laws::values_eq`] for a tolerance, e.g. a float sum, which is only
//! approximately associative). Choose value ranges the application really
//! stores: a plain `a + b` overflows (and panics in a debug build) near
//! `i64::MAX`, which the checker reports like any other failure.

use crate::entity::Shardable;
use crate::fold::FoldError;
use crate::value::ShardValue;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestError, TestRunner};
use std::any::TypeId;
use std::cell::Cell;
use std::fmt::{self, Debug};
use std::marker::PhantomData;

// The builder, the fold-law entry point and the type probe are here; the
// typed per-field checks (the fold laws themselves) are in `field.rs`, the
// replay rule for shard methods in `replay.rs`.
mod field;
mod replay;

use field::{FieldValues, Typed};

/// The proptest this module is built on, for strategies:
/// `autoshard::testing::proptest::prelude::*`.
pub use proptest;

/// The law checks for entity `T`; see the [module docs](self).
pub fn laws<T: Shardable>() -> Laws<T> {
    Laws {
        fields: T::__FIELDS.iter().map(|_| None).collect(),
        cases: None,
        _entity: PhantomData,
    }
}

/// Checks the fold laws and the replay rule of entity `T` on generated
/// values: made by [`laws`], given values for its sharded fields with
/// [`values`](Laws::values), then one `check_*` call per property.
pub struct Laws<T> {
    /// One slot per sharded field, in declaration order.
    fields: Vec<Option<Box<dyn FieldValues>>>,
    cases: Option<u32>,
    _entity: PhantomData<fn() -> T>,
}

impl<T: Shardable> Laws<T> {
    /// The values to try for sharded field `field`: a proptest strategy
    /// producing the field's type, e.g. `0i64..1_000` or
    /// `proptest::collection::btree_set(0u64..100, 0..10)`. Compared with
    /// `==`.
    ///
    /// # Panics
    ///
    /// If `T` has no sharded field `field`, or `V` is not its type.
    #[track_caller]
    pub fn values<V, S>(self, field: &str, values: S) -> Self
    where
        V: ShardValue + Clone + Debug,
        S: Strategy<Value = V> + 'static,
    {
        self.values_eq(field, values, |a: &V, b: &V| a == b)
    }

    /// [`values`](Laws::values), comparing results with `eq` instead of
    /// `==`: `|a, b| (a - b).abs() < 1e-9` for a float sum.
    ///
    /// # Panics
    ///
    /// As [`values`](Laws::values).
    #[track_caller]
    pub fn values_eq<V, S>(mut self, field: &str, values: S, eq: fn(&V, &V) -> bool) -> Self
    where
        V: ShardValue + Clone + Debug,
        S: Strategy<Value = V> + 'static,
    {
        let Some(index) = T::__FIELDS.iter().position(|f| f.name == field) else {
            panic!(
                "`{}` has no sharded field `{field}` (its sharded fields: {})",
                T::KIND,
                field_names::<T>()
            );
        };
        if let Some((id, name)) = field_type::<T>(index) {
            assert!(
                id == TypeId::of::<V>(),
                "values for `{}.{field}` are `{}`, but the field is `{name}`",
                T::KIND,
                std::any::type_name::<V>()
            );
        }
        self.fields[index] = Some(Box::new(Typed {
            entity: T::KIND,
            field: T::__FIELDS[index].name,
            index,
            fold: T::__fold,
            strategy: values.boxed(),
            eq,
        }));
        self
    }

    /// Generated cases per check (default: proptest's, 256, or the
    /// `PROPTEST_CASES` environment variable).
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = Some(cases);
        self
    }

    /// Checks every sharded field's fold: `neutral` is its identity
    /// (`fold(neutral, a) == a == fold(a, neutral)`), it is commutative
    /// (`fold(a, b) == fold(b, a)`) and associative (`fold(fold(a, b), c) ==
    /// fold(a, fold(b, c))`), on values from the field's strategy. A fold
    /// that returns an error, or panics, fails the check unless it does so
    /// on both sides of a law.
    ///
    /// # Panics
    ///
    /// On the first law a fold breaks, with the smallest counterexample
    /// found; if a sharded field was given no [`values`](Laws::values).
    #[track_caller]
    pub fn check_folds(&self) {
        for (index, field) in self.fields.iter().enumerate() {
            let Some(field) = field else {
                panic!(
                    "no values for `{}.{}`: add `.values(\"{1}\", strategy)` so its fold \
                     is checked too",
                    T::KIND,
                    T::__FIELDS[index].name
                );
            };
            if let Err(message) = field.check_fold(self.runner()) {
                panic!("{message}");
            }
        }
    }

    fn runner(&self) -> TestRunner {
        let mut config = Config {
            failure_persistence: None,
            ..Config::default()
        };
        if let Some(cases) = self.cases {
            config.cases = cases;
        }
        TestRunner::new(config)
    }
}

impl<T> Debug for Laws<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fields: Vec<_> = self.fields.iter().flatten().map(|f| f.name()).collect();
        f.debug_struct("Laws")
            .field("fields", &fields)
            .field("cases", &self.cases)
            .finish()
    }
}

fn describe(e: FoldError) -> String {
    match e {
        FoldError::Decode(e) | FoldError::Encode(e) => e.to_string(),
        FoldError::Fold(e) => e.to_string(),
        FoldError::NoSuchField(i) => format!("no sharded field #{i}"),
    }
}

/// A failed run as the message to panic with: proptest's reason for the
/// smallest case it found, and that case.
fn report<V: Debug>(result: Result<(), TestError<V>>) -> Result<(), String> {
    match result {
        Ok(()) => Ok(()),
        Err(TestError::Fail(reason, case)) => Err(format!(
            "{}\n  (smallest failing case proptest found: {case:?})",
            reason.message()
        )),
        Err(TestError::Abort(reason)) => Err(format!("the check gave up: {}", reason.message())),
    }
}

fn field_names<T: Shardable>() -> String {
    let names: Vec<_> = T::__FIELDS.iter().map(|f| f.name).collect();
    names.join(", ")
}

thread_local! {
    /// Armed by [`field_type`]: the type the next fold decodes into.
    static PROBE: Cell<Option<Option<(TypeId, &'static str)>>> = const { Cell::new(None) };
}

/// Called by every typed fold (`__private::fold_values`): records the
/// field's type when [`field_type`] asked for it.
pub(crate) fn note_field_type<V: 'static>() {
    PROBE.with(|probe| {
        if probe.get().is_some() {
            probe.set(Some(Some((TypeId::of::<V>(), std::any::type_name::<V>()))));
        }
    });
}

/// The type of sharded field `index` of `T`, learnt by folding nothing.
fn field_type<T: Shardable>(index: usize) -> Option<(TypeId, &'static str)> {
    PROBE.with(|probe| probe.set(Some(None)));
    let _ = T::__fold(index, &mut std::iter::empty());
    PROBE.with(|probe| probe.take()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{shard_fold, shard_method, Pending, Shardable};
    use std::collections::BTreeSet;

    #[derive(Shardable, Debug)]
    struct Counter {
        #[shard(id)]
        id: u64,
        #[shard(neutral = 0)]
        hits: i64,
        #[shard(neutral = BTreeSet::new())]
        seen: BTreeSet<u8>,
        #[shard(pending)]
        pending: Pending<Self>,
    }

    impl Counter {
        fn new() -> Self {
            Counter {
                id: 1,
                hits: 0,
                seen: BTreeSet::new(),
                pending: Pending::default(),
            }
        }
        #[shard_method]
        fn hit(&mut self, who: u8) {
            self.hits += 1;
            self.seen.insert(who);
        }
        #[shard_method]
        fn double(&mut self) {
            self.hits *= 2;
        }
        #[shard_fold]
        fn fold_hits(a: i64, b: i64) -> i64 {
            a + b
        }
        #[shard_fold]
        fn fold_seen(mut a: BTreeSet<u8>, b: BTreeSet<u8>) -> BTreeSet<u8> {
            a.extend(b);
            a
        }
    }

    fn counter_laws() -> Laws<Counter> {
        laws::<Counter>()
            .values("hits", -1_000i64..1_000)
            .values("seen", proptest::collection::btree_set(0u8..20, 0..5))
            .cases(64)
    }

    #[test]
    fn lawful_folds_and_methods_pass() {
        let laws = counter_laws();
        laws.check_folds();
        laws.check_shard_method_with(&Counter::new(), 0u8..20, Counter::hit);
    }

    #[test]
    #[should_panic(expected = "breaks the replay rule on `Counter.hits`")]
    fn doubling_breaks_the_replay_rule() {
        counter_laws().check_shard_method(&Counter::new(), Counter::double);
    }

    #[test]
    fn the_field_type_is_probed() {
        assert_eq!(
            field_type::<Counter>(0).map(|t| t.0),
            Some(TypeId::of::<i64>())
        );
        assert_eq!(
            field_type::<Counter>(1).map(|t| t.0),
            Some(TypeId::of::<BTreeSet<u8>>())
        );
        // Disarmed afterwards: folds elsewhere record nothing.
        let _ = Counter::__fold(0, &mut std::iter::empty());
        assert_eq!(PROBE.with(|p| p.get()), None);
    }

    #[test]
    #[should_panic(expected = "values for `Counter.hits` are `i32`, but the field is `i64`")]
    fn values_of_another_type_are_refused() {
        let _ = laws::<Counter>().values("hits", 0i32..10);
    }

    #[test]
    #[should_panic(
        expected = "`Counter` has no sharded field `hist` (its sharded fields: hits, seen)"
    )]
    fn an_unknown_field_is_refused() {
        let _ = laws::<Counter>().values("hist", 0i64..10);
    }

    #[test]
    #[should_panic(expected = "no values for `Counter.seen`")]
    fn every_field_needs_values_for_check_folds() {
        laws::<Counter>().values("hits", 0i64..10).check_folds();
    }
}

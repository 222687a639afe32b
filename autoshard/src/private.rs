//! Runtime support for the code that `#[derive(Shardable)]` and
//! `#[shard_method]` generate. Not part of the API: anything here may change
//! in any release.

use crate::entity::{Mode, Pending, Shardable};
use crate::error::{Error, Result};
use crate::fold::FoldOutput;
use crate::value::{self, Value, ValueError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::TypeId;

pub use serde;

/// The seam's public face, for a wrapper type that delegates to a store
/// (the shared test suites run the PostgreSQL store twice this way).
pub use crate::seam::{Backend, Boards, Entities};

/// The ranked fields of a kind (`#[shard(ranked = "board")]`), and the
/// ranking layer's writer the derive wires to them: the derive sits above
/// ranking, so it may name it; the stores below only call the hook.
pub use crate::seam::{Ranked, RankedHook};

/// The board writer of every ranked field.
pub const RANKED_HOOK: RankedHook = RankedHook(crate::ranking::entity_board::apply);

/// What a ranked field's type must be: an integer type whose every value a
/// board's `i64` score holds.
#[diagnostic::on_unimplemented(
    message = "a `ranked` field must be an integer type a board score holds, not `{Self}`",
    label = "not one of i8, i16, i32, i64, u8, u16, u32",
    note = "a board keeps `i64` scores; `u64` and `usize` totals may not fit"
)]
pub trait RankedScore {}
impl RankedScore for i8 {}
impl RankedScore for i16 {}
impl RankedScore for i32 {}
impl RankedScore for i64 {}
impl RankedScore for u8 {}
impl RankedScore for u16 {}
impl RankedScore for u32 {}

/// Hooks of the ranking queue's crash tests (`tests/ranking_queue/`),
/// process-wide: a child process sets them before it starts a worker.
pub mod queue_hooks {
    use crate::ranking::queue_hooks as hooks;
    use std::sync::atomic::Ordering;

    /// The process aborts between the `batches`-th committed worker batch
    /// from now and that batch's queue delete (0: never), so a test can hit
    /// the window between the two deterministically.
    pub fn abort_before_delete(batches: u64) {
        hooks::ABORT_BEFORE_DELETE.store(batches, Ordering::Relaxed);
    }

    /// Workers take every queued row, ignoring the applied-through marks:
    /// the bug the marks guard against, for the crash test's control.
    pub fn ignore_applied_marks(ignore: bool) {
        hooks::IGNORE_MARKS.store(ignore, Ordering::Relaxed);
    }
}

/// Hooks of the approximate boards' refresh tests
/// (`tests/approx_crash.rs`), process-wide.
pub mod approx_hooks {
    use crate::ranking::approx_hooks as hooks;
    use std::sync::atomic::Ordering;

    /// Buckets a refresh writes per transaction (0: the default), and how
    /// long it sleeps between two of them: a test stretches a refresh so a
    /// kill or a reader lands in the middle of it.
    pub fn refresh_chunks(buckets: u32, pause: std::time::Duration) {
        hooks::CHUNK.store(buckets, Ordering::Relaxed);
        hooks::PAUSE_MICROS.store(pause.as_micros() as u64, Ordering::Relaxed);
    }

    /// Refreshes write over the published snapshot's rows: the bug the
    /// snapshot protocol guards against, for the crash test's control.
    pub fn refresh_in_place(on: bool) {
        hooks::IN_PLACE.store(on, Ordering::Relaxed);
    }
}

/// Hooks of the split boards' oracle tests (`tests/stores_ranking_trees.rs`).
pub mod tree_hooks {
    /// On this thread, queries of split boards order tied players tree
    /// after tree instead of by who reached the score first: the wrong
    /// merge the oracle tests' control shows they catch.
    pub fn concatenate_ties(on: bool) {
        crate::ranking::trees_hooks::CONCATENATE_TIES.set(on);
    }

    /// Process-wide, trees of split boards hand out arrival numbers from
    /// their scores' counters alone (ties across trees then rank wrongly):
    /// a benchmark's diagnostic of what board-wide arrival numbers cost.
    pub fn local_arrivals(on: bool) {
        use std::sync::atomic::Ordering;
        crate::ranking::trees_hooks::LOCAL_ARRIVALS.store(on, Ordering::Relaxed);
    }
}

/// One sharded field as declared: its name and `shards = N` or
/// `shards = LOW..=HIGH` (neither: dynamic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// The field's name, which is also its key in the shard table.
    pub name: &'static str,
    /// Static shard count (`N`, or `HIGH` of an automatic count), or `None`
    /// for dynamic sharding. Code that does not know automatic counts
    /// (compaction's surplus, Redis Cluster) sees an automatic field as
    /// static with `HIGH` shards, which is never wrong, only wasteful.
    pub shards: Option<u32>,
    /// `LOW` of an automatic count, `None` for every other field.
    pub min_shards: Option<u32>,
}

impl FieldSpec {
    /// `LOW..=HIGH` of an automatic field.
    pub(crate) fn auto_range(&self) -> Option<(u32, u32)> {
        Some((self.min_shards?, self.shards?))
    }

    /// Rows an insert writes: `N` of a static field, `LOW` of an automatic
    /// one, one of a dynamic one.
    pub(crate) fn initial_shards(&self) -> u32 {
        self.min_shards.or(self.shards).unwrap_or(1)
    }
}

/// Bound on unsharded field types.
pub trait Document: Serialize + DeserializeOwned {}
impl<T: Serialize + DeserializeOwned> Document for T {}

/// What a sharded field's type must be: stored (serde), compared with the
/// neutral element (to skip empty writes), and kept in `Pending` across
/// threads. Implemented for every such type; name it in the bounds of a
/// generic entity's impl blocks: `impl<T: autoshard::ShardValue> Counter<T>`.
pub trait ShardValue: Serialize + DeserializeOwned + PartialEq + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + PartialEq + Send + Sync + 'static> ShardValue for T {}

/// The id type of the stub impl emitted next to derive errors.
#[derive(Debug, Clone)]
pub enum Never {}

impl crate::EntityId for Never {
    const KEY_KIND: crate::KeyKind = crate::KeyKind::Int;
    fn key(&self) -> Result<crate::Key<'_>> {
        match *self {}
    }
    fn __from_key(_: crate::Key<'_>) -> Option<Self> {
        None
    }
}

/// Why a fold over stored values failed; stores add kind, id and field.
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

fn invalid_value(kind: &'static str, field: &'static str, e: ValueError) -> Error {
    Error::InvalidValue {
        kind,
        field,
        reason: e.to_string(),
    }
}

fn fold_typed<T: ShardValue, R: FoldOutput<T>>(
    values: impl Iterator<Item = Value>,
    neutral: T,
    fold: fn(T, T) -> R,
) -> Result<T, FoldError> {
    values.into_iter().try_fold(neutral, |acc, stored| {
        let next = value::decode(&stored).map_err(FoldError::Decode)?;
        fold(acc, next).into_fold_result().map_err(FoldError::Fold)
    })
}

/// Folds stored values of one field into one stored value.
pub fn fold_values<T: ShardValue, R: FoldOutput<T>>(
    values: &mut dyn Iterator<Item = Value>,
    neutral: T,
    fold: fn(T, T) -> R,
) -> Result<Value, FoldError> {
    // How `testing::laws` learns a field's type: it folds nothing and asks.
    #[cfg(feature = "testing")]
    crate::testing::note_field_type::<T>();
    let folded = fold_typed(values, neutral, fold)?;
    value::encode(&folded).map_err(FoldError::Encode)
}

/// Encodes a field's aggregate (what `insert` stores as the initial shard).
pub fn encode_field<T: ShardValue>(
    kind: &'static str,
    field: &'static str,
    v: &T,
) -> Result<Value> {
    value::encode(v).map_err(|e| invalid_value(kind, field, e))
}

/// Encodes a pending delta, or `None` when it is the neutral element and so
/// needs no write.
pub fn encode_pending<T: ShardValue>(
    kind: &'static str,
    field: &'static str,
    pending: &T,
    neutral: &T,
) -> Result<Option<Value>> {
    if pending == neutral {
        return Ok(None);
    }
    encode_field(kind, field, pending).map(Some)
}

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

/// Error for an out-of-range field index (a bug in generated code).
pub fn no_such_field<T>(kind: &'static str, field: usize) -> Result<T> {
    Err(no_such_field_error(kind, field))
}

fn no_such_field_error(kind: &'static str, field: usize) -> Error {
    Error::SchemaMismatch {
        kind: kind.to_owned(),
        reason: format!("no sharded field #{field}"),
    }
}

/// The typed pending deltas inside an entity's `Pending`.
pub fn pending_values<T: Shardable>(pending: &mut Pending<T>) -> &mut T::__Pending {
    pending.values_mut()
}

/// Enters a shard method. Returns `true` for an outermost call, which must
/// run the body twice; after this the sharded fields hold the pending deltas.
pub fn begin_shard_run<T: Shardable>(entity: &mut T) -> bool {
    // With nothing sharded there is no pending view to update: run once.
    let Some(pending) = entity.__pending_mut().filter(|_| !T::__FIELDS.is_empty()) else {
        return false;
    };
    if pending.mode() != Mode::Idle {
        return false;
    }
    pending.set_mode(Mode::ShardRun);
    entity.__swap_pending();
    true
}

/// Between the two runs: swap the aggregate back in.
pub fn begin_aggregate_run<T: Shardable>(entity: &mut T) {
    entity.__swap_pending();
    if let Some(pending) = entity.__pending_mut() {
        pending.set_mode(Mode::AggregateRun);
    }
}

/// After the second run. A panic in either run skips this, which leaves the
/// entity marked so that `save` refuses it (`Error::Poisoned`).
pub fn end_shard_method<T: Shardable>(entity: &mut T) {
    if let Some(pending) = entity.__pending_mut() {
        pending.set_mode(Mode::Idle);
    }
}

/// Builds the JSON document of an entity's unsharded fields, in declaration
/// order. Written straight into a string: every save encodes the document to
/// see whether it changed, so this is on the hot path.
pub struct DocumentWriter {
    kind: &'static str,
    json: String,
}

impl DocumentWriter {
    /// An empty document.
    pub fn new(kind: &'static str) -> Self {
        DocumentWriter {
            kind,
            json: String::from("{"),
        }
    }

    /// Adds one field; refuses NaN and infinities, which JSON would turn
    /// into `null` and so lose.
    pub fn put<T: Serialize>(&mut self, field: &'static str, v: &T) -> Result<()> {
        use std::fmt::Write;
        if self.json.len() > 1 {
            self.json.push(',');
        }
        // Field names are Rust identifiers: no escaping needed.
        let _ = write!(self.json, "\"{field}\":");
        match value::encode(v).map_err(|e| invalid_value(self.kind, field, e))? {
            Value::Integer(i) => {
                let _ = write!(self.json, "{i}");
            }
            Value::Real(f) => self.json.push_str(&serde_json::Value::from(f).to_string()),
            Value::Text(text) => self.json.push_str(&text),
        }
        Ok(())
    }

    /// The document as stored.
    pub fn finish(mut self) -> String {
        self.json.push('}');
        self.json
    }
}

/// What a store read for one entity, handed to the generated constructor.
pub struct Parts {
    kind: &'static str,
    fields: &'static [FieldSpec],
    id: String,
    document: String,
    map: serde_json::Map<String, serde_json::Value>,
    shards: Vec<Vec<Value>>,
}

impl Parts {
    pub(crate) fn new<T: Shardable>(id: String, document: String) -> Result<Self> {
        let corrupt = |reason: String| Error::Corrupt {
            kind: T::KIND,
            id: id.clone(),
            field: "<document>".into(),
            reason,
        };
        let map = match serde_json::from_str(&document) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) => return Err(corrupt("not a JSON object".into())),
            Err(e) => return Err(corrupt(e.to_string())),
        };
        Ok(Parts {
            kind: T::KIND,
            fields: T::__FIELDS,
            shards: T::__FIELDS.iter().map(|_| Vec::new()).collect(),
            id,
            document,
            map,
        })
    }

    /// Adds a shard row. Rows of fields the struct no longer declares are
    /// ignored (and kept in the store).
    pub(crate) fn push(&mut self, field: usize, value: Value) {
        self.shards[field].push(value);
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The stored document, which becomes the entity's snapshot.
    pub fn document(&self) -> &str {
        &self.document
    }

    /// Decodes one unsharded field. A field missing from the document
    /// decodes from `null`, so adding an `Option` field needs no migration.
    pub fn take<T: DeserializeOwned>(&mut self, field: &str) -> Result<T> {
        let json = self.map.remove(field).unwrap_or(serde_json::Value::Null);
        serde_json::from_value(json).map_err(|e| Error::Corrupt {
            kind: self.kind,
            id: self.id.clone(),
            field: field.to_owned(),
            reason: e.to_string(),
        })
    }

    /// Folds the shard rows of sharded field number `field`.
    pub fn fold<T: ShardValue, R: FoldOutput<T>>(
        &mut self,
        field: usize,
        neutral: T,
        fold: fn(T, T) -> R,
    ) -> Result<T> {
        let rows = std::mem::take(&mut self.shards[field]);
        fold_typed(rows.into_iter(), neutral, fold)
            .map_err(|e| e.into_error(self.kind, &self.id, self.fields[field].name))
    }
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

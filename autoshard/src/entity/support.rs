//! What the code `#[derive(Shardable)]` and `#[shard_method]` generate
//! calls at run time: folds and encodings of a field's values, the
//! two-run protocol of a shard method, and the stub id of a derive error.
//! Re-exported as `autoshard::__private`; not API.

use super::{Mode, Pending, Shardable};
use crate::error::Result;
use crate::fold::{no_such_field_error, FoldError, FoldOutput};
use crate::value::{self, invalid_value, ShardValue, Value};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Bound on unsharded field types.
pub trait Document: Serialize + DeserializeOwned {}
impl<T: Serialize + DeserializeOwned> Document for T {}

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

pub(super) fn fold_typed<T: ShardValue, R: FoldOutput<T>>(
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

/// Error for an out-of-range field index (a bug in generated code).
pub fn no_such_field<T>(kind: &'static str, field: usize) -> Result<T> {
    Err(no_such_field_error(kind, field))
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

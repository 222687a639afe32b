//! Runtime support for the code that `#[derive(Shardable)]` and
//! `#[shard_method]` generate. Not part of the API: anything here may change
//! in any release.

use crate::entity::{Mode, Pending, Shardable};
use crate::error::{Error, Result};
use crate::fold::FoldOutput;
use crate::value::{self, Value, ValueError};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use serde;

/// The seam's public face, for a wrapper type that delegates to a store
/// (the shared test suites run the PostgreSQL store twice this way).
pub use crate::seam::{Backend, Boards, Entities};

/// One sharded field as declared: its name and `shards = N` (None: dynamic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// The field's name, which is also its key in the shard table.
    pub name: &'static str,
    /// Static shard count, or `None` for dynamic sharding.
    pub shards: Option<u32>,
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

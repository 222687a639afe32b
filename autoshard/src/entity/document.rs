//! The stored form of an entity's unsharded fields: written by the
//! generated `save`, read back (with the shard rows) by the generated
//! constructor.

use super::support::fold_typed;
use super::FieldSpec;
use crate::entity::Shardable;
use crate::error::{Error, Result};
use crate::fold::FoldOutput;
use crate::value::{self, Value};
use crate::value::{invalid_value, ShardValue};
use serde::de::DeserializeOwned;
use serde::Serialize;

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
    /// into `null` and so lose, and strings holding NUL
    /// ([`ValueError::Nul`](crate::value::ValueError::Nul)): checked here,
    /// under every store, so that they agree on what a document holds.
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
            Value::Text(text) if value::json_holds_nul(&text) => {
                return Err(invalid_value(self.kind, field, value::ValueError::Nul));
            }
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

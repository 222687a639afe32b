//! The store-independent half of the object mapper: what an insert, a load
//! and a save read and write, computed from the entity. A store only runs
//! the statements; it never decides what to write.

use crate::__private::{FieldSpec, Parts};
use crate::entity::{EntityId, Key, Mode, Shardable};
use crate::error::{Error, Result};
use crate::seam::Stored;
use crate::store::Saved;
use crate::value::Value;

/// The rows a new entity is stored as.
pub(crate) struct InsertPlan {
    pub document: String,
    /// `(field, shard, value)`: static fields get `shards` rows (the current
    /// value in shard 0, the neutral element elsewhere), dynamic fields one.
    pub rows: Vec<(&'static str, i64, Value)>,
}

pub(crate) fn plan_insert<T: Shardable>(entity: &T) -> Result<InsertPlan> {
    if entity
        .__pending_ref()
        .is_some_and(|p| p.is_poisoned_shared())
    {
        return Err(Error::Poisoned { kind: T::KIND });
    }
    let key = entity.id().key()?;
    let document = entity.__encode_document()?;
    let mut rows = Vec::new();
    for (index, spec) in T::__FIELDS.iter().enumerate() {
        let initial = entity.__encode_field(index)?;
        // The fold of no values is the neutral element, already encoded.
        let neutral = T::__fold(index, &mut std::iter::empty())
            .map_err(|e| e.into_error(T::KIND, &key.to_string(), spec.name))?;
        rows.push((spec.name, 0, initial));
        let shards = i64::from(spec.shards.unwrap_or(1));
        rows.extend((1..shards).map(|shard| (spec.name, shard, neutral.clone())));
    }
    Ok(InsertPlan { document, rows })
}

/// After a committed insert the stored rows include every pending delta.
pub(crate) fn inserted<T: Shardable>(entity: &T, plan: InsertPlan) {
    if let Some(pending) = entity.__pending_ref() {
        pending.committed_shared(plan.document);
    }
}

/// What a save writes; `None` from [`plan_save`] means nothing.
pub(crate) struct SavePlan {
    pub document: String,
    pub document_changed: bool,
    pub deltas: Vec<Delta>,
}

/// One non-neutral pending delta.
pub(crate) struct Delta {
    pub index: usize,
    pub spec: &'static FieldSpec,
    pub value: Value,
}

pub(crate) fn plan_save<T: Shardable>(entity: &mut T) -> Result<Option<SavePlan>> {
    let document = entity.__encode_document()?;
    let document_changed = match entity.__pending_mut() {
        Some(pending) => {
            if pending.mode() != Mode::Idle {
                return Err(Error::Poisoned { kind: T::KIND });
            }
            pending.snapshot() != Some(document.as_str())
        }
        // Without a pending field there is no snapshot to compare with.
        None => true,
    };
    let mut deltas = Vec::new();
    for (index, spec) in T::__FIELDS.iter().enumerate() {
        if let Some(value) = entity.__encode_pending(index)? {
            deltas.push(Delta { index, spec, value });
        }
    }
    if !document_changed && deltas.is_empty() {
        return Ok(None);
    }
    Ok(Some(SavePlan {
        document,
        document_changed,
        deltas,
    }))
}

/// Only after the commit: reset the deltas and remember what is stored.
pub(crate) fn saved<T: Shardable>(entity: &mut T, plan: SavePlan, attempts: u32) -> Saved {
    let saved = Saved {
        attempts,
        document_written: plan.document_changed,
        shard_writes: plan.deltas.len() as u32,
    };
    if let Some(pending) = entity.__pending_mut() {
        pending.committed(plan.document);
    }
    saved
}

/// The static shard a save folds its delta into: one of `0..shards`, at
/// random, chosen anew by every attempt of a retried transaction so that
/// two conflicting writers do not meet again.
pub(crate) fn pick_shard(shards: u32) -> i64 {
    i64::from(crate::random::range(..shards))
}

/// Builds a loaded entity from what the store read.
pub(crate) fn assemble<T: Shardable>(id: &T::Id, key: Key<'_>, stored: Stored) -> Result<T> {
    let mut parts = Parts::new::<T>(key.to_string(), stored.document)?;
    for (index, value) in stored.rows {
        let value = value.map_err(|reason| Error::Corrupt {
            kind: T::KIND,
            id: parts.id().to_owned(),
            field: T::__FIELDS[index].name.to_owned(),
            reason,
        })?;
        parts.push(index, value);
    }
    T::__from_parts(id.clone(), &mut parts)
}

/// Index of a declared sharded field, for `shard_count`.
pub(crate) fn field_index<T: Shardable>(field: &str) -> Result<usize> {
    T::__FIELDS
        .iter()
        .position(|f| f.name == field)
        .ok_or_else(|| Error::InvalidName {
            name: field.to_owned(),
            reason: format!("`{}` has no sharded field of that name", T::KIND),
        })
}

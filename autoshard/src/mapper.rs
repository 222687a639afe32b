//! The store-independent half of the object mapper: what an insert, a load
//! and a save read and write, computed from the entity. A store only runs
//! the statements; it never decides what to write.

use crate::__private::{Checked, Parts};
use crate::entity::{EntityId, Key, Mode, Shardable};
use crate::error::{Error, Result};
use crate::fold::FoldError;
use crate::seam::{Delta, InsertPlan, Kind, SavePlan, Stored};
use crate::value::{self, Value};
use serde::Serialize;

/// What one [`Store::save`](crate::Store::save) did: made here, by
/// `save` and `outcome`, from the plan and the store's attempts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Saved {
    /// Transactions tried: 0 when there was nothing to write, more than 1
    /// when the store was busy and the transaction was retried.
    pub attempts: u32,
    /// Whether the unsharded document was written.
    pub document_written: bool,
    /// Shard rows written (updated or appended).
    pub shard_writes: u32,
    /// For a save that wrote a field with an automatic shard count
    /// (`shards = LOW..=HIGH`; the first such field, if several): the
    /// entity's count after the save and why it has it. `None` otherwise.
    pub shard_count: Option<crate::seam::compaction::counts::ShardCount>,
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
        let shards = i64::from(spec.initial_shards());
        rows.extend((1..shards).map(|shard| (spec.name, shard, neutral.clone())));
    }
    let boards = match T::__RANKED.any() {
        // Shard 0 of each field, in field order, holds its initial total.
        true => {
            let totals = rows.iter().filter(|(_, shard, _)| *shard == 0);
            let totals = totals.map(|(_, _, value)| value.clone()).enumerate();
            Kind::of::<T>().board_adds(key, totals)?
        }
        false => Vec::new(),
    };
    Ok(InsertPlan {
        document,
        rows,
        incarnation: crate::random::range(1..=i64::MAX),
        boards,
    })
}

/// After a committed insert the stored rows include every pending delta,
/// and the object belongs to the incarnation it created.
pub(crate) fn inserted<T: Shardable>(entity: &T, plan: InsertPlan) {
    if let Some(pending) = entity.__pending_ref() {
        // Shard 0 of each field holds its whole value.
        let bases = plan
            .rows
            .into_iter()
            .filter(|(_, shard, _)| *shard == 0)
            .map(|(_, _, value)| value)
            .collect();
        pending.inserted(plan.document, plan.incarnation, bases);
    }
}

/// Runs one save: plans it, lets `write` run the transaction (it returns
/// the attempts made), and resets the object after the commit.
///
/// Copies of one object that share pending deltas (see [`Pending`]'s
/// `Clone`) take turns here, and once one of them committed the shared
/// deltas, the others are refused: they would count them again.
///
/// [`Pending`]: crate::Pending
pub(crate) fn save<T: Shardable>(
    entity: &mut T,
    write: impl FnOnce(Key<'_>, &SavePlan) -> Result<u32>,
) -> Result<Saved> {
    // An id no store can hold is refused before anything else is decided.
    crate::entity::key_of::<T>(entity.id())?;
    let copies = entity.__pending_mut().and_then(|p| p.copies());
    let mut turn = copies.as_deref().map(|c| c.turn());
    if turn.as_deref() == Some(&true) {
        return Err(Error::StaleCopy {
            kind: T::KIND,
            id: entity.id().key()?.to_string(),
        });
    }
    let Some(plan) = plan_save(entity)? else {
        return Ok(Saved::default());
    };
    let written = write(crate::entity::key_of::<T>(entity.id())?, &plan);
    if let Some(committed) = turn.as_deref_mut() {
        // A commit of unknown outcome may have stored the deltas: the other
        // copies are refused then too, as this one should be reloaded.
        let stored = matches!(written, Ok(_) | Err(Error::InDoubt { .. }));
        *committed |= stored && !plan.deltas.is_empty();
    }
    Ok(saved(entity, plan, written?))
}

fn plan_save<T: Shardable>(entity: &mut T) -> Result<Option<SavePlan>> {
    let document = entity.__encode_document()?;
    let (document_changed, incarnation) = match entity.__pending_mut() {
        Some(pending) => {
            if pending.mode() != Mode::Idle {
                return Err(Error::Poisoned { kind: T::KIND });
            }
            let changed = pending.snapshot() != Some(document.as_str());
            (changed, Some(pending.incarnation()))
        }
        // Without a pending field there is no snapshot to compare with.
        None => (true, None),
    };
    let mut deltas = Vec::new();
    for (index, spec) in T::__FIELDS.iter().enumerate() {
        if let Some(value) = entity.__encode_pending(index)? {
            deltas.push(Delta { index, spec, value });
        }
    }
    let bases = check_fields(entity, &deltas)?;
    if !document_changed && deltas.is_empty() {
        return Ok(None);
    }
    let boards = match T::__RANKED.any() {
        true => Kind::of::<T>().board_adds(
            entity.id().key()?,
            deltas.iter().map(|d| (d.index, d.value.clone())),
        )?,
        false => Vec::new(),
    };
    let incarnation = match incarnation {
        Some(Some(incarnation)) => Some(incarnation),
        // Built in code, never loaded or inserted: no stored entity is its.
        Some(None) => return Err(Error::not_found(T::KIND, entity.id().key()?)),
        None => None,
    };
    Ok(Some(SavePlan {
        document,
        document_changed,
        deltas,
        incarnation,
        bases,
        counted: std::cell::Cell::new(None),
        boards,
    }))
}

/// Refuses a sharded field changed outside a shard method: each must hold
/// its base folded with its delta, what the store holds after the save.
/// Returns the new bases of the fields with a delta. An object built in
/// code has no bases and nothing to check (its save is refused anyway).
fn check_fields<T: Shardable>(entity: &T, deltas: &[Delta]) -> Result<Vec<(usize, Value)>> {
    let Some(pending) = entity.__pending_ref() else {
        return Ok(Vec::new());
    };
    let bases = pending.bases();
    if bases.len() != T::__FIELDS.len() {
        return Ok(Vec::new());
    }
    let mut deltas = deltas.iter().peekable();
    let mut folded = Vec::new();
    for (index, (spec, base)) in T::__FIELDS.iter().zip(bases.iter()).enumerate() {
        let delta = deltas.next_if(|d| d.index == index).map(|d| &d.value);
        match entity.__check_field(index, base, delta)? {
            Checked::Unchanged => {}
            Checked::Folded(value) => folded.push((index, value)),
            Checked::Changed => {
                return Err(Error::DirectWrite {
                    kind: T::KIND,
                    id: entity.id().key()?.to_string(),
                    field: spec.name,
                })
            }
        }
    }
    Ok(folded)
}

/// Runs [`Store::save_delta`](crate::Store::save_delta): the save of one
/// delta to field `field` of entity `id` with no object at hand, written by
/// `write` as [`save`] writes a plan. A delta equal to the neutral element
/// writes nothing.
pub(crate) fn save_delta<T: Shardable, V: Serialize + ?Sized>(
    kind: &Kind,
    id: &T::Id,
    field: &str,
    delta: &V,
    write: impl FnOnce(Key<'_>, &SavePlan) -> Result<u32>,
) -> Result<Saved> {
    save_encoded_delta::<T>(kind, id, field, value::encode(delta), write)
}

/// [`save_delta`] of a delta encoded already: the async API encodes it on
/// the caller's side, where the borrowed value is, and ships the result.
pub(crate) fn save_encoded_delta<T: Shardable>(
    kind: &Kind,
    id: &T::Id,
    field: &str,
    encoded: std::result::Result<Value, value::ValueError>,
    write: impl FnOnce(Key<'_>, &SavePlan) -> Result<u32>,
) -> Result<Saved> {
    let key = crate::entity::key_of::<T>(id)?;
    let index = field_index::<T>(field)?;
    let spec = &T::__FIELDS[index];
    let invalid = |reason: String| Error::InvalidValue {
        kind: T::KIND,
        field: spec.name,
        reason,
    };
    let encoded = encoded.map_err(|e| invalid(e.to_string()))?;
    // The fold of one value decodes it into the field's type, so a delta of
    // another type is refused here instead of stored.
    let fold = |values: &mut dyn Iterator<Item = Value>| {
        kind.raw_fold(index, values).map_err(|e| match e {
            FoldError::Decode(e) => invalid(format!("not a value of the field's type: {e}")),
            e => e.into_error(T::KIND, &key.to_string(), spec.name),
        })
    };
    let value = fold(&mut std::iter::once(encoded))?;
    if value == fold(&mut std::iter::empty())? {
        return Ok(Saved::default());
    }
    let boards = kind.board_adds(key, [(index, value.clone())])?;
    let plan = SavePlan {
        document: String::new(),
        document_changed: false,
        deltas: vec![Delta { index, spec, value }],
        // No object, so no incarnation to hold to: the delta goes to
        // whichever entity has the id now, as it would for an entity type
        // without a `Pending` field.
        incarnation: None,
        bases: Vec::new(),
        counted: std::cell::Cell::new(None),
        boards,
    };
    let attempts = write(key, &plan)?;
    Ok(Saved {
        attempts,
        document_written: false,
        shard_writes: 1,
        shard_count: plan.counted.get(),
    })
}

/// A save planned on the caller's side and written on another thread (the
/// async API, `crate::nonblocking`): everything the write needs, owned.
///
/// Its deltas stay in the object until the commit is known, and `copies`
/// ties them to the write as [`Pending`]'s copies are tied to each other:
/// if the caller stops waiting (a dropped future), the write still runs,
/// and the object's next save either finds the deltas committed
/// ([`Error::StaleCopy`]: reload) or writes them; never twice, never lost.
///
/// [`Pending`]: crate::Pending
#[cfg(feature = "tokio")]
pub(crate) struct OwnedSave<I> {
    pub id: I,
    pub plan: SavePlan,
    copies: Option<std::sync::Arc<crate::entity::Copies>>,
}

/// Plans a save of `entity` to be written by [`write_owned`]; `None` when
/// there is nothing to write.
#[cfg(feature = "tokio")]
pub(crate) fn plan_owned<T: Shardable>(entity: &mut T) -> Result<Option<OwnedSave<T::Id>>> {
    crate::entity::key_of::<T>(entity.id())?;
    let Some(plan) = plan_save(entity)? else {
        return Ok(None);
    };
    // The turn is not taken here: it may be held by a write in flight, and
    // waiting for it would block the caller's runtime thread.
    let copies = match (plan.deltas.is_empty(), entity.__pending_mut()) {
        (false, Some(pending)) => Some(pending.share_copies()),
        (_, pending) => pending.and_then(|p| p.copies()),
    };
    Ok(Some(OwnedSave {
        id: entity.id().clone(),
        plan,
        copies,
    }))
}

/// Writes an [`OwnedSave`] (on the store's thread): as [`save`] does, in
/// turn with the object's copies and earlier writes of it.
#[cfg(feature = "tokio")]
pub(crate) fn write_owned<T: Shardable>(
    save: &OwnedSave<T::Id>,
    write: impl FnOnce(Key<'_>, &SavePlan) -> Result<u32>,
) -> Result<u32> {
    let mut turn = save.copies.as_deref().map(|c| c.turn());
    if turn.as_deref() == Some(&true) {
        return Err(Error::StaleCopy {
            kind: T::KIND,
            id: save.id.key()?.to_string(),
        });
    }
    let written = write(crate::entity::key_of::<T>(&save.id)?, &save.plan);
    if let Some(committed) = turn.as_deref_mut() {
        let stored = matches!(written, Ok(_) | Err(Error::InDoubt { .. }));
        *committed |= stored && !save.plan.deltas.is_empty();
    }
    written
}

/// After [`write_owned`] committed, back on the caller's side: the object
/// starts over from the stored state, as after [`save`].
#[cfg(feature = "tokio")]
pub(crate) fn finish_owned<T: Shardable>(
    entity: &mut T,
    save: OwnedSave<T::Id>,
    attempts: u32,
) -> Saved {
    saved(entity, save.plan, attempts)
}

/// Only after the commit: reset the deltas and remember what is stored.
fn saved<T: Shardable>(entity: &mut T, plan: SavePlan, attempts: u32) -> Saved {
    let saved = outcome(&plan, attempts);
    if let Some(pending) = entity.__pending_mut() {
        pending.committed(plan.document, plan.bases);
    }
    saved
}

/// What a save of `plan` that committed after `attempts` reports.
pub(crate) fn outcome(plan: &SavePlan, attempts: u32) -> Saved {
    Saved {
        attempts,
        document_written: plan.document_changed,
        shard_writes: plan.deltas.len() as u32,
        shard_count: plan.counted.get(),
    }
}

/// Builds a loaded entity from what the store read, remembering the
/// incarnation it came from and its aggregates. The rows of a field that
/// adds are replaced by their exact total first ([`Kind::load_rows`]).
pub(crate) fn assemble<T: Shardable>(
    kind: &Kind,
    id: &T::Id,
    key: Key<'_>,
    stored: Stored,
) -> Result<T> {
    let mut parts = Parts::new::<T>(key.to_string(), stored.document)?;
    let mut fields: Vec<Vec<Value>> = T::__FIELDS.iter().map(|_| Vec::new()).collect();
    for (index, value) in stored.rows {
        let value = value.map_err(|reason| Error::Corrupt {
            kind: T::KIND,
            id: parts.id().to_owned(),
            field: T::__FIELDS[index].name.to_owned(),
            reason,
        })?;
        fields[index].push(value);
    }
    for (index, values) in fields.into_iter().enumerate() {
        let values = kind
            .load_rows(index, values)
            .map_err(|e| e.into_error(T::KIND, parts.id(), T::__FIELDS[index].name))?;
        for value in values {
            parts.push(index, value);
        }
    }
    let mut entity = T::__from_parts(id.clone(), &mut parts)?;
    if entity.__pending_mut().is_some() {
        // An aggregate that cannot be encoded (a float sum that overflowed
        // to infinity) leaves the object without bases: a save then has
        // nothing to compare its fields with, and checks none.
        let bases = (0..T::__FIELDS.len())
            .map(|index| entity.__encode_field(index))
            .collect::<Result<_>>()
            .unwrap_or_default();
        if let Some(pending) = entity.__pending_mut() {
            pending.loaded(stored.incarnation, bases);
        }
    }
    Ok(entity)
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

//! [`Store`] for [`Postgres`]: the same plans as SQLite's (`crate::mapper`,
//! `crate::compaction`), run as PostgreSQL statements in the store's
//! concurrency mode.

use super::schema::{sql_sum, KindTables};
use super::{Concurrency, Postgres, Tx};
use crate::compaction::{self, BatchPlan, BatchScan, Resume};
use crate::entity::{EntityId, Key, KeyKind, Shardable};
use crate::error::{Error, Result};
use crate::fold::Overflow;
use crate::mapper::{self, Assembly};
use crate::store::{CompactionStats, Saved, Store};
use crate::value::Value;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::Row;
use std::fmt;

/// Rows a compaction scan fetches per statement.
const SCAN_CHUNK: i64 = 256;

/// An entity key as a statement parameter or as read back by a scan.
#[derive(Debug, Clone, PartialEq)]
enum Entity {
    Int(i64),
    Text(String),
}

impl Entity {
    fn of(key: Key<'_>) -> Result<Self> {
        match key {
            Key::Int(i) => Ok(Entity::Int(i)),
            // PostgreSQL text cannot hold NUL; SQLite's can.
            Key::Text(s) if s.contains('\0') => Err(Error::InvalidName {
                name: s.to_owned(),
                reason: "PostgreSQL cannot store a NUL character in a text id".into(),
            }),
            Key::Text(s) => Ok(Entity::Text(s.to_owned())),
        }
    }

    fn read(row: &Row, column: usize, kind: KeyKind) -> Result<Self> {
        Ok(match kind {
            KeyKind::Int => Entity::Int(row.try_get(column)?),
            KeyKind::Text => Entity::Text(row.try_get(column)?),
        })
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entity::Int(i) => write!(f, "{i}"),
            Entity::Text(s) => write!(f, "{s:?}"),
        }
    }
}

impl ToSql for Entity {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Entity::Int(i) => i.to_sql(ty, out),
            Entity::Text(s) => s.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty) || <String as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// A value as its three columns; exactly one is set.
fn columns(value: &Value) -> (Option<i64>, Option<f64>, Option<&str>) {
    match value {
        Value::Integer(i) => (Some(*i), None, None),
        Value::Real(f) => (None, Some(*f), None),
        Value::Text(s) => (None, None, Some(s)),
    }
}

/// Reads the value columns starting at `first`.
fn value_at(row: &Row, first: usize) -> Result<Value, String> {
    let get = || -> Result<_, postgres::Error> {
        Ok((
            row.try_get::<_, Option<i64>>(first)?,
            row.try_get::<_, Option<f64>>(first + 1)?,
            row.try_get::<_, Option<String>>(first + 2)?,
        ))
    };
    match get().map_err(|e| e.to_string())? {
        (Some(i), None, None) => Ok(Value::Integer(i)),
        (None, Some(f), None) => Ok(Value::Real(f)),
        (None, None, Some(s)) => Ok(Value::Text(s)),
        other => Err(format!("expected exactly one value column, got {other:?}")),
    }
}

fn sql_state(error: &postgres::Error) -> Option<&str> {
    error.code().map(|c| c.code())
}

/// A shard write to an entity that is gone violates the foreign key.
fn not_found_on_fk<T: Shardable>(entity: &Entity) -> impl Fn(postgres::Error) -> Error + '_ {
    move |e| match sql_state(&e) {
        Some("23503") => Error::not_found(T::KIND, entity),
        _ => e.into(),
    }
}

impl Store for Postgres {
    fn insert<T: Shardable>(&self, entity: &T) -> Result<()> {
        let plan = mapper::plan_insert(entity)?;
        let tables = self.tables::<T>()?;
        let key = Entity::of(entity.id().key()?)?;
        let mut fields = Vec::with_capacity(plan.rows.len());
        let mut shards = Vec::with_capacity(plan.rows.len());
        let (mut ints, mut reals, mut texts) = (Vec::new(), Vec::new(), Vec::new());
        for (field, shard, value) in &plan.rows {
            let (i, r, t) = columns(value);
            fields.push(*field);
            shards.push(*shard);
            ints.push(i);
            reals.push(r);
            texts.push(t);
        }
        self.write(|tx| {
            tx.execute(&tables.insert_entity, &[&key, &plan.document])
                .map_err(|e| match sql_state(&e) {
                    Some("23505") => Error::AlreadyExists {
                        kind: T::KIND,
                        id: key.to_string(),
                    },
                    _ => e.into(),
                })?;
            tx.execute(
                &tables.insert_shards,
                &[&key, &fields, &shards, &ints, &reals, &texts],
            )?;
            Ok(())
        })?;
        mapper::inserted(entity, plan);
        Ok(())
    }

    fn load<T: Shardable>(&self, id: &T::Id) -> Result<Option<T>> {
        let tables = self.tables::<T>()?;
        let key = id.key()?;
        let entity = Entity::of(key)?;
        let rows = self.read(|tx| Ok(tx.query(&tables.load, &[&entity])?))?;
        let Some(document) = rows.iter().find_map(|row| row.get::<_, Option<String>>(0)) else {
            return Ok(None);
        };
        let mut assembly = Assembly::<T>::new(id, key, document)?;
        for row in &rows {
            if let Some(field) = row.get::<_, Option<String>>(1) {
                assembly.row(&field, value_at(row, 2))?;
            }
        }
        assembly.finish().map(Some)
    }

    fn save<T: Shardable>(&self, entity: &mut T) -> Result<Saved> {
        let Some(plan) = mapper::plan_save(entity)? else {
            return Ok(Saved::default());
        };
        let tables = self.tables::<T>()?;
        let key = Entity::of(entity.id().key()?)?;
        let ((), attempts) = self.write(|tx| {
            if plan.document_changed {
                let updated = tx.execute(&tables.update_entity, &[&key, &plan.document])?;
                if updated == 0 {
                    return Err(Error::not_found(T::KIND, &key));
                }
            }
            for delta in &plan.deltas {
                match delta.spec.shards {
                    Some(shards) => {
                        let shard = i64::from(crate::random::range(..shards));
                        fold_into::<T>(tx, &tables, &key, delta.index, shard, &delta.value)?;
                    }
                    None => {
                        let (i, r, t) = columns(&delta.value);
                        tx.execute(&tables.append_shard, &[&key, &delta.spec.name, &i, &r, &t])
                            .map_err(not_found_on_fk::<T>(&key))?;
                    }
                }
            }
            Ok(())
        })?;
        Ok(mapper::saved(entity, plan, attempts))
    }

    fn delete<T: Shardable>(&self, id: &T::Id) -> Result<bool> {
        let tables = self.tables::<T>()?;
        let key = Entity::of(id.key()?)?;
        let (deleted, _) = self.write(|tx| Ok(tx.execute(&tables.delete_entity, &[&key])? > 0))?;
        Ok(deleted)
    }

    fn compact_with<T: Shardable>(
        &self,
        progress: &mut dyn FnMut(&CompactionStats),
    ) -> Result<CompactionStats> {
        let tables = self.tables::<T>()?;
        let batch_rows = self.compaction_batch_rows();
        compaction::run_batches(progress, |from| {
            let (batch, _) = self.write(|tx| compact_batch::<T>(tx, &tables, from, batch_rows))?;
            Ok(batch)
        })
    }

    fn shard_count<T: Shardable>(&self, id: &T::Id, field: &str) -> Result<u64> {
        mapper::field_index::<T>(field)?;
        let tables = self.tables::<T>()?;
        let key = Entity::of(id.key()?)?;
        let row = self.read(|tx| {
            Ok(tx
                .query_opt(&tables.count_shards, &[&key, &field])?
                .expect("one row"))
        })?;
        if !row.get::<_, bool>(0) {
            return Err(Error::not_found(T::KIND, &key));
        }
        Ok(row.get::<_, i64>(1) as u64)
    }
}

/// Folds `value` into shard `shard` of field `index` (a missing row counts as
/// neutral), in the transaction's concurrency mode. Used by static saves and
/// by compaction when its target row was not among the rows it read.
fn fold_into<T: Shardable>(
    tx: &mut Tx<'_>,
    tables: &KindTables,
    entity: &Entity,
    index: usize,
    shard: i64,
    value: &Value,
) -> Result<()> {
    let field = T::__FIELDS[index].name;
    let fold = |stored: Value| {
        T::__fold(index, &mut [stored, value.clone()].into_iter())
            .map_err(|e| e.into_error(T::KIND, &entity.to_string(), field))
    };
    let read = |row: Option<Row>| -> Result<Option<Value>> {
        row.map(|row| {
            value_at(&row, 0).map_err(|reason| Error::Corrupt {
                kind: T::KIND,
                id: entity.to_string(),
                field: field.to_owned(),
                reason,
            })
        })
        .transpose()
    };
    match (tx.mode, value) {
        // Read, fold, write: under REPEATABLE READ the write fails (40001)
        // if anyone changed or created the row since the snapshot.
        (Concurrency::Optimistic, _) => {
            let stored = read(tx.query_opt(&tables.select_shard, &[entity, &field, &shard])?)?;
            let new = match stored {
                Some(stored) => fold(stored)?,
                None => value.clone(),
            };
            let (i, r, t) = columns(&new);
            tx.execute(&tables.upsert_shard, &[entity, &field, &shard, &i, &r, &t])
                .map_err(not_found_on_fk::<T>(entity))?;
        }
        (Concurrency::Locking, Value::Integer(delta)) if sql_sum::<T>(index) => {
            tx.execute(&tables.add_to_shard, &[entity, &field, &shard, delta])
                .map_err(|e| match sql_state(&e) {
                    // bigint out of range: what `checked_sum` reports.
                    Some("22003") => Error::Fold {
                        kind: T::KIND,
                        field,
                        source: Box::new(Overflow),
                    },
                    Some("23514") => Error::Corrupt {
                        kind: T::KIND,
                        id: entity.to_string(),
                        field: field.to_owned(),
                        reason: "the stored value is not an integer".into(),
                    },
                    _ => not_found_on_fk::<T>(entity)(e),
                })?;
        }
        // Lock the row, fold under the lock. A missing row is created with
        // the value, unless another writer created it first: then lock that.
        (Concurrency::Locking, _) => loop {
            let locked = tx.query_opt(&tables.select_shard_locked, &[entity, &field, &shard])?;
            if let Some(stored) = read(locked)? {
                let new = fold(stored)?;
                let (i, r, t) = columns(&new);
                tx.execute(&tables.update_shard, &[entity, &field, &shard, &i, &r, &t])?;
                break;
            }
            let (i, r, t) = columns(value);
            let inserted = tx
                .execute(
                    &tables.insert_shard_if_absent,
                    &[entity, &field, &shard, &i, &r, &t],
                )
                .map_err(not_found_on_fk::<T>(entity))?;
            if inserted == 1 {
                break;
            }
        },
    }
    Ok(())
}

/// One compaction transaction. The scan reads chunks of rows in key order
/// (locking them in [`Concurrency::Locking`]; under `REPEATABLE READ` any
/// concurrent change to them fails the commit instead) until
/// [`BatchScan`] says the batch is complete. Rows are deleted by number, never
/// by range: appends may commit between the scan and the delete.
fn compact_batch<T: Shardable>(
    tx: &mut Tx<'_>,
    tables: &KindTables,
    from: &Resume<Entity>,
    max_rows: usize,
) -> Result<BatchPlan<Entity>> {
    let mut scan = BatchScan::<T, Entity>::new(from, max_rows);
    let mut last: Option<(Entity, String, i64)> = None;
    'scan: loop {
        let mode = tx.mode;
        let rows = match (&last, from) {
            (Some((entity, field, shard)), _) => {
                tx.query(tables.scan(mode, 3), &[entity, field, shard, &SCAN_CHUNK])?
            }
            (None, Resume::Done) => tx.query(tables.scan(mode, 0), &[&SCAN_CHUNK])?,
            (None, Resume::After(entity)) => {
                tx.query(tables.scan(mode, 1), &[entity, &SCAN_CHUNK])?
            }
            (None, Resume::At(entity)) => tx.query(tables.scan(mode, 2), &[entity, &SCAN_CHUNK])?,
        };
        // Not `len < SCAN_CHUNK`: in locking mode a row deleted meanwhile
        // (by another compaction) is skipped, so a short chunk is no proof
        // that the table ended.
        let complete = rows.is_empty();
        for row in &rows {
            let entity = Entity::read(row, 0, tables.key_kind)?;
            let field: String = row.try_get(1)?;
            let shard: i64 = row.try_get(2)?;
            if !scan.push(entity.clone(), &field, shard, || value_at(row, 3))? {
                break 'scan;
            }
            last = Some((entity, field, shard));
        }
        if complete {
            break;
        }
    }
    let batch = scan.finish()?;
    for (entity, index, plan) in &batch.plans {
        let field = T::__FIELDS[*index].name;
        tx.execute(&tables.delete_shards, &[entity, &field, &plan.removed])?;
        if plan.target_read {
            let (i, r, t) = columns(&plan.value);
            tx.execute(
                &tables.update_shard,
                &[entity, &field, &plan.target, &i, &r, &t],
            )?;
        } else {
            fold_into::<T>(tx, tables, entity, *index, plan.target, &plan.value)?;
        }
    }
    Ok(batch)
}

//! [`Store`] for [`Sqlite`]: the paper's load / save / compaction on SQL.

use super::{KindTables, Sqlite};
use crate::compaction::{self, BatchPlan, BatchScan, Resume};
use crate::entity::{EntityId, Key, Shardable};
use crate::error::{Error, Result};
use crate::mapper::{self, Assembly, Delta};
use crate::store::{CompactionStats, Saved, Store};
use crate::value::Value;
use rusqlite::types::{ToSqlOutput, Value as SqlValue};
use rusqlite::{ffi, OptionalExtension, ToSql, Transaction};

impl ToSql for Key<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Key::Int(i) => i.to_sql(),
            Key::Text(s) => s.to_sql(),
        }
    }
}

impl Store for Sqlite {
    fn insert<T: Shardable>(&self, entity: &T) -> Result<()> {
        let plan = mapper::plan_insert(entity)?;
        let tables = self.tables::<T>()?;
        let key = entity.id().key()?;
        self.write(|tx| {
            tx.prepare_cached(&tables.insert_entity)?
                .execute((key, &plan.document))
                .map_err(|e| match constraint(&e) {
                    Some(ffi::SQLITE_CONSTRAINT_PRIMARYKEY | ffi::SQLITE_CONSTRAINT_UNIQUE) => {
                        Error::AlreadyExists {
                            kind: T::KIND,
                            id: key.to_string(),
                        }
                    }
                    _ => e.into(),
                })?;
            let mut insert = tx.prepare_cached(&tables.insert_shard)?;
            for (field, shard, value) in &plan.rows {
                insert.execute((key, field, shard, value))?;
            }
            Ok(())
        })?;
        mapper::inserted(entity, plan);
        Ok(())
    }

    fn load<T: Shardable>(&self, id: &T::Id) -> Result<Option<T>> {
        let tables = self.tables::<T>()?;
        let key = id.key()?;
        self.read(|tx| {
            let document: Option<String> = tx
                .prepare_cached(&tables.select_entity)?
                .query_row([key], |r| r.get(0))
                .optional()?;
            let Some(document) = document else {
                return Ok(None);
            };
            let mut entity = Assembly::<T>::new(id, key, document)?;
            let mut select = tx.prepare_cached(&tables.select_shards)?;
            let mut rows = select.query([key])?;
            while let Some(row) = rows.next()? {
                let field: String = row.get(0)?;
                entity.row(&field, row.get::<_, Value>(1).map_err(|e| e.to_string()))?;
            }
            entity.finish().map(Some)
        })
    }

    fn save<T: Shardable>(&self, entity: &mut T) -> Result<Saved> {
        let Some(plan) = mapper::plan_save(entity)? else {
            return Ok(Saved::default());
        };
        let tables = self.tables::<T>()?;
        let key = entity.id().key()?;
        let ((), attempts) = self.write(|tx| {
            if plan.document_changed {
                update_document::<T>(tx, &tables, key, &plan.document)?;
            }
            for delta in &plan.deltas {
                write_delta::<T>(tx, &tables, key, delta)?;
            }
            Ok(())
        })?;
        Ok(mapper::saved(entity, plan, attempts))
    }

    fn delete<T: Shardable>(&self, id: &T::Id) -> Result<bool> {
        let tables = self.tables::<T>()?;
        let key = id.key()?;
        let (deleted, _) =
            self.write(|tx| Ok(tx.prepare_cached(&tables.delete_entity)?.execute([key])? > 0))?;
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
        let key = id.key()?;
        self.read(|tx| {
            let exists = tx
                .prepare_cached(&tables.select_entity)?
                .query_row([key], |_| Ok(()))
                .optional()?
                .is_some();
            if !exists {
                return Err(Error::not_found(T::KIND, key));
            }
            let count: i64 = tx
                .prepare_cached(&tables.count_shards)?
                .query_row((key, field), |r| r.get(0))?;
            Ok(count as u64)
        })
    }
}

fn update_document<T: Shardable>(
    tx: &Transaction<'_>,
    tables: &KindTables,
    key: Key<'_>,
    document: &str,
) -> Result<()> {
    let updated = tx
        .prepare_cached(&tables.update_entity)?
        .execute((key, document))?;
    if updated == 0 {
        return Err(Error::not_found(T::KIND, key));
    }
    Ok(())
}

/// Static: fold the delta into one random shard in `0..shards`. Dynamic:
/// append a row. The foreign key turns a write to a deleted entity into
/// `NotFound`.
fn write_delta<T: Shardable>(
    tx: &Transaction<'_>,
    tables: &KindTables,
    key: Key<'_>,
    delta: &Delta,
) -> Result<()> {
    let field = delta.spec.name;
    let written = match delta.spec.shards {
        Some(shards) => {
            let shard = i64::from(crate::random::range(..shards));
            let stored: Option<Value> = tx
                .prepare_cached(&tables.select_shard)?
                .query_row((key, field, shard), |r| r.get(0))
                .optional()?;
            let value = mapper::fold_delta::<T>(key, delta, stored)?;
            tx.prepare_cached(&tables.upsert_shard)?
                .execute((key, field, shard, &value))
        }
        None => tx
            .prepare_cached(&tables.append_shard)?
            .execute((key, field, &delta.value)),
    };
    written.map(drop).map_err(|e| match constraint(&e) {
        Some(ffi::SQLITE_CONSTRAINT_FOREIGNKEY) => Error::not_found(T::KIND, key),
        _ => e.into(),
    })
}

fn constraint(error: &rusqlite::Error) -> Option<i32> {
    match error {
        rusqlite::Error::SqliteFailure(e, _)
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            Some(e.extended_code)
        }
        _ => None,
    }
}

/// An entity key as the compaction scan reads it back.
#[derive(Debug, Clone, PartialEq)]
struct Entity(SqlValue);

impl std::fmt::Display for Entity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            SqlValue::Integer(i) => write!(f, "{i}"),
            SqlValue::Text(s) => write!(f, "{s:?}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// One compaction transaction: reads rows in key order until about `max_rows`
/// and rewrites every group (one field of one entity) that is not compact;
/// [`compaction::BatchScan`] decides where it stops. Inside `BEGIN IMMEDIATE`
/// no writer can add rows, so the rows read are exactly the rows deleted.
fn compact_batch<T: Shardable>(
    tx: &Transaction<'_>,
    tables: &KindTables,
    from: &Resume<Entity>,
    max_rows: usize,
) -> Result<BatchPlan<Entity>> {
    let (sql, start) = match from {
        Resume::Done => (&tables.scan_first, None),
        Resume::After(entity) => (&tables.scan_after, Some(entity)),
        Resume::At(entity) => (&tables.scan_from, Some(entity)),
    };
    let mut scan = tx.prepare_cached(sql)?;
    let mut rows = match start {
        Some(entity) => scan.query([&entity.0])?,
        None => scan.query([])?,
    };
    let mut batch = BatchScan::<T, Entity>::new(from, max_rows);
    while let Some(row) = rows.next()? {
        let field: String = row.get(1)?;
        let value = || row.get::<_, Value>(3).map_err(|e| e.to_string());
        if !batch.push(Entity(row.get(0)?), &field, row.get(2)?, value)? {
            break;
        }
    }
    drop(rows);
    let batch = batch.finish()?;
    for (entity, index, plan) in &batch.plans {
        let spec = &T::__FIELDS[*index];
        // Rows after the kept ones, up to the last row read: exactly `removed`.
        let keep_through = match spec.shards {
            None => plan.target,
            Some(n) => i64::from(n) - 1,
        };
        let last_read = *plan.removed.last().expect("a plan removes rows");
        tx.prepare_cached(&tables.delete_range)?.execute((
            &entity.0,
            spec.name,
            keep_through,
            last_read,
        ))?;
        tx.prepare_cached(&tables.upsert_shard)?.execute((
            &entity.0,
            spec.name,
            plan.target,
            &plan.value,
        ))?;
    }
    Ok(batch)
}

//! The entity operations of the seam on SQLite: the paper's load / save /
//! compaction as SQL, one `BEGIN IMMEDIATE` transaction each.

use super::schema::KindTables;
use super::{counts, Sqlite};
use crate::entity::Key;
use crate::error::{Error, Result};
use crate::seam::compaction::BatchScan;
use crate::seam::query::{ScanPlan, Scanned};
use crate::seam::{
    BatchPlan, Census, Delta, EntityStore, FieldCensus, InsertPlan, Kind, Resume, SavePlan,
    StaticRead, Stored,
};
use crate::sum::{Sum, Total};
use crate::value::Value;
use rusqlite::types::ValueRef;
use rusqlite::{ffi, OptionalExtension, Transaction};

impl EntityStore for Sqlite {
    fn store_name(&self) -> &'static str {
        "sqlite"
    }

    fn insert(&self, kind: &Kind, key: Key<'_>, plan: &InsertPlan) -> Result<()> {
        let tables = self.tables(kind)?;
        self.prepare_ranked(kind)?;
        self.write(|tx| {
            tx.prepare_cached(&tables.insert_entity)?
                .execute((key, &plan.document, plan.incarnation))
                .map_err(|e| match constraint(&e) {
                    Some(ffi::SQLITE_CONSTRAINT_PRIMARYKEY | ffi::SQLITE_CONSTRAINT_UNIQUE) => {
                        Error::AlreadyExists {
                            kind: kind.name,
                            id: key.to_string(),
                        }
                    }
                    _ => e.into(),
                })?;
            let mut insert = tx.prepare_cached(&tables.insert_shard)?;
            for (field, shard, value) in &plan.rows {
                insert.execute((key, field, shard, value))?;
            }
            self.write_entity_boards(tx, kind, &plan.boards)
        })?;
        Ok(())
    }

    fn load(&self, kind: &Kind, key: Key<'_>) -> Result<Option<Stored>> {
        let tables = self.tables(kind)?;
        self.read(|tx| {
            let entity: Option<(String, i64)> = tx
                .prepare_cached(&tables.select_entity)?
                .query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((document, incarnation)) = entity else {
                return Ok(None);
            };
            let mut rows = Vec::new();
            let mut select = tx.prepare_cached(&tables.select_shards)?;
            let mut shards = select.query([key])?;
            while let Some(row) = shards.next()? {
                let field: String = row.get(0)?;
                if let Some(index) = kind.field_index(&field) {
                    rows.push((index, row.get::<_, Value>(1).map_err(|e| e.to_string())));
                }
            }
            Ok(Some(Stored {
                document,
                incarnation,
                rows,
            }))
        })
    }

    fn save(&self, kind: &Kind, key: Key<'_>, plan: &SavePlan) -> Result<u32> {
        let tables = self.tables(kind)?;
        self.prepare_ranked(kind)?;
        let ((), attempts) = self.write(|tx| {
            // One writer at a time: the entity found here is the one the
            // shard rows below are written into.
            if plan.document_changed {
                update_document(tx, kind, &tables, key, plan)?;
            } else if let Some(incarnation) = plan.incarnation {
                check_incarnation(tx, kind, &tables, key, incarnation)?;
            }
            for delta in &plan.deltas {
                let picked = match (delta.spec.auto_range(), delta.spec.shards) {
                    (Some(_), _) => Some(counts::pick(self, tx, &tables, key, delta, plan)?),
                    (None, shards) => shards.map(crate::seam::pick_shard),
                };
                write_delta(tx, kind, &tables, key, delta, picked)?;
            }
            self.write_entity_boards(tx, kind, &plan.boards)
        })?;
        Ok(attempts)
    }

    fn delete(&self, kind: &Kind, key: Key<'_>) -> Result<bool> {
        let tables = self.tables(kind)?;
        self.prepare_ranked(kind)?;
        let (deleted, _) = self.write(|tx| {
            let deleted = tx.prepare_cached(&tables.delete_entity)?.execute([key])? > 0;
            if deleted {
                self.write_entity_boards(tx, kind, &kind.board_removals(key))?;
            }
            Ok(deleted)
        })?;
        Ok(deleted)
    }

    fn compact_batch(&self, kind: &Kind, from: &Resume) -> Result<BatchPlan> {
        let tables = self.tables(kind)?;
        let batch_rows = self.compaction_batch_rows();
        let (batch, _) = self.write(|tx| compact_batch(tx, kind, &tables, from, batch_rows))?;
        Ok(batch)
    }

    fn shard_count(&self, kind: &Kind, key: Key<'_>, field: &str) -> Result<u64> {
        let tables = self.tables(kind)?;
        self.read(|tx| {
            let exists = tx
                .prepare_cached(&tables.select_entity)?
                .query_row([key], |_| Ok(()))
                .optional()?
                .is_some();
            if !exists {
                return Err(kind.not_found(key));
            }
            let count: i64 = tx
                .prepare_cached(&tables.count_shards)?
                .query_row((key, field), |r| r.get(0))?;
            Ok(count as u64)
        })
    }

    fn census(&self, kind: &Kind) -> Result<Census> {
        let tables = self.tables(kind)?;
        self.read(|tx| {
            let entities: i64 = tx
                .prepare_cached(&tables.count_entities)?
                .query_row([], |r| r.get(0))?;
            let mut count = tx.prepare_cached(tables.count_field())?;
            let fields = kind
                .fields
                .iter()
                .map(|spec| {
                    let surplus_from = spec.shards.map_or(i64::MAX, i64::from);
                    let dynamic = spec.shards.is_none();
                    count.query_row((spec.name, surplus_from, dynamic), |r| {
                        Ok(FieldCensus {
                            rows: r.get::<_, i64>(0)? as u64,
                            entities: r.get::<_, i64>(1)? as u64,
                            surplus: r.get::<_, i64>(2)? as u64,
                            oldest_pending: r.get::<_, Option<i64>>(3)?.map(FieldCensus::age),
                        })
                    })
                })
                .collect::<rusqlite::Result<_>>()?;
            Ok(Census {
                entities: entities as u64,
                fields,
            })
        })
    }

    fn automatic_shards(&self) -> Result<()> {
        Ok(())
    }

    fn ranked_boards(&self) -> Result<()> {
        Ok(())
    }

    fn auto_census(
        &self,
        kind: &Kind,
        index: usize,
    ) -> Result<crate::seam::compaction::counts::AutoCensus> {
        self.count_census(kind, index)
    }

    fn query(&self, kind: &Kind, plan: &ScanPlan) -> Result<Scanned> {
        super::query::run(self, kind, plan)
    }
}

/// Writes the document of the plan's incarnation: no row is `NotFound`,
/// whether the entity is gone or another incarnation replaced it.
fn update_document(
    tx: &Transaction<'_>,
    kind: &Kind,
    tables: &KindTables,
    key: Key<'_>,
    plan: &SavePlan,
) -> Result<()> {
    let updated = tx.prepare_cached(&tables.update_entity)?.execute((
        key,
        &plan.document,
        plan.incarnation,
    ))?;
    if updated == 0 {
        return Err(kind.not_found(key));
    }
    Ok(())
}

/// For a save that writes no document: one primary-key read of the entity
/// row (a page a save of the same entity just read, so mostly cached).
fn check_incarnation(
    tx: &Transaction<'_>,
    kind: &Kind,
    tables: &KindTables,
    key: Key<'_>,
    incarnation: i64,
) -> Result<()> {
    let stored: Option<i64> = tx
        .prepare_cached(&tables.select_incarnation)?
        .query_row([key], |r| r.get(0))
        .optional()?;
    if stored != Some(incarnation) {
        return Err(kind.not_found(key));
    }
    Ok(())
}

/// Static (or automatic): fold the delta into `picked`, the shard the
/// caller picked (for a field
/// that adds, read the field's rows to check its total:
/// [`Kind::plan_static`]). Dynamic: append a row. The foreign key turns a
/// write to a deleted entity into `NotFound`.
fn write_delta(
    tx: &Transaction<'_>,
    kind: &Kind,
    tables: &KindTables,
    key: Key<'_>,
    delta: &Delta,
    picked: Option<i64>,
) -> Result<()> {
    let field = delta.spec.name;
    let written = match picked {
        Some(picked) => {
            let (shard, value) = if kind.sum(delta.index) == Sum::Other {
                let stored: Option<Value> = tx
                    .prepare_cached(&tables.select_shard)?
                    .query_row((key, field, picked), |r| r.get(0))
                    .optional()?;
                let value = kind.fold_delta(&key, delta.index, stored, &delta.value)?;
                (picked, value)
            } else {
                let (stored, total) = sum_field(tx, kind, tables, key, delta.index, picked)?;
                let mut rows = || field_rows(tx, tables, key, field);
                let read = StaticRead {
                    picked,
                    stored,
                    total,
                    rows: &mut rows,
                };
                kind.plan_static(&key, delta.index, read, &delta.value, true)?
            };
            tx.prepare_cached(&tables.upsert_shard)?
                .execute((key, field, shard, &value))
        }
        None => tx
            .prepare_cached(tables.append_shard())?
            .execute((key, field, &delta.value)),
    };
    written.map(drop).map_err(|e| match constraint(&e) {
        Some(ffi::SQLITE_CONSTRAINT_FOREIGNKEY) => kind.not_found(key),
        _ => e.into(),
    })
}

/// The picked row of a field that adds and the field's total, in one
/// statement that steps the field's rows inside SQLite (no row crosses into
/// Rust). SQLite's `sum` is exact over integers and fails when a partial sum
/// leaves `i64`, and gives a real if a row is not an integer: then the total
/// is left to the rows themselves (`field_rows`), which only the rare paths
/// read.
fn sum_field(
    tx: &Transaction<'_>,
    kind: &Kind,
    tables: &KindTables,
    key: Key<'_>,
    index: usize,
    picked: i64,
) -> Result<(Option<Value>, Option<Total>)> {
    let field = kind.fields[index].name;
    let read = tx
        .prepare_cached(&tables.sum_field)?
        .query_row((key, field, picked), |r| {
            let total = match (kind.sum(index), r.get_ref(1)?) {
                (Sum::Integers, ValueRef::Integer(i)) => Some(Total::Int(i.into())),
                (Sum::Integers, ValueRef::Null) => Some(Total::Int(0)),
                (Sum::Floats, ValueRef::Real(f)) => Some(Total::Float(f)),
                (Sum::Floats, ValueRef::Integer(i)) => Some(Total::Float(i as f64)),
                (Sum::Floats, ValueRef::Null) => Some(Total::Float(0.0)),
                _ => None,
            };
            Ok((r.get::<_, Option<Value>>(0)?, total))
        });
    match read {
        Err(rusqlite::Error::SqliteFailure(_, Some(message))) if message == "integer overflow" => {
            let stored = tx
                .prepare_cached(&tables.select_shard)?
                .query_row((key, field, picked), |r| r.get(0))
                .optional()?;
            Ok((stored, None))
        }
        read => Ok(read?),
    }
}

/// Every row of one field of an entity; `None` if one does not read.
fn field_rows(
    tx: &Transaction<'_>,
    tables: &KindTables,
    key: Key<'_>,
    field: &str,
) -> Result<Option<Vec<(i64, Value)>>> {
    let mut select = tx.prepare_cached(&tables.select_field)?;
    let rows = select.query_map((key, field), |r| {
        Ok(r.get::<_, Value>(1).ok().map(|v| (r.get(0), v)))
    })?;
    let mut read = Vec::new();
    for row in rows {
        match row? {
            Some((shard, value)) => read.push((shard?, value)),
            None => return Ok(None),
        }
    }
    Ok(Some(read))
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

/// One compaction transaction: reads rows in key order until about `max_rows`
/// and rewrites every group (one field of one entity) that is not compact;
/// [`compaction::BatchScan`] decides where it stops. Inside `BEGIN IMMEDIATE`
/// no writer can add rows, so the rows read are exactly the rows deleted.
fn compact_batch(
    tx: &Transaction<'_>,
    kind: &Kind,
    tables: &KindTables,
    from: &Resume,
    max_rows: usize,
) -> Result<BatchPlan> {
    let (sql, start) = match from {
        Resume::Done => (&tables.scan_first, None),
        Resume::After(entity) => (&tables.scan_after, Some(entity)),
        Resume::At(entity) => (&tables.scan_from, Some(entity)),
    };
    let mut scan = tx.prepare_cached(sql)?;
    let mut rows = match start {
        Some(entity) => scan.query([entity])?,
        None => scan.query([])?,
    };
    let mut batch = BatchScan::new(kind, from, max_rows);
    while let Some(row) = rows.next()? {
        let field: String = row.get(1)?;
        let value = || row.get::<_, Value>(3).map_err(|e| e.to_string());
        if !batch.push(row.get(0)?, &field, row.get(2)?, value) {
            break;
        }
    }
    drop(rows);
    let (batch, lowered) = if kind.has_auto() {
        let groups = batch.auto_groups();
        let counts = counts::read_all(tx, kind, tables, &groups)?;
        batch.finish_counted(counts)
    } else {
        (batch.finish(), Vec::new())
    };
    for (entity, index, plan) in &batch.plans {
        let spec = &kind.fields[*index];
        // Rows after the kept ones, up to the last row read: exactly `removed`.
        let keep_through = plan.keep_below - 1;
        let last_read = *plan.removed.last().expect("a plan removes rows");
        tx.prepare_cached(&tables.delete_range)?.execute((
            entity,
            spec.name,
            keep_through,
            last_read,
        ))?;
        tx.prepare_cached(&tables.upsert_shard)?.execute((
            entity,
            spec.name,
            plan.target,
            &plan.value,
        ))?;
    }
    counts::lower(tx, kind, tables, &lowered)?;
    Ok(batch)
}

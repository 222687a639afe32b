//! The entity operations of the seam on PostgreSQL: the same plans as every
//! store's (`crate::mapper`, `crate::seam::compaction`), run as PostgreSQL
//! statements in the store's concurrency mode.

use super::counts::{self, Observed};
use super::schema::KindTables;
use super::values::{columns, param, read_key, value_at};
use super::{Concurrency, Postgres, Tx};
use crate::entity::Key;
use crate::error::{Error, Result};
use crate::seam::compaction::BatchScan;
use crate::seam::query::{ScanPlan, Scanned};
use crate::seam::{
    BatchPlan, Census, EntityStore, FieldCensus, InsertPlan, Kind, Resume, SavePlan, StaticRead,
    Stored, StoredKey,
};
use crate::sum::{Sum, Total};
use crate::value::Value;
use postgres::types::ToSql;
use postgres::Row;
use std::sync::atomic::Ordering::Relaxed;

/// Rows a compaction scan fetches per statement.
const SCAN_CHUNK: i64 = 256;

pub(super) fn sql_state(error: &postgres::Error) -> Option<&str> {
    error.code().map(|c| c.code())
}

/// A shard write to an entity that is gone violates the foreign key.
fn not_found_on_fk<'a>(
    kind: &'a Kind,
    entity: &'a StoredKey,
) -> impl Fn(postgres::Error) -> Error + 'a {
    move |e| match sql_state(&e) {
        Some("23503") => kind.not_found(entity),
        _ => e.into(),
    }
}

impl EntityStore for Postgres {
    fn store_name(&self) -> &'static str {
        "postgres"
    }

    fn insert(&self, kind: &Kind, key: Key<'_>, plan: &InsertPlan) -> Result<()> {
        let key = param(key)?;
        let tables = self.tables(kind)?;
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
            tx.execute(
                &tables.insert_entity,
                &[&key, &plan.document, &plan.incarnation],
            )
            .map_err(|e| match sql_state(&e) {
                Some("23505") => Error::AlreadyExists {
                    kind: kind.name,
                    id: key.to_string(),
                },
                _ => e.into(),
            })?;
            tx.execute(
                &tables.insert_shards,
                &[&key, &fields, &shards, &ints, &reals, &texts],
            )?;
            self.write_entity_boards(tx, kind, &plan.boards)
        })?;
        Ok(())
    }

    fn load(&self, kind: &Kind, key: Key<'_>) -> Result<Option<Stored>> {
        let key = param(key)?;
        let tables = self.tables(kind)?;
        let rows = self.read(|tx| Ok(tx.query(&tables.load, &[&key])?))?;
        let entity = rows.iter().find_map(|row| {
            let document = row.get::<_, Option<String>>(0)?;
            Some((document, row.get::<_, i64>(2)))
        });
        let Some((document, incarnation)) = entity else {
            return Ok(None);
        };
        let rows = rows
            .iter()
            .filter_map(|row| {
                let field = row.get::<_, Option<&str>>(1)?;
                Some((kind.field_index(field)?, value_at(row, 2)))
            })
            .collect();
        Ok(Some(Stored {
            document,
            incarnation,
            rows,
        }))
    }

    fn save(&self, kind: &Kind, key: Key<'_>, plan: &SavePlan) -> Result<u32> {
        let key = param(key)?;
        let tables = self.tables(kind)?;
        let observed = Observed::default();
        let body = |tx: &mut Tx<'_>| {
            // No row: the entity is gone, or another incarnation replaced
            // it. The update locks the row, so no delete gets in before the
            // commit.
            if plan.document_changed {
                let updated = tx.execute(
                    &tables.update_entity,
                    &[&key, &plan.document, &plan.incarnation],
                )?;
                if updated == 0 {
                    return Err(kind.not_found(&key));
                }
            }
            for delta in &plan.deltas {
                match delta.spec.shards {
                    Some(shards) => {
                        let (shard, seen) = match delta.spec.auto_range() {
                            Some(_) => counts::pick(tx, &tables, &key, delta, plan, &observed)?,
                            None => (crate::seam::pick_shard(shards), shards),
                        };
                        if kind.sum(delta.index) == Sum::Other {
                            fold_into(tx, kind, &tables, &key, delta.index, shard, &delta.value)
                        } else {
                            save_to_sum(tx, kind, &tables, &key, delta.index, shard, &delta.value)
                        }
                        .inspect_err(|e| {
                            if delta.spec.auto_range().is_some() {
                                observed.on_write_error(e, delta.index, seen);
                            }
                        })?;
                    }
                    None => {
                        let (i, r, t) = columns(&delta.value);
                        tx.execute(&tables.append_shard, &[&key, &delta.spec.name, &i, &r, &t])
                            .map_err(not_found_on_fk(kind, &key))?;
                    }
                }
            }
            match plan.incarnation {
                Some(incarnation) if !plan.document_changed => {
                    check_incarnation(tx, kind, &tables, &key, incarnation)?
                }
                _ => {}
            }
            self.write_entity_boards(tx, kind, &plan.boards)
        };
        if !kind.has_auto() {
            return Ok(self.write(body)?.1);
        }
        let raise = &mut || counts::raise(self, kind, &tables, &key, &observed);
        let written = self.write_observed(body, raise);
        counts::raise(self, kind, &tables, &key, &observed);
        counts::report(kind, plan, &observed);
        Ok(written?.1)
    }

    fn delete(&self, kind: &Kind, key: Key<'_>) -> Result<bool> {
        let key = param(key)?;
        let tables = self.tables(kind)?;
        let (deleted, _) = self.write(|tx| {
            let deleted = tx.execute(&tables.delete_entity, &[&key])? > 0;
            if deleted {
                self.write_entity_boards(tx, kind, &kind.board_removals(key.as_key()))?;
            }
            Ok(deleted)
        })?;
        Ok(deleted)
    }

    /// A batch the server cancels (its `statement_timeout`) is re-run with
    /// half the rows, down to one, and the rest of the run keeps the
    /// smaller size; each such batch counts in `CompactionStats::timeouts`.
    fn compact_batch(&self, kind: &Kind, from: &Resume) -> Result<BatchPlan> {
        let tables = self.tables(kind)?;
        if let Resume::Done = from {
            // A new run starts from the configured size.
            tables.compaction_rows.store(0, Relaxed);
        }
        let mut timeouts = 0;
        loop {
            let rows = match tables.compaction_rows.load(Relaxed) {
                0 => self.compaction_batch_rows(),
                rows => rows,
            };
            match self.write(|tx| compact_batch(tx, kind, &tables, from, rows)) {
                Ok((mut batch, _)) => {
                    batch.stats.timeouts = timeouts;
                    return Ok(batch);
                }
                Err(Error::Cancelled { .. }) if rows > 1 => {
                    tables.compaction_rows.store(rows / 2, Relaxed);
                    timeouts += 1;
                    let _retry = crate::trace::retry!(
                        store = "postgres",
                        kind = kind.name,
                        attempt = timeouts + 1,
                        rows = rows / 2,
                        sqlstate = "57014",
                        error = "the batch ran past statement_timeout: half as many rows"
                    );
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn shard_count(&self, kind: &Kind, key: Key<'_>, field: &str) -> Result<u64> {
        let key = param(key)?;
        let tables = self.tables(kind)?;
        let row = self.read(|tx| {
            Ok(tx
                .query_opt(&tables.count_shards, &[&key, &field])?
                .expect("one row"))
        })?;
        if !row.get::<_, bool>(0) {
            return Err(kind.not_found(&key));
        }
        Ok(row.get::<_, i64>(1) as u64)
    }

    fn census(&self, kind: &Kind) -> Result<Census> {
        let tables = self.tables(kind)?;
        let names: Vec<&str> = kind.fields.iter().map(|f| f.name).collect();
        let surplus_from: Vec<i64> = kind
            .fields
            .iter()
            .map(|f| f.shards.map_or(i64::MAX, i64::from))
            .collect();
        let dynamic: Vec<bool> = kind.fields.iter().map(|f| f.shards.is_none()).collect();
        let rows =
            self.read(|tx| Ok(tx.query(&tables.census, &[&names, &surplus_from, &dynamic])?))?;
        let mut census = Census {
            entities: 0,
            fields: vec![FieldCensus::default(); names.len()],
        };
        for row in &rows {
            census.entities = row.get::<_, i64>(0) as u64;
            let name: Option<&str> = row.get(1);
            if let Some(index) = name.and_then(|name| kind.field_index(name)) {
                census.fields[index] = FieldCensus {
                    rows: row.get::<_, i64>(2) as u64,
                    entities: row.get::<_, i64>(3) as u64,
                    surplus: row.get::<_, i64>(4) as u64,
                    oldest_pending: row.get::<_, Option<i64>>(5).map(FieldCensus::age),
                };
            }
        }
        Ok(census)
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

/// Whether the entity the save's shard writes went into is the plan's
/// incarnation. Checked after them, without a lock: each of them holds a
/// lock a delete of the entity must wait for until the commit (the shard
/// row's, or, for a new row, the foreign key's share lock on the entity
/// row), so the entity this reads is the one they wrote into. Under
/// `REPEATABLE READ` an entity replaced after the snapshot fails those
/// writes with a serialization failure instead, and the retry sees it.
fn check_incarnation(
    tx: &mut Tx<'_>,
    kind: &Kind,
    tables: &KindTables,
    key: &StoredKey,
    incarnation: i64,
) -> Result<()> {
    let stored = tx.query_opt(&tables.select_incarnation, &[key])?;
    if stored.map(|row| row.get::<_, i64>(0)) != Some(incarnation) {
        return Err(kind.not_found(key));
    }
    Ok(())
}

/// Folds `value` into shard `shard` of field `index` (a missing row counts as
/// neutral), in the transaction's concurrency mode. Used by static saves and
/// by compaction when its target row was not among the rows it read.
fn fold_into(
    tx: &mut Tx<'_>,
    kind: &Kind,
    tables: &KindTables,
    entity: &StoredKey,
    index: usize,
    shard: i64,
    value: &Value,
) -> Result<()> {
    let field = kind.fields[index].name;
    let read = |row: Option<Row>| -> Result<Option<Value>> {
        row.map(|row| value_at(&row, 0).map_err(|reason| kind.corrupt(entity, field, reason)))
            .transpose()
    };
    match (tx.mode, value) {
        // Read, fold, write: under REPEATABLE READ the write fails (40001)
        // if anyone changed or created the row since the snapshot.
        (Concurrency::Optimistic, _) => {
            let stored = read(tx.query_opt(&tables.select_shard, &[entity, &field, &shard])?)?;
            let existed = stored.is_some();
            let new = kind.fold_delta(entity, index, stored, value)?;
            write_read_row(tx, kind, tables, entity, field, shard, &new, existed)?;
        }
        // One statement, unless the sum would leave bigint's range (or the
        // row holds no integer): then fold under the lock as below, which
        // does whatever the user's fold does there.
        (Concurrency::Locking, Value::Integer(delta))
            if tables.sums[index]
                && tx
                    .execute(&tables.add_to_shard, &[entity, &field, &shard, delta])
                    .map_err(not_found_on_fk(kind, entity))?
                    == 1 => {}
        // Lock the row, fold under the lock. A missing row is created with
        // the value, unless another writer created it first: then lock that.
        (Concurrency::Locking, _) => loop {
            let locked = tx.query_opt(&tables.select_shard_locked, &[entity, &field, &shard])?;
            if let Some(stored) = read(locked)? {
                let new = kind.fold_delta(entity, index, Some(stored), value)?;
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
                .map_err(not_found_on_fk(kind, entity))?;
            if inserted == 1 {
                break;
            }
        },
    }
    Ok(())
}

/// Writes row `shard` of an optimistic save, `existed` saying whether the
/// save's snapshot held it. An `UPDATE`, not the upsert, for a row the
/// snapshot holds: compaction may have folded the row elsewhere and deleted
/// it since (a row above a lowered automatic count, a saver holding the old
/// count), which fails the `UPDATE` with a serialization failure, where the
/// upsert would write the row again with the folded value in it and count
/// that twice (`tests/suites/auto_shards.rs` caught it so). Without that failure
/// no row updated means the entity is gone.
#[allow(clippy::too_many_arguments)]
fn write_read_row(
    tx: &mut Tx<'_>,
    kind: &Kind,
    tables: &KindTables,
    entity: &StoredKey,
    field: &str,
    shard: i64,
    value: &Value,
    existed: bool,
) -> Result<()> {
    let (i, r, t) = columns(value);
    let params: &[&(dyn ToSql + Sync)] = &[entity, &field, &shard, &i, &r, &t];
    if !existed {
        tx.execute(&tables.upsert_shard, params)
            .map_err(not_found_on_fk(kind, entity))?;
    } else if tx.execute(&tables.update_shard, params)? == 0 {
        return Err(kind.not_found(entity));
    }
    Ok(())
}

/// A static save to a field whose fold adds: folds `delta` into shard
/// `shard`, or the row [`Kind::plan_static`] moves it to, and refuses it if
/// the field's new total would not fit. The total counts the other rows as
/// of the statement's snapshot: a concurrent save to another row of the
/// field that commits meanwhile is not seen (`docs/design/sharding.md`, "Overflow").
fn save_to_sum(
    tx: &mut Tx<'_>,
    kind: &Kind,
    tables: &KindTables,
    entity: &StoredKey,
    index: usize,
    shard: i64,
    delta: &Value,
) -> Result<()> {
    let field = kind.fields[index].name;
    // A row that does not read leaves the total unknown: the delta is then
    // folded as for any field (`fold_into`), and load reports the row.
    let readable = |rows: &[Row], first: usize| -> Result<Option<Vec<(i64, Value)>>> {
        let mut read = Vec::with_capacity(rows.len());
        for row in rows {
            match value_at(row, first + 1) {
                Ok(value) => read.push((row.try_get(first)?, value)),
                Err(_) => return Ok(None),
            }
        }
        Ok(Some(read))
    };
    match (tx.mode, delta) {
        // One statement: add in SQL, and sum the other rows in its RETURNING.
        // No row comes back when the row's own sum would leave bigint (or
        // it holds no integer): then as below, under the lock it took.
        (Concurrency::Locking, Value::Integer(d)) if tables.sums[index] => {
            let added = tx
                .query_opt(&tables.add_to_shard_total, &[entity, &field, &shard, d])
                .map_err(not_found_on_fk(kind, entity))?;
            if let Some(row) = added {
                let (own, others): (i64, String) = (row.try_get(0)?, row.try_get(1)?);
                let others: i128 = others
                    .parse()
                    .map_err(|e| kind.corrupt(entity, field, format!("sum of the rows: {e}")))?;
                return kind.check_total(entity, index, i128::from(own) + others);
            }
        }
        // Read the picked row and the field's total, plan, write the row:
        // under REPEATABLE READ the write fails (40001) if anyone changed or
        // created it meanwhile. The total comes from the same snapshot the
        // rows would, so it is as exact as reading them; they are read only
        // to refuse or move a delta.
        (Concurrency::Optimistic, _) if kind.sum(index) == Sum::Integers => {
            let row = tx.query_one(&tables.sum_field, &[entity, &field, &shard])?;
            let stored = match row.try_get::<_, bool>(0)? {
                true => Some(value_at(&row, 1).map_err(|r| kind.corrupt(entity, field, r))?),
                false => None,
            };
            let total = match row.try_get::<_, bool>(5)? {
                true => Some(Total::Int(row.try_get::<_, String>(4)?.parse().map_err(
                    |e| kind.corrupt(entity, field, format!("sum of the rows: {e}")),
                )?)),
                false => None,
            };
            let mut rows_read = None;
            let mut rows = || -> Result<Option<Vec<(i64, Value)>>> {
                let read = tx.query(&tables.select_field, &[entity, &field])?;
                let read = readable(&read, 0)?;
                rows_read.clone_from(&read);
                Ok(read)
            };
            let existed = stored.is_some();
            let read = StaticRead {
                picked: shard,
                stored,
                total,
                rows: &mut rows,
            };
            let (target, value) = kind.plan_static(entity, index, read, delta, true)?;
            // A moved delta goes to a row the rows were read for.
            let existed = match target == shard {
                true => existed,
                false => rows_read.iter().flatten().any(|(s, _)| *s == target),
            };
            return write_read_row(tx, kind, tables, entity, field, target, &value, existed);
        }
        // Floats: read the field, plan, write the row, as above.
        (Concurrency::Optimistic, _) => {
            let read = tx.query(&tables.select_field, &[entity, &field])?;
            let Some(read) = readable(&read, 0)? else {
                return fold_into(tx, kind, tables, entity, index, shard, delta);
            };
            let (target, value) =
                kind.plan_static_rows(entity, index, shard, &read, delta, true)?;
            let existed = read.iter().any(|(s, _)| *s == target);
            return write_read_row(tx, kind, tables, entity, field, target, &value, existed);
        }
        (Concurrency::Locking, _) => {}
    }
    // Lock the picked row and read the others in one statement, plan, and
    // write the locked row; a plan that moves the delta locks that row
    // instead (once). A missing row is created, unless another writer
    // created it first: then lock that one.
    let (mut picked, mut may_move) = (shard, true);
    loop {
        let read = tx.query(&tables.lock_field, &[entity, &field, &picked])?;
        let locked = read.iter().any(|row| row.get::<_, bool>(0));
        let Some(read) = readable(&read, 1)? else {
            return fold_into(tx, kind, tables, entity, index, picked, delta);
        };
        let (target, value) =
            kind.plan_static_rows(entity, index, picked, &read, delta, may_move)?;
        if target != picked {
            (picked, may_move) = (target, false);
            continue;
        }
        let (i, r, t) = columns(&value);
        let params: &[&(dyn ToSql + Sync)] = &[entity, &field, &target, &i, &r, &t];
        if locked {
            tx.execute(&tables.update_shard, params)?;
            return Ok(());
        }
        let inserted = tx
            .execute(&tables.insert_shard_if_absent, params)
            .map_err(not_found_on_fk(kind, entity))?;
        if inserted == 1 {
            return Ok(());
        }
    }
}

/// One compaction transaction. The scan reads chunks of rows in key order
/// (locking them in [`Concurrency::Locking`]; under `REPEATABLE READ` any
/// concurrent change to them fails the commit instead) until
/// [`BatchScan`] says the batch is complete. Rows are deleted by number, never
/// by range: appends may commit between the scan and the delete.
fn compact_batch(
    tx: &mut Tx<'_>,
    kind: &Kind,
    tables: &KindTables,
    from: &Resume,
    max_rows: usize,
) -> Result<BatchPlan> {
    let mut scan = BatchScan::new(kind, from, max_rows);
    let mut last: Option<(StoredKey, String, i64)> = None;
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
            let entity = read_key(row, 0, tables.key_kind)?;
            let field: String = row.try_get(1)?;
            let shard: i64 = row.try_get(2)?;
            if !scan.push(entity.clone(), &field, shard, || value_at(row, 3)) {
                break 'scan;
            }
            last = Some((entity, field, shard));
        }
        if complete {
            break;
        }
    }
    let (batch, lowered) = if kind.has_auto() {
        let groups = scan.auto_groups();
        let counts = counts::read_all(tx, kind, tables, &groups)?;
        scan.finish_counted(counts)
    } else {
        (scan.finish(), Vec::new())
    };
    for (entity, index, plan) in &batch.plans {
        let field = kind.fields[*index].name;
        tx.execute(&tables.delete_shards, &[entity, &field, &plan.removed])?;
        if plan.target_read {
            let (i, r, t) = columns(&plan.value);
            tx.execute(
                &tables.update_shard,
                &[entity, &field, &plan.target, &i, &r, &t],
            )?;
        } else {
            fold_into(tx, kind, tables, entity, *index, plan.target, &plan.value)?;
        }
    }
    counts::lower(tx, kind, tables, &lowered)?;
    Ok(batch)
}

//! Queries on SQLite: the plan's `SELECT` (`crate::stores::query_sql`) and
//! then the shard rows of the entities it returned, both in one read
//! transaction, so in one snapshot.

use super::Sqlite;
use crate::error::Result;
use crate::naming::{quote, table_base};
use crate::seam::query::{Operand, ScanPlan, Scanned};
use crate::seam::{Kind, Stored, StoredKey};
use crate::stores::query_sql::{self, Dialect};
use crate::value::Value;
use rusqlite::types::Value as SqlValue;
use rusqlite::Transaction;
use std::collections::BTreeMap;

pub(super) fn run(db: &Sqlite, kind: &Kind, plan: &ScanPlan) -> Result<Scanned> {
    // Creates the tables on first use and checks the kind owns them.
    db.tables(kind)?;
    let base = table_base(kind.name)?;
    let entity = quote(&format!("as_entity_{base}"));
    let shard = quote(&format!("as_shard_{base}"));
    let select = query_sql::select(Dialect::Sqlite, &entity, &shard, plan);
    // Without conditions or a limit every entity is returned: one scan of
    // the shard table beats a lookup per entity.
    let rows_sql = match plan.conditions.is_empty() && plan.limit.is_none() {
        true => format!("SELECT entity, field, value FROM {shard}"),
        false => format!(
            "SELECT entity, field, value FROM {shard} \
             WHERE entity IN (SELECT value FROM json_each(?1))"
        ),
    };
    let params: Vec<SqlValue> = select.params.iter().map(sql_value).collect();
    db.read(|tx| {
        let Some(mut found) = entities(tx, &select.sql, &params)? else {
            return Ok(Scanned::Overflow);
        };
        shard_rows(tx, kind, &rows_sql, &mut found)?;
        Ok(Scanned::Rows(found))
    })
}

/// The plan's entities in order, or `None` when an SQL sum overflowed.
fn entities(
    tx: &Transaction<'_>,
    sql: &str,
    params: &[SqlValue],
) -> Result<Option<Vec<(StoredKey, Stored)>>> {
    let mut statement = tx.prepare_cached(sql)?;
    let mut rows = statement.query(rusqlite::params_from_iter(params))?;
    let mut found = Vec::new();
    loop {
        // `sum()` raises while the statement steps, at any row.
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => return Ok(Some(found)),
            Err(e) if is_overflow(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let stored = Stored {
            document: row.get(1)?,
            incarnation: row.get(2)?,
            rows: Vec::new(),
        };
        found.push((row.get(0)?, stored));
    }
}

/// Adds the shard rows of the declared fields to each entity found.
fn shard_rows(
    tx: &Transaction<'_>,
    kind: &Kind,
    sql: &str,
    found: &mut [(StoredKey, Stored)],
) -> Result<()> {
    if found.is_empty() {
        return Ok(());
    }
    let position: BTreeMap<StoredKey, usize> = found
        .iter()
        .enumerate()
        .map(|(i, (key, _))| (key.clone(), i))
        .collect();
    let mut statement = tx.prepare_cached(sql)?;
    let mut rows = if statement.parameter_count() == 0 {
        statement.query([])?
    } else {
        statement.query([json_keys(found)])?
    };
    while let Some(row) = rows.next()? {
        let key: StoredKey = row.get(0)?;
        let field: String = row.get(1)?;
        let (Some(&i), Some(index)) = (position.get(&key), kind.field_index(&field)) else {
            continue;
        };
        let value = row.get::<_, Value>(2).map_err(|e| e.to_string());
        found[i].1.rows.push((index, value));
    }
    Ok(())
}

/// The keys as a JSON array, for `json_each`: integers stay integers.
fn json_keys(found: &[(StoredKey, Stored)]) -> String {
    let keys: Vec<serde_json::Value> = found
        .iter()
        .map(|(key, _)| match key {
            StoredKey::Int(i) => (*i).into(),
            StoredKey::Text(s) => s.as_str().into(),
        })
        .collect();
    serde_json::Value::Array(keys).to_string()
}

fn sql_value(operand: &Operand) -> SqlValue {
    match operand {
        Operand::Int(i) => SqlValue::Integer(*i),
        Operand::Real(f) => SqlValue::Real(*f),
        Operand::Text(s) => SqlValue::Text(s.clone()),
        // `json_extract` reads `true` / `false` as 1 / 0.
        Operand::Bool(b) => SqlValue::Integer(i64::from(*b)),
    }
}

/// SQLite's `sum()` over integers that left `i64` at some step.
fn is_overflow(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(_, Some(message)) if message == "integer overflow")
}

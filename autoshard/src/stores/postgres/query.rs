//! Queries on PostgreSQL: the plan's `SELECT` (`crate::stores::query_sql`)
//! and then the shard rows of the entities it returned, both in one
//! `REPEATABLE READ READ ONLY` transaction, so in one snapshot.

use super::schema::identifier;
use super::values::{read_key, value_at};
use super::{Postgres, Tx};
use crate::entity::KeyKind;
use crate::error::{Error, Result};
use crate::naming::table_base;
use crate::seam::query::{Operand, ScanPlan, Scanned};
use crate::seam::{Kind, Stored, StoredKey};
use crate::stores::query_sql::{self, Dialect};
use postgres::error::SqlState;
use postgres::types::ToSql;
use std::collections::BTreeMap;

pub(super) fn run(db: &Postgres, kind: &Kind, plan: &ScanPlan) -> Result<Scanned> {
    // Creates the tables on first use and checks the kind owns them.
    db.tables(kind)?;
    let base = table_base(kind.name)?;
    let schema = db.quoted_schema();
    let entity = format!("{schema}.{}", identifier(&format!("as_entity_{base}"))?);
    let shard = format!("{schema}.{}", identifier(&format!("as_shard_{base}"))?);
    let select = query_sql::select(Dialect::Postgres, &entity, &shard, plan);
    let columns = "entity, field, int_value, real_value, text_value";
    // Without conditions or a limit every entity is returned: one scan of
    // the shard table beats an index probe per entity.
    let rows_sql = match plan.conditions.is_empty() && plan.limit.is_none() {
        true => format!("SELECT {columns} FROM {shard}"),
        false => format!("SELECT {columns} FROM {shard} WHERE entity = ANY($1)"),
    };
    let params: Vec<Box<dyn ToSql + Sync>> = select.params.iter().map(sql_value).collect();
    let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| &**p).collect();
    db.read_snapshot(|tx| {
        let rows = match tx.query(&select.sql, &params) {
            Ok(rows) => rows,
            // `sum(...)::bigint` left i64's range.
            Err(e) if e.code() == Some(&SqlState::NUMERIC_VALUE_OUT_OF_RANGE) => {
                return Ok(Scanned::Overflow)
            }
            // A document stored with a NUL before they were refused: the
            // `jsonb` cast of a condition or order cannot read it.
            Err(e) if e.code() == Some(&SqlState::UNTRANSLATABLE_CHARACTER) => {
                return Err(Error::Corrupt {
                    kind: kind.name,
                    id: "(one of the kind's)".into(),
                    field: "<document>".into(),
                    reason: format!(
                        "a stored document holds a string with a NUL character (written before \
                         they were refused), which PostgreSQL cannot read as JSON: {}; load that \
                         entity and save it without the NUL",
                        e.as_db_error().map_or("", |d| d.message())
                    ),
                })
            }
            Err(e) => return Err(e.into()),
        };
        let mut found = Vec::with_capacity(rows.len());
        for row in &rows {
            let stored = Stored {
                document: row.try_get(1)?,
                incarnation: row.try_get(2)?,
                rows: Vec::new(),
            };
            found.push((read_key(row, 0, kind.key_kind)?, stored));
        }
        shard_rows(tx, kind, &rows_sql, &mut found)?;
        Ok(Scanned::Rows(found))
    })
}

/// Adds the shard rows of the declared fields to each entity found.
fn shard_rows(
    tx: &mut Tx<'_>,
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
    let rows = if sql.contains("$1") {
        match kind.key_kind {
            KeyKind::Int => {
                let keys: Vec<i64> = found.iter().filter_map(|(k, _)| int(k)).collect();
                tx.query(sql, &[&keys])?
            }
            KeyKind::Text => {
                let keys: Vec<&str> = found.iter().filter_map(|(k, _)| text(k)).collect();
                tx.query(sql, &[&keys])?
            }
        }
    } else {
        tx.query(sql, &[])?
    };
    for row in &rows {
        let key = read_key(row, 0, kind.key_kind)?;
        let field: &str = row.try_get(1)?;
        let (Some(&i), Some(index)) = (position.get(&key), kind.field_index(field)) else {
            continue;
        };
        found[i].1.rows.push((index, value_at(row, 2)));
    }
    Ok(())
}

fn int(key: &StoredKey) -> Option<i64> {
    match key {
        StoredKey::Int(i) => Some(*i),
        StoredKey::Text(_) => None,
    }
}

fn text(key: &StoredKey) -> Option<&str> {
    match key {
        StoredKey::Text(s) => Some(s),
        StoredKey::Int(_) => None,
    }
}

/// A parameter of the type `query_sql` casts it to.
fn sql_value(operand: &Operand) -> Box<dyn ToSql + Sync> {
    match operand {
        Operand::Int(i) => Box::new(*i),
        Operand::Real(f) => Box::new(*f),
        Operand::Text(s) => Box::new(s.clone()),
        Operand::Bool(b) => Box::new(*b),
    }
}

//! Keys and shard values as PostgreSQL parameters and columns.

use crate::entity::{Key, KeyKind};
use crate::error::{Error, Result};
use crate::seam::StoredKey;
use crate::value::Value;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::Row;

/// A key as a statement parameter: PostgreSQL text cannot hold NUL (SQLite's
/// can), so such an id is refused before any SQL.
pub(super) fn param(key: Key<'_>) -> Result<StoredKey> {
    match key {
        Key::Text(s) if s.contains('\0') => Err(Error::InvalidName {
            name: s.to_owned(),
            reason: "PostgreSQL cannot store a NUL character in a text id".into(),
        }),
        key => Ok(key.into()),
    }
}

pub(super) fn read_key(row: &Row, column: usize, kind: KeyKind) -> Result<StoredKey> {
    Ok(match kind {
        KeyKind::Int => StoredKey::Int(row.try_get(column)?),
        KeyKind::Text => StoredKey::Text(row.try_get(column)?),
    })
}

impl ToSql for StoredKey {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            StoredKey::Int(i) => i.to_sql(ty, out),
            StoredKey::Text(s) => s.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty) || <String as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// A value as its three columns; exactly one is set.
pub(super) fn columns(value: &Value) -> (Option<i64>, Option<f64>, Option<&str>) {
    match value {
        Value::Integer(i) => (Some(*i), None, None),
        Value::Real(f) => (None, Some(*f), None),
        Value::Text(s) => (None, None, Some(s)),
    }
}

/// Reads the value columns starting at `first`.
pub(super) fn value_at(row: &Row, first: usize) -> Result<Value, String> {
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

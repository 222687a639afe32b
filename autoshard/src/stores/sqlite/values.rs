//! rusqlite's conversions for the core value and key types: a `Value` is
//! stored natively in a `STRICT` table's `ANY` column.

use crate::entity::Key;
use crate::seam::StoredKey;
use crate::value::Value;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
        }))
    }
}

impl FromSql for Value {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Integer(i) => Ok(Value::Integer(i)),
            ValueRef::Real(f) => Ok(Value::Real(f)),
            ValueRef::Text(_) => Ok(Value::Text(value.as_str()?.to_owned())),
            ValueRef::Null | ValueRef::Blob(_) => Err(FromSqlError::InvalidType),
        }
    }
}

impl ToSql for Key<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Key::Int(i) => i.to_sql(),
            Key::Text(s) => s.to_sql(),
        }
    }
}

impl ToSql for StoredKey {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            StoredKey::Int(i) => i.to_sql(),
            StoredKey::Text(s) => s.to_sql(),
        }
    }
}

/// An id column holds integers or text, whichever the kind's id is.
impl FromSql for StoredKey {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Integer(i) => Ok(StoredKey::Int(i)),
            ValueRef::Text(_) => Ok(StoredKey::Text(value.as_str()?.to_owned())),
            _ => Err(FromSqlError::InvalidType),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value;
    use std::collections::HashSet;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    struct Score(i64);

    #[test]
    fn sqlite_round_trip() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, v ANY) STRICT")
            .unwrap();
        let values = [
            (Value::Integer(i64::MIN), "integer"),
            (Value::Real(-0.0), "real"),
            (Value::Real(f64::MAX), "real"),
            (
                value::encode(&HashSet::from(["a".to_string()])).unwrap(),
                "text",
            ),
            (value::encode(&u64::MAX).unwrap(), "text"),
        ];
        for (value, sql_type) in &values {
            conn.execute("DELETE FROM t", []).unwrap();
            conn.execute("INSERT INTO t(v) VALUES (?1)", [value])
                .unwrap();
            let (read, read_type): (Value, String) = conn
                .query_row("SELECT v, typeof(v) FROM t", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap();
            // Debug output tells -0.0 from 0.0, which `==` does not.
            assert_eq!(format!("{read:?}"), format!("{value:?}"));
            assert_eq!(read_type, *sql_type);
        }
        assert_eq!(value::decode::<u64>(&values[4].0).unwrap(), u64::MAX);

        // SQL arithmetic on a stored integer still decodes.
        conn.execute("UPDATE t SET v = 41", []).unwrap();
        conn.execute("UPDATE t SET v = v + 1", []).unwrap();
        let read: Value = conn.query_row("SELECT v FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(value::decode::<Score>(&read).unwrap(), Score(42));

        for sql in ["SELECT NULL", "SELECT x'00'"] {
            let err = conn
                .query_row(sql, [], |r| r.get::<_, Value>(0))
                .unwrap_err();
            assert!(
                matches!(err, rusqlite::Error::InvalidColumnType(..)),
                "{sql}: {err:?}"
            );
        }
    }
}

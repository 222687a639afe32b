//! The board table on PostgreSQL: creating a board and opening one.
//!
//! A board's configuration is its catalog record (`seam/catalog.rs`), in
//! the board table's `record`. The columns boards were stored in before it
//! (`policy`, `score_order`, `entry_data` and `dims` came one by one) are
//! read for a board without a record, whichever of them the table has; a
//! table made before the record gets its column (and the policy's, if it
//! lacks them) when the next board is created. The players' `data` is
//! added when the first board that keeps entry data is created; boards that
//! keep none never name it.

use super::small;
use crate::error::{Error, Result};
use crate::seam::{BoardSpec, Columns, RECORD_POLICY};
use crate::stores::postgres::{approx, Postgres, Tx};
use postgres::error::SqlState;
use postgres::Row;

/// Creates board `name` shaped `spec`, with the tables, or the columns
/// its shape needs, that are not there yet.
pub(super) fn create(db: &Postgres, name: &str, spec: &BoardSpec) -> Result<i64> {
    let sql = db.boards_sql();
    let (id, _) = db.write_read_committed(|tx| {
        if !db.tables_exist(tx)? {
            tx.batch(&format!("{}; {}", db.ddl_lock(), sql.create))?;
        } else if !db.has_column(tx, &sql.has_record)? {
            // Looked up first: `ALTER TABLE` locks the table even when
            // it has nothing to do.
            tx.batch(&format!(
                "{}; {}; {}",
                db.ddl_lock(),
                sql.add_policy,
                sql.add_record
            ))?;
        }
        if spec.entry_data > 0 && !db.has_column(tx, &sql.has_data)? {
            tx.batch(&format!("{}; {}", db.ddl_lock(), sql.add_data))?;
        }
        // The older columns hold what they can (they are `NOT NULL`); the
        // policy's is one no version before the record knows.
        let row = tx.query_opt(
            &sql.insert_board,
            &[
                &name,
                &spec.min,
                &spec.max,
                &small(spec.branching),
                &small(spec.shards),
                &small(spec.queues),
                &RECORD_POLICY,
                &spec.order,
                &small(spec.entry_data),
                &spec.record(),
            ],
        )?;
        let id = match row {
            Some(row) => row.try_get::<_, i64>(0)?,
            None => return Err(Error::RankingExists { name: name.into() }),
        };
        if spec.buckets > 0 {
            approx::init(db, tx, id, spec)?;
        }
        Ok(id)
    })?;
    Ok(id)
}

impl Postgres {
    /// Board `name`'s id and stored shape, read in `tx` (a read or a write
    /// transaction: an entity save opens its boards in its own). One
    /// statement reads the record, or the columns a board stored before it
    /// has, whichever the table holds (`select_board`).
    pub(in crate::stores::postgres) fn open_in(
        &self,
        tx: &mut Tx<'_>,
        name: &str,
    ) -> Result<Option<(i64, BoardSpec)>> {
        let sql = self.boards_sql();
        if !self.tables_exist(tx)? {
            return Ok(None);
        }
        let Some(row) = tx.query_opt(&sql.select_board, &[&name])? else {
            return Ok(None);
        };
        self.spec_of(tx, name, &row).map(Some)
    }

    /// The id and configuration of a board row `select_board` read: its
    /// record, or (a board stored before it) its columns and approximate
    /// mode, read in `tx`.
    fn spec_of(&self, tx: &mut Tx<'_>, name: &str, row: &Row) -> Result<(i64, BoardSpec)> {
        let id: i64 = row.try_get(0)?;
        let spec = match row.try_get::<_, Option<String>>(9)? {
            Some(record) => BoardSpec::from_record(&record),
            None => {
                // Out-of-range values become ones the ranking layer
                // refuses, so `open` reports them as corruption.
                let count = |i| -> Result<u32> {
                    Ok(u32::try_from(row.try_get::<_, i32>(i)?).unwrap_or(u32::MAX))
                };
                let entry_data: Option<String> = row.try_get(8)?;
                let entry_data = entry_data.map_or(Ok(0), |v| v.parse::<u32>());
                let (buckets, exact_top) = approx::mode(self, tx, id)?;
                let policy: Option<String> = row.try_get(6)?;
                let order: Option<String> = row.try_get(7)?;
                let dims: Option<String> = row.try_get(10)?;
                BoardSpec::from_columns(Columns {
                    min: row.try_get(1)?,
                    max: row.try_get(2)?,
                    branching: count(3)?,
                    shards: count(4)?,
                    queues: count(5)?,
                    policy: policy.as_deref(),
                    order: order.as_deref(),
                    entry_data: entry_data.unwrap_or(u32::MAX),
                    dims: dims.as_deref().unwrap_or_default(),
                    buckets,
                    exact_top,
                })
            }
        };
        let spec = spec.map_err(|e| e.for_board(name))?;
        Ok((id, spec))
    }

    /// [`open_in`](Self::open_in) outside a transaction: the row in one
    /// statement, one round trip where a read transaction took four (its
    /// begin, the table check, the row, its commit). A board's row changes
    /// only when it is created or deleted, so one statement's snapshot is
    /// all a reader needs; a table that is not there yet is no board.
    pub(super) fn open_alone(&self, name: &str) -> Result<Option<(i64, BoardSpec)>> {
        let sql = self.boards_sql();
        self.read(|tx| match tx.query_opt(&sql.select_board, &[&name]) {
            Ok(Some(row)) => self.spec_of(tx, name, &row).map(Some),
            Ok(None) => Ok(None),
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(None),
            Err(e) => Err(e.into()),
        })
    }

    /// Runs one of the `has_…` queries.
    fn has_column(&self, tx: &mut Tx<'_>, query: &str) -> Result<bool> {
        let row = tx.query_opt(query, &[])?;
        Ok(row.is_some_and(|r| r.get::<_, bool>(0)))
    }

    fn tables_exist(&self, tx: &mut Tx<'_>) -> Result<bool> {
        let row = tx.query_opt("SELECT to_regclass($1)::text", &[&self.boards_sql().probe])?;
        Ok(row.and_then(|r| r.get::<_, Option<String>>(0)).is_some())
    }
}

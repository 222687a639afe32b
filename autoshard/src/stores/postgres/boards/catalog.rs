//! The board table on PostgreSQL: creating a board and opening one.
//!
//! The board table's `policy`, `score_order` and `entry_data` came later: a
//! table made before them gets them (with the defaults every board then
//! had) when the next board is created, and `open` reads a table without
//! them as holding the defaults. The players' `data` is added when the first
//! board that keeps entry data is created; boards that keep none never name
//! it. The board table's `dims` (a composite board's dimensions, `''` for
//! one score) is added when the first composite board is created.

use super::small;
use crate::error::{Error, Result};
use crate::seam::BoardSpec;
use crate::stores::postgres::{approx, Postgres, Tx};

/// Creates board `name` shaped `spec`, with the tables, or the columns
/// its shape needs, that are not there yet.
pub(super) fn create(db: &Postgres, name: &str, spec: &BoardSpec) -> Result<i64> {
    let sql = db.boards_sql();
    let (id, _) = db.write_read_committed(|tx| {
        if !db.tables_exist(tx)? {
            tx.batch(&format!("{}; {}", db.ddl_lock(), sql.create))?;
        } else if !db.has_policy(tx)? {
            // Looked up first: `ALTER TABLE` locks the table even when
            // it has nothing to do.
            tx.batch(&format!("{}; {}", db.ddl_lock(), sql.add_policy))?;
        }
        if spec.entry_data > 0 && !db.has_column(tx, &sql.has_data)? {
            tx.batch(&format!("{}; {}", db.ddl_lock(), sql.add_data))?;
        }
        if !spec.dims.is_empty() && !db.has_column(tx, &sql.has_dims)? {
            tx.batch(&format!("{}; {}", db.ddl_lock(), sql.add_dims))?;
        }
        let row = tx.query_opt(
            &sql.insert_board,
            &[
                &name,
                &spec.min,
                &spec.max,
                &small(spec.branching),
                &small(spec.shards),
                &small(spec.queues),
                &spec.policy,
                &spec.order,
                &small(spec.entry_data),
            ],
        )?;
        let id = match row {
            Some(row) => row.try_get::<_, i64>(0)?,
            None => return Err(Error::RankingExists { name: name.into() }),
        };
        if !spec.dims.is_empty() {
            tx.execute(&sql.set_dims, &[&id, &spec.dims])?;
        }
        if spec.buckets > 0 {
            approx::init(db, tx, id, spec)?;
        }
        Ok(id)
    })?;
    Ok(id)
}

impl Postgres {
    /// Board `name`'s id and stored shape, read in `tx` (a read or a write
    /// transaction: an entity save opens its boards in its own).
    pub(super) fn open_in(&self, tx: &mut Tx<'_>, name: &str) -> Result<Option<(i64, BoardSpec)>> {
        let Some((id, spec)) = self.open_flat_in(tx, name)? else {
            return Ok(None);
        };
        let sql = self.boards_sql();
        if !self.has_column(tx, &sql.has_dims)? {
            return Ok(Some((id, spec)));
        }
        let dims = match tx.query_opt(&sql.select_dims, &[&id])? {
            Some(row) => row.try_get(0)?,
            None => String::new(),
        };
        Ok(Some((id, BoardSpec { dims, ..spec })))
    }

    /// [`open_in`](Self::open_in) without a composite board's dimensions,
    /// as an entity save reads its boards on every write: its boards are
    /// `Increment` boards, which cannot be composite, so the column check
    /// (a round trip) is skipped.
    pub(in crate::stores::postgres) fn open_flat_in(
        &self,
        tx: &mut Tx<'_>,
        name: &str,
    ) -> Result<Option<(i64, BoardSpec)>> {
        let sql = self.boards_sql();
        if !self.tables_exist(tx)? {
            return Ok(None);
        }
        let select = match self.has_policy(tx)? {
            true => &sql.select_board,
            false => &sql.select_old_board,
        };
        let Some(row) = tx.query_opt(select, &[&name])? else {
            return Ok(None);
        };
        // Out-of-range values become ones the ranking layer refuses, so
        // `open` reports them as corruption.
        let count =
            |i| -> Result<u32> { Ok(u32::try_from(row.try_get::<_, i32>(i)?).unwrap_or(u32::MAX)) };
        let spec = BoardSpec {
            min: row.try_get(1)?,
            max: row.try_get(2)?,
            branching: count(3)?,
            shards: count(4)?,
            queues: count(5)?,
            policy: row.try_get(6)?,
            order: row.try_get(7)?,
            entry_data: count(8)?,
            dims: String::new(),
            buckets: 0,
            exact_top: 0,
        };
        let id: i64 = row.try_get(0)?;
        let (buckets, exact_top) = approx::mode(self, tx, id)?;
        Ok(Some((
            id,
            BoardSpec {
                buckets,
                exact_top,
                ..spec
            },
        )))
    }

    fn has_policy(&self, tx: &mut Tx<'_>) -> Result<bool> {
        self.has_column(tx, &self.boards_sql().has_policy)
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

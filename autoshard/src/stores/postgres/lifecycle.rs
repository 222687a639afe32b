//! Listing, deleting and checking boards on PostgreSQL.
//!
//! A delete is one `READ COMMITTED` transaction that takes the board's
//! advisory lock exclusively (every writer of the board holds it, shared or
//! exclusive, before it reads: `boards/locks.rs`) and deletes that board's
//! rows only, by primary-key prefix: no table lock, no lock another board's
//! writer takes. The queue's tables are in the same database, so the queued
//! rows, heads, applied-through marks and dead letters go in the same
//! transaction: a crash leaves all of the board or none of it. Board ids are
//! an identity column, never handed out twice, so a board created again
//! under the same name never sees the old one's rows.

use super::{Postgres, Tx};
use crate::error::Result;
use crate::hash::fnv;
use crate::seam::Board;

/// The lifecycle statements, with the schema's table names filled in.
pub(super) struct LifecycleSql {
    list: String,
    find: String,
    name_of: String,
    /// `DELETE … WHERE board = $1` for each board-side table.
    board_rows: Vec<String>,
    /// The same for the queue's tables (which exist once a queue was used).
    queue_rows: Vec<String>,
    delete_board: String,
    dead_letters: String,
    /// Text for `to_regclass`: a table the queue's `prepare` creates.
    queue_probe: String,
}

impl LifecycleSql {
    pub(super) fn new(schema: &str) -> Self {
        let t = |name: &str| format!("{schema}.{name}");
        let boards = t("autoshard_rank_boards");
        let delete = |name: &str| format!("DELETE FROM {} WHERE board = $1", t(name));
        LifecycleSql {
            list: format!("SELECT name FROM {boards} ORDER BY name COLLATE \"C\""),
            find: format!("SELECT id FROM {boards} WHERE name = $1"),
            name_of: format!("SELECT name FROM {boards} WHERE id = $1"),
            board_rows: ["autoshard_rank_nodes", "autoshard_rank_arrivals"]
                .into_iter()
                .chain(["autoshard_rank_players"])
                .map(delete)
                .collect(),
            queue_rows: [
                "autoshard_rank_queue",
                "autoshard_rank_queue_heads",
                "autoshard_rank_applied",
                "autoshard_rank_dead_letters",
            ]
            .into_iter()
            .map(delete)
            .collect(),
            delete_board: format!("DELETE FROM {boards} WHERE id = $1"),
            dead_letters: delete("autoshard_rank_dead_letters"),
            queue_probe: t("autoshard_rank_applied"),
        }
    }
}

/// The advisory lock key of board `id` in the schema seeded `seed`: what a
/// writer takes first (`PgTx::key(b'b', &[])` in `boards/locks.rs`).
pub(super) fn board_key(seed: u64, id: i64) -> i64 {
    fnv(fnv(seed, &id.to_le_bytes()), b"b") as i64
}

/// [`Error::RankingNotFound`] unless `board.id` still names `board.name`.
/// A writer calls it after taking the board's lock, so it sees a delete
/// that committed while it waited.
pub(super) fn check_alive(tx: &mut Tx<'_>, sql: &LifecycleSql, board: Board<'_>) -> Result<()> {
    let row = tx.query_opt(&sql.name_of, &[&board.id])?;
    match row.map(|r| r.try_get::<_, String>(0)).transpose()? {
        Some(name) if name == board.name => Ok(()),
        _ => Err(board.not_found()),
    }
}

/// Whether the queue's tables exist.
fn queue_exists(tx: &mut Tx<'_>, sql: &LifecycleSql) -> Result<bool> {
    let row = tx.query_opt("SELECT to_regclass($1)::text", &[&sql.queue_probe])?;
    Ok(row.and_then(|r| r.get::<_, Option<String>>(0)).is_some())
}

/// Deletes the rows of board `id` in the queue's tables (marks and dead
/// letters included), in `tx`.
pub(super) fn delete_queue_rows(tx: &mut Tx<'_>, sql: &LifecycleSql, id: i64) -> Result<()> {
    if queue_exists(tx, sql)? {
        for delete in &sql.queue_rows {
            tx.execute(delete, &[&id])?;
        }
    }
    Ok(())
}

/// [`Storage::clear`](crate::seam::Storage::clear): the tree, players and
/// dead letters of board `id`, in `tx` (which holds the board exclusively).
pub(super) fn clear(tx: &mut Tx<'_>, sql: &LifecycleSql, id: i64) -> Result<()> {
    for delete in &sql.board_rows {
        tx.execute(delete, &[&id])?;
    }
    if queue_exists(tx, sql)? {
        tx.execute(&sql.dead_letters, &[&id])?;
    }
    Ok(())
}

impl Postgres {
    pub(super) fn list(&self, sql: &LifecycleSql, exist: &str) -> Result<Vec<String>> {
        self.read_snapshot(|tx| {
            let row = tx.query_opt("SELECT to_regclass($1)::text", &[&exist])?;
            if row.and_then(|r| r.get::<_, Option<String>>(0)).is_none() {
                return Ok(Vec::new());
            }
            let rows = tx.query(&sql.list, &[])?;
            rows.iter()
                .map(|r| Ok(r.try_get::<_, String>(0)?))
                .collect()
        })
    }

    pub(super) fn delete(
        &self,
        sql: &LifecycleSql,
        seed: u64,
        exist: &str,
        name: &str,
    ) -> Result<bool> {
        let (found, _) = self.write_read_committed(|tx| {
            let row = tx.query_opt("SELECT to_regclass($1)::text", &[&exist])?;
            if row.and_then(|r| r.get::<_, Option<String>>(0)).is_none() {
                return Ok(false);
            }
            let Some(row) = tx.query_opt(&sql.find, &[&name])? else {
                return Ok(false);
            };
            let id: i64 = row.try_get(0)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&board_key(seed, id)])?;
            // The board row first: its lock waits for the enqueues that hold
            // it (`FOR KEY SHARE`, `queue.rs`), whose rows the queue delete
            // below then sees (read committed); a later enqueue waits for this
            // commit and finds no board. Deleting it last would let an
            // enqueue commit rows after the queue delete, and lock in the
            // opposite order to the enqueue's.
            tx.execute(&sql.delete_board, &[&id])?;
            for delete in &sql.board_rows {
                tx.execute(delete, &[&id])?;
            }
            delete_queue_rows(tx, sql, id)?;
            super::approx::purge(self, tx, id)?;
            Ok(true)
        })?;
        Ok(found)
    }
}

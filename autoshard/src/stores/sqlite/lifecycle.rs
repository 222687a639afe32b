//! Listing, deleting and checking boards on SQLite.
//!
//! A board's id is its `autoshard_rank_boards` rowid, and SQLite gives a new
//! row the largest rowid plus one: deleting the board row would let the next
//! board take the deleted one's id, and with it whatever a crash left under
//! that id (queued rows in the queue's file). So a delete keeps the row as a
//! tombstone, renamed to [`TOMBSTONE`] plus its id (a control character: no
//! board name can have it), and deletes the rows under the id in bounded
//! batches, each its own short write transaction, so that other boards'
//! writers (SQLite has one writer per file) wait for one batch at most.
//! Every delete first finishes the batches of earlier deletes a crash
//! interrupted.

use super::Sqlite;
use crate::error::Result;
use crate::seam::Board;
use rusqlite::{params, OptionalExtension, Transaction};

/// How a deleted board's row is renamed: `"\u{1}deleted:<id>"`.
const TOMBSTONE: &str = "\u{1}deleted:";

/// Rows per table a delete batch removes.
const BATCH: i64 = 5_000;

/// A bounded delete per table of the board's file, by its primary key
/// (`WITHOUT ROWID` tables have no rowid to page by).
const BATCHES: [(&str, &str); 5] = [
    ("autoshard_rank_nodes", "board, height, idx, part, shard"),
    ("autoshard_rank_arrivals", "board, score, height, idx"),
    ("autoshard_rank_players", "board, player"),
    ("autoshard_rank_dead_letters", "id"),
    ("autoshard_rank_applied", "board, queue"),
];

fn table_exists(tx: &Transaction<'_>, table: &str) -> Result<bool> {
    Ok(tx
        .prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .exists([table])?)
}

/// [`Error::RankingNotFound`] unless `board.id` still names `board.name`:
/// a handle whose board was deleted (and maybe created again, under a new
/// id) must not read or write under the old id.
pub(super) fn check_alive(tx: &Transaction<'_>, board: Board<'_>) -> Result<()> {
    let name: Option<String> = tx
        .prepare_cached("SELECT name FROM autoshard_rank_boards WHERE id = ?1")?
        .query_row([board.id], |r| r.get(0))
        .optional()?;
    match name {
        Some(name) if name == board.name => Ok(()),
        _ => Err(board.not_found()),
    }
}

pub(super) fn list(db: &Sqlite) -> Result<Vec<String>> {
    db.read(|tx| {
        if !table_exists(tx, "autoshard_rank_boards")? {
            return Ok(Vec::new());
        }
        let mut stmt = tx.prepare_cached(
            "SELECT name FROM autoshard_rank_boards WHERE substr(name, 1, 1) <> char(1) \
             ORDER BY name",
        )?;
        let names = stmt.query_map([], |r| r.get(0))?;
        Ok(names.collect::<rusqlite::Result<_>>()?)
    })
}

pub(super) fn delete(db: &Sqlite, name: &str) -> Result<bool> {
    let (found, _) = db.write(|tx| {
        if !table_exists(tx, "autoshard_rank_boards")? {
            return Ok(false);
        }
        let id: Option<i64> = tx
            .prepare_cached("SELECT id FROM autoshard_rank_boards WHERE name = ?1")?
            .query_row([name], |r| r.get(0))
            .optional()?;
        let Some(id) = id else { return Ok(false) };
        tx.prepare_cached("UPDATE autoshard_rank_boards SET name = ?2 WHERE id = ?1")?
            .execute(params![id, format!("{TOMBSTONE}{id}")])?;
        Ok(true)
    })?;
    purge(db)?;
    Ok(found)
}

/// Deletes the rows under every tombstone, batch by batch, then closes
/// their queues in the queue's file (deleting their queued rows), so that
/// a stale handle's enqueue is refused. Repeating it is harmless.
fn purge(db: &Sqlite) -> Result<()> {
    let ids: Vec<i64> = db.read(|tx| {
        if !table_exists(tx, "autoshard_rank_boards")? {
            return Ok(Vec::new());
        }
        let mut stmt = tx.prepare_cached(
            "SELECT id FROM autoshard_rank_boards WHERE substr(name, 1, 1) = char(1)",
        )?;
        let ids = stmt.query_map([], |r| r.get(0))?;
        Ok(ids.collect::<rusqlite::Result<_>>()?)
    })?;
    for &id in &ids {
        while delete_batch(db, id)? {}
    }
    super::queue::close(db, &ids)
}

/// One write transaction deleting up to [`BATCH`] rows of board `id` from
/// each table; whether any table may hold more.
fn delete_batch(db: &Sqlite, id: i64) -> Result<bool> {
    let (more, _) = db.write(|tx| {
        let mut more = false;
        for (table, key) in BATCHES {
            if !table_exists(tx, table)? {
                continue;
            }
            let sql = format!(
                "DELETE FROM {table} WHERE ({key}) IN \
                 (SELECT {key} FROM {table} WHERE board = ?1 LIMIT ?2)"
            );
            more |= tx.prepare_cached(&sql)?.execute(params![id, BATCH])? as i64 == BATCH;
        }
        if table_exists(tx, "autoshard_rank_generations")? {
            tx.prepare_cached("DELETE FROM autoshard_rank_generations WHERE board = ?1")?
                .execute([id])?;
        }
        super::approx::purge(tx, id)?;
        Ok(more)
    })?;
    Ok(more)
}

/// [`Storage::clear`](crate::seam::Storage::clear) in a board transaction.
pub(super) fn clear(tx: &Transaction<'_>, board: i64) -> Result<()> {
    for (table, _) in BATCHES {
        // A reset keeps the applied-through marks: it moves them itself.
        if table == "autoshard_rank_applied" || !table_exists(tx, table)? {
            continue;
        }
        tx.prepare_cached(&format!("DELETE FROM {table} WHERE board = ?1"))?
            .execute([board])?;
    }
    Ok(())
}

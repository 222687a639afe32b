//! The queue's tables and statements on SQLite.
//!
//! Every write (a group commit, a worker batch) is one `BEGIN IMMEDIATE`
//! transaction, and SQLite has one writer per file: workers, in any
//! process, take turns, and each reads the queue after the previous batch's
//! delete committed, so no two apply the same rows.

use super::{Drained, Item};
use crate::error::Result;
use crate::ranking::sqlite::SqliteTx;
use crate::ranking::{Ranking, Update};
use crate::sqlite::Sqlite;
use rusqlite::{params, Transaction};
use std::path::PathBuf;

/// `autoshard_rank_queue` holds the updates; `autoshard_rank_queue_heads`
/// the next sequence number of each queue shard, so numbers are never reused
/// when a shard runs empty (a `flush` compares them with a mark taken
/// earlier).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS autoshard_rank_queue (
    board INTEGER NOT NULL,
    queue INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    player TEXT NOT NULL,
    score INTEGER,
    PRIMARY KEY (board, queue, seq)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS autoshard_rank_queue_heads (
    board INTEGER NOT NULL,
    queue INTEGER NOT NULL,
    next INTEGER NOT NULL,
    PRIMARY KEY (board, queue)
) STRICT, WITHOUT ROWID;
";

/// Creates the queue tables if needed; the key handles of one file share
/// their queue state by (`None` for an in-memory database, which has no
/// name to share by).
pub(super) fn prepare(_: &Ranking, db: &Sqlite) -> Result<Option<String>> {
    db.write(|tx| Ok(tx.execute_batch(SCHEMA)?))?;
    db.with_conn(|conn| {
        Ok(conn.path().filter(|p| !p.is_empty()).map(|p| {
            let file = std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
            format!("sqlite:{}", file.display())
        }))
    })
}

/// One transaction appending `items` to their queue shards, each shard's
/// items numbered in order from the shard's head.
pub(super) fn write_items(ranking: &Ranking, db: &Sqlite, items: &[Item]) -> Result<()> {
    let shards = super::shards_of(items);
    db.write(|tx| {
        let mut head = tx.prepare_cached(
            "INSERT INTO autoshard_rank_queue_heads (board, queue, next) VALUES (?1, ?2, ?3) \
             ON CONFLICT (board, queue) DO UPDATE SET next = next + excluded.next \
             RETURNING next - ?3",
        )?;
        let mut insert = tx.prepare_cached(
            "INSERT INTO autoshard_rank_queue (board, queue, seq, player, score) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for &queue in &shards {
            let mine = || items.iter().filter(|i| i.queue == queue);
            let n = mine().count() as i64;
            let first: i64 = head.query_row(params![ranking.board_id(), queue, n], |r| r.get(0))?;
            for (seq, item) in (first..).zip(mine()) {
                insert.execute(params![
                    ranking.board_id(),
                    queue,
                    seq,
                    item.player,
                    item.score
                ])?;
            }
        }
        Ok(())
    })?;
    Ok(())
}

pub(super) fn queued(ranking: &Ranking, db: &Sqlite) -> Result<u64> {
    db.read(|tx| {
        let n: i64 = tx
            .prepare_cached("SELECT count(*) FROM autoshard_rank_queue WHERE board = ?1")?
            .query_row([ranking.board_id()], |r| r.get(0))?;
        Ok(n as u64)
    })
}

/// `(queue shard, next sequence number)`: every update committed so far is
/// below its shard's mark.
pub(super) fn marks(ranking: &Ranking, db: &Sqlite) -> Result<Vec<(u32, i64)>> {
    db.read(|tx| {
        let mut stmt = tx.prepare_cached(
            "SELECT queue, next FROM autoshard_rank_queue_heads WHERE board = ?1",
        )?;
        let rows = stmt.query_map([ranking.board_id()], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    })
}

/// Updates below the marks that are still queued; with `count` false, only
/// whether there is any (one index seek per shard).
pub(super) fn behind(
    ranking: &Ranking,
    db: &Sqlite,
    marks: &[(u32, i64)],
    count: bool,
) -> Result<u64> {
    db.read(|tx| behind_in(tx, ranking.board_id(), marks, count))
}

fn behind_in(tx: &Transaction<'_>, board: i64, marks: &[(u32, i64)], count: bool) -> Result<u64> {
    let sql = if count {
        "SELECT count(*) FROM autoshard_rank_queue WHERE board = ?1 AND queue = ?2 AND seq < ?3"
    } else {
        "SELECT EXISTS (SELECT 1 FROM autoshard_rank_queue \
         WHERE board = ?1 AND queue = ?2 AND seq < ?3)"
    };
    let mut stmt = tx.prepare_cached(sql)?;
    let mut total = 0;
    for &(queue, mark) in marks {
        let n: i64 = stmt.query_row(params![board, queue, mark], |r| r.get(0))?;
        total += n as u64;
        if n > 0 && !count {
            break;
        }
    }
    Ok(total)
}

/// One worker transaction: the oldest queued updates (up to `max`, taking
/// the shards in turn from `first`), applied in queue order, then deleted.
pub(super) fn drain_batch(
    ranking: &Ranking,
    db: &Sqlite,
    max: usize,
    first: u32,
) -> Result<Drained> {
    let queues = ranking.queues().max(1);
    let board = ranking.board_id();
    let (applied, _) = db.write(|tx| {
        let mut updates = Vec::new();
        let mut taken = Vec::new();
        let mut select = tx.prepare_cached(
            "SELECT seq, player, score FROM autoshard_rank_queue \
             WHERE board = ?1 AND queue = ?2 ORDER BY seq LIMIT ?3",
        )?;
        for k in 0..queues {
            let room = max - updates.len();
            if room == 0 {
                break;
            }
            let queue = (first + k) % queues;
            let mut rows = select.query(params![board, queue, room as i64])?;
            let mut last = None;
            while let Some(row) = rows.next()? {
                last = Some(row.get::<_, i64>(0)?);
                updates.push(Update {
                    player: row.get(1)?,
                    score: row.get(2)?,
                });
            }
            if let Some(last) = last {
                taken.push((queue, last));
            }
        }
        if updates.is_empty() {
            return Ok(0);
        }
        ranking.apply_in(&SqliteTx::new(tx, board, ranking.name()), &updates)?;
        let mut delete = tx.prepare_cached(
            "DELETE FROM autoshard_rank_queue WHERE board = ?1 AND queue = ?2 AND seq <= ?3",
        )?;
        for &(queue, last) in &taken {
            delete.execute(params![board, queue, last])?;
        }
        Ok(updates.len())
    })?;
    Ok(Drained {
        applied,
        contended: false,
    })
}

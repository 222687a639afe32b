//! The queue's tables and statements on SQLite.
//!
//! The queue lives in a database of its own, the file `<board db>-queue`
//! ([`Sqlite::queue_db`]): SQLite has one writer per file, and with the queue
//! in the board's file every enqueue waited for the worker's apply
//! transaction (BENCHMARKS.md §5: enqueue p99 of 106–168 ms). Now an
//! enqueue only waits for other enqueues and for a worker's short delete.
//!
//! What must commit with the apply stays in the board's file: per queue
//! shard, the applied-through mark (`autoshard_rank_applied`), and the dead
//! letters. A worker's board transaction (`BEGIN IMMEDIATE` on the board's
//! file: one at a time, in any process) reads the mark, takes the queue rows
//! above it (a read transaction on the queue's file), applies them and moves
//! the mark; after the commit, a transaction on the queue's file deletes the
//! rows through the mark. A crash between the two leaves applied rows
//! queued, below the mark, where nothing takes them again (`docs/design/ranking-queue.md`,
//! "The queue's data model").

use super::Sqlite;
use crate::error::Result;
use crate::seam::{queue_shards, Board, DeadLetter, QueuedRow, QueuedUpdate, NOTHING_APPLIED};
use rusqlite::types::ValueRef;
use rusqlite::{params, OptionalExtension, Transaction};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// In the queue's file: `autoshard_rank_queue` holds the updates;
/// `autoshard_rank_queue_heads` the next sequence number of each queue
/// shard, so numbers are never reused when a shard runs empty (a `flush`
/// compares them with a mark taken earlier, and the applied-through marks
/// rely on them); `autoshard_rank_queue_closed` the deleted boards, which an
/// append checks in its own transaction: the board's tombstone is in the
/// other file, where the append cannot see it atomically (one row per
/// deleted board; ids are never reused, see `lifecycle.rs`).
const QUEUE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS autoshard_rank_queue (
    board INTEGER NOT NULL,
    queue INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    player TEXT NOT NULL,
    score INTEGER,
    data BLOB,
    enqueued_ms INTEGER,
    PRIMARY KEY (board, queue, seq)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS autoshard_rank_queue_heads (
    board INTEGER NOT NULL,
    queue INTEGER NOT NULL,
    next INTEGER NOT NULL,
    PRIMARY KEY (board, queue)
) STRICT, WITHOUT ROWID;
";

/// In the queue's file, beside [`QUEUE_SCHEMA`] (which an earlier version
/// kept in the board's file, see `prepare`): the deleted boards.
const CLOSED_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS autoshard_rank_queue_closed (
    board INTEGER PRIMARY KEY
) STRICT;
";

/// In the board's file: `autoshard_rank_applied` the applied-through mark
/// of each queue shard; `autoshard_rank_dead_letters` the rows a worker
/// could not apply, moved aside.
const BOARD_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS autoshard_rank_applied (
    board INTEGER NOT NULL,
    queue INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (board, queue)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS autoshard_rank_dead_letters (
    id INTEGER PRIMARY KEY,
    board INTEGER NOT NULL,
    queue INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    player TEXT NOT NULL,
    score INTEGER,
    reason TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS autoshard_rank_dead_letters_board
    ON autoshard_rank_dead_letters (board, id);
";

/// Creates the queue's tables if needed (moving a queue an earlier version
/// kept in the board's file to the queue's); the key handles of one file
/// share their queue state by (`None` for an in-memory database, which has
/// no name to share by).
pub(super) fn prepare(db: &Sqlite) -> Result<Option<String>> {
    let queue = db.queue_db()?;
    queue.write(|tx| {
        tx.execute_batch(QUEUE_SCHEMA)?;
        tx.execute_batch(CLOSED_SCHEMA)?;
        // A queue file made before entry data could be queued.
        let has_data = tx
            .prepare_cached(
                "SELECT 1 FROM pragma_table_info('autoshard_rank_queue') WHERE name = 'data'",
            )?
            .exists([])?;
        if !has_data {
            tx.execute_batch("ALTER TABLE autoshard_rank_queue ADD COLUMN data BLOB")?;
        }
        // One made before rows carried their enqueue time: its rows keep
        // none (NULL), new ones get it.
        let has_time = tx
            .prepare_cached(
                "SELECT 1 FROM pragma_table_info('autoshard_rank_queue') \
                 WHERE name = 'enqueued_ms'",
            )?
            .exists([])?;
        if !has_time {
            tx.execute_batch("ALTER TABLE autoshard_rank_queue ADD COLUMN enqueued_ms INTEGER")?;
        }
        Ok(())
    })?;
    db.write(|tx| Ok(tx.execute_batch(BOARD_SCHEMA)?))?;
    move_legacy_queue(db, queue)?;
    db.with_conn(|conn| {
        Ok(conn.path().filter(|p| !p.is_empty()).map(|p| {
            let file = std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
            format!("sqlite:{}", file.display())
        }))
    })
}

/// A queue kept in the board's file (before the queue had a file of its
/// own) moves to the queue's file: rows copied with their sequence numbers
/// (`OR IGNORE`, heads raised to at least theirs, so a copy repeated after
/// a crash changes nothing), then the old tables dropped. Those rows were
/// never applied (the old worker deleted what it applied in the same
/// transaction), which is what a missing applied-through mark says.
fn move_legacy_queue(db: &Sqlite, queue: &Sqlite) -> Result<()> {
    type Legacy = (
        Vec<(
            i64,
            i64,
            i64,
            rusqlite::types::Value,
            rusqlite::types::Value,
        )>,
        Vec<(i64, i64, i64)>,
    );
    let legacy: Option<Legacy> = db.read(|tx| {
        let exists = tx
            .prepare_cached(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'autoshard_rank_queue'",
            )?
            .exists([])?;
        if !exists {
            return Ok(None);
        }
        let mut rows = tx.prepare("SELECT board, queue, seq, player, score FROM autoshard_rank_queue")?;
        let rows = rows
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut heads = tx.prepare("SELECT board, queue, next FROM autoshard_rank_queue_heads")?;
        let heads = heads
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(Some((rows, heads)))
    })?;
    let Some((rows, heads)) = legacy else {
        return Ok(());
    };
    queue.write(|tx| {
        let mut insert = tx.prepare_cached(
            "INSERT OR IGNORE INTO autoshard_rank_queue (board, queue, seq, player, score) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for (board, queue, seq, player, score) in &rows {
            insert.execute(params![board, queue, seq, player, score])?;
        }
        let mut head = tx.prepare_cached(
            "INSERT INTO autoshard_rank_queue_heads (board, queue, next) VALUES (?1, ?2, ?3) \
             ON CONFLICT (board, queue) DO UPDATE SET next = max(next, excluded.next)",
        )?;
        for (board, queue, next) in &heads {
            head.execute(params![board, queue, next])?;
        }
        Ok(())
    })?;
    db.write(|tx| {
        Ok(tx.execute_batch(
            "DROP TABLE IF EXISTS autoshard_rank_queue; \
             DROP TABLE IF EXISTS autoshard_rank_queue_heads;",
        )?)
    })?;
    Ok(())
}

/// One transaction on the queue's file appending `items` to their queue
/// shards, each shard's items numbered in order from the shard's head.
///
/// A deleted board's queue is closed (`close`, in the delete): the append
/// then fails with [`Error::RankingNotFound`], decided in this transaction,
/// so no acknowledged update is left behind for a board that is gone.
pub(super) fn append(db: &Sqlite, board: Board<'_>, items: &[QueuedUpdate]) -> Result<()> {
    let (named, board) = (board, board.id);
    let now = unix_ms();
    db.queue_db()?.write(|tx| {
        let closed = tx
            .prepare_cached("SELECT 1 FROM autoshard_rank_queue_closed WHERE board = ?1")?
            .exists([board])?;
        if closed {
            return Err(named.not_found());
        }
        let mut head = tx.prepare_cached(
            "INSERT INTO autoshard_rank_queue_heads (board, queue, next) VALUES (?1, ?2, ?3) \
             ON CONFLICT (board, queue) DO UPDATE SET next = next + excluded.next \
             RETURNING next - ?3",
        )?;
        let mut insert = tx.prepare_cached(
            "INSERT INTO autoshard_rank_queue \
             (board, queue, seq, player, score, data, enqueued_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        for queue in queue_shards(items) {
            let mine = || items.iter().filter(|i| i.queue == queue);
            let n = mine().count() as i64;
            let first: i64 = head.query_row(params![board, queue, n], |r| r.get(0))?;
            for (seq, item) in (first..).zip(mine()) {
                insert.execute(params![
                    board,
                    queue,
                    seq,
                    item.player,
                    item.score,
                    item.data,
                    now
                ])?;
            }
        }
        Ok(())
    })?;
    Ok(())
}

/// Closes the queues of deleted boards `ids` and deletes their rows, in one
/// transaction of the queue's file: an append either committed before (its
/// rows go here) or finds the board closed.
pub(super) fn close(db: &Sqlite, ids: &[i64]) -> Result<()> {
    db.queue_db()?.write(|tx| {
        tx.execute_batch(QUEUE_SCHEMA)?;
        tx.execute_batch(CLOSED_SCHEMA)?;
        let mut close =
            tx.prepare_cached("INSERT OR IGNORE INTO autoshard_rank_queue_closed VALUES (?1)")?;
        for &id in ids {
            close.execute([id])?;
            for table in ["autoshard_rank_queue", "autoshard_rank_queue_heads"] {
                tx.execute(&format!("DELETE FROM {table} WHERE board = ?1"), [id])?;
            }
        }
        Ok(())
    })?;
    Ok(())
}

/// The board's applied-through marks, by queue shard (from the board's
/// file; read before the queue's, see `BoardStore::queued`).
fn applied_marks(db: &Sqlite, board: i64) -> Result<HashMap<u32, i64>> {
    db.read(|tx| {
        let mut stmt =
            tx.prepare_cached("SELECT queue, seq FROM autoshard_rank_applied WHERE board = ?1")?;
        let rows = stmt.query_map([board], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    })
}

pub(super) fn queued(db: &Sqlite, board: i64) -> Result<u64> {
    let applied = applied_marks(db, board)?;
    // Every row of each shard, also one written past its head behind the
    // library's back.
    let all: Vec<(u32, i64)> = marks(db, board)?
        .into_iter()
        .map(|(queue, _)| (queue, i64::MAX))
        .collect();
    below(db, board, &all, &applied, true)
}

/// `(queue shard, next sequence number)`: every update committed so far is
/// below its shard's mark.
pub(super) fn marks(db: &Sqlite, board: i64) -> Result<Vec<(u32, i64)>> {
    db.queue_db()?.read(|tx| {
        let mut stmt = tx.prepare_cached(
            "SELECT queue, next FROM autoshard_rank_queue_heads WHERE board = ?1",
        )?;
        let rows = stmt.query_map([board], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    })
}

/// Updates below the marks and above the applied-through marks that are
/// still queued; with `count` false, only whether there is any.
pub(super) fn unapplied_below(
    db: &Sqlite,
    board: i64,
    marks: &[(u32, i64)],
    count: bool,
) -> Result<u64> {
    let applied = applied_marks(db, board)?;
    below(db, board, marks, &applied, count)
}

/// One index seek per shard (`count` false), or one range count.
fn below(
    db: &Sqlite,
    board: i64,
    marks: &[(u32, i64)],
    applied: &HashMap<u32, i64>,
    count: bool,
) -> Result<u64> {
    db.queue_db()?.read(|tx| {
        let sql = if count {
            "SELECT count(*) FROM autoshard_rank_queue \
             WHERE board = ?1 AND queue = ?2 AND seq > ?3 AND seq < ?4"
        } else {
            "SELECT EXISTS (SELECT 1 FROM autoshard_rank_queue \
             WHERE board = ?1 AND queue = ?2 AND seq > ?3 AND seq < ?4)"
        };
        let mut stmt = tx.prepare_cached(sql)?;
        let mut total = 0;
        for &(queue, mark) in marks {
            let after = applied.get(&queue).copied().unwrap_or(NOTHING_APPLIED);
            let n: i64 = stmt.query_row(params![board, queue, after, mark], |r| r.get(0))?;
            total += n as u64;
            if n > 0 && !count {
                break;
            }
        }
        Ok(total)
    })
}

/// Queue shard `queue`'s applied-through mark, in the board transaction.
pub(super) fn applied(tx: &Transaction<'_>, board: i64, queue: u32) -> Result<i64> {
    let seq = tx
        .prepare_cached("SELECT seq FROM autoshard_rank_applied WHERE board = ?1 AND queue = ?2")?
        .query_row(params![board, queue], |r| r.get(0))
        .optional()?;
    Ok(seq.unwrap_or(NOTHING_APPLIED))
}

/// Moves board `board`'s write generation (`autoshard_rank_generations`,
/// in the board's file: `Sqlite::ensure_generations`); the value before.
pub(super) fn bump_generation(tx: &Transaction<'_>, board: i64) -> Result<u64> {
    let after: i64 = tx
        .prepare_cached(
            "INSERT INTO autoshard_rank_generations (board, generation) VALUES (?1, 1) \
             ON CONFLICT (board) DO UPDATE SET generation = generation + 1 \
             RETURNING generation",
        )?
        .query_row([board], |r| r.get(0))?;
    Ok(after as u64 - 1)
}

pub(super) fn set_applied(tx: &Transaction<'_>, board: i64, queue: u32, seq: i64) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO autoshard_rank_applied (board, queue, seq) VALUES (?1, ?2, ?3) \
         ON CONFLICT (board, queue) DO UPDATE SET seq = excluded.seq",
    )?
    .execute(params![board, queue, seq])?;
    Ok(())
}

/// Appends up to `limit` of shard `queue`'s oldest rows to `out`, a row
/// that is not an update (a player that is not UTF-8 text, a score that is
/// not an integer: damage, or a hand edit) marked unreadable.
pub(super) fn take(
    db: &Sqlite,
    board: i64,
    (queue, after): (u32, i64),
    limit: usize,
    out: &mut Vec<QueuedRow>,
) -> Result<()> {
    let start = out.len();
    db.queue_db()?.read(|tx| {
        // A read retried after `BUSY` starts over.
        out.truncate(start);
        take_in(tx, board, (queue, after), limit, out)
    })
}

fn take_in(
    tx: &Transaction<'_>,
    board: i64,
    (queue, after): (u32, i64),
    limit: usize,
    out: &mut Vec<QueuedRow>,
) -> Result<()> {
    let mut select = tx.prepare_cached(
        "SELECT seq, player, score, data FROM autoshard_rank_queue \
         WHERE board = ?1 AND queue = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4",
    )?;
    let mut rows = select.query(params![board, queue, after, limit as i64])?;
    while let Some(row) = rows.next()? {
        let mut unreadable = Vec::new();
        let player = match row.get_ref(1)? {
            ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
                Ok(player) => player.to_owned(),
                Err(_) => {
                    unreadable.push("the player is not valid UTF-8".to_owned());
                    String::from_utf8_lossy(bytes).into_owned()
                }
            },
            other => {
                unreadable.push(format!("the player is {:?}, not text", other.data_type()));
                String::new()
            }
        };
        let score = match row.get_ref(2)? {
            ValueRef::Integer(score) => Some(score),
            ValueRef::Null => None,
            other => {
                unreadable.push(format!(
                    "the score is {:?}, not an integer",
                    other.data_type()
                ));
                None
            }
        };
        let data = match row.get_ref(3)? {
            ValueRef::Blob(bytes) => Some(bytes.to_vec()),
            ValueRef::Null => None,
            other => {
                unreadable.push(format!(
                    "the entry data is {:?}, not a blob",
                    other.data_type()
                ));
                None
            }
        };
        out.push(QueuedRow {
            seq: row.get(0)?,
            player,
            score,
            data,
            unreadable: (!unreadable.is_empty()).then(|| unreadable.join("; ")),
        });
    }
    Ok(())
}

/// One transaction on the queue's file deleting each shard's updates up to
/// its sequence number in `through`.
pub(super) fn delete(db: &Sqlite, board: i64, through: &[(u32, i64)]) -> Result<()> {
    db.queue_db()?.write(|tx| {
        let mut delete = tx.prepare_cached(
            "DELETE FROM autoshard_rank_queue WHERE board = ?1 AND queue = ?2 AND seq <= ?3",
        )?;
        for &(queue, seq) in through {
            delete.execute(params![board, queue, seq])?;
        }
        Ok(())
    })?;
    Ok(())
}

/// Stores a row a worker cannot apply in the board's dead letters.
pub(super) fn dead_letter(
    tx: &Transaction<'_>,
    board: i64,
    queue: u32,
    seq: i64,
    player: &str,
    score: Option<i64>,
    reason: &str,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO autoshard_rank_dead_letters (board, queue, seq, player, score, reason) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![board, queue, seq, player, score, reason])?;
    Ok(())
}

pub(super) fn dead_letters(db: &Sqlite, board: i64) -> Result<Vec<DeadLetter>> {
    db.read(|tx| {
        let mut stmt = tx.prepare_cached(
            "SELECT id, queue, seq, player, score, reason FROM autoshard_rank_dead_letters \
             WHERE board = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([board], |r| {
            Ok(DeadLetter {
                id: r.get(0)?,
                queue: r.get(1)?,
                seq: r.get(2)?,
                player: r.get(3)?,
                score: r.get(4)?,
                reason: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    })
}

pub(super) fn dead_letter_count(db: &Sqlite, board: i64) -> Result<u64> {
    db.read(|tx| {
        let n: i64 = tx
            .prepare_cached("SELECT count(*) FROM autoshard_rank_dead_letters WHERE board = ?1")?
            .query_row([board], |r| r.get(0))?;
        Ok(n as u64)
    })
}

/// The age of the oldest row above the applied-through marks (read from
/// the board's file before the queue's, as `queued` reads them).
pub(super) fn oldest_age(db: &Sqlite, board: i64) -> Result<Option<Duration>> {
    let applied = applied_marks(db, board)?;
    let heads = marks(db, board)?;
    let oldest = db.queue_db()?.read(|tx| {
        let mut first = tx.prepare_cached(
            "SELECT enqueued_ms FROM autoshard_rank_queue WHERE board = ?1 AND queue = ?2 \
             AND seq > ?3 AND enqueued_ms IS NOT NULL ORDER BY seq LIMIT 1",
        )?;
        let mut oldest: Option<i64> = None;
        for &(queue, _) in &heads {
            let mark = applied.get(&queue).copied().unwrap_or(NOTHING_APPLIED);
            let at: Option<Option<i64>> = first
                .query_row(params![board, queue, mark], |r| r.get(0))
                .optional()?;
            if let Some(Some(at)) = at {
                oldest = Some(oldest.map_or(at, |o| o.min(at)));
            }
        }
        Ok(oldest)
    })?;
    Ok(oldest.map(|at| Duration::from_millis(u64::try_from(unix_ms() - at).unwrap_or(0))))
}

/// Milliseconds since the Unix epoch, by this machine's clock (SQLite's
/// clock: the database is a file here).
fn unix_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_millis() as i64)
}

pub(super) fn delete_dead_letter(db: &Sqlite, board: i64, id: i64) -> Result<bool> {
    let (deleted, _) = db.write(|tx| {
        let n = tx
            .prepare_cached("DELETE FROM autoshard_rank_dead_letters WHERE board = ?1 AND id = ?2")?
            .execute(params![board, id])?;
        Ok(n > 0)
    })?;
    Ok(deleted)
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;

//! The queue's tables and statements on SQLite.
//!
//! Every write (a group commit, a worker batch) is one `BEGIN IMMEDIATE`
//! transaction, and SQLite has one writer per file: workers, in any
//! process, take turns, and each reads the queue after the previous batch's
//! delete committed, so no two apply the same rows.

use super::Sqlite;
use crate::error::Result;
use crate::seam::{queue_shards, DeadLetter, QueuedRow, QueuedUpdate};
use rusqlite::types::ValueRef;
use rusqlite::{params, Transaction};
use std::path::PathBuf;

/// `autoshard_rank_queue` holds the updates; `autoshard_rank_queue_heads`
/// the next sequence number of each queue shard, so numbers are never reused
/// when a shard runs empty (a `flush` compares them with a mark taken
/// earlier); `autoshard_rank_dead_letters` the rows a worker could not
/// apply, moved aside.
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

/// Creates the queue tables if needed; the key handles of one file share
/// their queue state by (`None` for an in-memory database, which has no
/// name to share by).
pub(super) fn prepare(db: &Sqlite) -> Result<Option<String>> {
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
pub(super) fn append(db: &Sqlite, board: i64, items: &[QueuedUpdate]) -> Result<()> {
    let shards = queue_shards(items);
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
            let first: i64 = head.query_row(params![board, queue, n], |r| r.get(0))?;
            for (seq, item) in (first..).zip(mine()) {
                insert.execute(params![board, queue, seq, item.player, item.score])?;
            }
        }
        Ok(())
    })?;
    Ok(())
}

pub(super) fn queued(db: &Sqlite, board: i64) -> Result<u64> {
    db.read(|tx| {
        let n: i64 = tx
            .prepare_cached("SELECT count(*) FROM autoshard_rank_queue WHERE board = ?1")?
            .query_row([board], |r| r.get(0))?;
        Ok(n as u64)
    })
}

/// `(queue shard, next sequence number)`: every update committed so far is
/// below its shard's mark.
pub(super) fn marks(db: &Sqlite, board: i64) -> Result<Vec<(u32, i64)>> {
    db.read(|tx| {
        let mut stmt = tx.prepare_cached(
            "SELECT queue, next FROM autoshard_rank_queue_heads WHERE board = ?1",
        )?;
        let rows = stmt.query_map([board], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    })
}

/// Updates below the marks that are still queued; with `count` false, only
/// whether there is any (one index seek per shard).
pub(super) fn below(db: &Sqlite, board: i64, marks: &[(u32, i64)], count: bool) -> Result<u64> {
    db.read(|tx| below_in(tx, board, marks, count))
}

fn below_in(tx: &Transaction<'_>, board: i64, marks: &[(u32, i64)], count: bool) -> Result<u64> {
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

/// Appends up to `limit` of shard `queue`'s oldest rows to `out`, a row
/// that is not an update (a player that is not UTF-8 text, a score that is
/// not an integer: damage, or a hand edit) marked unreadable.
pub(super) fn take(
    tx: &Transaction<'_>,
    board: i64,
    queue: u32,
    limit: usize,
    out: &mut Vec<QueuedRow>,
) -> Result<()> {
    let mut select = tx.prepare_cached(
        "SELECT seq, player, score FROM autoshard_rank_queue \
         WHERE board = ?1 AND queue = ?2 ORDER BY seq LIMIT ?3",
    )?;
    let mut rows = select.query(params![board, queue, limit as i64])?;
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
        out.push(QueuedRow {
            seq: row.get(0)?,
            player,
            score,
            unreadable: (!unreadable.is_empty()).then(|| unreadable.join("; ")),
        });
    }
    Ok(())
}

/// Deletes shard `queue`'s updates up to sequence `through`; how many.
pub(super) fn delete(tx: &Transaction<'_>, board: i64, queue: u32, through: i64) -> Result<u64> {
    let deleted = tx
        .prepare_cached(
            "DELETE FROM autoshard_rank_queue WHERE board = ?1 AND queue = ?2 AND seq <= ?3",
        )?
        .execute(params![board, queue, through])?;
    Ok(deleted as u64)
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
mod tests {
    use crate::error::{Error, Result};
    use crate::ranking::{Ranking, RankingConfig};
    use crate::Sqlite;
    use std::sync::Barrier;
    use std::time::Duration;

    /// Group commit: 8 threads enqueueing at once need fewer transactions
    /// than enqueues. One transaction per call (the bug this guards
    /// against) makes `commits == enqueues` and fails the assertion.
    #[test]
    fn concurrent_enqueues_share_commits() {
        let dir = tempfile::tempdir().unwrap();
        let db = Sqlite::open(dir.path().join("q.db")).unwrap();
        let board = Ranking::create(&db, "b", RankingConfig::new(0..1_000).queues(3)).unwrap();
        let (threads, each) = (8, 100);
        let start = Barrier::new(threads);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (board, start) = (&board, &start);
                s.spawn(move || {
                    start.wait();
                    for n in 0..each {
                        board.enqueue(&format!("p{t}-{n}"), n as i64).unwrap();
                    }
                });
            }
        });
        let enqueues = (threads * each) as u64;
        let commits = board.group_commits().unwrap();
        assert_eq!(board.queued().unwrap(), enqueues);
        assert!(
            commits < enqueues * 3 / 4,
            "{commits} commits for {enqueues} enqueues"
        );
        // Sequence numbers are dense per shard and never reused.
        let stats = board.worker().drain().unwrap();
        assert_eq!(stats.updates, enqueues);
        board.enqueue("late", 1).unwrap();
        let seqs: Vec<i64> = db
            .read(|tx| {
                let mut s = tx.prepare("SELECT seq FROM autoshard_rank_queue")?;
                let rows = s.query_map([], |r| r.get(0))?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .unwrap();
        assert_eq!(seqs.len(), 1);
        assert!(seqs[0] > 0, "a drained shard restarted its sequence");
    }

    /// Another connection holds the write lock, so group commits fail with
    /// `Busy`: every caller gets the error, the leader's followers included,
    /// and nothing is queued.
    #[test]
    fn a_failed_group_commit_fails_every_caller_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let db = Sqlite::builder(&path)
            .busy_timeout(Duration::from_millis(200))
            .max_attempts(1)
            .open()
            .unwrap();
        let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
        // Creates the queue tables before the blocker takes the lock.
        assert_eq!(board.group_commits().unwrap(), 0);
        let blocker = rusqlite::Connection::open(&path).unwrap();
        blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let threads = 8;
        let start = Barrier::new(threads);
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let calls: Vec<_> = (0..threads)
                .map(|t| {
                    let (board, start) = (&board, &start);
                    s.spawn(move || {
                        start.wait();
                        board.enqueue(&format!("p{t}"), 1)
                    })
                })
                .collect();
            calls.into_iter().map(|c| c.join().unwrap()).collect()
        });
        for result in &results {
            assert!(
                matches!(result, Err(Error::Busy { attempts: 1 })),
                "{result:?}"
            );
        }
        let commits = board.group_commits().unwrap();
        assert!(
            commits < threads as u64,
            "no batch had followers: {commits}"
        );
        blocker.execute_batch("ROLLBACK").unwrap();
        assert_eq!(board.queued().unwrap(), 0);
        board.enqueue("after", 2).unwrap();
        assert_eq!(board.queued().unwrap(), 1);
    }

    #[test]
    fn a_handle_of_the_same_file_shares_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let db = Sqlite::open(&path).unwrap();
        let board = Ranking::create(&db, "b", RankingConfig::new(0..10)).unwrap();
        let other = Ranking::open(&Sqlite::open(&path).unwrap(), "b").unwrap();
        let memory = Sqlite::memory().unwrap();
        let in_memory = Ranking::create(&memory, "b", RankingConfig::new(0..10)).unwrap();
        assert!(board.shares_queue_with(&other).unwrap());
        assert!(!board.shares_queue_with(&in_memory).unwrap());
    }
}

//! The SQLite queue's tests: group commit, the queue's own file, the move
//! of a queue an earlier version kept in the board's file.

use super::QUEUE_SCHEMA;
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
        .queue_db()
        .unwrap()
        .read(|tx| {
            let mut s = tx.prepare("SELECT seq FROM autoshard_rank_queue")?;
            let rows = s.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .unwrap();
    assert_eq!(seqs.len(), 1);
    assert!(seqs[0] > 0, "a drained shard restarted its sequence");
}

/// A board on a handle that gives up on a lock after 200 ms, at once.
fn impatient_board() -> (tempfile::TempDir, std::path::PathBuf, Sqlite, Ranking) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let db = Sqlite::builder(&path)
        .busy_timeout(Duration::from_millis(200))
        .max_attempts(1)
        .open()
        .unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
    (dir, path, db, board)
}

/// Another connection holds the queue file's write lock, so group
/// commits fail with `Busy`: every caller gets the error, the leader's
/// followers included, and nothing is queued.
#[test]
fn a_failed_group_commit_fails_every_caller_in_it() {
    let (dir, _path, _db, board) = impatient_board();
    // Creates the queue tables before the blocker takes the lock.
    assert_eq!(board.group_commits().unwrap(), 0);
    let blocker = rusqlite::Connection::open(dir.path().join("q.db-queue")).unwrap();
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

/// Issue 13, item 1: a board transaction (here another connection
/// holding the board file's write lock, as a worker's apply does) does
/// not hold up an enqueue, which writes the queue's own file. The
/// control shows the blocker holds the lock a direct write needs, the
/// one every enqueue queued behind when the queue was in the board's
/// file (that layout fails this test with `Busy`).
#[test]
fn an_enqueue_does_not_wait_for_a_board_transaction() {
    let (_dir, path, _db, board) = impatient_board();
    board.queued().unwrap();
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    for n in 0..20 {
        board.enqueue(&format!("p{n}"), n).unwrap();
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(board.queued().unwrap(), 20);
    let direct = board.set_score("direct", 1);
    assert!(
        matches!(direct, Err(Error::Busy { .. })),
        "control: {direct:?}"
    );
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(board.worker().drain().unwrap().updates, 20);
    assert_eq!(board.queued().unwrap(), 0);
}

/// A queue an earlier version kept in the board's file (its tables and
/// rows made here by hand, as that version made them) moves to the
/// queue's file on first use, sequence numbers and heads included, and
/// its updates are applied once. Without the move they would sit in the
/// board's file, never applied: `queued` would say 0 and the scores
/// would stay unset.
#[test]
fn a_queue_kept_in_the_board_file_moves_to_the_queue_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let db = Sqlite::open(&path).unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
    db.write(|tx| {
        tx.execute_batch(QUEUE_SCHEMA)?;
        tx.execute_batch(
            "INSERT INTO autoshard_rank_queue (board, queue, seq, player, score) VALUES (1, 0, 7, 'a', 5), (1, 0, 8, 'b', NULL), \
             (1, 0, 9, 'a', 6); \
             INSERT INTO autoshard_rank_queue_heads VALUES (1, 0, 10);",
        )?;
        Ok(())
    })
    .unwrap();
    let other = Ranking::open(&Sqlite::open(&path).unwrap(), "b").unwrap();
    assert_eq!(other.queued().unwrap(), 3);
    assert_eq!(board.queued().unwrap(), 3, "a second move changes nothing");
    board.enqueue("c", 1).unwrap();
    assert_eq!(board.worker().drain().unwrap().updates, 4);
    assert_eq!(board.score("a").unwrap(), Some(6));
    assert_eq!(board.score("c").unwrap(), Some(1));
    let legacy: i64 = db
        .read(|tx| {
            let n = tx.query_row(
                "SELECT count(*) FROM sqlite_master WHERE name LIKE 'autoshard_rank_queue%'",
                [],
                |r| r.get(0),
            )?;
            Ok(n)
        })
        .unwrap();
    assert_eq!(legacy, 0);
    let seqs: Vec<i64> = db
        .queue_db()
        .unwrap()
        .read(|tx| {
            let mut s = tx.prepare("SELECT next FROM autoshard_rank_queue_heads")?;
            let rows = s.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .unwrap();
    assert_eq!(seqs, [11], "the head continues after the moved rows");
}

/// A queue file made before rows carried their enqueue time gets the
/// column on first use: its old row has no time (no age: the control
/// that the age is the stamp's, not a guess), the next enqueue's has.
#[test]
fn a_queue_made_before_the_enqueue_time_gets_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let db = Sqlite::open(&path).unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
    db.queue_db()
        .unwrap()
        .write(|tx| {
            tx.execute_batch(
                "CREATE TABLE autoshard_rank_queue (board INTEGER NOT NULL, \
                 queue INTEGER NOT NULL, seq INTEGER NOT NULL, player TEXT NOT NULL, \
                 score INTEGER, PRIMARY KEY (board, queue, seq)) STRICT, WITHOUT ROWID; \
                 CREATE TABLE autoshard_rank_queue_heads (board INTEGER NOT NULL, \
                 queue INTEGER NOT NULL, next INTEGER NOT NULL, \
                 PRIMARY KEY (board, queue)) STRICT, WITHOUT ROWID; \
                 INSERT INTO autoshard_rank_queue VALUES (1, 0, 0, 'old', 5); \
                 INSERT INTO autoshard_rank_queue_heads VALUES (1, 0, 1);",
            )?;
            Ok(())
        })
        .unwrap();
    assert_eq!(board.queued().unwrap(), 1);
    assert_eq!(board.oldest_queued_age().unwrap(), None);
    board.enqueue("new", 6).unwrap();
    let age = board.oldest_queued_age().unwrap();
    assert!(age.is_some_and(|a| a < Duration::from_secs(60)), "{age:?}");
    assert_eq!(board.worker().drain().unwrap().updates, 2);
    assert_eq!(board.oldest_queued_age().unwrap(), None);
    assert_eq!(board.score("old").unwrap(), Some(5));
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

//! Input, flush and the worker's life cycle on SQLite: rows the board
//! refuses or cannot read, a queue out of order, an in-memory board, and
//! `Duration::MAX` options.

use super::oracle::{read_scores, Scores};
use crate::common;
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::{Error, Sqlite};
use std::thread;
use std::time::Duration;

/// A queued update the board refuses (written behind the library's back)
/// is corruption: with dead letters turned off, it stops the worker with
/// `Error::Corrupt` naming the row (before issue 12's item 12 it was
/// `ScoreOutOfRange`, which this test showed, as if the caller had passed a
/// bad score); nothing of its batch is applied and the update stays queued.
/// With them on (the default, `stores_ranking_queue/several_workers.rs`) it
/// is set aside.
#[test]
fn without_dead_letters_a_worker_stops_at_an_update_it_cannot_apply() {
    let db = common::db();
    let board = Ranking::create(&db.store, "b", RankingConfig::new(0..100)).unwrap();
    board.enqueue("good", 5).unwrap();
    let raw = common::raw(&common::queue_file(&db.path));
    raw.execute(
        "INSERT INTO autoshard_rank_queue (board, queue, seq, player, score) \
         SELECT board, queue, seq + 1, 'bad', 1000 FROM autoshard_rank_queue",
        [],
    )
    .unwrap();
    let worker = board.worker().dead_letter(false).spawn().unwrap();
    let err = worker.join().unwrap_err();
    match &err {
        Error::Corrupt { field, reason, .. } => {
            assert_eq!(field, "queued update (queue 0, seq 1)", "{err}");
            assert!(reason.contains("score 1000 is outside"), "{err}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(board.queued().unwrap(), 2);
    assert_eq!(
        board.len().unwrap(),
        0,
        "part of a failed batch was applied"
    );
    assert!(board.dead_letters().unwrap().is_empty());
    // The default worker sets it aside and applies the rest.
    let stats = board.worker().drain().unwrap();
    assert_eq!((stats.updates, stats.dead_letters), (1, 1));
    assert_eq!(board.score("good").unwrap(), Some(5));
}

/// A queued row the store cannot read as an update (here a player that is
/// not UTF-8, as damage to the file could leave) is set aside too, with
/// what could be read of it. Before the fix the worker stopped with
/// `Error::Sqlite` (a UTF-8 conversion failure) and the shard stayed
/// blocked.
#[test]
fn an_unreadable_queued_row_is_set_aside() {
    let db = common::db();
    let board = Ranking::create(&db.store, "b", RankingConfig::new(0..100)).unwrap();
    board.enqueue("before", 1).unwrap();
    board.enqueue("bytes", 2).unwrap();
    board.enqueue("after", 3).unwrap();
    let raw = common::raw(&common::queue_file(&db.path));
    let edited = raw
        .execute(
            "UPDATE autoshard_rank_queue SET player = CAST(x'62ff79' AS TEXT) \
             WHERE player = 'bytes'",
            [],
        )
        .unwrap();
    assert_eq!(edited, 1);
    let stats = board.worker().drain().unwrap();
    assert_eq!((stats.updates, stats.dead_letters), (2, 1));
    assert_eq!(board.len().unwrap(), 2);
    let letters = board.dead_letters().unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!((letter.queue, letter.seq), (0, 1));
    assert_eq!(
        (letter.player.as_str(), letter.score),
        ("b\u{fffd}y", Some(2))
    );
    assert!(letter.reason.contains("not valid UTF-8"), "{letter:?}");
    board.check_integrity().unwrap();
}

/// A queue whose index is out of order (damage; here its declared order is
/// reversed behind SQLite's back, which reads it as "row not in PRIMARY KEY
/// order") hands the worker rows out of sequence order. Before the fix the
/// worker applied the same rows again forever (`drain` never returned: this
/// test timed out; that worker deleted what it took, and the delete missed
/// rows); now the worker checks the order and stops with `Error::Corrupt`
/// (the applied-through marks would also stop the loop, but skip rows).
#[test]
fn a_queue_out_of_order_stops_the_worker_instead_of_looping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    {
        let store = Sqlite::open(&path).unwrap();
        let board = Ranking::create(&store, "b", RankingConfig::new(0..100)).unwrap();
        for n in 0..10 {
            board.enqueue(&format!("p{n}"), n).unwrap();
        }
    }
    let raw = common::raw(&common::queue_file(&path));
    raw.execute_batch(
        "PRAGMA writable_schema = ON; \
         UPDATE sqlite_master SET sql = replace(sql, 'seq)', 'seq DESC)') \
         WHERE name = 'autoshard_rank_queue'; \
         PRAGMA writable_schema = OFF;",
    )
    .unwrap();
    drop(raw);
    let store = Sqlite::open(&path).unwrap();
    let board = Ranking::open(&store, "b").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let drainer = board.clone();
    thread::spawn(move || tx.send(drainer.worker().batch_size(4).drain()));
    let outcome = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the worker loops on rows it cannot delete");
    match outcome {
        Err(Error::Corrupt { reason, .. }) => assert!(reason.contains("out of order"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_in_memory_board_queues_too() {
    let db = Sqlite::memory().unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(-50..50).queues(2)).unwrap();
    board.set_score("direct", -50).unwrap();
    for n in 0..100 {
        board.enqueue(&format!("p{}", n % 10), n - 50).unwrap();
    }
    board.enqueue_remove("p0").unwrap();
    let stats = board.worker().batch_size(7).drain().unwrap();
    assert_eq!(stats.updates, 101);
    let mut expected: Scores = (1..10).map(|i| (format!("p{i}"), 40 + i)).collect();
    expected.insert("direct".into(), -50);
    let players = expected.keys().cloned().chain(["p0".into()]).collect();
    board.check_integrity().unwrap();
    assert_eq!(read_scores(&board, &players), expected);
}

/// `Duration::MAX` means "no limit" for every duration option: the worker
/// waits for a wake-up instead of a deadline, and `flush_within` waits
/// until the queue is applied. Before the fix the worker thread panicked
/// ("overflow when adding duration to instant") at its first idle wait, so
/// the flush timed out and `stop` re-raised the panic (issue 12, item 9).
#[test]
fn duration_max_options_mean_no_limit() {
    let db = Sqlite::memory().unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
    let worker = board
        .worker()
        .idle_timeout(Duration::MAX)
        .linger(Duration::MAX)
        .spawn()
        .unwrap();
    for round in 0..3 {
        for n in 0..10 {
            board.enqueue(&format!("p{n}"), round * 10 + n).unwrap();
        }
        board.flush_within(Duration::from_secs(20)).unwrap();
    }
    board.enqueue("last", 99).unwrap();
    board.flush_within(Duration::MAX).unwrap();
    assert_eq!(board.score("last").unwrap(), Some(99));
    let stats = worker.stop().unwrap();
    assert_eq!(stats.updates, 31);
}

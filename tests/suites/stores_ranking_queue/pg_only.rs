//! The queue's PostgreSQL-only checks: an enqueue does not wait for a
//! board transaction, concurrent enqueues share transactions, and a worker
//! without dead letters stops at an update it cannot apply.

use crate::stores::{self, TestStore};
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::Error;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

/// Issue 13, item 1, on PostgreSQL: a transaction holding every board
/// table (as no apply does, but any apply needs some of them) does not
/// hold up an enqueue, which writes only the queue's tables. The
/// control: a direct write waits for it meanwhile.
#[test]
fn pg_an_enqueue_does_not_wait_for_a_board_transaction() {
    let store = <autoshard::Postgres as TestStore>::fresh();
    let board = Ranking::create(&*store, "w", RankingConfig::new(0..100)).unwrap();
    board.queued().unwrap(); // creates the queue's tables
    let mut client = stores::pg::client();
    let mut tx = client.transaction().unwrap();
    let schema = store.schema();
    tx.batch_execute(&format!(
        "LOCK TABLE \"{schema}\".autoshard_rank_nodes, \"{schema}\".autoshard_rank_players, \
         \"{schema}\".autoshard_rank_arrivals, \"{schema}\".autoshard_rank_applied \
         IN ACCESS EXCLUSIVE MODE"
    ))
    .unwrap();
    thread::scope(|s| {
        let direct = s.spawn(|| board.set_score("direct", 1));
        let started = Instant::now();
        for n in 0..20 {
            board.enqueue(&format!("p{n}"), n).unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        thread::sleep(Duration::from_millis(200));
        assert!(
            !direct.is_finished(),
            "control: the direct write did not wait"
        );
        tx.commit().unwrap();
        direct.join().unwrap().unwrap();
    });
    assert_eq!(board.worker().drain().unwrap().updates, 20);
    assert_eq!(board.queued().unwrap(), 0);
}

/// Group commit on PostgreSQL: 8 threads enqueueing at once need fewer
/// transactions than enqueues. A row's `xmin` is the transaction that
/// inserted it; one transaction per call (the bug this guards against)
/// gives every row its own.
#[test]
fn pg_concurrent_enqueues_share_transactions() {
    let store = <autoshard::Postgres as TestStore>::fresh();
    let board = Ranking::create(&*store, "g", RankingConfig::new(0..1_000).queues(3)).unwrap();
    let (threads, each) = (8, 50);
    let start = Barrier::new(threads);
    thread::scope(|s| {
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
    let enqueues = (threads * each) as i64;
    assert_eq!(board.queued().unwrap(), enqueues as u64);
    let transactions: i64 = stores::pg::client()
        .query_one(
            &format!(
                "SELECT count(DISTINCT xmin::text) FROM \"{}\".autoshard_rank_queue",
                store.schema()
            ),
            &[],
        )
        .unwrap()
        .get(0);
    eprintln!("{enqueues} enqueues in {transactions} transactions");
    assert!(
        transactions < enqueues * 3 / 4,
        "{transactions} transactions for {enqueues} enqueues"
    );
    assert_eq!(board.worker().drain().unwrap().updates, enqueues as u64);
}

/// With dead letters off, a queued update the board refuses (written
/// behind the library's back) stops the worker with `Error::Corrupt`
/// (before issue 12's item 12: `ScoreOutOfRange`); nothing of its batch
/// is applied and both rows stay queued. The default worker sets it
/// aside (`a_queued_row_the_board_refuses_is_set_aside_and_the_rest_drains`).
#[test]
fn pg_without_dead_letters_a_worker_stops_at_an_update_it_cannot_apply() {
    let store = <autoshard::Postgres as TestStore>::fresh();
    let board = Ranking::create(&*store, "b", RankingConfig::new(0..100)).unwrap();
    board.enqueue("good", 5).unwrap();
    stores::pg::client()
        .execute(
            &format!(
                "INSERT INTO \"{0}\".autoshard_rank_queue (board, queue, seq, player, score) \
                 SELECT board, queue, seq + 1, 'bad', 1000 FROM \"{0}\".autoshard_rank_queue",
                store.schema()
            ),
            &[],
        )
        .unwrap();
    let worker = board.worker().dead_letter(false).spawn().unwrap();
    let err = worker.join().unwrap_err();
    assert!(
        matches!(&err, Error::Corrupt { reason, .. } if reason.contains("score 1000")),
        "{err:?}"
    );
    assert_eq!(board.queued().unwrap(), 2);
    assert_eq!(
        board.len().unwrap(),
        0,
        "part of a failed batch was applied"
    );
}

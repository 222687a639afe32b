//! Input, flush and the worker's life cycle: bad input refused before
//! anything is queued, `flush` with and without a worker, and worker
//! handles that stop on drop and are woken by an enqueue.

use super::Boards;
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::Error;
use std::thread;
use std::time::{Duration, Instant};

every_store_tests!(
    bad_input_is_refused_before_anything_is_queued,
    flush_without_a_worker_times_out_and_keeps_the_updates,
    flush_does_not_wait_for_later_updates,
    worker_handles_stop_on_drop_and_report_what_they_did,
);

fn bad_input_is_refused_before_anything_is_queued<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100)).unwrap();
    let long = "x".repeat(257);
    for (player, score) in [("", 5), ("nul\0", 5), (long.as_str(), 5)] {
        let err = board.enqueue(player, score).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
        assert!(!err.is_retryable());
    }
    assert!(matches!(
        board.enqueue_remove("").unwrap_err(),
        Error::InvalidName { .. }
    ));
    for score in [-1, 100, i64::MIN, i64::MAX] {
        let err = board.enqueue("ok", score).unwrap_err();
        assert!(
            matches!(err, Error::ScoreOutOfRange { score: s, min: 0, max: 100 } if s == score),
            "{err:?}"
        );
    }
    assert_eq!(board.queued().unwrap(), 0);
    // The boundaries are accepted.
    board.enqueue("low", 0).unwrap();
    board.enqueue("high", 99).unwrap();
    assert_eq!(board.queued().unwrap(), 2);
}

/// Without a worker nothing drains, so `flush` gives up after its time
/// limit with a typed error that says how much is still queued, and loses
/// nothing; with a worker the same flush returns.
fn flush_without_a_worker_times_out_and_keeps_the_updates<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100)).unwrap();
    board.flush_within(Duration::ZERO).unwrap(); // nothing queued: nothing to wait for
    for (i, player) in ["a", "b", "c"].into_iter().enumerate() {
        board.enqueue(player, i as i64).unwrap();
    }
    let started = Instant::now();
    let err = board.flush_within(Duration::from_millis(200)).unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(200));
    match &err {
        Error::FlushTimeout { remaining, waited } => {
            assert_eq!(*remaining, 3);
            assert!(*waited >= Duration::from_millis(200));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("is a worker running?"), "{err}");
    assert_eq!(board.queued().unwrap(), 3);
    assert_eq!(board.len().unwrap(), 0);

    let worker = board.worker().spawn().unwrap();
    board.flush().unwrap();
    assert_eq!(board.score("c").unwrap(), Some(2));
    assert_eq!(board.len().unwrap(), 3);
    worker.stop().unwrap();
}

/// A flush waits only for what was enqueued before it: updates arriving
/// during the flush do not keep it waiting.
fn flush_does_not_wait_for_later_updates<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..1_000)).unwrap();
    board.enqueue("first", 1).unwrap();
    let worker = board.worker().batch_size(10).spawn().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                board
                    .enqueue(&format!("later-{}", n % 50), n % 1_000)
                    .unwrap();
                n += 1;
            }
        });
        board.flush_within(Duration::from_secs(30)).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(board.score("first").unwrap(), Some(1));
    worker.stop().unwrap();
}

fn worker_handles_stop_on_drop_and_report_what_they_did<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100).queues(3)).unwrap();
    drop(board.worker().spawn().unwrap()); // returns: the drop stopped it
    for n in 0..10 {
        board.enqueue(&format!("p{n}"), n).unwrap();
    }
    let worker = board.worker().exit_when_idle(true).spawn().unwrap();
    let stats = worker.join().unwrap();
    assert_eq!((stats.updates, stats.busy), (10, 0));
    assert_eq!(board.len().unwrap(), 10);
    // An idle worker is woken by an enqueue, not only by its timeout.
    let worker = board
        .worker()
        .idle_timeout(Duration::from_secs(3_600))
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(50));
    board.enqueue("woken", 7).unwrap();
    // No flush here: a flush wakes the worker too.
    let deadline = Instant::now() + Duration::from_secs(20);
    while board.score("woken").unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the enqueue did not wake the worker"
        );
        thread::sleep(Duration::from_millis(5));
    }
    assert!(!worker.is_finished());
    assert_eq!(worker.stop().unwrap().updates, 1);
}

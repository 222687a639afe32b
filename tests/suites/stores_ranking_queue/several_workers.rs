//! Several workers on one queue: every update applied once and in order,
//! sequence numbers that survive an empty queue, and a queued row the
//! board refuses set aside while the rest drains.

use super::oracle::{assert_board, Scores, RANGE};
use super::Boards;
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::Error;
use std::thread;
use std::time::Duration;

store_tests!(
    workers_on_four_handles_apply_every_update_once_in_order,
    sequence_numbers_survive_an_empty_queue,
    a_queued_row_the_board_refuses_is_set_aside_and_the_rest_drains,
);
// The dead-letter test edits rows with SQL: its Redis variant, which
// writes the bad entries into the streams by hand, is in `redis_ranking.rs`.
redis_cluster_tests!(
    workers_on_four_handles_apply_every_update_once_in_order,
    sequence_numbers_survive_an_empty_queue,
);

/// Four workers, each on its own store handle (its own connections, as in
/// another process), drain one queue at once. Each player's updates are
/// increasing scores, so a batch applied out of order or twice after a
/// newer one would leave an older score; the workers' counts add up to
/// exactly the updates queued.
fn workers_on_four_handles_apply_every_update_once_in_order<S: Boards>() {
    const PLAYERS: usize = 200;
    const EACH: i64 = 10;
    let store = S::fresh();
    let config = RankingConfig::new(RANGE)
        .branching(8)
        .node_shards(2)
        .queues(3);
    let board = Ranking::create(store.db(), "multi", config).unwrap();
    let mut expected = Scores::new();
    thread::scope(|s| {
        for t in 0..4 {
            let board = &board;
            s.spawn(move || {
                for n in 0..EACH {
                    for p in (t..PLAYERS).step_by(4) {
                        board
                            .enqueue(&format!("p{p}"), n * 100 + p as i64 % 100)
                            .unwrap();
                    }
                }
            });
        }
    });
    for p in 0..PLAYERS {
        expected.insert(format!("p{p}"), (EACH - 1) * 100 + p as i64 % 100);
    }
    let total = PLAYERS as u64 * EACH as u64;
    assert_eq!(board.queued().unwrap(), total);
    let counts: Vec<u64> = thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let store = &store;
                s.spawn(move || {
                    let db = store.open_another();
                    let board = Ranking::open(db.db(), "multi").unwrap();
                    board.worker().batch_size(16).drain().unwrap().updates
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    eprintln!("{}: updates per worker {counts:?}", S::NAME);
    assert_eq!(counts.iter().sum::<u64>(), total, "applied once each");
    assert_eq!(board.queued().unwrap(), 0);
    let players = expected.keys().cloned().collect();
    assert_board(&board, &expected, &players);
}

/// A flush compares the queue with sequence marks taken when it starts, so
/// a shard drained empty must not number its next update from the start
/// again (the flush would then wait for nothing, or forever).
fn sequence_numbers_survive_an_empty_queue<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100).queues(2)).unwrap();
    for n in 0..10 {
        board.enqueue(&format!("p{n}"), n).unwrap();
    }
    assert_eq!(board.worker().drain().unwrap().updates, 10);
    assert_eq!(board.queued().unwrap(), 0);
    board.enqueue("p1", 50).unwrap();
    board.enqueue("late", 60).unwrap();
    // Queued after the drain: a flush without a worker times out with
    // exactly these two behind its marks.
    match board.flush_within(Duration::from_millis(50)) {
        Err(Error::FlushTimeout { remaining: 2, .. }) => {}
        other => panic!("{other:?}"),
    }
    let worker = board.worker().spawn().unwrap();
    board.flush().unwrap();
    assert_eq!(board.score("p1").unwrap(), Some(50));
    assert_eq!(board.score("late").unwrap(), Some(60));
    assert_eq!(worker.stop().unwrap().updates, 2);
    board.check_integrity().unwrap();
}

/// Item 12 of issue 12: queued rows the board refuses (a score outside its
/// range, an empty player name), written behind the store's back as a hand
/// edit or damage would, used to stop every worker for good at the first
/// of them with `ScoreOutOfRange` or `InvalidName`, and that queue shard
/// stayed blocked. Before the fix this failed at the flush on every store:
/// `FlushTimeout { remaining: 26, .. }` (the worker had stopped with
/// `ScoreOutOfRange { score: 1000 }`). Now the worker moves them to the dead
/// letters, in the transaction that drains the rows around them, and the
/// rest drains, rows behind them in the same shard included.
fn a_queued_row_the_board_refuses_is_set_aside_and_the_rest_drains<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100).queues(2)).unwrap();
    let good: Vec<String> = (0..20).map(|i| format!("good-{i}")).collect();
    for (i, player) in good.iter().enumerate() {
        board.enqueue(player, i as i64).unwrap();
    }
    board.enqueue("bad-score", 5).unwrap();
    board.enqueue("bad-name", 6).unwrap();
    for (i, player) in good.iter().enumerate() {
        board.enqueue(player, 50 + i as i64).unwrap();
    }
    let edits = [
        "UPDATE autoshard_rank_queue SET score = 1000 WHERE player = 'bad-score'",
        "UPDATE autoshard_rank_queue SET player = '' WHERE player = 'bad-name'",
    ];
    for sql in edits {
        assert_eq!(store.execute_queue(sql), 1, "{sql}");
    }
    let worker = board.worker().batch_size(8).spawn().unwrap();
    board.flush_within(Duration::from_secs(30)).unwrap();
    let stats = worker.stop().unwrap();
    assert_eq!((stats.updates, stats.dead_letters), (40, 2), "{stats:?}");
    assert_eq!(board.queued().unwrap(), 0);
    for (i, player) in good.iter().enumerate() {
        assert_eq!(board.score(player).unwrap(), Some(50 + i as i64));
    }
    assert_eq!(board.len().unwrap(), 20);
    board.check_integrity().unwrap();

    let letters = board.dead_letters().unwrap();
    let found = |player: &str| {
        let letter = letters.iter().find(|l| l.player == player);
        letter.unwrap_or_else(|| panic!("{player:?} not in {letters:?}"))
    };
    let (score, name) = (found("bad-score"), found(""));
    assert_eq!(letters.len(), 2, "{letters:?}");
    assert_eq!(score.score, Some(1000));
    assert!(
        score.reason.contains("outside the board's range 0..100"),
        "{score:?}"
    );
    assert_eq!(name.score, Some(6));
    assert!(name.reason.contains("1 to 256 bytes"), "{name:?}");
    assert!(score.queue < 2 && name.queue < 2 && score.id != name.id);

    // Set right by hand: the corrected update queued, the letter deleted.
    board.enqueue("bad-score", 99).unwrap();
    assert!(board.delete_dead_letter(score.id).unwrap());
    assert!(!board.delete_dead_letter(score.id).unwrap());
    assert_eq!(board.worker().drain().unwrap().updates, 1);
    assert_eq!(board.score("bad-score").unwrap(), Some(99));
    assert_eq!(board.dead_letters().unwrap(), std::slice::from_ref(name));
    board.check_integrity().unwrap();
}

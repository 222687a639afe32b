//! Direct writers and queued writers at once, against the oracle.

use super::oracle::{apply, assert_board, write, Scores, RANGE};
use super::{seed, Boards};
use autoshard::ranking::{Ranking, RankingConfig};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeSet;
use std::sync::Barrier;
use std::thread;

every_store_tests!(direct_and_queued_writers_at_once_match_the_oracle);

/// 4 threads call `set_score`/`remove` while 4 threads `enqueue` and a
/// worker drains in small batches. Each thread owns its players, so its own
/// last write is the expected outcome; a shared set is written by both
/// paths during the run, then given final scores through the queue after
/// the direct writers stopped, so the queue's last write is the outcome.
fn direct_and_queued_writers_at_once_match_the_oracle<S: Boards>() {
    const THREADS: usize = 4;
    let own = S::OWN;
    const SHARED: usize = 80;
    const ROUNDS: usize = 4;
    let store = S::fresh();
    let config = RankingConfig::new(RANGE)
        .branching(10)
        .node_shards(4)
        .queues(4);
    let board = Ranking::create(store.db(), "mixed", config).unwrap();
    let worker = board.worker().batch_size(64).spawn().unwrap();
    let shared: Vec<String> = (0..SHARED).map(|i| format!("shared-{i}")).collect();
    let start = Barrier::new(2 * THREADS);
    let seed = seed();

    let outcomes: Vec<Scores> = thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..2 * THREADS {
            let (board, shared, start) = (&board, &shared, &start);
            handles.push(s.spawn(move || {
                let queued = t >= THREADS;
                let mut rng = SmallRng::seed_from_u64(seed ^ t as u64);
                let prefix = if queued { "queued" } else { "direct" };
                let mine: Vec<String> = (0..own).map(|i| format!("{prefix}-{t}-{i}")).collect();
                let mut last = Scores::new();
                start.wait();
                for round in 0..ROUNDS {
                    for player in &mine {
                        // Some players end removed, some are removed and
                        // come back: both paths must handle either.
                        let score = if rng.random_range(..10u8) == 0 && round > 0 {
                            None
                        } else {
                            Some(rng.random_range(RANGE))
                        };
                        write(board, queued, player, score);
                        apply(&mut last, player, score);
                        let other = &shared[rng.random_range(..SHARED)];
                        write(board, queued, other, Some(rng.random_range(RANGE)));
                    }
                }
                last
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    // The direct writers are done; the queue has the last word on the
    // shared players.
    let mut expected: Scores = outcomes.into_iter().flatten().collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    for (i, player) in shared.iter().enumerate() {
        let score = (i % 7 != 0).then(|| rng.random_range(RANGE));
        write(&board, true, player, score);
        apply(&mut expected, player, score);
    }
    board.flush().unwrap();
    assert_eq!(board.queued().unwrap(), 0);
    let stats = worker.stop().unwrap();
    let queued_writes = (THREADS * ROUNDS * own * 2 + SHARED) as u64;
    assert_eq!(
        stats.updates, queued_writes,
        "every queued write applied once"
    );
    assert!(stats.batches > 1, "{stats:?}");

    let mut players: BTreeSet<String> = shared.into_iter().collect();
    for t in 0..2 * THREADS {
        let prefix = if t >= THREADS { "queued" } else { "direct" };
        players.extend((0..own).map(|i| format!("{prefix}-{t}-{i}")));
    }
    assert_board(&board, &expected, &players);
}

//! Entry data through the ranking queue (`Ranking::enqueue_with`, issue 10
//! item 4), on every store: a queued submission stores its data by the rule
//! a direct `submit_with` follows, so a board fed through the queue ends
//! where a board fed directly ends, data included.

use autoshard::ranking::Update;
use autoshard::ranking::{Policy, Ranking, RankingConfig, ScoreOrder};
use autoshard::Error;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::boards;
use boards::Boards;

store_tests!(
    queued_data_ends_where_direct_submissions_end,
    queued_data_is_checked_before_it_is_queued,
    a_queue_made_before_queued_data_gets_its_column,
);
// The migration test makes an SQL table; Redis streams take any field.
redis_cluster_tests!(
    queued_data_ends_where_direct_submissions_end,
    queued_data_is_checked_before_it_is_queued,
);

#[derive(Debug, Clone)]
enum Op {
    /// `enqueue_with` / `submit_with`.
    WithData(usize, i64, Vec<u8>),
    /// `enqueue` / `set_score`: the player's data stays.
    Plain(usize, i64),
    Remove(usize),
}

/// Random operations on 6 players, applied directly to one board and
/// through the queue to its twin, for every policy and order: the twins
/// must hold the same entries (data included). A worker batch of one
/// update applies the queue as the direct calls were made; a batch of
/// everything applies it by net effect, which must end in the same place.
///
/// Control: with `store_entry_data` not called by the worker
/// (`ranking/queue/drain.rs`), every store fails; with a removal's clearing
/// skipped when a later score of the same batch brings the player back,
/// the whole-batch cases fail (the player keeps data from before the
/// batch). The rule itself (which
/// data a `Best` board keeps) is shared by both paths, so this test cannot
/// see it; `stores_ranking_policy.rs` checks it against a model.
fn queued_data_ends_where_direct_submissions_end<S: Boards>() {
    let store = S::fresh();
    let mut rng = SmallRng::seed_from_u64(11);
    let policies = [
        Policy::Replace,
        Policy::Best,
        Policy::Worst,
        Policy::Increment,
    ];
    let mut n = 0;
    for policy in policies {
        for order in [ScoreOrder::HigherIsBetter, ScoreOrder::LowerIsBetter] {
            for one_by_one in [true, false] {
                n += 1;
                let config = RankingConfig::new(-1_000..1_000)
                    .policy(policy)
                    .order(order)
                    .entry_data(4);
                let direct = Ranking::create(store.db(), &format!("d{n}"), config.clone()).unwrap();
                let queued = Ranking::create(store.db(), &format!("q{n}"), config).unwrap();
                // Two rounds, each drained before the next: the second
                // round's batch meets rows (and data) the first one left.
                for round in 0..2 {
                    let ops: Vec<Op> = (0..20)
                        .map(|_| {
                            let (player, score) =
                                (rng.random_range(0..6), rng.random_range(-20..20));
                            let data = vec![rng.random(); rng.random_range(0..5)];
                            match rng.random_range(0..10) {
                                0 => Op::Remove(player),
                                1..=3 => Op::Plain(player, score),
                                _ => Op::WithData(player, score, data),
                            }
                        })
                        .collect();
                    for op in &ops {
                        match op {
                            Op::WithData(p, s, d) => {
                                direct
                                    .submit_update(Update::score(&format!("p{p}"), *s).with_data(d))
                                    .unwrap();
                                queued
                                    .enqueue_update(
                                        Update::score(&format!("p{p}"), *s).with_data(d),
                                    )
                                    .unwrap();
                            }
                            Op::Plain(p, s) => {
                                direct.set_score(&format!("p{p}"), *s).unwrap();
                                queued.enqueue(&format!("p{p}"), *s).unwrap();
                            }
                            Op::Remove(p) => {
                                direct.remove(&format!("p{p}")).unwrap();
                                queued.enqueue_remove(&format!("p{p}")).unwrap();
                            }
                        }
                    }
                    let batch = if one_by_one { 1 } else { 1_000 };
                    let stats = queued.worker().batch_size(batch).drain().unwrap();
                    assert_eq!(stats.updates as usize, ops.len());
                    assert_eq!(
                        queued.top(100).unwrap(),
                        direct.top(100).unwrap(),
                        "{policy:?} {order:?} batch {batch} round {round}: {ops:?}"
                    );
                }
                queued.check_integrity().unwrap();
            }
        }
    }
}

fn queued_data_is_checked_before_it_is_queued<S: Boards>() {
    let store = S::fresh();
    let keeps =
        Ranking::create(store.db(), "keeps", RankingConfig::new(0..10).entry_data(3)).unwrap();
    let none = Ranking::create(store.db(), "none", RankingConfig::new(0..10)).unwrap();
    assert!(matches!(
        keeps.enqueue_update(Update::score("a", 1).with_data(b"four")),
        Err(Error::EntryDataTooLarge { len: 4, max: 3 })
    ));
    assert!(matches!(
        none.enqueue_update(Update::score("a", 1).with_data(b"x")),
        Err(Error::EntryDataTooLarge { len: 1, max: 0 })
    ));
    assert!(matches!(
        keeps.enqueue_update(Update::score("", 1).with_data(b"x")),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        keeps.enqueue_update(Update::score("a", 10).with_data(b"x")),
        Err(Error::ScoreOutOfRange { .. })
    ));
    assert_eq!(keeps.queued().unwrap(), 0);
    assert_eq!(none.queued().unwrap(), 0);
    // Empty data on a board without data is no data, as `submit_with`.
    none.enqueue_update(Update::score("a", 1).with_data(b""))
        .unwrap();
    keeps
        .enqueue_update(Update::score("a", 1).with_data(b""))
        .unwrap();
    keeps.worker().drain().unwrap();
    none.worker().drain().unwrap();
    assert_eq!(none.top(1).unwrap()[0].data, None);
    assert_eq!(keeps.top(1).unwrap()[0].data.as_deref(), Some(&b""[..]));
}

/// A queue table made before updates could carry data (no `data` column)
/// gets the column when the queue is first used, and its rows drain.
///
/// Control: without the migration (`stores/{sqlite,postgres}/queue.rs`),
/// the first `enqueue_with` fails with a store error (no such column).
fn a_queue_made_before_queued_data_gets_its_column<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..10).entry_data(8)).unwrap();
    let old_table = if S::NAME == "sqlite" {
        "CREATE TABLE autoshard_rank_queue (board INTEGER NOT NULL, queue INTEGER NOT NULL, \
         seq INTEGER NOT NULL, player TEXT NOT NULL, score INTEGER, \
         PRIMARY KEY (board, queue, seq)) STRICT, WITHOUT ROWID"
    } else {
        "CREATE TABLE autoshard_rank_queue (board bigint NOT NULL, queue integer NOT NULL, \
         seq bigint NOT NULL, player text COLLATE \"C\" NOT NULL, score bigint, \
         PRIMARY KEY (board, queue, seq))"
    };
    store.execute_queue(old_table);
    board
        .enqueue_update(Update::score("a", 3).with_data(b"old-file"))
        .unwrap();
    board.enqueue("b", 4).unwrap();
    board.worker().drain().unwrap();
    let top = board.top(2).unwrap();
    assert_eq!(top[0].player, "b");
    assert_eq!(top[1].data.as_deref(), Some(&b"old-file"[..]));
}

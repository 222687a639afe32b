//! `StoreMetrics::snapshot` on every store: each board's queue and dead
//! letters as the store holds them, and the process counters moving by
//! exactly what the calls did.

use crate::serial;
use crate::stores::TestStore;
use crate::{every_store_tests, redis_cluster_tests, store_tests};
use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{BoardMetrics, StoreMetrics};

every_store_tests!(
    metrics_report_each_boards_queue_dead_letters_and_the_counters,
    metrics_count_saves_and_leave_out_saves_with_nothing_to_write,
);

fn metrics_report_each_boards_queue_dead_letters_and_the_counters<S: TestStore>() {
    let _serial = serial();
    let db = S::fresh();
    let snapshot = || StoreMetrics::snapshot(&*db).unwrap();
    assert!(snapshot().boards.is_empty());
    let sums = RankingConfig::new(0..100).policy(Policy::Increment);
    let sums = Ranking::create(&*db, "m_sums", sums).unwrap();
    let other = Ranking::create(&*db, "m_other", RankingConfig::new(0..100)).unwrap();
    let before = snapshot().counters;
    // alice's 10 + 95 leaves the range: her second update is a dead letter.
    for (player, score) in [
        ("alice", 10),
        ("bob", 20),
        ("carol", 30),
        ("alice", 95),
        ("bob", 1),
    ] {
        sums.enqueue(player, score).unwrap();
    }
    other.enqueue("dan", 5).unwrap();
    other.enqueue("eve", 6).unwrap();

    let board =
        |name: &str, queued: u64, dead_letters: u64| (name.to_owned(), queued, dead_letters);
    let boards = |m: &StoreMetrics| -> Vec<(String, u64, u64)> {
        let row = |b: &BoardMetrics| (b.board.clone(), b.queued, b.dead_letters);
        m.boards.iter().map(row).collect()
    };
    let queued = snapshot();
    assert_eq!(
        boards(&queued),
        [board("m_other", 2, 0), board("m_sums", 5, 0)]
    );
    // The bounded count agrees with the one that counts the rows.
    assert_eq!((sums.queued().unwrap(), other.queued().unwrap()), (5, 2));

    let drained = sums.worker().drain().unwrap();
    assert_eq!((drained.updates, drained.dead_letters), (4, 1));
    let after = snapshot();
    // Control: the board no worker drained still has its two.
    assert_eq!(
        boards(&after),
        [board("m_other", 2, 0), board("m_sums", 0, 1)]
    );
    assert_eq!(sums.score("alice").unwrap(), Some(10));

    let (b, a) = (before, after.counters);
    assert_eq!(
        (a.enqueued - b.enqueued, a.group_commits - b.group_commits),
        (7, 7)
    );
    assert_eq!(a.updates_applied - b.updates_applied, 4);
    assert_eq!(a.dead_lettered - b.dead_lettered, 1);
    assert_eq!(a.worker_batches - b.worker_batches, drained.batches);

    // What an exporter sends.
    let json = serde_json::to_value(&after).unwrap();
    assert_eq!(json["boards"][1]["board"], "m_sums");
    assert_eq!(json["boards"][1]["dead_letters"], 1);
    assert!(json["counters"]["enqueued"].as_u64().unwrap() >= 7);
}

fn metrics_count_saves_and_leave_out_saves_with_nothing_to_write<S: TestStore>() {
    use crate::Tally;
    let _serial = serial();
    let db = S::fresh();
    db.insert(&Tally::new(1)).unwrap();
    let mut t: Tally = db.load(&1).unwrap().unwrap();
    let before = StoreMetrics::snapshot(&*db).unwrap().counters;
    for _ in 0..3 {
        t.hit();
        db.save(&mut t).unwrap();
    }
    // Control: a save with nothing to write is not counted.
    db.save(&mut t).unwrap();
    db.save_delta::<Tally, _>(&1, "views", &2i64).unwrap();
    let after = StoreMetrics::snapshot(&*db).unwrap().counters;
    assert_eq!(after.saves - before.saves, 4);
    assert_eq!(after.save_conflicts, before.save_conflicts);
}

//! `StoreMetrics::snapshot` on every store: each board's queue, dead
//! letters and oldest queued update as the store holds them, a kind's
//! compaction lag (`with_kind`), and the process counters moving by
//! exactly what the calls did.

use crate::serial;
use crate::stores::TestStore;
use crate::{every_store_tests, redis_cluster_tests, store_tests};
use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{BoardMetrics, StoreMetrics};
use std::time::{Duration, Instant};

every_store_tests!(
    metrics_report_each_boards_queue_dead_letters_and_the_counters,
    metrics_count_saves_and_leave_out_saves_with_nothing_to_write,
    metrics_age_each_boards_oldest_queued_update,
    metrics_report_a_kinds_compaction_lag,
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

/// The oldest queued update's age, by the store's clock: at least the
/// wait since it was enqueued, at most the time since just before; the
/// board enqueued to later is younger by at least the wait between (the
/// control: one age for all boards would fail it); none once applied, and
/// none on a board with nothing queued.
fn metrics_age_each_boards_oldest_queued_update<S: TestStore>() {
    const WAIT: Duration = Duration::from_millis(150);
    // The stores stamp whole milliseconds.
    const GRAIN: Duration = Duration::from_millis(2);
    let _serial = serial();
    let db = S::fresh();
    let age = |m: &StoreMetrics, name: &str| {
        let board = m.boards.iter().find(|b| b.board == name).unwrap();
        board.oldest_queued
    };
    let old = Ranking::create(&*db, "m_old", RankingConfig::new(0..100)).unwrap();
    let young = Ranking::create(&*db, "m_young", RankingConfig::new(0..100)).unwrap();
    let idle = Ranking::create(&*db, "m_idle", RankingConfig::new(0..100)).unwrap();
    idle.enqueue("z", 1).unwrap();
    idle.worker().drain().unwrap();
    let started = Instant::now();
    old.enqueue("a", 1).unwrap();
    old.enqueue("b", 2).unwrap();
    std::thread::sleep(WAIT);
    young.enqueue("c", 3).unwrap();
    std::thread::sleep(WAIT);
    let reading = Instant::now();
    let m = StoreMetrics::snapshot(&*db).unwrap();
    // The boards are aged one after another: m_young this much later.
    let read = reading.elapsed();
    let elapsed = started.elapsed();
    let (old_age, young_age) = (age(&m, "m_old").unwrap(), age(&m, "m_young").unwrap());
    assert!(old_age + GRAIN >= 2 * WAIT, "{old_age:?}");
    assert!(old_age <= elapsed + GRAIN, "{old_age:?} > {elapsed:?}");
    assert!(young_age + GRAIN >= WAIT, "{young_age:?}");
    let (later, older) = (young_age + WAIT, old_age + GRAIN + read);
    assert!(
        later <= older,
        "{young_age:?} vs {old_age:?} read in {read:?}"
    );
    assert_eq!(age(&m, "m_idle"), None, "nothing queued, no age");
    old.worker().drain().unwrap();
    let m = StoreMetrics::snapshot(&*db).unwrap();
    assert_eq!(age(&m, "m_old"), None, "applied, no age");
    assert!(age(&m, "m_young").is_some());
    // What an exporter sends: `{ "secs": .., "nanos": .. }`, or null.
    let json = serde_json::to_value(&m).unwrap();
    let young_json = json["boards"].as_array().unwrap().iter();
    let young_json = young_json
        .clone()
        .find(|b| b["board"] == "m_young")
        .unwrap();
    assert!(young_json["oldest_queued"]["secs"].is_u64());
}

/// `with_kind` reports what `Store::stats` counts for the kind: nothing
/// pending before the saves (the control), the dynamic rows the saves
/// appended after them, and after a compaction what `stats` counts then
/// (nothing on SQLite and PostgreSQL; on Redis Cluster the census counts
/// the one row per bucket compaction keeps as pending).
fn metrics_report_a_kinds_compaction_lag<S: TestStore>() {
    use crate::Tally;
    let _serial = serial();
    let db = S::fresh();
    db.insert(&Tally::new(1)).unwrap();
    let lag = || {
        let m = StoreMetrics::snapshot(&*db).unwrap();
        m.with_kind::<Tally>(&*db).unwrap().kinds.remove(0)
    };
    let before = lag();
    assert_eq!((before.kind.as_str(), before.pending), ("Tally", 0));
    assert_eq!(before.oldest_pending, None);
    let mut t: Tally = db.load(&1).unwrap().unwrap();
    for _ in 0..3 {
        t.view();
        db.save(&mut t).unwrap();
    }
    let stats = db.stats::<Tally>().unwrap();
    let pending = lag();
    assert!(pending.pending > 0);
    assert_eq!(pending.pending, stats.pending());
    assert_eq!(
        pending.oldest_pending.is_some(),
        stats.oldest_pending().is_some()
    );
    db.compact::<Tally>().unwrap();
    let after = lag();
    assert_eq!(after.pending, db.stats::<Tally>().unwrap().pending());
    if !S::NAME.starts_with("redis") {
        assert_eq!(after.pending, 0);
    }
}

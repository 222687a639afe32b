//! The spans every store shares: saves and loads (`Store`), compaction
//! batches, group commits and worker batches (the ranking queue).

use crate::capture::Capture;
use crate::stores::TestStore;
use crate::{redis_cluster_tests, store_tests};
use crate::{serial, Tally};
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::StoreMetrics;

store_tests!(
    saves_and_loads_are_spans_with_kind_id_and_outcome,
    compaction_batches_are_spans_with_the_rows_they_merged,
    group_commits_and_worker_batches_are_spans_with_board_and_sizes,
    family_worker_batches_are_spans_with_the_family_and_sizes,
);
// Families need multi-board transactions, which Redis Cluster refuses.
redis_cluster_tests!(
    saves_and_loads_are_spans_with_kind_id_and_outcome,
    compaction_batches_are_spans_with_the_rows_they_merged,
    group_commits_and_worker_batches_are_spans_with_board_and_sizes,
);

fn family_worker_batches_are_spans_with_the_family_and_sizes<S: TestStore>() {
    use autoshard::ranking::{Family, FamilyConfig, Window};
    let _serial = serial();
    let db = S::fresh();
    let config = FamilyConfig::new(RankingConfig::new(0..100)).window(Window::Week);
    let game = Family::create(&*db, "game", config).unwrap();
    let capture = Capture::default();
    let stats = capture.run(|| {
        game.submission("ann", 42).at(0).enqueue().unwrap();
        game.submission("bo", 7).at(0).enqueue().unwrap();
        game.worker().drain().unwrap()
    });
    assert_eq!(stats.submissions, 2);
    let seen = capture.seen();
    let batches = seen.named("autoshard.family_batch");
    assert!(!batches.is_empty());
    assert!(
        batches.iter().all(|b| b.fields["family"] == "game"),
        "{batches:?}"
    );
    assert_eq!(seen.sum("autoshard.family_batch", "applied"), 2);
    assert_eq!(seen.sum("autoshard.family_batch", "dead_letters"), 0);
    // Its submissions were group commits on the family's queue.
    assert_eq!(seen.sum("autoshard.group_commit", "batch"), 2);
}

fn saves_and_loads_are_spans_with_kind_id_and_outcome<S: TestStore>() {
    let _serial = serial();
    let db = S::fresh();
    db.insert(&Tally::new(7)).unwrap();
    let capture = Capture::default();
    capture.run(|| {
        let mut t: Tally = db.load(&7).unwrap().unwrap();
        t.hit();
        t.view();
        assert_eq!(db.save(&mut t).unwrap().attempts, 1);
        // Control: nothing to write, no transaction, and it says so.
        assert_eq!(db.save(&mut t).unwrap().attempts, 0);
        // Control: the id is the call's, not a constant.
        assert!(db.load::<Tally>(&99).unwrap().is_none());
    });
    let seen = capture.seen();
    let loads = seen.named("autoshard.load");
    let ids: Vec<_> = loads.iter().map(|s| s.fields["id"].as_str()).collect();
    assert_eq!(ids, ["7", "99"], "{loads:?}");
    assert!(loads.iter().all(|s| s.fields["kind"] == "Tally"));
    let saves = seen.named("autoshard.save");
    assert_eq!(saves.len(), 2, "{saves:?}");
    let (wrote, idle) = (&saves[0].fields, &saves[1].fields);
    assert_eq!(
        (wrote["kind"].as_str(), wrote["id"].as_str()),
        ("Tally", "7")
    );
    assert_eq!(
        (wrote["attempts"].as_str(), wrote["shard_writes"].as_str()),
        ("1", "2")
    );
    assert_eq!(idle["attempts"], "0");
    assert!(!wrote.contains_key("error"));
    drop(seen);

    // Without a subscriber nothing reaches the capture: it is this
    // thread's, and only while `run` runs.
    let before = capture.seen().spans.len();
    let mut t: Tally = db.load(&7).unwrap().unwrap();
    t.hit();
    db.save(&mut t).unwrap();
    assert_eq!(capture.seen().spans.len(), before);

    // A failed save records its error.
    let mut gone: Tally = db.load(&7).unwrap().unwrap();
    db.delete::<Tally>(&7).unwrap();
    gone.hit();
    capture.run(|| db.save(&mut gone).unwrap_err());
    let seen = capture.seen();
    let failed = seen.named("autoshard.save").pop().unwrap();
    assert!(
        failed.fields["error"].contains("no Tally with id 7"),
        "{failed:?}"
    );
}

fn compaction_batches_are_spans_with_the_rows_they_merged<S: TestStore>() {
    let _serial = serial();
    let db = S::fresh();
    for id in 1..=3 {
        db.insert(&Tally::new(id)).unwrap();
        let mut t: Tally = db.load(&id).unwrap().unwrap();
        // Redis Cluster folds rows only within one of an entity's 12
        // buckets (slots): 13 appended rows make a fold certain by
        // pigeonhole, where 4 left it to the random buckets (failed once).
        for _ in 0..13 {
            t.view();
            db.save(&mut t).unwrap();
        }
    }
    let before = StoreMetrics::snapshot(&*db).unwrap().counters;
    let capture = Capture::default();
    let stats = capture.run(|| db.compact::<Tally>().unwrap());
    let again = capture.run(|| db.compact::<Tally>().unwrap());
    let after = StoreMetrics::snapshot(&*db).unwrap().counters;
    assert!(stats.rows_merged > 0, "{stats:?}");
    assert_eq!(again.rows_merged, 0, "control: nothing left to fold");

    let seen = capture.seen();
    let batches = seen.named("autoshard.compaction_batch");
    assert_eq!(batches.len() as u64, stats.batches + again.batches);
    assert!(batches.iter().all(|b| b.fields["kind"] == "Tally"));
    assert_eq!(
        seen.sum("autoshard.compaction_batch", "merged"),
        stats.rows_merged
    );
    let compact = seen.parent_of(batches[0]).unwrap();
    assert_eq!(compact.name, "autoshard.compact");
    // The same numbers in the process counters.
    assert_eq!(after.rows_merged - before.rows_merged, stats.rows_merged);
    assert_eq!(
        after.compaction_batches - before.compaction_batches,
        stats.batches + again.batches
    );
}

fn group_commits_and_worker_batches_are_spans_with_board_and_sizes<S: TestStore>() {
    let _serial = serial();
    let db = S::fresh();
    let board = Ranking::create(&*db, "spans", RankingConfig::new(0..1_000)).unwrap();
    let capture = Capture::default();
    capture.run(|| {
        for (player, score) in [("ann", 1), ("bo", 2), ("cy", 3)] {
            board.enqueue(player, score).unwrap();
        }
        assert_eq!(board.worker().drain().unwrap().updates, 3);
        // Control: a second drain applies nothing.
        assert_eq!(board.worker().drain().unwrap().updates, 0);
    });
    let seen = capture.seen();
    let commits = seen.named("autoshard.group_commit");
    assert_eq!(commits.len(), 3, "one caller at a time: {commits:?}");
    assert!(commits.iter().all(|c| c.fields["board"] == "spans"));
    assert_eq!(seen.sum("autoshard.group_commit", "batch"), 3);
    let batches = seen.named("autoshard.worker_batch");
    assert!(batches.iter().all(|b| b.fields["board"] == "spans"));
    assert_eq!(seen.sum("autoshard.worker_batch", "applied"), 3);
    assert_eq!(seen.sum("autoshard.worker_batch", "dead_letters"), 0);
    assert_eq!(board.score("cy").unwrap(), Some(3));
}

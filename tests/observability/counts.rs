//! Automatic shard counts: a raise is an event in the span of the save that
//! raised it, a lowering one in the span of the compaction batch that
//! halved it. Both come from code every store shares (`Store::save`,
//! `seam/compaction/`), so SQLite, where a save can be made to count as
//! contended at will, stands for the others.

use crate::capture::Capture;
use crate::serial;
use autoshard::{shard_method, Pending, Shardable, Sqlite, Store, StoreMetrics};
use std::time::Duration;

#[derive(Shardable, Debug)]
#[shard(kind = "Auto")]
struct Auto {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 1..=4, fold = autoshard::fold::checked_sum)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Auto {
    #[shard_method]
    fn vote(&mut self) {
        self.votes += 1;
    }
}

#[test]
fn shard_count_raises_and_lowerings_are_events_in_their_save_and_batch() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    // Every save counts as contended: each raises the count, up to 4.
    let db = Sqlite::builder(dir.path().join("auto.db"))
        .contention_wait(Duration::ZERO)
        .open()
        .unwrap();
    db.insert(&Auto {
        id: 1,
        votes: 0,
        pending: Pending::default(),
    })
    .unwrap();
    let mut a: Auto = db.load(&1).unwrap().unwrap();
    let before = StoreMetrics::snapshot(&db).unwrap().counters;
    let capture = Capture::default();
    capture.run(|| {
        // 1 -> 2 -> 4, and the third at the high end raises nothing (control).
        for _ in 0..3 {
            a.vote();
            db.save(&mut a).unwrap();
        }
    });
    let compactor = db.compactor::<Auto>().quiet_period(Duration::ZERO);
    let stats = capture.run(|| compactor.run_once().unwrap());
    assert_eq!(stats.counts_lowered, 1);
    let after = StoreMetrics::snapshot(&db).unwrap().counters;
    assert_eq!(after.shard_counts_raised - before.shard_counts_raised, 2);
    assert_eq!(after.shard_counts_lowered - before.shard_counts_lowered, 1);

    let seen = capture.seen();
    let with = |message: &str| -> Vec<_> {
        let said = |e: &&crate::capture::EventSeen| e.fields["message"].contains(message);
        seen.events.iter().filter(said).collect()
    };
    let raised = with("shard count raised");
    let shards: Vec<_> = raised.iter().map(|e| e.fields["shards"].as_str()).collect();
    assert_eq!(shards, ["2", "4"], "{raised:?}");
    for event in &raised {
        let save = &seen.spans[event.span.unwrap()];
        assert_eq!(
            (save.name, save.fields["id"].as_str()),
            ("autoshard.save", "1")
        );
        assert_eq!(event.fields["field"], "votes");
    }
    let lowered = with("shard count lowered");
    assert_eq!(lowered.len(), 1, "{lowered:?}");
    let f = &lowered[0].fields;
    let got = (
        f["kind"].as_str(),
        f["id"].as_str(),
        f["from"].as_str(),
        f["to"].as_str(),
    );
    assert_eq!(got, ("Auto", "1", "4", "2"));
    let batch = &seen.spans[lowered[0].span.unwrap()];
    assert_eq!(
        (batch.name, batch.fields["lowered"].as_str()),
        ("autoshard.compaction_batch", "1")
    );
}

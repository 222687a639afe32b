//! Compaction: exact statistics, batches (a group larger than a batch
//! included), an empty kind, and rows of fields the struct no longer
//! declares.

use super::stats;
use crate::stores::{Options, TestStore};
use autoshard::{shard_fold, shard_method, Pending, Shardable, Store, Value};
use std::collections::BTreeMap;

store_tests!(
    compaction_stats_are_exact_on_a_known_layout,
    compaction_in_small_batches_reports_growing_totals_once_per_batch,
    a_group_larger_than_a_batch_is_folded_a_part_at_a_time,
    compaction_of_an_empty_kind,
    compaction_leaves_rows_of_undeclared_fields_alone,
);
redis_cluster_tests!(compaction_of_an_empty_kind);

#[derive(Shardable, Debug)]
#[shard(kind = "Compacted")]
struct Compacted {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 2)]
    votes: i64,
    #[shard(neutral = 0)]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Compacted {
    fn new(id: u64) -> Self {
        Compacted {
            id,
            votes: 0,
            views: 0,
            pending: Pending::default(),
        }
    }
    #[shard_method]
    fn view(&mut self) {
        self.views += 1;
    }
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn views_saved<S: Store>(store: &S, id: u64, saves: usize) {
    let mut c: Compacted = store.load(&id).unwrap().unwrap();
    for _ in 0..saves {
        c.view();
        store.save(&mut c).unwrap();
    }
}

fn compaction_stats_are_exact_on_a_known_layout<S: TestStore>() {
    let db = S::fresh();
    for (id, saves) in [(1, 3), (2, 0), (3, 1)] {
        db.insert(&Compacted::new(id)).unwrap();
        views_saved(&db.store, id, saves);
    }
    let s = db.compact::<Compacted>().unwrap();
    assert_eq!(stats(&s), (3, 2, 3 + 1, 1));
    // (2 votes + 4 views) + (2 + 1) + (2 + 2)
    assert_eq!(s.rows_scanned, 13);

    for (id, views) in [(1, 3), (2, 0), (3, 1)] {
        assert_eq!(db.shard_count::<Compacted>(&id, "views").unwrap(), 1);
        assert_eq!(db.shard_count::<Compacted>(&id, "votes").unwrap(), 2);
        let rows = db.field_rows("compacted", &id.to_string(), "views");
        assert_eq!(rows, BTreeMap::from([(0, Value::Integer(views))]));
    }
    let again = db.compact::<Compacted>().unwrap();
    assert_eq!(stats(&again), (3, 0, 0, 1));
    assert_eq!(again.rows_scanned, 9);
}

fn compaction_in_small_batches_reports_growing_totals_once_per_batch<S: TestStore>() {
    let db = S::fresh_with(Options {
        compaction_batch_rows: Some(7),
        ..Options::default()
    });
    for id in 1..=50 {
        db.insert(&Compacted::new(id)).unwrap();
        views_saved(&db.store, id, 1 + (id as usize % 2));
    }
    let mut seen = Vec::new();
    let s = db
        .compact_with::<Compacted>(&mut |p| seen.push(p.clone()))
        .unwrap();
    // Odd ids hold 2 + 3 rows, even ids 2 + 2: a batch takes whole entities
    // until it has read at least 7 rows, so always two of them.
    assert_eq!(stats(&s), (50, 50, 75, 25));
    assert_eq!(s.rows_scanned, 25 * 5 + 25 * 4);
    assert_eq!(seen.len(), 25);
    assert_eq!(seen.last(), Some(&s));
    for (i, p) in seen.iter().enumerate() {
        assert_eq!(p.batches, i as u64 + 1);
        assert_eq!(p.entities_visited, 2 * (i as u64 + 1));
    }
    for pair in seen.windows(2) {
        assert!(pair[1].rows_scanned > pair[0].rows_scanned);
        assert!(pair[1].rows_merged > pair[0].rows_merged);
    }
    for id in 1..=50u64 {
        let c: Compacted = db.load(&id).unwrap().unwrap();
        assert_eq!(c.views, 1 + (id as i64 % 2));
        assert_eq!(db.shard_count::<Compacted>(&id, "views").unwrap(), 1);
    }
}

fn a_group_larger_than_a_batch_is_folded_a_part_at_a_time<S: TestStore>() {
    // Without splitting, one entity's 300 pending rows would be read and
    // folded in a single transaction (the batch size would bound nothing).
    // With it, every transaction reads about `compaction_batch_rows` rows,
    // and the entity is still counted once.
    let db = S::fresh_with(Options {
        compaction_batch_rows: Some(50),
        ..Options::default()
    });
    for id in 1..=2 {
        db.insert(&Compacted::new(id)).unwrap();
    }
    views_saved(&db.store, 1, 300);
    views_saved(&db.store, 2, 3);
    let mut seen = Vec::new();
    let s = db
        .compact_with::<Compacted>(&mut |p| seen.push(p.clone()))
        .unwrap();
    assert_eq!((s.entities_visited, s.entities_compacted), (2, 2));
    assert_eq!(s.rows_merged, 300 + 3);
    assert!(s.batches >= 6, "{s:?}");
    let mut scanned = 0;
    for p in &seen {
        // A batch stops at the first row past the limit that lets it fold
        // something, so it never reads more than limit + one group's start.
        assert!(p.rows_scanned - scanned <= 50 + 3, "{p:?}");
        scanned = p.rows_scanned;
    }
    for (id, views) in [(1u64, 300), (2, 3)] {
        let c: Compacted = db.load(&id).unwrap().unwrap();
        assert_eq!(c.views, views);
        assert_eq!(db.shard_count::<Compacted>(&id, "views").unwrap(), 1);
        assert_eq!(db.shard_count::<Compacted>(&id, "votes").unwrap(), 2);
    }
}

fn compaction_of_an_empty_kind<S: TestStore>() {
    let db = S::fresh();
    let mut calls = 0;
    let s = db.compact_with::<Compacted>(&mut |_| calls += 1).unwrap();
    assert_eq!((stats(&s), s.rows_scanned), ((0, 0, 0, 1), 0));
    assert_eq!(calls, 1);

    // Emptied by deletes: same answer.
    db.insert(&Compacted::new(1)).unwrap();
    db.delete::<Compacted>(&1).unwrap();
    let s = db.compact::<Compacted>().unwrap();
    assert_eq!((stats(&s), s.rows_scanned), ((0, 0, 0, 1), 0));
}

#[derive(Shardable, Debug)]
#[shard(kind = "Legacy")]
struct LegacyV1 {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0)]
    views: i64,
    #[shard(neutral = 0)]
    abandoned: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl LegacyV1 {
    #[shard_method]
    fn touch(&mut self) {
        self.views += 1;
        self.abandoned += 10;
    }
    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_abandoned(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[derive(Shardable, Debug)]
#[shard(kind = "Legacy")]
struct LegacyV2 {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0)]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl LegacyV2 {
    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn compaction_leaves_rows_of_undeclared_fields_alone<S: TestStore>() {
    let db = S::fresh();
    db.insert(&LegacyV1 {
        id: 1,
        views: 0,
        abandoned: 0,
        pending: Pending::default(),
    })
    .unwrap();
    let mut v1: LegacyV1 = db.load(&1).unwrap().unwrap();
    for _ in 0..3 {
        v1.touch();
        db.save(&mut v1).unwrap();
    }
    let abandoned = db.field_rows("legacy", "1", "abandoned");
    assert_eq!(abandoned.len(), 4);

    let s = db.compact::<LegacyV2>().unwrap();
    assert_eq!(stats(&s), (1, 1, 3, 1));
    assert_eq!(db.field_rows("legacy", "1", "abandoned"), abandoned);
    assert_eq!(db.field_rows("legacy", "1", "views").len(), 1);
    assert_eq!(db.load::<LegacyV2>(&1).unwrap().unwrap().views, 3);
    // The old struct still sees its field intact.
    let v1: LegacyV1 = db.load(&1).unwrap().unwrap();
    assert_eq!((v1.views, v1.abandoned), (3, 30));
}

//! Changing a field's shard count (lowering it, static to dynamic and
//! back): nothing is lost, and compaction folds the surplus rows.

use super::{diff, int_sum, stats};
use crate::entities::{DynamicSwitch, StaticSwitch};
use crate::stores::{Fresh, TestStore};
use autoshard::{shard_fold, shard_method, Pending, Shardable, Value};
use std::collections::BTreeMap;

store_tests!(
    lowering_shards_loses_nothing_and_compaction_folds_the_surplus,
    static_to_dynamic_and_back,
);

#[derive(Shardable, Debug)]
#[shard(kind = "Resized")]
struct Wide {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 10)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Wide {
    #[shard_method]
    fn vote(&mut self) {
        self.votes += 1;
    }
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[derive(Shardable, Debug)]
#[shard(kind = "Resized")]
struct Narrow {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 3)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Narrow {
    #[shard_method]
    fn vote(&mut self) {
        self.votes += 1;
    }
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn lowering_shards_loses_nothing_and_compaction_folds_the_surplus<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Wide {
        id: 1,
        votes: 5,
        pending: Pending::default(),
    })
    .unwrap();
    let mut w: Wide = db.load(&1).unwrap().unwrap();
    for _ in 0..100 {
        w.vote();
        db.save(&mut w).unwrap();
    }
    let rows = db.field_rows("resized", "1", "votes");
    assert_eq!(
        rows.keys().copied().collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    // 100 saves over 10 shards leave shards 3..9 empty with probability 0.3^100.
    assert!(rows.range(3..).any(|(_, v)| *v != Value::Integer(0)));

    let mut n: Narrow = db.load(&1).unwrap().unwrap();
    assert_eq!(n.votes, 105);
    for _ in 0..50 {
        let before = db.shard_rows("resized");
        n.vote();
        db.save(&mut n).unwrap();
        let changed = diff(&before, &db.shard_rows("resized"));
        assert_eq!(changed.len(), 1);
        assert!((0..3).contains(&changed[0].2), "{changed:?}");
    }
    assert_eq!(db.load::<Narrow>(&1).unwrap().unwrap().votes, 155);

    let before = db.field_rows("resized", "1", "votes");
    let s = db.compact::<Narrow>().unwrap();
    assert_eq!(stats(&s), (1, 1, 7, 1));
    let after = db.field_rows("resized", "1", "votes");
    assert_eq!(after.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
    assert_eq!(after[&1], before[&1]);
    assert_eq!(after[&2], before[&2]);
    let surplus: BTreeMap<i64, Value> = before
        .iter()
        .filter(|(s, _)| **s == 0 || **s >= 3)
        .map(|(s, v)| (*s, v.clone()))
        .collect();
    assert_eq!(after[&0], Value::Integer(int_sum(&surplus)));
    assert_eq!(int_sum(&after), 155);
    assert_eq!(db.load::<Narrow>(&1).unwrap().unwrap().votes, 155);
    // Raising it back is just as safe: the wide struct sees the same total.
    assert_eq!(db.load::<Wide>(&1).unwrap().unwrap().votes, 155);
    assert_eq!(stats(&db.compact::<Narrow>().unwrap()), (1, 0, 0, 1));
}

fn hits<S>(db: &Fresh<S>) -> BTreeMap<i64, Value> {
    db.field_rows("switch", "1", "hits")
}

fn static_to_dynamic_and_back<S: TestStore>() {
    let db = S::fresh();
    db.insert(&StaticSwitch {
        id: 1,
        hits: 3,
        pending: Pending::default(),
    })
    .unwrap();
    let mut s: StaticSwitch = db.load(&1).unwrap().unwrap();
    for _ in 0..8 {
        s.hit();
        db.save(&mut s).unwrap();
    }
    assert_eq!(hits(&db).len(), 4);

    let mut d: DynamicSwitch = db.load(&1).unwrap().unwrap();
    assert_eq!(d.hits, 11);
    d.hit();
    db.save(&mut d).unwrap();
    // Appended after the highest static shard, so no static row is touched.
    let rows = hits(&db);
    let keys: Vec<i64> = rows.keys().copied().collect();
    assert_eq!((keys.len(), &keys[..4]), (5, &[0, 1, 2, 3][..]), "{keys:?}");
    assert_eq!(rows[&keys[4]], Value::Integer(1));
    assert_eq!(db.load::<DynamicSwitch>(&1).unwrap().unwrap().hits, 12);

    assert_eq!(stats(&db.compact::<DynamicSwitch>().unwrap()), (1, 1, 4, 1));
    assert_eq!(hits(&db), BTreeMap::from([(0, Value::Integer(12))]));

    // Back to static: shards 1..3 are missing now, which save must handle.
    let mut s: StaticSwitch = db.load(&1).unwrap().unwrap();
    assert_eq!(s.hits, 12);
    for _ in 0..20 {
        s.hit();
        db.save(&mut s).unwrap();
    }
    let rows = hits(&db);
    assert!(rows.keys().all(|k| (0..4).contains(k)), "{rows:?}");
    assert_eq!(int_sum(&rows), 32);
    assert_eq!(db.load::<StaticSwitch>(&1).unwrap().unwrap().hits, 32);
    // Nothing above shard 3, so static compaction has nothing to do.
    assert_eq!(stats(&db.compact::<StaticSwitch>().unwrap()), (1, 0, 0, 1));
}

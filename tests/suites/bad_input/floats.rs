//! Non-finite floats: refused on insert and on save, and nothing written.

use super::{dump, is_empty};
use crate::common::db;
use autoshard::fold::max_f64;
use autoshard::{shard_fold, shard_method, Error, Pending, Shardable, Store};

#[derive(Shardable, Debug)]
struct Floats {
    #[shard(id)]
    id: u64,
    ratio: f64,
    samples: Vec<f64>,
    #[shard(neutral = f64::MIN, shards = 2, fold = max_f64)]
    peak: f64,
    #[shard(neutral = 0.0)]
    total: f64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Floats {
    fn new(id: u64) -> Self {
        Floats {
            id,
            ratio: 0.5,
            samples: vec![1.0],
            peak: 1.0,
            total: 0.0,
            pending: Pending::default(),
        }
    }
    #[shard_method]
    fn record(&mut self, v: f64) {
        self.peak = max_f64(self.peak, v);
    }
    #[shard_method]
    fn set_peak(&mut self, v: f64) {
        self.peak = v;
    }
    #[shard_method]
    fn add(&mut self, v: f64) {
        self.total += v;
    }
    #[shard_fold]
    fn fold_total(a: f64, b: f64) -> f64 {
        a + b
    }
}

fn assert_invalid(result: autoshard::Result<impl std::fmt::Debug>, field: &str) {
    match result {
        Err(Error::InvalidValue {
            kind: "Floats",
            field: f,
            ..
        }) if f == field => {}
        other => panic!("expected InvalidValue for {field}, got {other:?}"),
    }
}

#[test]
fn non_finite_floats_are_refused_on_insert() {
    let db = db();
    type Spoil = fn(&mut Floats);
    let cases: [(&str, Spoil); 5] = [
        ("ratio", |f| f.ratio = f64::NAN),
        ("ratio", |f| f.ratio = f64::NEG_INFINITY),
        ("samples", |f| f.samples = vec![1.0, f64::NAN]),
        ("peak", |f| f.peak = f64::INFINITY),
        ("total", |f| f.total = f64::NAN),
    ];
    for (field, spoil) in cases {
        let mut f = Floats::new(1);
        spoil(&mut f);
        assert_invalid(db.store.insert(&f), field);
        assert!(is_empty(&dump(&db.path, "floats")), "{field}");
    }
    db.store.insert(&Floats::new(1)).unwrap();
}

#[test]
fn non_finite_floats_are_refused_on_save_and_nothing_is_written() {
    let db = db();
    db.store.insert(&Floats::new(1)).unwrap();
    let before = dump(&db.path, "floats");

    let mut f: Floats = db.store.load(&1).unwrap().unwrap();
    f.ratio = f64::NAN;
    f.add(2.0);
    assert_invalid(db.store.save(&mut f), "ratio");
    assert_eq!(dump(&db.path, "floats"), before);

    let mut f: Floats = db.store.load(&1).unwrap().unwrap();
    f.samples.push(f64::INFINITY);
    assert_invalid(db.store.save(&mut f), "samples");

    let mut f: Floats = db.store.load(&1).unwrap().unwrap();
    f.add(2.0);
    f.record(f64::INFINITY);
    assert_invalid(db.store.save(&mut f), "peak");
    assert_eq!(dump(&db.path, "floats"), before);

    let mut f: Floats = db.store.load(&1).unwrap().unwrap();
    f.set_peak(f64::NAN);
    assert_invalid(db.store.save(&mut f), "peak");

    let mut f: Floats = db.store.load(&1).unwrap().unwrap();
    f.add(f64::MAX);
    f.add(f64::MAX); // the pending sum itself becomes +inf
    assert_invalid(db.store.save(&mut f), "total");
    assert_eq!(dump(&db.path, "floats"), before);

    // `max` ignores NaN, so recording one is no change and nothing to write.
    let mut f: Floats = db.store.load(&1).unwrap().unwrap();
    f.record(f64::NAN);
    assert_eq!(db.store.save(&mut f).unwrap().attempts, 0);
    assert_eq!(dump(&db.path, "floats"), before);
    let f: Floats = db.store.load(&1).unwrap().unwrap();
    assert_eq!(
        (f.ratio, f.samples, f.peak, f.total),
        (0.5, vec![1.0], 1.0, 0.0)
    );
}

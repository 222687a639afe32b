//! Panicking shard methods: the object is poisoned (its saves and inserts
//! are refused and write nothing) and a reload is the way out.

use super::dump;
use crate::common::db;
use autoshard::{shard_fold, shard_method, Error, Pending, Shardable, Store};
use std::panic::{catch_unwind, AssertUnwindSafe};

#[derive(Shardable, Debug)]
struct Fragile {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 2)]
    n: i64,
    #[shard(neutral = 0)]
    m: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Fragile {
    #[shard_method]
    fn add(&mut self, by: i64) {
        self.n += by;
        self.m += by;
    }
    /// Panics in the run numbered `on` (1: the pending view, 2: the aggregate),
    /// after changing both fields.
    #[shard_method]
    fn explode(&mut self, calls: &mut u32, on: u32) {
        *calls += 1;
        self.n += 100;
        self.m += 100;
        if *calls == on {
            panic!("shard method failed in run {on}");
        }
    }
    #[shard_fold]
    fn fold_n(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_m(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[test]
fn a_panicking_shard_method_poisons_the_entity() {
    for on in [1, 2] {
        let db = db();
        db.store
            .insert(&Fragile {
                id: 1,
                n: 1,
                m: 1,
                pending: Pending::default(),
            })
            .unwrap();
        let mut f: Fragile = db.store.load(&1).unwrap().unwrap();
        f.add(5);
        let before = dump(&db.path, "fragile");
        let mut calls = 0;
        let panicked = catch_unwind(AssertUnwindSafe(|| f.explode(&mut calls, on)));
        assert!(panicked.is_err());
        assert_eq!(calls, on);

        let err = db.store.save(&mut f).unwrap_err();
        assert!(
            matches!(err, Error::Poisoned { kind: "Fragile" }),
            "{err:?}"
        );
        assert!(!err.is_retryable());
        // Still poisoned on the next try, and not insertable either.
        assert!(matches!(db.store.save(&mut f), Err(Error::Poisoned { .. })));
        f.id = 2;
        assert!(matches!(db.store.insert(&f), Err(Error::Poisoned { .. })));
        assert_eq!(dump(&db.path, "fragile"), before, "run {on}");

        // The delta of the clean call before the panic is lost with the
        // object, by design: a reload is the documented way out.
        let mut f: Fragile = db.store.load(&1).unwrap().unwrap();
        assert_eq!((f.n, f.m), (1, 1));
        f.add(2);
        db.store.save(&mut f).unwrap();
        let f: Fragile = db.store.load(&1).unwrap().unwrap();
        assert_eq!((f.n, f.m), (3, 3));
    }
}

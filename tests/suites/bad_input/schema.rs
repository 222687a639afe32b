//! Schema changes: a kind whose id type changed is a schema mismatch.

use super::dump;
use crate::common::db;
use autoshard::{shard_fold, Error, Pending, Shardable, Sqlite, Store};

#[derive(Shardable, Debug)]
#[shard(kind = "Typed")]
struct IntTyped {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 2)]
    n: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl IntTyped {
    #[shard_fold]
    fn fold_n(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[derive(Shardable, Debug)]
#[shard(kind = "Typed")]
struct TextTyped {
    #[shard(id)]
    id: String,
    #[shard(neutral = 0, shards = 2)]
    n: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl TextTyped {
    #[shard_fold]
    fn fold_n(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn assert_mismatch<T: std::fmt::Debug>(result: autoshard::Result<T>) {
    match result {
        Err(Error::SchemaMismatch { kind, .. }) => assert_eq!(kind, "Typed"),
        other => panic!("expected SchemaMismatch, got {other:?}"),
    }
}

#[test]
fn changing_the_id_type_of_a_kind_is_a_schema_mismatch() {
    let db = db();
    db.store
        .insert(&IntTyped {
            id: 1,
            n: 1,
            pending: Pending::default(),
        })
        .unwrap();
    let before = dump(&db.path, "typed");
    let text = TextTyped {
        id: "1".into(),
        n: 1,
        pending: Pending::default(),
    };
    // The handle that already knows the kind, and a fresh one. Before cached
    // kinds were checked too, the first handle answered AlreadyExists here:
    // STRICT coerced the text id "1" into the integer column.
    let fresh = Sqlite::open(&db.path).unwrap();
    for store in [&db.store, &fresh] {
        assert_mismatch(store.insert(&text));
        assert_mismatch(store.load::<TextTyped>(&"1".into()));
        assert_mismatch(store.delete::<TextTyped>(&"1".into()));
        assert_mismatch(store.compact::<TextTyped>());
    }
    assert_eq!(dump(&db.path, "typed"), before);
    assert_eq!(fresh.load::<IntTyped>(&1).unwrap().unwrap().n, 1);
    assert_eq!(db.store.load::<IntTyped>(&1).unwrap().unwrap().n, 1);
}

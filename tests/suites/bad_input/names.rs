//! Names: kinds that differ only in case, and fields named like SQL
//! keywords or the tables' own columns.

use super::dump;
use crate::common::{db, raw};
use autoshard::{shard_fold, shard_method, Error, Pending, Shardable, Sqlite, Store};

// A hostile `#[shard(kind = "...")]` is a compile error (ui-tests/tests/ui/bad_kind_name.rs);
// what only the database can tell is two kinds that share tables because
// SQL identifiers ignore case.
#[derive(Shardable, Debug)]
#[shard(kind = "Vote")]
struct VoteUpper {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 2)]
    n: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl VoteUpper {
    #[shard_fold]
    fn fold_n(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[derive(Shardable, Debug)]
#[shard(kind = "vote")]
struct VoteLower {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 2)]
    n: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl VoteLower {
    #[shard_fold]
    fn fold_n(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[test]
fn kinds_that_differ_only_in_case_are_refused() {
    let db = db();
    db.store
        .insert(&VoteUpper {
            id: 1,
            n: 1,
            pending: Pending::default(),
        })
        .unwrap();
    let before = dump(&db.path, "vote");

    let lower = VoteLower {
        id: 2,
        n: 2,
        pending: Pending::default(),
    };
    let err = db.store.insert(&lower).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidName { name, .. } if name == "vote"),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    // Every entry point refuses it, not just insert, and from another handle.
    let other = Sqlite::open(&db.path).unwrap();
    for store in [&db.store, &other] {
        let err = store.load::<VoteLower>(&1).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
        let err = store.delete::<VoteLower>(&1).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
        let err = store.compact::<VoteLower>().unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
    }
    assert_eq!(dump(&db.path, "vote"), before);
    let kinds: Vec<String> = raw(&db.path)
        .prepare("SELECT kind FROM autoshard_kinds")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(kinds, ["Vote"]);
    assert_eq!(db.store.load::<VoteUpper>(&1).unwrap().unwrap().n, 1);
}

/// Field names that are SQL keywords, Rust keywords, or the store's own
/// column names: they are only ever bound as parameters, so they are data.
#[derive(Shardable, Debug)]
#[shard(kind = "Keywords")]
struct Keywords {
    #[shard(id)]
    key: String,
    r#type: String,
    id: i64,
    doc: String,
    #[shard(neutral = 0, shards = 3)]
    select: i64,
    #[shard(neutral = 0)]
    r#where: i64,
    #[shard(neutral = 0, shards = 2)]
    value: i64,
    #[shard(neutral = 0)]
    shard: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Keywords {
    #[shard_method]
    fn bump(&mut self) {
        self.select += 1;
        self.r#where += 2;
        self.value += 3;
        self.shard += 4;
    }
    #[shard_fold]
    fn fold_select(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_where(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_value(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_shard(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[test]
fn keyword_and_column_named_fields_are_just_data() {
    let db = db();
    let k = Keywords {
        key: "'; DROP TABLE as_entity_keywords; --".into(),
        r#type: "\" OR 1=1 --".into(),
        id: -7,
        doc: "{\"not\": \"the document\"}".into(),
        select: 0,
        r#where: 0,
        value: 0,
        shard: 0,
        pending: Pending::default(),
    };
    db.store.insert(&k).unwrap();
    let mut k: Keywords = db.store.load(&k.key).unwrap().unwrap();
    for _ in 0..5 {
        k.bump();
        db.store.save(&mut k).unwrap();
    }
    db.store.compact::<Keywords>().unwrap();
    let loaded: Keywords = db.store.load(&k.key).unwrap().unwrap();
    assert_eq!(loaded.r#type, "\" OR 1=1 --");
    assert_eq!(
        (loaded.id, loaded.doc.as_str()),
        (-7, "{\"not\": \"the document\"}")
    );
    assert_eq!(
        (loaded.select, loaded.r#where, loaded.value, loaded.shard),
        (5, 10, 15, 20)
    );
    for (field, rows) in [("select", 3), ("value", 2), ("shard", 1)] {
        assert_eq!(
            db.store.shard_count::<Keywords>(&k.key, field).unwrap(),
            rows
        );
    }
    // A raw identifier is stored under its plain name, as serde names it
    // (before the derive unrawed names, this was "r#where" and failed).
    assert_eq!(
        db.store.shard_count::<Keywords>(&k.key, "where").unwrap(),
        1
    );
    let (docs, _) = dump(&db.path, "keywords");
    let doc: serde_json::Value = serde_json::from_str(docs.values().next().unwrap()).unwrap();
    assert_eq!(doc["type"], "\" OR 1=1 --");
}

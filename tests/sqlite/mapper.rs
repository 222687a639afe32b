//! SQLite-only checks of the rows the store writes: a second, raw connection
//! on the same file edits and reads `as_entity_<kind>` and `as_shard_<kind>`
//! behind the store's back, and SQLite's own shard numbering (a dynamic save
//! appends at `max(shard) + 1`). The behaviour every store shares is tested
//! once for all stores in `stores_mapper/`.

use autoshard::{CompactionStats, Error, Pending, Saved};
use autoshard::{Sqlite, Store};
use rusqlite::types::Value as Sql;
use std::collections::BTreeMap;
use std::path::Path;

use crate::common;
use crate::entities;
use common::{db, raw, Db};
use entities::{DynamicSwitch, Question, StaticSwitch};

// --- helpers -------------------------------------------------------------

/// Every shard row of kind `base`, keyed `(entity, field, shard)`.
type Rows = BTreeMap<(String, String, i64), Sql>;

fn shard_rows(path: &Path, base: &str) -> Rows {
    let conn = raw(path);
    let mut stmt = conn
        .prepare(&format!(
            "SELECT entity, field, shard, value FROM as_shard_{base}"
        ))
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            let entity: Sql = r.get(0)?;
            let entity = match entity {
                Sql::Integer(i) => i.to_string(),
                Sql::Text(s) => s,
                other => panic!("unexpected entity key {other:?}"),
            };
            Ok(((entity, r.get(1)?, r.get(2)?), r.get(3)?))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// The rows of one field of one entity: shard number -> value.
fn field_rows(path: &Path, base: &str, entity: &str, field: &str) -> BTreeMap<i64, Sql> {
    shard_rows(path, base)
        .into_iter()
        .filter(|((e, f, _), _)| e == entity && f == field)
        .map(|((_, _, s), v)| (s, v))
        .collect()
}

fn int_sum(rows: &BTreeMap<i64, Sql>) -> i64 {
    rows.values()
        .map(|v| match v {
            Sql::Integer(i) => *i,
            other => panic!("expected an integer, got {other:?}"),
        })
        .sum()
}

fn documents(path: &Path, base: &str) -> BTreeMap<String, String> {
    let conn = raw(path);
    let mut stmt = conn
        .prepare(&format!("SELECT id, doc FROM as_entity_{base}"))
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            let id: Sql = r.get(0)?;
            let id = match id {
                Sql::Integer(i) => i.to_string(),
                Sql::Text(s) => s,
                other => panic!("unexpected id {other:?}"),
            };
            Ok((id, r.get(1)?))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn saved(s: Saved) -> (u32, bool, u32) {
    (s.attempts, s.document_written, s.shard_writes)
}

const NOTHING: (u32, bool, u32) = (0, false, 0);

fn stats(s: &CompactionStats) -> (u64, u64, u64, u64) {
    (
        s.entities_visited,
        s.entities_compacted,
        s.rows_merged,
        s.batches,
    )
}

/// The rows that differ between two dumps (present in either).
// --- load ----------------------------------------------------------------

#[test]
fn load_folds_every_shard_row() {
    let db = db();
    db.store.insert(&Question::new(1, 0, 0)).unwrap();
    // Rows written behind the store's back, including a dynamic row with a
    // gap in the numbering: load must fold them all, whatever they are.
    let conn = raw(&db.path);
    for shard in 0..10 {
        conn.execute(
            "UPDATE as_shard_question SET value = ?1 WHERE entity = 1 AND field = 'votes' AND shard = ?2",
            (shard * 100 + 1, shard),
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO as_shard_question (entity, field, shard, value) VALUES (1, 'views', 7, 40), (1, 'views', 3, 2)",
        [],
    )
    .unwrap();

    let mut q: Question = db.store.load(&1).unwrap().unwrap();
    assert_eq!(q.votes, (0..10).map(|s| s * 100 + 1).sum::<i64>());
    assert_eq!(q.views, 42);
    // Pending is neutral after a load: saving at once writes nothing.
    assert_eq!(saved(db.store.save(&mut q).unwrap()), NOTHING);
}

// --- save ----------------------------------------------------------------

#[test]
fn the_document_is_written_only_when_an_unsharded_field_changed() {
    let db = db();
    db.store.insert(&Question::new(1, 0, 0)).unwrap();
    let mut q: Question = db.store.load(&1).unwrap().unwrap();

    // Another program edits the document: a save that believes the document
    // unchanged must not overwrite it, which shows it did not write it.
    let external = r#"{"title":"edited elsewhere"}"#;
    raw(&db.path)
        .execute(
            "UPDATE as_entity_question SET doc = ?1 WHERE id = 1",
            [external],
        )
        .unwrap();
    q.vote(1);
    let s = db.store.save(&mut q).unwrap();
    assert!(!s.document_written);
    assert_eq!(saved(s), (1, false, 1));
    assert_eq!(documents(&db.path, "question")["1"], external);

    q.title = "new title".into();
    let s = db.store.save(&mut q).unwrap();
    assert_eq!(saved(s), (1, true, 0));
    let doc: serde_json::Value =
        serde_json::from_str(&documents(&db.path, "question")["1"]).unwrap();
    assert_eq!(doc, serde_json::json!({ "title": "new title" }));

    // The snapshot moved with the save: the same title is not written again.
    raw(&db.path)
        .execute(
            "UPDATE as_entity_question SET doc = ?1 WHERE id = 1",
            [external],
        )
        .unwrap();
    q.view();
    assert_eq!(saved(db.store.save(&mut q).unwrap()), (1, false, 1));
    assert_eq!(documents(&db.path, "question")["1"], external);
}

// --- changing the shard count ----------------------------------------------

fn hits(db: &Db) -> BTreeMap<i64, Sql> {
    field_rows(&db.path, "switch", "1", "hits")
}

#[test]
fn dynamic_to_static() {
    let db = db();
    db.store
        .insert(&DynamicSwitch {
            id: 1,
            hits: 1,
            pending: Pending::default(),
        })
        .unwrap();
    let mut d: DynamicSwitch = db.store.load(&1).unwrap().unwrap();
    for _ in 0..6 {
        d.hit();
        db.store.save(&mut d).unwrap();
    }
    assert_eq!(hits(&db).len(), 7);

    let mut s: StaticSwitch = db.store.load(&1).unwrap().unwrap();
    assert_eq!(s.hits, 7);
    for _ in 0..10 {
        let before = hits(&db);
        s.hit();
        db.store.save(&mut s).unwrap();
        let after = hits(&db);
        let changed: Vec<_> = after
            .keys()
            .filter(|k| before.get(k) != after.get(k))
            .collect();
        assert_eq!(changed.len(), 1);
        assert!((0..4).contains(changed[0]), "{changed:?}");
    }
    // Static compaction folds shards 4..6 (left by dynamic saves) into 0 and
    // keeps 1..3 as they are.
    let before = hits(&db);
    assert_eq!(
        stats(&db.store.compact::<StaticSwitch>().unwrap()),
        (1, 1, 3, 1)
    );
    let after = hits(&db);
    assert_eq!(after.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    for shard in 1..4 {
        assert_eq!(after[&shard], before[&shard]);
    }
    assert_eq!(int_sum(&after), 17);
    assert_eq!(db.store.load::<StaticSwitch>(&1).unwrap().unwrap().hits, 17);
}

// --- in-memory -------------------------------------------------------------

#[test]
fn the_in_memory_store_is_a_full_store() {
    let store = Sqlite::memory().unwrap();
    store.insert(&Question::new(1, 2, 0)).unwrap();
    let mut q: Question = store.load(&1).unwrap().unwrap();
    q.vote(3);
    q.view();
    q.title = "in memory".into();
    assert_eq!(saved(store.save(&mut q).unwrap()), (1, true, 2));
    assert_eq!(store.shard_count::<Question>(&1, "votes").unwrap(), 10);
    assert_eq!(store.shard_count::<Question>(&1, "views").unwrap(), 2);
    assert_eq!(stats(&store.compact::<Question>().unwrap()), (1, 1, 1, 1));
    let q: Question = store.load(&1).unwrap().unwrap();
    assert_eq!((q.title.as_str(), q.votes, q.views), ("in memory", 5, 1));
    // A clone shares the database; a second memory() is a different one.
    let clone = store.clone();
    assert_eq!(clone.load::<Question>(&1).unwrap().unwrap().votes, 5);
    assert!(Sqlite::memory()
        .unwrap()
        .load::<Question>(&1)
        .unwrap()
        .is_none());
    assert!(store.delete::<Question>(&1).unwrap());
    assert!(clone.load::<Question>(&1).unwrap().is_none());
}

// --- databases from before incarnations (issue 12) ---------------------------

/// A kind's tables as autoshard made them before incarnations: no
/// `incarnation` column in the entity table.
const WITHOUT_INCARNATIONS: &str = r#"
    CREATE TABLE autoshard_kinds (
        kind TEXT PRIMARY KEY NOT NULL,
        base TEXT NOT NULL UNIQUE,
        id_type TEXT NOT NULL
    ) STRICT;
    INSERT INTO autoshard_kinds VALUES ('Question', 'question', 'integer');
    CREATE TABLE as_entity_question (
        id INTEGER PRIMARY KEY NOT NULL,
        doc TEXT NOT NULL
    ) STRICT;
    CREATE TABLE as_shard_question (
        entity INTEGER NOT NULL REFERENCES as_entity_question (id) ON DELETE CASCADE,
        field TEXT NOT NULL,
        shard INTEGER NOT NULL,
        value ANY NOT NULL,
        PRIMARY KEY (entity, field, shard)
    ) STRICT, WITHOUT ROWID;
    INSERT INTO as_entity_question VALUES (1, '{"title":"old"}');
    INSERT INTO as_shard_question VALUES (1, 'votes', 0, 7), (1, 'votes', 1, 0), (1, 'views', 0, 3);
"#;

fn incarnations(path: &Path) -> BTreeMap<i64, i64> {
    let conn = raw(path);
    let mut stmt = conn
        .prepare("SELECT id, incarnation FROM as_entity_question")
        .unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

/// Without the `ALTER TABLE` in `KindTables::ensure` the first load fails
/// with `no such column: incarnation`.
#[test]
fn a_database_from_before_incarnations_gains_the_column_and_keeps_its_entities() {
    let db = db();
    raw(&db.path).execute_batch(WITHOUT_INCARNATIONS).unwrap();

    let mut old: Question = db.store.load(&1).unwrap().unwrap();
    assert_eq!((old.title.as_str(), old.votes, old.views), ("old", 7, 3));
    // Entities stored before are incarnation 0, which no insert hands out.
    assert_eq!(incarnations(&db.path), BTreeMap::from([(1, 0)]));
    old.vote(1);
    old.view();
    assert_eq!(saved(db.store.save(&mut old).unwrap()), (1, false, 2));

    // Another handle (another process, say) finds the column there.
    let other = Sqlite::open(&db.path).unwrap();
    let mut again: Question = other.load(&1).unwrap().unwrap();
    assert_eq!((again.votes, again.views), (8, 4));
    again.vote(1);
    other.save(&mut again).unwrap();

    // Replaced, the old entity's objects are stale like any others.
    assert!(db.store.delete::<Question>(&1).unwrap());
    db.store.insert(&Question::new(1, 0, 0)).unwrap();
    assert_ne!(incarnations(&db.path)[&1], 0);
    old.vote(1);
    let err = db.store.save(&mut old).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    assert_eq!(db.store.load::<Question>(&1).unwrap().unwrap().votes, 0);
}

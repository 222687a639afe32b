//! Corrupted rows: a shard value, a dynamic row or a document that does
//! not decode is a typed error naming where it is, and a save that meets
//! one keeps its delta.

use super::{dump, Question};
use crate::common::{db, raw};
use autoshard::{Error, Store};
use std::path::Path;

fn corrupt(path: &Path, sql: &str) {
    assert_eq!(raw(path).execute(sql, []).unwrap(), 1, "{sql}");
}

fn assert_corrupt<T: std::fmt::Debug>(result: autoshard::Result<T>, field: &str) {
    match result {
        Err(Error::Corrupt {
            kind: "Question",
            id,
            field: f,
            reason,
        }) => {
            assert_eq!((id.as_str(), f.as_str()), ("1", field), "{reason}");
            assert!(!reason.is_empty());
        }
        other => panic!("expected Corrupt for {field}, got {other:?}"),
    }
}

#[test]
fn a_corrupted_shard_value_is_a_typed_error_naming_kind_id_and_field() {
    let values = ["'garbage'", "1.5", "x'00ff'", "'\"12\"'", "'[1]'"];
    for bad in values {
        let db = db();
        db.store.insert(&Question::new(1)).unwrap();
        db.store.insert(&Question::new(2)).unwrap();
        let mut q: Question = db.store.load(&1).unwrap().unwrap();
        corrupt(
            &db.path,
            &format!("UPDATE as_shard_question SET value = {bad} WHERE entity = 1 AND field = 'votes' AND shard = 2"),
        );
        let before = dump(&db.path, "question");
        assert_corrupt(db.store.load::<Question>(&1), "votes");
        // Compaction folds only groups that need it, and `votes` keeps its
        // rows within 0..4, so the bad value is left alone; SQLite types
        // the store never writes (a BLOB) are refused as soon as read, and
        // the group is skipped (reported, the other entities compacted).
        let stats = db.store.compact::<Question>().unwrap();
        assert_eq!(stats.rows_merged, 0);
        if bad.starts_with("x'") {
            assert_eq!(stats.entities_skipped, 1, "{stats:?}");
            let skipped = &stats.skipped[0];
            assert_eq!((skipped.id.as_str(), skipped.field), ("1", "votes"));
            assert!(
                skipped.error.starts_with("corrupt Question 1"),
                "{skipped:?}"
            );
        } else {
            assert_eq!(stats.entities_skipped, 0, "{stats:?}");
        }
        assert_eq!(dump(&db.path, "question"), before);
        // A save that never reads the bad row still succeeds; the error is
        // where the value is read, never a silent zero.
        q.view();
        db.store.save(&mut q).unwrap();
        assert_corrupt(db.store.load::<Question>(&1), "votes");
        // The neighbour is unaffected.
        assert_eq!(db.store.load::<Question>(&2).unwrap().unwrap().votes, 0);
        let after = dump(&db.path, "question");
        assert_eq!(after.0, before.0, "{bad}");
        assert_eq!(after.1.len(), before.1.len() + 1, "{bad}");
    }
}

#[test]
fn a_save_that_meets_a_corrupted_shard_fails_and_keeps_its_delta() {
    let db = db();
    db.store.insert(&Question::new(1)).unwrap();
    // Loaded before the row goes bad: load refuses the entity after.
    let mut q: Question = db.store.load(&1).unwrap().unwrap();
    corrupt(
        &db.path,
        "UPDATE as_shard_question SET value = 'garbage' WHERE entity = 1 AND field = 'votes' AND shard = 2",
    );
    assert_corrupt(db.store.load::<Question>(&1), "votes");
    let mut failures = 0;
    for _ in 0..100 {
        q.vote();
        match db.store.save(&mut q) {
            Ok(_) => {}
            Err(e) => {
                assert_corrupt(Err::<(), _>(e), "votes");
                failures += 1;
            }
        }
    }
    // Each save picks shard 2 with probability 1/4: 100 misses are 3e-13.
    assert!(failures > 0);
    let mut tries = 0;
    while let Err(e) = db.store.save(&mut q) {
        assert_corrupt(Err::<(), _>(e), "votes");
        tries += 1;
        assert!(tries < 200, "the kept delta never found a good shard");
    }
    // Every vote landed exactly once, all on the good shards.
    let conn = raw(&db.path);
    let good: i64 = conn
        .query_row(
            "SELECT sum(value) FROM as_shard_question WHERE entity = 1 AND field = 'votes' AND shard <> 2",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(good, 100);
}

#[test]
fn a_corrupted_dynamic_row_is_named_too() {
    let db = db();
    db.store.insert(&Question::new(1)).unwrap();
    corrupt(
        &db.path,
        "INSERT INTO as_shard_question (entity, field, shard, value) VALUES (1, 'views', 1, 'oops')",
    );
    let load_error = db.store.load::<Question>(&1);
    let stats = db.store.compact::<Question>().unwrap();
    assert_eq!(stats.entities_skipped, 1, "{stats:?}");
    assert_eq!(
        stats.skipped[0].error,
        load_error.as_ref().unwrap_err().to_string()
    );
    assert_corrupt(load_error, "views");
}

#[test]
fn a_corrupted_document_is_a_typed_error() {
    for (doc, field) in [
        ("not json", "<document>"),
        ("[1, 2]", "<document>"),
        ("{\"title\": 5}", "title"),
    ] {
        let db = db();
        db.store.insert(&Question::new(1)).unwrap();
        raw(&db.path)
            .execute("UPDATE as_entity_question SET doc = ?1 WHERE id = 1", [doc])
            .unwrap();
        assert_corrupt(db.store.load::<Question>(&1), field);
        // Sharded fields are untouched and compaction, which never reads
        // documents, still works.
        db.store.compact::<Question>().unwrap();
    }
}

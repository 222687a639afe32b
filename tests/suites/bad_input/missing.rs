//! Missing entities, unknown field names and ids above `i64::MAX`: a
//! defined answer from every call, and nothing written.

use super::{dump, is_empty, Question};
use crate::common::db;
use autoshard::{Error, Store};

#[test]
fn a_missing_entity_has_a_defined_answer_everywhere() {
    let db = db();
    db.store.insert(&Question::new(2)).unwrap();
    assert!(db.store.load::<Question>(&1).unwrap().is_none());
    let mut q = Question::new(1);
    q.vote();
    assert!(matches!(
        db.store.save(&mut q),
        Err(Error::NotFound {
            kind: "Question",
            ..
        })
    ));
    assert!(!db.store.delete::<Question>(&1).unwrap());
    let err = db.store.shard_count::<Question>(&1, "votes").unwrap_err();
    assert!(
        matches!(&err, Error::NotFound { id, .. } if id == "1"),
        "{err:?}"
    );

    for field in ["title", "pending", "id", "nope", "votes' OR '1'='1", ""] {
        let err = db.store.shard_count::<Question>(&2, field).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidName { name, .. } if name == field),
            "{err:?}"
        );
    }
    assert_eq!(db.store.shard_count::<Question>(&2, "votes").unwrap(), 4);
    // The never-inserted object kept its delta: inserting it stores it once.
    db.store.insert(&q).unwrap();
    assert_eq!(db.store.load::<Question>(&1).unwrap().unwrap().votes, 1);
}

#[test]
fn a_u64_id_above_i64_max_is_refused_and_writes_nothing() {
    let db = db();
    for id in [i64::MAX as u64 + 1, u64::MAX] {
        let err = db.store.insert(&Question::new(id)).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidName { name, .. } if *name == id.to_string()),
            "{err:?}"
        );
        assert!(matches!(
            db.store.load::<Question>(&id),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            db.store.delete::<Question>(&id),
            Err(Error::InvalidName { .. })
        ));
        let mut q = Question::new(id);
        q.vote();
        assert!(matches!(
            db.store.save(&mut q),
            Err(Error::InvalidName { .. })
        ));
    }
    assert!(is_empty(&dump(&db.path, "question")));
    // The wrapped value is a different, valid id; it must not have been used.
    assert!(db.store.load::<Question>(&0).unwrap().is_none());
}

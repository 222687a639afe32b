//! Stale objects (issue 12): an object of a deleted incarnation, copies
//! sharing one pending delta, and sharded fields changed outside a shard
//! method.

use super::{saved, NOTHING};
use crate::entities::Question;
use crate::stores::TestStore;
use autoshard::{shard_fold, shard_method, Error, Pending, Shardable, Store};

store_tests!(
    a_stale_object_cannot_write_into_a_new_incarnation,
    a_copy_cannot_commit_the_same_pending_delta_twice,
    copies_saving_at_once_commit_the_shared_delta_once,
    changing_a_sharded_field_outside_a_shard_method_is_refused,
);
redis_cluster_tests!(a_stale_object_cannot_write_into_a_new_incarnation);

/// Issue 12, item 2. Before incarnations, the first stale save below
/// returned `Ok(Saved { attempts: 1, document_written: false, shard_writes: 2 })`
/// and its vote and view landed in the entity inserted after the delete
/// (`unwrap_err()` on an `Ok` value), on SQLite and both PostgreSQL modes.
fn a_stale_object_cannot_write_into_a_new_incarnation<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Question::new(1, 10, 10)).unwrap();
    let mut stale: Question = db.load(&1).unwrap().unwrap();
    let mut stale_doc: Question = db.load(&1).unwrap().unwrap();
    assert!(db.delete::<Question>(&1).unwrap());
    let mut inserted = Question::new(1, 0, 0);
    db.insert(&inserted).unwrap();
    let rows = db.shard_rows("question");
    let docs = db.documents("question");

    // Only shard rows to write: the save does not write the document row,
    // so it must check the incarnation on its own...
    stale.vote(1);
    stale.view();
    let err = db.save(&mut stale).unwrap_err();
    assert!(is_not_found(&err, "Question", "1"), "{err:?}");
    // ...and with a document to write too.
    stale_doc.title = "stale".into();
    stale_doc.vote(1);
    let err = db.save(&mut stale_doc).unwrap_err();
    assert!(is_not_found(&err, "Question", "1"), "{err:?}");
    assert_eq!(db.shard_rows("question"), rows);
    assert_eq!(db.documents("question"), docs);
    // Retrying cannot help: the object belongs to the deleted entity.
    let err = db.save(&mut stale).unwrap_err();
    assert!(is_not_found(&err, "Question", "1"), "{err:?}");
    assert_eq!(db.shard_rows("question"), rows);

    // The object `insert` wrote knows its incarnation, and so does a load.
    inserted.vote(2);
    assert_eq!(saved(db.save(&mut inserted).unwrap()), (1, false, 1));
    let mut loaded: Question = db.load(&1).unwrap().unwrap();
    loaded.vote(3);
    loaded.title = "current".into();
    assert_eq!(saved(db.save(&mut loaded).unwrap()), (1, true, 1));

    // An object built in code was neither loaded nor inserted: it belongs
    // to no incarnation, so its save cannot reach the stored entity.
    let mut built = Question::new(1, 100, 0);
    built.vote(1);
    let err = db.save(&mut built).unwrap_err();
    assert!(is_not_found(&err, "Question", "1"), "{err:?}");

    // The inserted object goes stale in turn once its entity is replaced.
    assert!(db.delete::<Question>(&1).unwrap());
    db.insert(&Question::new(1, 7, 0)).unwrap();
    inserted.vote(1);
    let err = db.save(&mut inserted).unwrap_err();
    assert!(is_not_found(&err, "Question", "1"), "{err:?}");
    let q: Question = db.load(&1).unwrap().unwrap();
    assert_eq!((q.title.as_str(), q.votes, q.views), ("question 1", 7, 0));
}

fn is_not_found(err: &Error, kind: &str, id: &str) -> bool {
    matches!(err, Error::NotFound { kind: k, id: i } if *k == kind && i == id)
}

#[derive(Shardable, Debug, Clone)]
struct Poll {
    #[shard(id)]
    id: u64,
    title: String,
    #[shard(neutral = 0, shards = 4)]
    yes: i64,
    #[shard(neutral = 0)]
    seen: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Poll {
    fn new(id: u64) -> Self {
        Poll {
            id,
            title: format!("poll {id}"),
            yes: 0,
            seen: 0,
            pending: Pending::default(),
        }
    }
    #[shard_method]
    fn vote(&mut self) {
        self.yes += 1;
        self.seen += 1;
    }
    #[shard_fold]
    fn fold_yes(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_seen(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn is_stale_copy(err: &Error, kind: &str, id: &str) -> bool {
    matches!(err, Error::StaleCopy { kind: k, id: i } if *k == kind && i == id)
}

fn poll_totals<S: Store>(store: &S, id: u64) -> (i64, i64) {
    let p: Poll = store.load(&id).unwrap().unwrap();
    (p.yes, p.seen)
}

/// Issue 12, item 3. Before the commit token, the copy's save returned
/// `Ok(Saved { attempts: 1, document_written: false, shard_writes: 2 })`
/// and the one vote was stored twice (`unwrap_err()` on an `Ok` value).
fn a_copy_cannot_commit_the_same_pending_delta_twice<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Poll::new(1)).unwrap();
    let mut a: Poll = db.load(&1).unwrap().unwrap();
    a.vote();
    let mut b = a.clone();
    assert_eq!(saved(db.save(&mut a).unwrap()), (1, false, 2));
    let rows = db.shard_rows("poll");
    let docs = db.documents("poll");

    let err = db.save(&mut b).unwrap_err();
    assert!(is_stale_copy(&err, "Poll", "1"), "{err:?}");
    assert!(!err.is_retryable());
    // Whatever the copy does next, it stays refused and writes nothing.
    b.vote();
    b.title = "copy".into();
    let err = db.save(&mut b).unwrap_err();
    assert!(is_stale_copy(&err, "Poll", "1"), "{err:?}");
    assert_eq!(db.shard_rows("poll"), rows);
    assert_eq!(db.documents("poll"), docs);
    assert_eq!(poll_totals(&db.store, 1), (1, 1));

    // The copy that committed first goes on as a normal object.
    a.vote();
    db.save(&mut a).unwrap();
    // Reloading fixes the refused copy.
    let mut b: Poll = db.load(&1).unwrap().unwrap();
    b.vote();
    db.save(&mut b).unwrap();
    assert_eq!(poll_totals(&db.store, 1), (3, 3));

    // A copy made with nothing pending shares no delta: both save, as two
    // loads of the same entity would.
    let mut c = b.clone();
    c.vote();
    b.vote();
    db.save(&mut c).unwrap();
    db.save(&mut b).unwrap();
    assert_eq!(poll_totals(&db.store, 1), (5, 5));

    // Of three copies sharing a delta, the first to commit wins.
    let mut d: Poll = db.load(&1).unwrap().unwrap();
    d.vote();
    let mut e = d.clone();
    let mut f = e.clone();
    db.save(&mut e).unwrap();
    for copy in [&mut d, &mut f] {
        let err = db.save(copy).unwrap_err();
        assert!(is_stale_copy(&err, "Poll", "1"), "{err:?}");
    }
    assert_eq!(poll_totals(&db.store, 1), (6, 6));
}

/// Two copies saved from two threads at once: the shared delta lands once.
fn copies_saving_at_once_commit_the_shared_delta_once<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Poll::new(1)).unwrap();
    for round in 1..=10 {
        let mut a: Poll = db.load(&1).unwrap().unwrap();
        a.vote();
        let copies = [a.clone(), a];
        let barrier = std::sync::Barrier::new(2);
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = copies
                .into_iter()
                .map(|mut copy| {
                    let (store, barrier) = (&db.store, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        store.save(&mut copy).map(drop)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "round {round}: {results:?}");
        for err in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(is_stale_copy(err, "Poll", "1"), "{err:?}");
        }
        assert_eq!(poll_totals(&db.store, 1), (round, round));
    }
}

fn is_direct_write(err: &Error, kind: &str, id: &str, field: &str) -> bool {
    matches!(err, Error::DirectWrite { kind: k, id: i, field: f }
        if *k == kind && i == id && *f == field)
}

/// Issue 12, item 4. Before the check, the first save below returned
/// `Ok(Saved { attempts: 0, document_written: false, shard_writes: 0 })`:
/// nothing written while the object showed 15 votes (`unwrap_err()` on an
/// `Ok` value).
fn changing_a_sharded_field_outside_a_shard_method_is_refused<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Question::new(1, 10, 10)).unwrap();
    let rows = db.shard_rows("question");
    let docs = db.documents("question");
    let mut q: Question = db.load(&1).unwrap().unwrap();

    q.votes = 15;
    let err = db.save(&mut q).unwrap_err();
    assert!(is_direct_write(&err, "Question", "1", "votes"), "{err:?}");
    assert!(!err.is_retryable());
    assert_eq!(q.votes, 15);
    // With pending deltas and a changed document: all of it is refused.
    q.votes = 10;
    q.vote(1);
    q.views += 3;
    q.title = "changed".into();
    let err = db.save(&mut q).unwrap_err();
    assert!(is_direct_write(&err, "Question", "1", "views"), "{err:?}");
    assert_eq!(db.shard_rows("question"), rows);
    assert_eq!(db.documents("question"), docs);

    // Undone, the same object saves its deltas and document once.
    q.views -= 3;
    assert_eq!(saved(db.save(&mut q).unwrap()), (1, true, 1));
    // A direct write that leaves the value the store expects is no change.
    q.votes = 11;
    assert_eq!(saved(db.save(&mut q).unwrap()), NOTHING);
    // After a save the expected value is the saved aggregate.
    q.view();
    q.views = 0;
    let err = db.save(&mut q).unwrap_err();
    assert!(is_direct_write(&err, "Question", "1", "views"), "{err:?}");
    q.views = 11;
    db.save(&mut q).unwrap();
    // An inserted object is checked against what it inserted.
    let mut inserted = Question::new(2, 4, 0);
    db.insert(&inserted).unwrap();
    inserted.votes += 1;
    let err = db.save(&mut inserted).unwrap_err();
    assert!(is_direct_write(&err, "Question", "2", "votes"), "{err:?}");

    let q: Question = db.load(&1).unwrap().unwrap();
    assert_eq!((q.title.as_str(), q.votes, q.views), ("changed", 11, 11));
    assert_eq!(db.load::<Question>(&2).unwrap().unwrap().votes, 4);
}

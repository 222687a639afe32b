//! Contention: a locked database is a retryable busy error, then the same
//! save succeeds; `Duration::MAX` as busy timeout waits without a limit.

use super::{dump, Question};
use crate::common::{db_with, raw};
use autoshard::{Error, Store};
use std::sync::mpsc;
use std::time::Duration;

#[test]
fn a_locked_database_is_busy_then_the_same_save_succeeds() {
    let db = db_with(|b| b.busy_timeout(Duration::from_millis(50)).max_attempts(2));
    db.store.insert(&Question::new(1)).unwrap();
    let mut q: Question = db.store.load(&1).unwrap().unwrap();
    q.vote();
    q.view();
    q.title = "while locked".into();

    let locker = raw(&db.path);
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let before = dump(&db.path, "question");

    let err = db.store.save(&mut q).unwrap_err();
    assert!(matches!(err, Error::Busy { attempts: 2 }), "{err:?}");
    assert!(err.is_retryable());
    let err = db.store.insert(&Question::new(2)).unwrap_err();
    assert!(matches!(err, Error::Busy { .. }), "{err:?}");
    let err = db.store.compact::<Question>().unwrap_err();
    assert!(matches!(err, Error::Busy { .. }), "{err:?}");
    // WAL: readers are not blocked by the writer.
    assert_eq!(db.store.load::<Question>(&1).unwrap().unwrap().votes, 0);

    locker.execute_batch("COMMIT").unwrap();
    assert_eq!(dump(&db.path, "question"), before);

    let saved = db.store.save(&mut q).unwrap();
    assert_eq!(
        (saved.attempts, saved.document_written, saved.shard_writes),
        (1, true, 2)
    );
    let q: Question = db.store.load(&1).unwrap().unwrap();
    assert_eq!((q.title.as_str(), q.votes, q.views), ("while locked", 1, 1));
    db.store.insert(&Question::new(2)).unwrap();
}

/// `busy_timeout(Duration::MAX)` means "wait as long as it takes". Before
/// the fix `open` panicked with "overflow when adding duration to instant"
/// (issue 12, item 9); now the deadline saturates, and a save that meets a
/// locked file waits for it.
#[test]
fn a_busy_timeout_of_duration_max_waits_without_a_limit() {
    let db = db_with(|b| b.busy_timeout(Duration::MAX));
    db.store.insert(&Question::new(1)).unwrap();
    let mut q: Question = db.store.load(&1).unwrap().unwrap();
    q.vote();

    let locker = raw(&db.path);
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let saved = db.store.save(&mut q);
            tx.send(()).unwrap();
            saved.unwrap()
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the save did not wait for the lock"
        );
        locker.execute_batch("COMMIT").unwrap();
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the save did not finish after the lock was released");
    });
    assert_eq!(db.store.load::<Question>(&1).unwrap().unwrap().votes, 1);
}

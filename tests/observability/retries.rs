//! Retries, provoked for real on each store's own path: a SQLite write
//! lock held by another connection, and on PostgreSQL (optimistic) a row
//! updated by another transaction under a save's snapshot. Each retry is an
//! `autoshard.retry` span inside the save's span, and one count in
//! `ProcessCounters::retries`.

use crate::capture::Capture;
use crate::{serial, Tally};
use autoshard::{Store, StoreMetrics};
use std::time::Duration;

/// Polls `done` up to ~20 s: what the other side waits for happens on a
/// thread of the test's own (no timing is asserted).
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..4_000 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("never saw {what}");
}

/// Saves `t` on a thread of its own with `capture` installed, while `hold`
/// keeps the save from committing until the capture shows a retry or
/// `blocked` says the save waits, then `release`s.
fn save_against<S: Store + Sync>(
    db: &S,
    t: &mut Tally,
    capture: &Capture,
    blocked: impl FnMut() -> bool,
    release: impl FnOnce(),
) -> autoshard::Saved {
    std::thread::scope(|scope| {
        let saver = scope.spawn(move || capture.run(move || db.save(t)));
        wait_until("the save held up", blocked);
        release();
        saver.join().unwrap().unwrap()
    })
}

#[test]
fn a_sqlite_busy_retry_is_a_span_in_the_save_with_attempt_and_error() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("retry.db");
    let db = autoshard::Sqlite::builder(&path)
        .busy_timeout(Duration::from_millis(50))
        .max_attempts(1_000)
        .open()
        .unwrap();
    db.insert(&Tally::new(1)).unwrap();
    let mut t: Tally = db.load(&1).unwrap().unwrap();

    // Control: with nobody else writing, one attempt and no retry.
    let capture = Capture::default();
    t.hit();
    assert_eq!(capture.run(|| db.save(&mut t)).unwrap().attempts, 1);
    assert!(capture.seen().named("autoshard.retry").is_empty());

    let before = StoreMetrics::snapshot(&db).unwrap().counters;
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    t.hit();
    let seen_retry = || !capture.seen().named("autoshard.retry").is_empty();
    let saved = save_against(&db, &mut t, &capture, seen_retry, || {
        other.execute_batch("COMMIT").unwrap()
    });
    let after = StoreMetrics::snapshot(&db).unwrap().counters;

    let seen = capture.seen();
    let retries = seen.named("autoshard.retry");
    assert_eq!(retries.len() as u32, saved.attempts - 1, "{retries:?}");
    assert_eq!(
        after.retries - before.retries,
        u64::from(saved.attempts - 1)
    );
    let first = &retries[0].fields;
    assert_eq!(
        (first["store"].as_str(), first["attempt"].as_str()),
        ("sqlite", "1")
    );
    assert!(first["error"].contains("locked"), "{first:?}");
    let save = seen.parent_of(retries[0]).unwrap();
    assert_eq!(save.name, "autoshard.save");
    assert_eq!(
        (save.fields["kind"].as_str(), save.fields["id"].as_str()),
        ("Tally", "1")
    );
    assert_eq!(save.fields["attempts"], saved.attempts.to_string());
    // Each retry also shows as an event (what a formatting subscriber prints).
    let retry_at = seen.spans.iter().position(|s| s.name == "autoshard.retry");
    let in_retry = |e: &&crate::capture::EventSeen| e.span == retry_at;
    let event = seen.events.iter().find(in_retry).unwrap();
    assert!(event.fields["message"].contains("retrying"), "{event:?}");
    assert_eq!(db.load::<Tally>(&1).unwrap().unwrap().hits, 2);
}

#[cfg(feature = "postgres")]
#[test]
fn a_postgres_serialization_failure_is_a_retry_span_with_its_sqlstate() {
    use crate::stores::pg;
    use autoshard::{Concurrency, Postgres};
    let _serial = serial();
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let tag = format!("obs_{schema}");
    let db = Postgres::builder(&pg::tagged_url(&tag))
        .schema(&schema)
        .concurrency(Concurrency::Optimistic)
        .max_attempts(10)
        .open()
        .unwrap();
    db.insert(&Tally::new(1)).unwrap();
    let mut t: Tally = db.load(&1).unwrap().unwrap();

    // Control: uncontended, one attempt and no retry.
    let capture = Capture::default();
    t.hit();
    assert_eq!(capture.run(|| db.save(&mut t)).unwrap().attempts, 1);
    assert!(capture.seen().named("autoshard.retry").is_empty());

    // Another transaction updates the row the save will lock; it commits
    // once the save waits for it, after the save's snapshot was taken.
    let mut other = pg::client();
    other
        .batch_execute(&format!(
            "BEGIN; UPDATE \"{schema}\".as_shard_tally SET shard = shard WHERE field = 'hits'"
        ))
        .unwrap();
    let mut watcher = pg::client();
    let waiting = || {
        let n: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
                 WHERE NOT l.granted AND a.application_name = $1",
                &[&tag],
            )
            .unwrap()
            .get(0);
        n > 0
    };
    let before = StoreMetrics::snapshot(&db).unwrap().counters;
    t.hit();
    let saved = save_against(&db, &mut t, &capture, waiting, || {
        other.batch_execute("COMMIT").unwrap()
    });
    let after = StoreMetrics::snapshot(&db).unwrap().counters;

    assert_eq!(saved.attempts, 2);
    assert_eq!(after.retries - before.retries, 1);
    let seen = capture.seen();
    let retries = seen.named("autoshard.retry");
    assert_eq!(retries.len(), 1, "{retries:?}");
    let retry = &retries[0].fields;
    assert_eq!(
        (
            retry["store"].as_str(),
            retry["attempt"].as_str(),
            retry["sqlstate"].as_str()
        ),
        ("postgres", "1", "40001")
    );
    let save = seen.parent_of(retries[0]).unwrap();
    assert_eq!(
        (save.name, save.fields["id"].as_str()),
        ("autoshard.save", "1")
    );
    assert_eq!(db.load::<Tally>(&1).unwrap().unwrap().hits, 2);
}

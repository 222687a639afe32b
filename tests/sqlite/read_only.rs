//! A SQLite file that is read-only for a while: writes fail while it is,
//! and the same handle writes again once it is writable, without being
//! reopened.
//!
//! SQLite opens a file it may not write read-only instead of failing, and
//! such a connection stays read-only for its whole life: a handle that kept
//! it in its pool failed every write after the file was writable again
//! (issue 12, item 11). Before the fix `recovers_once_the_file_is_writable`
//! failed with `SqliteFailure(Error { code: ReadOnly, extended_code: 8 },
//! "attempt to write a readonly database")` on all 10 tries over 2 s after
//! the `chmod` back. Now a connection that meets `SQLITE_READONLY` is closed
//! instead of going back to the pool, and the next call opens a new one.
//!
//! Root ignores file modes, and these tests usually run as root; a test
//! then runs its store calls with the file-system user id of `nobody` on
//! its own thread (`setfsuid` is per thread on Linux, and dropping it to a
//! non-zero id drops root's file capabilities), so the modes count.
#![cfg(target_os = "linux")]

use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::{Error, Sqlite, Store};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::entities;
use entities::Question;

const NOBODY: libc::uid_t = 65534;

/// Runs `f` with this thread's file accesses checked as `nobody`'s when the
/// test runs as root; as any other user the modes count anyway.
fn as_nobody<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Option<libc::uid_t>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(uid) = self.0 {
                // SAFETY: setfsuid only changes this thread's credentials.
                unsafe { libc::setfsuid(uid) };
            }
        }
    }
    // SAFETY: as above; geteuid cannot fail.
    let restore = Restore(if unsafe { libc::geteuid() } == 0 {
        Some(unsafe { libc::setfsuid(NOBODY) } as libc::uid_t)
    } else {
        None
    });
    if restore.0.is_some() {
        // An invalid id changes nothing and answers the current one.
        // SAFETY: as above.
        let now = unsafe { libc::setfsuid(libc::uid_t::MAX) } as libc::uid_t;
        assert_eq!(now, NOBODY, "setfsuid did not take: no read-only file");
    }
    let result = f();
    drop(restore);
    result
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Every file in `dir`: SQLite creates a database's `-wal` and `-shm`
/// with the database's mode, so a read-only database gets read-only ones.
fn chmod_files(dir: &Path, mode: u32) {
    for entry in std::fs::read_dir(dir).unwrap() {
        chmod(&entry.unwrap().path(), mode);
    }
}

/// A directory anyone may write, so `nobody` can create the database and
/// SQLite its `-wal` and `-shm` files.
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o777);
    dir
}

fn is_read_only(e: &Error) -> bool {
    matches!(e, Error::Sqlite(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly))
}

/// A database holding question 1 (0 votes) and board "b" (player "a" at
/// 1), written by a handle that is closed again.
fn prepare(path: &Path) {
    let db = Sqlite::open(path).unwrap();
    db.insert(&Question::new(1, 0, 0)).unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
    board.set_score("a", 1).unwrap();
}

/// Saves one vote, trying `tries` times over about 2 s; the errors seen.
fn save_with_retries(db: &Sqlite, q: &mut Question, tries: u32) -> Result<u32, Vec<String>> {
    let mut errors = Vec::new();
    for attempt in 1..=tries {
        match db.save(q) {
            Ok(_) => return Ok(attempt),
            Err(e) => errors.push(format!("{e:?}")),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(errors)
}

/// While the file is read-only every write fails the same way, nothing
/// changes, and reads work.
#[test]
fn a_read_only_file_refuses_every_write_and_still_reads() {
    let dir = open_dir();
    let path = dir.path().join("ro.db");
    as_nobody(|| {
        prepare(&path);
        chmod_files(dir.path(), 0o444);
        let db = Sqlite::open(&path).unwrap();
        let board = Ranking::open(&db, "b").unwrap();
        let mut q: Question = db.load(&1).unwrap().unwrap();
        q.vote(1);
        for _ in 0..3 {
            let err = db.save(&mut q).unwrap_err();
            assert!(is_read_only(&err), "{err:?}");
            assert!(!err.is_retryable(), "{err:?}");
            let err = db.insert(&Question::new(2, 0, 0)).unwrap_err();
            assert!(is_read_only(&err), "{err:?}");
            let err = board.set_score("a", 2).unwrap_err();
            assert!(is_read_only(&err), "{err:?}");
        }
        assert_eq!(db.load::<Question>(&1).unwrap().unwrap().votes, 0);
        assert!(db.load::<Question>(&2).unwrap().is_none());
        assert_eq!(board.score("a").unwrap(), Some(1));
    });
}

#[test]
fn recovers_once_the_file_is_writable() {
    let dir = open_dir();
    let path = dir.path().join("ro.db");
    as_nobody(|| {
        prepare(&path);
        chmod_files(dir.path(), 0o444);
        let db = Sqlite::builder(&path).pool_size(2).open().unwrap();
        let board = Ranking::open(&db, "b").unwrap();
        let mut q: Question = db.load(&1).unwrap().unwrap();
        q.vote(1);
        let err = db.save(&mut q).unwrap_err();
        assert!(is_read_only(&err), "{err:?}");
        let err = board.set_score("a", 2).unwrap_err();
        assert!(is_read_only(&err), "{err:?}");

        chmod_files(dir.path(), 0o644);
        let started = Instant::now();
        let tries = save_with_retries(&db, &mut q, 10).unwrap_or_else(|errors| {
            panic!(
                "the handle never recovered ({:.1?}): {errors:#?}",
                started.elapsed()
            )
        });
        assert_eq!(tries, 1, "the first save after the chmod succeeds");
        board.set_score("a", 2).unwrap();
        assert_eq!(board.score("a").unwrap(), Some(2));
        // The delta was kept through the failures and counted once.
        q.vote(1);
        db.save(&mut q).unwrap();
        assert_eq!(db.load::<Question>(&1).unwrap().unwrap().votes, 2);
    });
}

/// A database from before append times, read-only when a handle first
/// uses it: the handle cannot add the column and goes on without it (reads
/// and `stats` work, no age), its saves work once the file is writable
/// (unstamped), and the next handle adds the column and stamps. With the
/// `ADD COLUMN` failure propagated instead, the first load failed with
/// `SqliteFailure(Error { code: ReadOnly, extended_code: 8 }, "attempt to
/// write a readonly database")`.
#[test]
fn a_read_only_file_without_append_times_still_opens() {
    let dir = open_dir();
    let path = dir.path().join("old.db");
    as_nobody(|| {
        prepare(&path);
        let first = Sqlite::open(&path).unwrap();
        let mut q: Question = first.load(&1).unwrap().unwrap();
        q.view();
        first.save(&mut q).unwrap();
        drop(first);
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute_batch("ALTER TABLE as_shard_question DROP COLUMN appended_ms")
            .unwrap();
        drop(raw);
        chmod_files(dir.path(), 0o444);
        let db = Sqlite::open(&path).unwrap();
        assert_eq!(db.load::<Question>(&1).unwrap().unwrap().views, 1);
        let stats = db.stats::<Question>().unwrap();
        assert_eq!(stats.field("views").unwrap().pending, 1);
        assert_eq!(stats.oldest_pending(), None);

        chmod_files(dir.path(), 0o644);
        let mut q: Question = db.load(&1).unwrap().unwrap();
        q.view();
        save_with_retries(&db, &mut q, 10).unwrap();
        assert_eq!(db.stats::<Question>().unwrap().oldest_pending(), None);
        let reopened = Sqlite::open(&path).unwrap();
        q.view();
        reopened.save(&mut q).unwrap();
        let stats = reopened.stats::<Question>().unwrap();
        assert_eq!(stats.field("views").unwrap().pending, 3);
        assert!(stats.oldest_pending().is_some());
    });
}

//! Helpers shared by the integration tests that inspect the SQLite rows
//! behind the store's back.

use autoshard::{Sqlite, SqliteBuilder};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A store on a fresh file in its own temporary directory.
pub struct Db {
    // Held so the directory outlives the test.
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub store: Sqlite,
}

#[allow(dead_code)] // not every test file uses every helper
pub fn db() -> Db {
    db_with(|b| b)
}

pub fn db_with(options: impl FnOnce(SqliteBuilder) -> SqliteBuilder) -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.db");
    let store = options(Sqlite::builder(&path)).open().unwrap();
    Db {
        _dir: dir,
        path,
        store,
    }
}

/// The file of a board database's ranking queue: `<path>-queue`.
#[allow(dead_code)] // not every test file uses every helper
pub fn queue_file(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-queue");
    name.into()
}

/// A plain rusqlite connection on the same file, for reading and corrupting
/// rows directly.
pub fn raw(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn
}

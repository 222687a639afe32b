//! The board writer's WAL checkpoints, on a thread of their own.
//!
//! SQLite checkpoints a WAL file from the connection whose commit took it
//! past 1,000 pages, inside that commit: the writer copies its pages into
//! the database file a second time and fsyncs it while it still holds this
//! process's writer turn. A queue worker's batch on a large board writes
//! tens of thousands of pages, so each batch paid a checkpoint of its own
//! pages before the next one could start. The board writer's connection
//! (`writer.rs`) therefore only signals: a thread with a connection of its
//! own runs a `PASSIVE` checkpoint, which never blocks a writer, while the
//! worker already applies its next batch. SQLite restarts the WAL from its
//! start at a write transaction that finds it fully copied, so the file
//! stays bounded while the checkpoints keep up; if they do not (the thread
//! starved of CPU), a commit that finds the WAL past [`INLINE_PAGES`]
//! checkpoints inline as before, which bounds the file whatever the
//! thread does. Durability does not move: a commit is durable once in the
//! WAL; a checkpoint only copies what is already there.

use super::SqliteBuilder;
use crate::error::Result;
use rusqlite::Connection;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// WAL pages after which a commit asks for a checkpoint: SQLite's own
/// `wal_autocheckpoint` default.
const SIGNAL_PAGES: i32 = 1_000;

/// WAL pages after which a commit checkpoints inline, as SQLite would: the
/// bound on the WAL file if the thread falls behind (256 MiB of 4 KiB
/// pages).
const INLINE_PAGES: i32 = 65_536;

impl SqliteBuilder {
    /// Whether the connection ranking boards are written through leaves
    /// its WAL checkpoints to a thread of its own instead of running them
    /// inside the commit that grew the WAL past 1,000 pages (default
    /// `false`). A queue worker then applies its next batch while the last
    /// one's pages are copied into the database file. Other connections
    /// keep SQLite's automatic checkpoint.
    ///
    /// Off by default because on 2 cores it lost more than it saved: a
    /// worker draining alone applied 1.28x faster with it, but with 64
    /// producers enqueueing beside it the checkpoint thread took their
    /// CPU and the applied rate fell to 0.61x (BENCHMARKS.md, "SQLite
    /// queue keeps up"). Turn it on where the machine has a core to spare.
    pub fn background_checkpoint(mut self, on: bool) -> Self {
        self.background_checkpoint = on;
        self
    }
}

#[derive(Default)]
struct State {
    /// A commit asked for a checkpoint the thread has not started yet.
    wanted: bool,
    /// The writer connection is closing: the thread ends.
    closing: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// The checkpoint thread of one board writer connection, ended and joined
/// when that connection closes (it owns this through its WAL hook).
struct Checkpointer {
    shared: Shared,
    thread: Option<JoinHandle<()>>,
}

/// Installs the WAL hook on `writer` (the board writer's connection) and
/// starts its checkpoint thread, if `options` asks for them.
pub(super) fn install(options: &SqliteBuilder, writer: &mut Connection) -> Result<()> {
    if !options.background_checkpoint || options.path.is_none() {
        return Ok(());
    }
    let conn = options.connect()?;
    let shared: Shared = Arc::default();
    let spawned = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("autoshard-checkpoint".into())
            .spawn(move || run(&conn, &shared))
    };
    // Without a thread the connection keeps SQLite's own checkpoints.
    let Ok(thread) = spawned else {
        return Ok(());
    };
    let owner = Checkpointer {
        shared: shared.clone(),
        thread: Some(thread),
    };
    // Setting a WAL hook replaces SQLite's automatic checkpoint on this
    // connection, which is the point.
    writer.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: i32| {
        let _owner = &owner;
        if pages >= INLINE_PAGES {
            return wal.checkpoint();
        }
        if pages >= SIGNAL_PAGES {
            let (state, wake) = &*owner.shared;
            state.lock().unwrap_or_else(|p| p.into_inner()).wanted = true;
            wake.notify_one();
        }
        Ok(())
    }))?;
    Ok(())
}

fn run(conn: &Connection, shared: &Shared) {
    let (state, wake) = &**shared;
    let mut guard = state.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if guard.closing {
            return;
        }
        if !guard.wanted {
            guard = wake.wait(guard).unwrap_or_else(|p| p.into_inner());
            continue;
        }
        guard.wanted = false;
        drop(guard);
        #[cfg(test)]
        drop(tests::GATE.lock());
        // PASSIVE never waits for a lock; a checkpoint that could not copy
        // everything (a reader on an older snapshot, an I/O error) is
        // retried by the next commit's signal, and SQLite itself
        // checkpoints at the last connection's close.
        let _ = conn.wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::PASSIVE);
        guard = state.lock().unwrap_or_else(|p| p.into_inner());
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let (state, wake) = &*self.shared;
        state.lock().unwrap_or_else(|p| p.into_inner()).closing = true;
        wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Sqlite;
    use std::sync::Mutex;

    /// Held by a test, keeps every checkpoint thread of this test binary
    /// from starting its checkpoint.
    pub(super) static GATE: Mutex<()> = Mutex::new(());

    /// WAL frames already copied into the database file: `nBackfill`, the
    /// `u32` at byte 96 of the `-shm` file (SQLite's file format page,
    /// "the WAL-index format").
    fn backfilled(db: &std::path::Path) -> u32 {
        let mut shm = db.as_os_str().to_owned();
        shm.push("-shm");
        let bytes = std::fs::read(shm).unwrap();
        u32::from_ne_bytes(bytes[96..100].try_into().unwrap())
    }

    /// Commits about 8 MB (2,000 pages) through the board writer.
    fn big_commit(db: &Sqlite) {
        db.write_boards_tx(|tx| {
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS big (b BLOB);
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
                 INSERT INTO big SELECT randomblob(4000) FROM n;",
            )?;
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn the_writers_commit_leaves_the_checkpoint_to_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Sqlite::builder(&path)
            .background_checkpoint(true)
            .open()
            .unwrap();
        let gate = GATE.lock().unwrap_or_else(|p| p.into_inner());
        big_commit(&db);
        assert_eq!(backfilled(&path), 0, "the commit checkpointed");
        drop(gate);
        // The thread copies the frames once the gate opens; this waits for
        // it, it does not time it.
        let mut waited = 0;
        while backfilled(&path) == 0 {
            assert!(waited < 6_000, "the thread never checkpointed");
            std::thread::sleep(std::time::Duration::from_millis(10));
            waited += 1;
        }
        big_commit(&db);
        drop(db);
    }

    /// The control: SQLite's own checkpoint runs in the commit.
    #[test]
    fn control_without_the_thread_the_commit_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Sqlite::builder(&path)
            .background_checkpoint(false)
            .open()
            .unwrap();
        let _gate = GATE.lock().unwrap_or_else(|p| p.into_inner());
        big_commit(&db);
        assert!(backfilled(&path) > 0, "the commit did not checkpoint");
    }
}

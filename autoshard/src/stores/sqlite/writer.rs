//! Writers to one database file: this process's queue for SQLite's write
//! lock, and the connection ranking boards are written through.
//!
//! A handle writes its boards through one connection of its own rather
//! than any pooled one, so that connection's page cache
//! ([`SqliteBuilder::writer_cache_size`](super::SqliteBuilder::writer_cache_size))
//! can be sized for the board and stays warm: SQLite keeps a connection's
//! cache across transactions only while no other connection writes the
//! file, and a queue worker, usually its board's only writer, then finds
//! the pages its last batch touched still there. Writers take turns on the
//! file anyway (SQLite has one writer), so one connection costs them no
//! parallelism; readers keep the pool.

use super::Sqlite;
use crate::error::{Error, Result};
use crate::stores::pool::Pool;
use rusqlite::{Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

impl Sqlite {
    /// Runs `body` in a write transaction on the board writer's connection
    /// (a file's; an in-memory database's one connection otherwise), as
    /// [`write`](Sqlite::write) does on a pooled one.
    pub(crate) fn write_boards_tx<R>(
        &self,
        mut body: impl FnMut(&Transaction<'_>) -> Result<R>,
    ) -> Result<(R, u32)> {
        self.transact(true, TransactionBehavior::Immediate, &mut body)
    }

    /// The board writer's pool of one connection, opened on first use, if
    /// `writer` and the database is a file.
    pub(super) fn writer_pool(&self, writer: bool) -> Result<Option<&Pool<rusqlite::Connection>>> {
        let options = &self.inner.options;
        if !writer || options.path.is_none() {
            return Ok(None);
        }
        if let Some(pool) = self.inner.writer.get() {
            return Ok(Some(pool));
        }
        let conn = options.connect_writer()?;
        // A racing first call may have set it: the loser's connection closes.
        Ok(Some(self.inner.writer.get_or_init(|| Pool::new(1, conn))))
    }
}

/// This process's writers to one database file take turns here before they
/// ask SQLite for its write lock.
///
/// SQLite's write lock is not a queue: a writer that finds it taken polls,
/// sleeping between tries, and a busy thread can win it again and again while
/// another starves (BENCHMARKS.md §2b, "the in-process writer lock", has the tail
/// latencies that showed it). Threads of one process, whichever handle they use,
/// therefore wait on this lock instead, which wakes a waiter as soon as it is
/// released; SQLite's lock then mostly contends with other processes.
/// `parking_lot`'s mutex is eventually fair: it lets a running thread take the
/// lock back (cheap: no context switch per transaction) but hands it to the
/// longest waiter at least every 0.5 ms, which bounds starvation. Waiting
/// here counts against the busy timeout like waiting for SQLite.
#[derive(Default)]
pub(super) struct WriterQueue {
    lock: parking_lot::Mutex<()>,
}

impl WriterQueue {
    /// The queue shared by every handle of this process on `path`.
    pub(super) fn for_file(path: &Path) -> Result<Arc<Self>> {
        static QUEUES: Mutex<Vec<(PathBuf, std::sync::Weak<WriterQueue>)>> = Mutex::new(Vec::new());
        // The file exists now (connect created it), so this names it uniquely
        // whichever relative path or link a handle was opened with.
        let file = std::fs::canonicalize(path).map_err(|e| {
            Error::Sqlite(rusqlite::Error::InvalidPath(
                format!("{}: {e}", path.display()).into(),
            ))
        })?;
        let mut queues = QUEUES.lock().unwrap_or_else(|p| p.into_inner());
        queues.retain(|(_, queue)| queue.strong_count() > 0);
        if let Some(queue) = queues
            .iter()
            .find(|(p, _)| *p == file)
            .and_then(|(_, q)| q.upgrade())
        {
            return Ok(queue);
        }
        let queue = Arc::new(WriterQueue::default());
        queues.push((file, Arc::downgrade(&queue)));
        Ok(queue)
    }

    /// `None` if `timeout` passed first: the caller reports the store busy.
    pub(super) fn wait_turn(&self, timeout: Duration) -> Option<parking_lot::MutexGuard<'_, ()>> {
        self.lock.try_lock_for(timeout)
    }
}

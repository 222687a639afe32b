//! The background jobs for async code.
//!
//! The compactor runs as a tokio task on the caller's runtime: its one
//! loop (`compactor/mod.rs`) over an environment whose batches go to the
//! store's threads and whose waits are on tokio's timer
//! (`compactor/task.rs`).
//!
//! So does the board queue worker: [`BoardWorker`]'s one loop over an
//! environment whose batches and trims go to the store's threads and whose
//! waits are on tokio's timer and the queue's notify
//! (`ranking/queue/task.rs`).
//!
//! And so does the family queue worker: [`FamilyWorker`]'s one loop over
//! the board worker's task environment, its batches on the store's threads
//! and its idle wait on the queue's notify (`ranking/family/task.rs`).

use super::family::AsyncFamily;
use super::ranking::AsyncRanking;
use super::store::AsyncStore;
use super::threads::Threads;
use crate::compactor::{Compactor, CompactorTask};
use crate::entity::Shardable;
use crate::error::Result;
use crate::job::Job;
use crate::ranking::{BoardWorker, FamilyWorker, FamilyWorkerHandle, FamilyWorkerStats};
use crate::ranking::{BoardWorkerHandle, BoardWorkerStats};
use crate::store::Store;

mod sealed {
    pub trait Sealed {}
}

/// A running queue worker's sync handle that can also run as tokio tasks:
/// [`BoardWorkerHandle`] or [`FamilyWorkerHandle`]. Its lifecycle is [`Job`]'s.
/// Sealed.
pub trait BackgroundJob: Job + sealed::Sealed + Send + 'static {
    /// A job running as tokio tasks: its awaited stop (`Err(self)` for a
    /// job on a thread).
    #[doc(hidden)]
    #[allow(clippy::type_complexity)]
    fn __stop_task(self) -> std::result::Result<StopTask<Self::Stats>, Self>
    where
        Self: Sized;
}

#[doc(hidden)]
pub type StopTask<S> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<S>> + Send>>;

impl sealed::Sealed for BoardWorkerHandle {}
impl BackgroundJob for BoardWorkerHandle {
    fn __stop_task(self) -> std::result::Result<StopTask<BoardWorkerStats>, Self> {
        if self.is_task() {
            Ok(Box::pin(self.stop_task()))
        } else {
            Err(self)
        }
    }
}

impl sealed::Sealed for FamilyWorkerHandle {}
impl BackgroundJob for FamilyWorkerHandle {
    fn __stop_task(self) -> std::result::Result<StopTask<FamilyWorkerStats>, Self> {
        if self.is_task() {
            Ok(Box::pin(self.stop_task()))
        } else {
            Err(self)
        }
    }
}

/// A queue worker started from async code (feature `tokio`): see
/// [`AsyncRanking::spawn_worker`] and [`AsyncFamily::spawn_worker`].
///
/// A board worker runs as tokio tasks on the runtime that started it
/// (one per tree of a split board), a family worker as one task; their
/// batches run on the store's threads, so neither blocks a runtime's
/// worker nor costs a thread of its own. [`stop`](Background::stop) ends it after its
/// current batch, as the sync handle's `stop` does, and is awaited;
/// dropping the handle stops the job too, without waiting for it (the
/// wait happens on the store's threads).
#[must_use = "dropping the handle stops the job"]
pub struct Background<H: BackgroundJob> {
    handle: Option<H>,
    threads: Threads,
}

impl<H: BackgroundJob> Background<H> {
    fn new(handle: H, threads: &Threads) -> Self {
        Background {
            handle: Some(handle),
            threads: threads.clone(),
        }
    }

    /// The sync handle, for what it reports while the job runs.
    pub fn handle(&self) -> &H {
        self.handle.as_ref().expect("taken only by stop and drop")
    }

    /// What the job did so far, as the sync handle's `stats` reports it.
    pub fn stats(&self) -> H::Stats {
        self.handle().stats()
    }

    /// Whether the job has ended by itself (an error, or an idle worker
    /// made to exit when idle).
    pub fn is_finished(&self) -> bool {
        self.handle().is_finished()
    }

    /// Stops the job after its current batch and returns what it did.
    ///
    /// # Errors
    ///
    /// The error that had stopped the job, as the sync handle's `stop`
    /// returns it; a panic of the job resumes here.
    pub async fn stop(mut self) -> Result<H::Stats> {
        let handle = self.handle.take().expect("stopped once");
        match handle.__stop_task() {
            Ok(stop) => stop.await,
            // A thread's join blocks: on the store's threads.
            Err(handle) => self.threads.run(move || handle.stop()).await?,
        }
    }
}

impl<H: BackgroundJob> Drop for Background<H> {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            // The sync handle's drop stops and joins the job: there.
            self.threads.drop_there(handle);
        }
    }
}

impl<H: BackgroundJob> std::fmt::Debug for Background<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Background")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl AsyncStore {
    /// A [`Compactor`] builder for kind `T` on this store, as
    /// [`Store::compactor`]; start it with
    /// [`spawn_compactor`](AsyncStore::spawn_compactor).
    pub fn compactor<T: Shardable>(&self) -> Compactor<T> {
        self.sync_store().compactor::<T>()
    }

    /// Starts `compactor` (from [`compactor`](AsyncStore::compactor)) as a
    /// task on the current tokio runtime: [`Compactor::spawn`]'s loop, whose
    /// batches run on the store's threads, so the task never blocks a
    /// runtime worker; it costs no thread of its own.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as `tokio::spawn`.
    ///
    /// ```
    /// # use autoshard::{Pending, Shardable};
    /// # #[derive(Shardable)]
    /// # struct Page {
    /// #     #[shard(id)] id: u64,
    /// #     #[shard(neutral = 0, fold = autoshard::fold::checked_sum)] views: i64,
    /// #     #[shard(pending)] pending: Pending<Self>,
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> autoshard::Result<()> {
    /// let db = autoshard::open_async("sqlite::memory:").await?;
    /// let compactor = db.compactor::<Page>().interval(std::time::Duration::from_secs(1));
    /// let running = db.spawn_compactor(compactor);
    /// // ... serve requests ...
    /// let stats = running.stop().await?; // after its current batch
    /// assert_eq!(stats.rows_merged, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn spawn_compactor<T: Shardable>(&self, compactor: Compactor<T>) -> CompactorTask {
        compactor.spawn_task(self.threads().clone())
    }
}

impl AsyncRanking {
    /// A queue [`BoardWorker`] builder for this board, as [`Ranking::worker`](crate::ranking::Ranking::worker);
    /// start it with [`spawn_worker`](AsyncRanking::spawn_worker).
    pub fn worker(&self) -> BoardWorker {
        self.sync_board().worker()
    }

    /// Starts `worker` as a task on the current tokio runtime (one per tree
    /// of a split board): [`BoardWorker::spawn`]'s loop, whose batches and trims
    /// run on the store's threads, so the task never blocks a runtime
    /// worker and costs no thread of its own. Stop, flush and error
    /// semantics and [`BoardWorkerStats`] are the thread's;
    /// [`flush`](AsyncRanking::flush) waits for it as for a worker thread.
    ///
    /// A flush waits on a thread of its own, so any number of them leave
    /// the store's threads to the worker's batches.
    ///
    /// # Errors
    ///
    /// As [`BoardWorker::spawn`] (preparing the queue's tables on first use).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as `tokio::spawn`.
    pub async fn spawn_worker(&self, worker: BoardWorker) -> Result<Background<BoardWorkerHandle>> {
        let threads = self.store().threads();
        let parts = threads.run(move || worker.task_parts()).await??;
        let handle = BoardWorker::spawn_tasks(parts, threads.clone());
        Ok(Background::new(handle, threads))
    }
}

impl AsyncFamily {
    /// A queue [`FamilyWorker`] builder for this family, as
    /// [`Family::worker`](crate::ranking::Family::worker); start it with
    /// [`spawn_worker`](AsyncFamily::spawn_worker).
    pub fn worker(&self) -> FamilyWorker {
        self.sync_family().worker()
    }

    /// Starts `worker` as a task on the current tokio runtime:
    /// [`FamilyWorker::spawn`]'s loop, whose batches run on the store's
    /// threads, so the task never blocks a runtime worker and costs no
    /// thread of its own. Stop and error semantics and
    /// [`FamilyWorkerStats`] are the thread's.
    ///
    /// # Errors
    ///
    /// As [`FamilyWorker::spawn`] (preparing the queue's tables on first use).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as `tokio::spawn`.
    pub async fn spawn_worker(
        &self,
        worker: FamilyWorker,
    ) -> Result<Background<FamilyWorkerHandle>> {
        let threads = self.store().threads();
        let (worker, state) = threads
            .run(move || worker.task_state().map(|state| (worker, state)))
            .await??;
        let handle = worker.spawn_task(state, threads.clone());
        Ok(Background::new(handle, threads))
    }
}

#[cfg(test)]
mod tests {
    use crate::ranking::RankingConfig;
    use crate::{AsyncRanking, Pending, Shardable};

    #[derive(Shardable)]
    struct Page {
        #[shard(id)]
        id: u64,
        #[shard(neutral = 0, fold = crate::fold::checked_sum)]
        views: i64,
        #[shard(pending)]
        pending: Pending<Self>,
    }

    impl Page {
        #[crate::shard_method]
        fn view(&mut self) {
            self.views += 1;
        }
    }

    /// On a current-thread runtime (one worker, which a blocking join
    /// would freeze): the worker applies what was queued, `flush` waits
    /// for it, and `stop` returns its count.
    #[tokio::test(flavor = "current_thread")]
    async fn a_board_worker_started_from_async_code_applies_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("w.db").display());
        let db = crate::open_async(&url).await.unwrap();
        let board = AsyncRanking::create(&db, "b", RankingConfig::new(0..100))
            .await
            .unwrap();
        let worker = board.spawn_worker(board.worker()).await.unwrap();
        for (i, p) in ["a", "b", "c"].iter().enumerate() {
            board.enqueue(p, i as i64).await.unwrap();
        }
        board.flush().await.unwrap();
        assert_eq!(board.len().await.unwrap(), 3);
        let stats = worker.stop().await.unwrap();
        assert_eq!(stats.updates, 3);
    }

    /// The compactor as a task on a current-thread runtime (its one
    /// worker would freeze if the task blocked it): it folds, then waits
    /// out its interval on tokio's timer until `stop` wakes it.
    #[tokio::test(flavor = "current_thread")]
    async fn a_compactor_task_folds_and_stops_during_its_wait() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("c.db").display());
        let db = crate::open_async(&url).await.unwrap();
        let mut page = Page {
            id: 1,
            views: 0,
            pending: Pending::default(),
        };
        db.insert(&page).await.unwrap();
        for _ in 0..5 {
            page.view();
            db.save(&mut page).await.unwrap();
        }
        // A pass, then an hour's wait that a stop cuts short.
        let compactor = db
            .compactor::<Page>()
            .interval(std::time::Duration::from_secs(3_600));
        let running = db.spawn_compactor(compactor);
        // Bounded wait for its first pass.
        for _ in 0..1_000 {
            if db.shard_count::<Page>(&1, "views").await.unwrap() == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let limit = std::time::Duration::from_secs(30);
        let stats = tokio::time::timeout(limit, running.stop())
            .await
            .expect("a stop wakes the task's wait")
            .unwrap();
        assert_eq!((stats.rows_merged, stats.passes), (5, 1));
        assert_eq!(db.load::<Page>(&1).await.unwrap().unwrap().views, 5);
    }

    /// `join` on a compactor task waits for it to end by itself and
    /// returns the error that ended it: here its kind's shard table,
    /// dropped behind its back. The control is `stop` on a healthy store
    /// (above), which returns what the compactor did.
    #[tokio::test(flavor = "current_thread")]
    async fn a_joined_compactor_task_returns_the_error_that_ended_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let db = crate::open_async(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let page = Page {
            id: 1,
            views: 0,
            pending: Pending::default(),
        };
        db.insert(&page).await.unwrap();
        let conn = rusqlite::Connection::open(&path).unwrap();
        let shard_tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%shard%'")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(!shard_tables.is_empty());
        for table in &shard_tables {
            conn.execute_batch(&format!("DROP TABLE \"{table}\""))
                .unwrap();
        }
        let compactor = db
            .compactor::<Page>()
            .interval(std::time::Duration::from_millis(5));
        let running = db.spawn_compactor(compactor);
        let limit = std::time::Duration::from_secs(30);
        let ended = tokio::time::timeout(limit, running.join())
            .await
            .expect("the compactor ends by itself at an error it cannot retry");
        assert!(ended.is_err(), "{ended:?}");
    }
}

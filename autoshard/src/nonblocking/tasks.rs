//! The background jobs (compactor, board and family queue workers) for
//! async code: the same jobs, loops and handles as the sync API's, started
//! and stopped without blocking the runtime.
//!
//! Each job keeps its one loop on the thread [`Compactor::spawn`] /
//! [`Worker::spawn`] / [`FamilyWorker::spawn`] start for it, so its stop,
//! flush and error semantics are the sync job's by construction. What
//! changes is the handle: a sync handle's `stop` and drop join the thread,
//! which on a runtime's worker would block it for up to a batch; a
//! [`Background`] sends both to the store's threads, and `stop` is awaited.

use super::family::AsyncFamily;
use super::ranking::AsyncRanking;
use super::store::AsyncStore;
use super::threads::Threads;
use crate::compactor::{Compactor, CompactorHandle, CompactorStats};
use crate::entity::Shardable;
use crate::error::Result;
use crate::ranking::{FamilyWorker, FamilyWorkerHandle, FamilyWorkerStats, Worker};
use crate::ranking::{WorkerHandle, WorkerStats};
use crate::store::Store;

mod sealed {
    pub trait Sealed {}
}

/// A running background job's sync handle: [`CompactorHandle`],
/// [`WorkerHandle`] or [`FamilyWorkerHandle`]. Sealed.
pub trait BackgroundJob: sealed::Sealed + Send + 'static {
    /// What the job reports when it stops.
    type Stats: Send + 'static;
    #[doc(hidden)]
    fn __stop(self) -> Result<Self::Stats>;
    #[doc(hidden)]
    fn __is_finished(&self) -> bool;
}

macro_rules! jobs {
    ($($handle:ty => $stats:ty;)*) => {$(
        impl sealed::Sealed for $handle {}
        impl BackgroundJob for $handle {
            type Stats = $stats;
            fn __stop(self) -> Result<$stats> {
                self.stop()
            }
            fn __is_finished(&self) -> bool {
                self.is_finished()
            }
        }
    )*};
}
jobs! {
    CompactorHandle => CompactorStats;
    WorkerHandle => WorkerStats;
    FamilyWorkerHandle => FamilyWorkerStats;
}

/// A background job started from async code (feature `tokio`): see
/// [`AsyncStore::spawn_compactor`], [`AsyncRanking::spawn_worker`] and
/// [`AsyncFamily::spawn_worker`].
///
/// The job runs on its own thread, as the sync job does, so it never
/// takes a runtime's worker. [`stop`](Background::stop) ends it after its
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

    /// The sync handle, for what it reports while the job runs
    /// ([`CompactorHandle::stats`], ...).
    pub fn handle(&self) -> &H {
        self.handle.as_ref().expect("taken only by stop and drop")
    }

    /// Whether the job has ended by itself (an error, or an idle worker
    /// made to exit when idle).
    pub fn is_finished(&self) -> bool {
        self.handle().__is_finished()
    }

    /// Stops the job after its current batch and returns what it did.
    ///
    /// # Errors
    ///
    /// The error that had stopped the job, as the sync handle's `stop`
    /// returns it; a panic of the job resumes here.
    pub async fn stop(mut self) -> Result<H::Stats> {
        let handle = self.handle.take().expect("stopped once");
        self.threads.run(move || handle.__stop()).await?
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

    /// Starts `compactor` (from [`compactor`](AsyncStore::compactor)) as
    /// [`Compactor::spawn`] does, with a handle for async code.
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
    pub fn spawn_compactor<T: Shardable>(
        &self,
        compactor: Compactor<T>,
    ) -> Background<CompactorHandle> {
        Background::new(compactor.spawn(), self.threads())
    }
}

impl AsyncRanking {
    /// A queue [`Worker`] builder for this board, as [`Ranking::worker`](crate::ranking::Ranking::worker);
    /// start it with [`spawn_worker`](AsyncRanking::spawn_worker).
    pub fn worker(&self) -> Worker {
        self.sync_board().worker()
    }

    /// Starts `worker` as [`Worker::spawn`] does (on the store's threads:
    /// the first call may create the queue's tables), with a handle for
    /// async code. [`flush`](AsyncRanking::flush) waits for it as for a
    /// worker thread.
    ///
    /// # Errors
    ///
    /// As [`Worker::spawn`].
    pub async fn spawn_worker(&self, worker: Worker) -> Result<Background<WorkerHandle>> {
        let handle = self.store().threads().run(move || worker.spawn()).await??;
        Ok(Background::new(handle, self.store().threads()))
    }
}

impl AsyncFamily {
    /// A queue [`FamilyWorker`] builder for this family, as
    /// [`Family::worker`](crate::ranking::Family::worker); start it with
    /// [`spawn_worker`](AsyncFamily::spawn_worker).
    pub fn worker(&self) -> FamilyWorker {
        self.sync_family().worker()
    }

    /// Starts `worker` as [`FamilyWorker::spawn`] does (on the store's
    /// threads), with a handle for async code.
    ///
    /// # Errors
    ///
    /// As [`FamilyWorker::spawn`].
    pub async fn spawn_worker(
        &self,
        worker: FamilyWorker,
    ) -> Result<Background<FamilyWorkerHandle>> {
        let handle = self.store().threads().run(move || worker.spawn()).await??;
        Ok(Background::new(handle, self.store().threads()))
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

    #[tokio::test(flavor = "current_thread")]
    async fn a_compactor_started_from_async_code_folds_and_stops() {
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
        let compactor = db.compactor::<Page>();
        let running = db.spawn_compactor(compactor);
        // Bounded wait for its first pass.
        for _ in 0..1_000 {
            if db.shard_count::<Page>(&1, "views").await.unwrap() == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let stats = running.stop().await.unwrap();
        assert_eq!(stats.rows_merged, 5);
        assert_eq!(db.load::<Page>(&1).await.unwrap().unwrap().views, 5);
    }
}

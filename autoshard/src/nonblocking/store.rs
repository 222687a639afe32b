//! [`AsyncStore`]: [`Store`]'s calls as `async fn`s, each one job of the
//! sync core on the store's own threads.

use super::threads::{OnThreads, Threads};
use crate::any::AnyStore;
use crate::entity::{key_of, Shardable};
use crate::error::Result;
use crate::mapper;
use crate::query::{Filter, Query, Queryable, SortKey};
use crate::seam::{Backend, Kind};
use crate::stats::KindStats;
use crate::store::{self, auto_supported, Store};
use crate::trace;
use crate::{CompactionStats, Saved};
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

/// Threads [`open_async`](crate::open_async) starts per store: enough for
/// a pool's worth of PostgreSQL or Redis calls in flight, and for SQLite's
/// readers beside its one writer.
pub const DEFAULT_THREADS: usize = 8;

/// A store for async code (feature `tokio`): the calls of [`Store`] as
/// `async fn`s with the same names and arguments, made by
/// [`open_async`](crate::open_async).
///
/// Each call is one job of the sync store, run on threads of the store's
/// own (never a runtime's worker, nor tokio's blocking pool), so a call
/// never blocks the runtime it is awaited on and works on both runtime
/// flavors. Results, errors and guarantees are those of the sync call;
/// `docs/design/async.md` has the mechanism and the reasons.
///
/// **Cancellation.** A call's future may be dropped at any await: a write
/// that was handed to the store's threads runs to its end (it commits or
/// not, as if awaited), and one that was not is never made. A dropped
/// [`save`](AsyncStore::save) leaves its deltas in the object, tied to the
/// write in flight: the object's next save writes them if that write did
/// not commit, and is refused with [`Error::StaleCopy`](crate::Error::StaleCopy)
/// (reload it) if it did, so a delta is never lost or counted twice.
///
/// Cloning is cheap and shares the store and its threads, which end when
/// the last clone (and the last call in flight) is gone.
///
/// ```
/// use autoshard::{Pending, Shardable};
///
/// #[derive(Shardable)]
/// struct Question {
///     #[shard(id)]
///     id: u64,
///     #[shard(neutral = 0, shards = 8, fold = autoshard::fold::checked_sum)]
///     votes: i64,
///     #[shard(pending)]
///     pending: Pending<Self>,
/// }
///
/// impl Question {
///     #[autoshard::shard_method]
///     fn vote(&mut self) {
///         self.votes += 1;
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> autoshard::Result<()> {
/// let db = autoshard::open_async("sqlite::memory:").await?;
/// db.insert(&Question { id: 1, votes: 0, pending: Pending::default() }).await?;
/// let mut q: Question = db.load(&1).await?.expect("inserted");
/// q.vote();
/// db.save(&mut q).await?;
/// db.save_delta::<Question, _>(&1, "votes", &10).await?;
/// assert_eq!(db.load::<Question>(&1).await?.unwrap().votes, 11);
/// let top = db.query::<Question>().order_by(|q| q.votes.desc()).limit(10).run().await?;
/// assert_eq!(top.len(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct AsyncStore {
    store: Arc<OnThreads<AnyStore>>,
}

impl fmt::Debug for AsyncStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AsyncStore").field(self.store.get()).finish()
    }
}

impl AsyncStore {
    /// Runs `store`'s calls on `threads` threads of its own (at least one).
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`](crate::Error::Unavailable) if the system
    /// refuses to start a thread.
    pub fn new(store: AnyStore, threads: usize) -> Result<Self> {
        let threads = Threads::start(threads, "autoshard")?;
        Self::with_threads(store, threads)
    }

    pub(crate) fn with_threads(store: AnyStore, threads: Threads) -> Result<Self> {
        Ok(AsyncStore {
            store: Arc::new(OnThreads::new(store, threads)),
        })
    }

    /// The sync store the calls run on, for what has no async form here
    /// (call it from [`tokio::task::spawn_blocking`] or a thread of yours,
    /// not from a runtime's worker).
    pub fn sync_store(&self) -> &AnyStore {
        self.store.get()
    }

    /// The URL scheme the store was opened with; see [`AnyStore::scheme`].
    pub fn scheme(&self) -> &'static str {
        self.store.get().scheme()
    }

    pub(crate) fn threads(&self) -> &Threads {
        &self.store.threads
    }

    /// Runs `job` on the store's threads with a handle of the store.
    pub(crate) async fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce(&AnyStore) -> R + Send + 'static,
    ) -> Result<R> {
        let db = self.store.get().clone();
        self.threads().run(move || job(&db)).await
    }

    /// [`Store::insert`]. If the future is dropped after the insert was
    /// sent, it may still commit; the object then does not know it (a
    /// save of it is refused with [`Error::NotFound`](crate::Error::NotFound)):
    /// load the entity instead.
    ///
    /// # Errors
    ///
    /// As [`Store::insert`].
    pub async fn insert<T: Shardable + 'static>(&self, entity: &T) -> Result<()> {
        let plan = mapper::plan_insert(entity)?;
        let id = entity.id().clone();
        let plan = self
            .run(move |db| {
                auto_supported::<T>(db)?;
                let key = key_of::<T>(&id)?;
                db.__entities().0.insert(&Kind::of::<T>(), key, &plan)?;
                Ok::<_, crate::Error>(plan)
            })
            .await??;
        mapper::inserted(entity, plan);
        Ok(())
    }

    /// [`Store::load`]. The rows are read on the store's threads and
    /// folded into the entity here.
    ///
    /// # Errors
    ///
    /// As [`Store::load`].
    pub async fn load<T: Shardable + 'static>(&self, id: &T::Id) -> Result<Option<T>> {
        let key = key_of::<T>(id)?;
        let owned = id.clone();
        let stored = self
            .run(move |db| {
                let key = key_of::<T>(&owned)?;
                db.__entities().0.load(&Kind::of::<T>(), key)
            })
            .await??;
        match stored {
            Some(stored) => mapper::assemble(&Kind::of::<T>(), id, key, stored).map(Some),
            None => Ok(None),
        }
    }

    /// [`Store::save`]: planned here (the checks that refuse an object
    /// come first, as in the sync call), written on the store's threads.
    /// See the type's docs for what a dropped save does.
    ///
    /// # Errors
    ///
    /// As [`Store::save`].
    pub async fn save<T: Shardable + 'static>(&self, entity: &mut T) -> Result<Saved> {
        // A capability of the store, known without asking it.
        auto_supported::<T>(self.store.get())?;
        let Some(save) = mapper::plan_owned(entity)? else {
            return Ok(Saved::default());
        };
        let (save, written) = self
            .run(move |db| {
                // The span and the counters on the store's thread, where the
                // write runs: an entered span cannot cross an await.
                let span = store::save_span!(T, trace::Id::<T>(&save.id));
                let written = mapper::write_owned::<T>(&save, |key, plan| {
                    db.__entities().0.save(&Kind::of::<T>(), key, plan)
                });
                let outcome = written.as_ref().map(|&a| mapper::outcome(&save.plan, a));
                store::traced(&span, outcome.as_ref().map_err(|e| *e));
                (save, written)
            })
            .await?;
        Ok(mapper::finish_owned(entity, save, written?))
    }

    /// [`Store::save_delta`]: `delta` is encoded here, the write runs on
    /// the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Store::save_delta`].
    pub async fn save_delta<T: Shardable + 'static, V: Serialize + ?Sized>(
        &self,
        id: &T::Id,
        field: &str,
        delta: &V,
    ) -> Result<Saved> {
        let encoded = crate::value::encode(delta);
        let (id, field) = (id.clone(), field.to_owned());
        self.run(move |db| {
            auto_supported::<T>(db)?;
            let kind = Kind::of::<T>();
            let span = store::save_span!(T, trace::Id::<T>(&id), field = field.as_str());
            let saved =
                mapper::save_encoded_delta::<T>(&kind, &id, &field, encoded, |key, plan| {
                    db.__entities().0.save(&kind, key, plan)
                });
            store::traced(&span, saved.as_ref());
            saved
        })
        .await?
    }

    /// [`Store::delete`].
    ///
    /// # Errors
    ///
    /// As [`Store::delete`].
    pub async fn delete<T: Shardable + 'static>(&self, id: &T::Id) -> Result<bool> {
        let id = id.clone();
        self.run(move |db| db.delete::<T>(&id)).await?
    }

    /// [`Store::compact`]: the whole run is one job; a dropped future
    /// does not stop it (each batch commits on its own, as in the sync
    /// call).
    ///
    /// # Errors
    ///
    /// As [`Store::compact`].
    pub async fn compact<T: Shardable + 'static>(&self) -> Result<CompactionStats> {
        self.run(|db| db.compact::<T>()).await?
    }

    /// [`Store::compact_with`]: `progress` is called after every committed
    /// batch with the totals so far, on the store's thread that runs the
    /// compaction, so it should be quick (send the totals on a channel, as
    /// below, rather than wait); otherwise as
    /// [`compact`](AsyncStore::compact).
    ///
    /// ```
    /// # #[derive(autoshard::Shardable)]
    /// # struct Post {
    /// #     #[shard(id)] id: u64,
    /// #     #[shard(neutral = 0, fold = autoshard::fold::checked_sum)] views: i64,
    /// #     #[shard(pending)] pending: autoshard::Pending<Self>,
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> autoshard::Result<()> {
    /// let db = autoshard::open_async("sqlite::memory:").await?;
    /// let (sent, mut progress) = tokio::sync::mpsc::unbounded_channel();
    /// let stats = db
    ///     .compact_with::<Post>(move |so_far| drop(sent.send(so_far.clone())))
    ///     .await?;
    /// while let Some(so_far) = progress.recv().await {
    ///     println!("{} batches, {} rows merged", so_far.batches, so_far.rows_merged);
    /// }
    /// assert_eq!(stats.rows_merged, 0); // nothing to compact yet
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Store::compact_with`].
    pub async fn compact_with<T: Shardable + 'static>(
        &self,
        mut progress: impl FnMut(&CompactionStats) + Send + 'static,
    ) -> Result<CompactionStats> {
        self.run(move |db| db.compact_with::<T>(&mut progress))
            .await?
    }

    /// [`Store::stats`].
    ///
    /// # Errors
    ///
    /// As [`Store::stats`].
    pub async fn stats<T: Shardable + 'static>(&self) -> Result<KindStats> {
        self.run(|db| db.stats::<T>()).await?
    }

    /// [`Store::shard_count`].
    ///
    /// # Errors
    ///
    /// As [`Store::shard_count`].
    pub async fn shard_count<T: Shardable + 'static>(
        &self,
        id: &T::Id,
        field: &str,
    ) -> Result<u64> {
        let (id, field) = (id.clone(), field.to_owned());
        self.run(move |db| db.shard_count::<T>(&id, &field)).await?
    }

    /// [`Store::query`]: the same builder, whose
    /// [`run`](AsyncQuery::run) is an `async fn`.
    pub fn query<T: Queryable + Send + 'static>(&self) -> AsyncQuery<T> {
        AsyncQuery {
            store: self.clone(),
            query: Query::new(&()),
        }
    }
}

/// A query of [`AsyncStore::query`]: [`Query`]'s builder, run on the
/// store's threads.
#[must_use = "a query does nothing until `run`"]
pub struct AsyncQuery<T: Queryable> {
    store: AsyncStore,
    query: Query<'static, (), T>,
}

impl<T: Queryable + Send + 'static> AsyncQuery<T> {
    /// [`Query::filter`].
    pub fn filter(mut self, condition: impl FnOnce(&T::Fields) -> Filter<T>) -> Self {
        self.query = self.query.filter(condition);
        self
    }

    /// [`Query::order_by`].
    pub fn order_by(mut self, key: impl FnOnce(&T::Fields) -> SortKey<T>) -> Self {
        self.query = self.query.order_by(key);
        self
    }

    /// [`Query::limit`].
    pub fn limit(mut self, n: usize) -> Self {
        self.query = self.query.limit(n);
        self
    }

    /// [`Query::offset`].
    pub fn offset(mut self, n: usize) -> Self {
        self.query = self.query.offset(n);
        self
    }

    /// [`Query::run`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Query::run`].
    pub async fn run(self) -> Result<Vec<T>>
    where
        T::Fields: Send,
    {
        let query = self.query;
        self.store.run(move |db| query.rebind(db).run()).await?
    }
}

#[cfg(test)]
mod tests {
    use crate::ranking::{Policy, RankingConfig};
    use crate::{AsyncRanking, Pending, Shardable};

    #[derive(Shardable)]
    struct Question {
        #[shard(id)]
        id: u64,
        #[shard(neutral = 0, shards = 4, fold = crate::fold::checked_sum, ranked = "top")]
        votes: i64,
        #[shard(pending)]
        pending: Pending<Self>,
    }

    impl Question {
        #[crate::shard_method]
        fn upvote(&mut self) {
            self.votes += 1;
        }
    }

    /// An entity board follows async saves as it does sync ones: the
    /// board write is planned with the save and runs in its transaction.
    #[tokio::test(flavor = "current_thread")]
    async fn async_saves_feed_an_entity_board() {
        let db = crate::open_async("sqlite::memory:").await.unwrap();
        let config = RankingConfig::new(-1_000..1_000).policy(Policy::Increment);
        let top = AsyncRanking::create(&db, "top", config).await.unwrap();
        let mut q = Question {
            id: 7,
            votes: 0,
            pending: Pending::new(),
        };
        db.insert(&q).await.unwrap();
        q.upvote();
        db.save(&mut q).await.unwrap();
        db.save_delta::<Question, _>(&7, "votes", &5).await.unwrap();
        assert_eq!(top.score("7").await.unwrap(), Some(6));
        assert!(db.delete::<Question>(&7).await.unwrap());
        assert_eq!(top.score("7").await.unwrap(), None);
    }
}

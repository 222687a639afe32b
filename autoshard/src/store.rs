//! The [`Store`] trait: what every store offers, implemented once for all
//! of them over the seam (`crate::seam`).

use crate::compactor::Compactor;
use crate::counters;
use crate::entity::{key_of, Shardable};
use crate::error::{Error, Result};
use crate::mapper::{self, Saved};
use crate::query::{Query, Queryable};
use crate::seam::compaction;
use crate::seam::{Backend, CompactionStats, Kind};
use crate::stats::KindStats;
use crate::trace;
use serde::Serialize;

/// The span of a save or `save_delta` of a `$t`: `kind`, `id`, and what
/// [`traced`] records once it is done.
macro_rules! save_span {
    ($t:ty, $id:expr_2021 $(, $($more:tt)*)?) => {
        trace::span!(DEBUG, "autoshard.save", kind = <$t as Shardable>::KIND, id = %$id,
            $($($more)*,)? attempts = tracing::field::Empty,
            shard_writes = tracing::field::Empty, error = tracing::field::Empty)
    };
}
#[cfg(feature = "tokio")]
pub(crate) use save_span;

/// A database that persists [`Shardable`] entities with property sharding:
/// [`Sqlite`](crate::Sqlite), [`Postgres`](crate::Postgres) and
/// [`AnyStore`](crate::AnyStore).
///
/// The semantics are the AutoShard paper's and are the same for every
/// store; `docs/design/sharding.md` states them in full. The methods are provided:
/// a store implements the crate's internal seam, so the trait is sealed.
///
/// Every method that takes an id refuses a string id longer than
/// [`MAX_ID_LEN`](crate::MAX_ID_LEN) bytes with
/// [`Error::InvalidValue`](crate::Error::InvalidValue) before it reaches
/// the store, on every store.
pub trait Store: Backend {
    /// Writes a new entity: its document, and for each sharded field either
    /// `shards` rows (static: the first holds the current value, the rest the
    /// neutral element) or one row (dynamic). Resets the entity's pending
    /// deltas, since the stored rows now include them. Each insert starts a
    /// new *incarnation* of the id, which the object now belongs to: objects
    /// loaded from an earlier entity with the same id cannot save into it.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyExists`](crate::Error::AlreadyExists); [`Error::Poisoned`](crate::Error::Poisoned)
    /// for an entity whose shard method panicked; [`Error::InvalidValue`](crate::Error::InvalidValue)
    /// or [`Error::InvalidName`](crate::Error::InvalidName) for values or ids
    /// the store cannot hold; a store error. Nothing is written on error.
    fn insert<T: Shardable>(&self, entity: &T) -> Result<()> {
        auto_supported::<T>(self)?;
        let plan = mapper::plan_insert(entity)?;
        let key = key_of::<T>(entity.id())?;
        self.__entities().0.insert(&Kind::of::<T>(), key, &plan)?;
        mapper::inserted(entity, plan);
        Ok(())
    }

    /// Reads an entity and folds each sharded field over all its shard rows.
    /// `Ok(None)` if no entity has this id. A field whose fold adds numbers
    /// is the exact sum of its rows, whatever their order; an `f64` sum
    /// that overflows loads as infinity.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`](crate::Error::Corrupt) for a stored value that
    /// does not decode into its field, [`Error::Fold`](crate::Error::Fold)
    /// when the fold refuses the stored rows (with
    /// [`fold::OutOfRange`](crate::fold::OutOfRange) as its source when an
    /// integer sum's total does not fit the field's type: see
    /// [`save_delta`](Store::save_delta) for the way back), or a store error.
    fn load<T: Shardable>(&self, id: &T::Id) -> Result<Option<T>> {
        let key = key_of::<T>(id)?;
        let _span = trace::span!(DEBUG, "autoshard.load", kind = T::KIND, id = %key);
        let kind = Kind::of::<T>();
        match self.__entities().0.load(&kind, key)? {
            Some(stored) => mapper::assemble(&kind, id, key, stored).map(Some),
            None => Ok(None),
        }
    }

    /// Writes what changed since the entity was loaded, inserted or last
    /// saved, in one short transaction: the document only if an unsharded
    /// field changed, then each non-neutral pending delta, folded into one
    /// random shard (static) or appended as a new shard row (dynamic).
    ///
    /// The pending deltas are reset only after the commit, so after an error
    /// the same entity can be saved again and nothing is lost or counted
    /// twice. An entity with nothing to write costs no transaction.
    ///
    /// An object writes only into the stored entity it was loaded or
    /// inserted as (its *incarnation*), and only changes it made through
    /// shard methods; the errors below refuse everything else before
    /// anything is written.
    ///
    /// A statically sharded field whose fold adds numbers is checked
    /// against its total: a delta that would take the field's total out of
    /// its type's range (an `f64` total to infinity) is refused, whichever
    /// shard row it would land in. Dynamic appends read nothing and are not
    /// checked, nor is the total on Redis Cluster, where the field's other
    /// rows are in other slots: there only the row the delta lands in is
    /// (`docs/design/sharding.md`, "Overflow").
    ///
    /// # Errors
    ///
    /// - [`Error::NotFound`](crate::Error::NotFound) if the entity was
    ///   deleted, also if it was inserted again since (a new incarnation),
    ///   and for an object built in code that was never loaded or inserted;
    /// - [`Error::DirectWrite`](crate::Error::DirectWrite) if a sharded
    ///   field was changed outside a shard method (`q.votes = 10`): it
    ///   does not hold its loaded value folded with its pending delta;
    /// - [`Error::StaleCopy`](crate::Error::StaleCopy) for a copy (`Clone`)
    ///   whose pending deltas another copy of the same object saved first;
    /// - [`Error::Poisoned`](crate::Error::Poisoned) after a shard method
    ///   panicked, [`Error::Fold`](crate::Error::Fold) when a fold refuses
    ///   the delta (for a checked integer sum: the field's new total would
    ///   not fit), [`Error::InvalidValue`](crate::Error::InvalidValue) (also
    ///   for a float total that would not be finite);
    /// - or a store error. Retryable ones
    ///   ([`Error::is_retryable`](crate::Error::is_retryable)) can simply be
    ///   retried with the same object; the others will fail again until the
    ///   object is changed back or loaded anew. Nothing is written on
    ///   error.
    fn save<T: Shardable>(&self, entity: &mut T) -> Result<Saved> {
        auto_supported::<T>(self)?;
        let span = save_span!(T, trace::Id::<T>(entity.id()));
        let saved = mapper::save(entity, |key, plan| {
            self.__entities().0.save(&Kind::of::<T>(), key, plan)
        });
        traced(&span, saved.as_ref());
        saved
    }

    /// Folds `delta` into the sharded field named `field` of entity `id`
    /// without loading the entity: exactly what [`save`](Store::save) does
    /// for an object whose only change is this delta (one random shard of a
    /// static field, checked against the field's total; a new row of a
    /// dynamic one). A delta equal to the neutral element writes nothing.
    ///
    /// This is the way back for an entity that [`load`](Store::load)
    /// refuses because the exact total of an integer sum does not fit the
    /// field's type ([`Error::Fold`](crate::Error::Fold) with
    /// [`fold::OutOfRange`](crate::fold::OutOfRange), which holds the
    /// total): save the difference, and every delta stored before still
    /// counts exactly.
    ///
    /// ```no_run
    /// # use autoshard::{Error, Pending, Shardable, Store};
    /// # #[derive(Shardable)]
    /// # struct Counter {
    /// #     #[shard(id)]
    /// #     id: u64,
    /// #     #[shard(neutral = 0, fold = autoshard::fold::checked_sum)]
    /// #     hits: i64,
    /// #     #[shard(pending)]
    /// #     pending: Pending<Self>,
    /// # }
    /// # fn repair(db: &autoshard::Sqlite) -> autoshard::Result<()> {
    /// if let Err(Error::Fold { field, source, .. }) = db.load::<Counter>(&7) {
    ///     if let Some(out) = source.downcast_ref::<autoshard::fold::OutOfRange>() {
    ///         // Bring the total back to i64::MAX.
    ///         let delta = i64::try_from(i128::from(i64::MAX) - out.total).unwrap_or(i64::MIN);
    ///         db.save_delta::<Counter, _>(&7, field, &delta)?;
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) if `T` has no
    /// sharded field `field`; [`Error::InvalidValue`](crate::Error::InvalidValue)
    /// if `delta` is not a value of the field's type (or a float total would
    /// not be finite); [`Error::NotFound`](crate::Error::NotFound) if the
    /// entity is not stored; [`Error::Fold`](crate::Error::Fold) if the
    /// fold refuses the delta (a static integer sum whose new total would
    /// still not fit); or a store error, retryable ones as for `save`.
    /// Nothing is written on error.
    fn save_delta<T: Shardable, V: Serialize + ?Sized>(
        &self,
        id: &T::Id,
        field: &str,
        delta: &V,
    ) -> Result<Saved> {
        auto_supported::<T>(self)?;
        let kind = Kind::of::<T>();
        let span = save_span!(T, trace::Id::<T>(id), field = field);
        let saved = mapper::save_delta::<T, V>(&kind, id, field, delta, |key, plan| {
            self.__entities().0.save(&kind, key, plan)
        });
        traced(&span, saved.as_ref());
        saved
    }

    /// Removes an entity and all its shard rows. Returns whether it existed.
    ///
    /// # Errors
    ///
    /// A store error; nothing is deleted then.
    fn delete<T: Shardable>(&self, id: &T::Id) -> Result<bool> {
        if T::__RANKED.any() {
            self.__entities().0.ranked_boards()?;
        }
        self.__entities()
            .0
            .delete(&Kind::of::<T>(), key_of::<T>(id)?)
    }

    /// The compaction job: folds the shard rows of every entity of kind `T`
    /// so that each dynamic field keeps one row and each static field keeps
    /// rows only within `0..shards`. Safe to run while others save, and to
    /// kill at any point: each batch commits atomically.
    ///
    /// A field of an entity whose rows cannot be folded (a total that does
    /// not fit its type, a value that does not decode) is left as it is and
    /// reported in [`CompactionStats::skipped`]; the other entities are
    /// compacted all the same.
    ///
    /// # Errors
    ///
    /// As [`compact_with`](Store::compact_with).
    fn compact<T: Shardable>(&self) -> Result<CompactionStats> {
        self.compact_with::<T>(&mut |_| {})
    }

    /// [`compact`](Store::compact), calling `progress` after every committed
    /// batch with the totals so far.
    ///
    /// # Errors
    ///
    /// A store error. Batches committed before the error stay committed.
    /// Entities whose rows cannot be folded are not errors: they are
    /// skipped and counted in [`CompactionStats`].
    fn compact_with<T: Shardable>(
        &self,
        progress: &mut dyn FnMut(&CompactionStats),
    ) -> Result<CompactionStats> {
        auto_supported::<T>(self)?;
        let kind = Kind::of::<T>();
        let entities = self.__entities().0;
        let _span = trace::span!(DEBUG, "autoshard.compact", kind = T::KIND);
        compaction::run_batches(progress, |from| {
            compaction::traced_batch(&kind, || entities.compact_batch(&kind, from))
        })
    }

    /// The compaction job for kind `T` as a background thread: a
    /// [`Compactor`] builder (interval, batch size, the share of time it may
    /// hold the writer) that [`spawn`](Compactor::spawn)s it. Any number of
    /// compactors, in any number of processes, may run on one store.
    fn compactor<T: Shardable>(&self) -> Compactor<T>
    where
        Self: Clone + Send + Sync + Sized + 'static,
    {
        Compactor::new(self, Kind::of::<T>())
    }

    /// What the store holds for kind `T`, counted in one snapshot: its
    /// entities and, per sharded field, the shard rows, the entities they
    /// belong to, and how many rows compaction would fold now (dynamic rows
    /// beyond one per entity, static rows numbered `shards` or above). An
    /// operator watches `pending` to see rows pile up and a
    /// [`compactor`](Store::compactor) keep up. It reads every shard row of
    /// the kind: an operator's call, not one for every request.
    ///
    /// The age of the oldest pending row is the database's append time of
    /// it where the store stamps one ([`FieldStats::oldest_pending`](crate::FieldStats::oldest_pending)).
    ///
    /// # Errors
    ///
    /// A store error, or [`Error::InvalidName`](crate::Error::InvalidName)
    /// / [`Error::SchemaMismatch`](crate::Error::SchemaMismatch) if the
    /// kind's tables belong to another kind or id type.
    fn stats<T: Shardable>(&self) -> Result<KindStats> {
        auto_supported::<T>(self)?;
        let kind = Kind::of::<T>();
        let census = self.__entities().0.census(&kind)?;
        let mut stats = KindStats::new(&kind, census);
        crate::stats::add_auto(&mut stats, &kind, self.__entities().0)?;
        Ok(stats)
    }

    /// A typed query of the entities of kind `T`, filtered and ordered by
    /// sharded and unsharded fields alike; see [`Query`](crate::Query).
    ///
    /// ```
    /// # use autoshard::{Pending, Shardable, Sqlite, Store};
    /// # #[derive(Shardable)]
    /// # struct Question {
    /// #     #[shard(id)] id: u64,
    /// #     #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum)] votes: i64,
    /// #     #[shard(pending)] pending: Pending<Self>,
    /// # }
    /// # let db = Sqlite::memory()?;
    /// let top: Vec<Question> = db
    ///     .query::<Question>()
    ///     .filter(|q| q.votes.ge(50))
    ///     .order_by(|q| q.votes.desc())
    ///     .limit(10)
    ///     .run()?;
    /// # Ok::<(), autoshard::Error>(())
    /// ```
    fn query<T: Queryable + 'static>(&self) -> Query<'_, Self, T> {
        Query::new(self)
    }

    /// How many shard rows `field` of entity `id` has now: operators use it to
    /// watch dynamic shards pile up and compaction catch up.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) if `T` has no
    /// sharded field `field`, [`Error::NotFound`](crate::Error::NotFound)
    /// if the entity is not stored, or a store error.
    fn shard_count<T: Shardable>(&self, id: &T::Id, field: &str) -> Result<u64> {
        mapper::field_index::<T>(field)?;
        self.__entities()
            .0
            .shard_count(&Kind::of::<T>(), key_of::<T>(id)?, field)
    }
}

impl<S: Backend + ?Sized> Store for S {}

/// Records a save's outcome on its span, and an automatic shard count it
/// raised as an event in it.
pub(crate) fn traced(span: &trace::Entered, saved: std::result::Result<&Saved, &Error>) {
    match saved {
        Ok(saved) => {
            if saved.attempts > 0 {
                counters::SAVES.add(1);
            }
            if saved.shard_count.is_some_and(|c| c.raised) {
                counters::COUNTS_RAISED.add(1);
            }
            span.record("attempts", saved.attempts);
            span.record("shard_writes", saved.shard_writes);
            #[cfg(feature = "tracing")]
            if let Some(count) = saved.shard_count.filter(|c| c.raised) {
                trace::event!(INFO, field = count.field, shards = count.shards,
                    reason = ?count.reason, "autoshard: shard count raised");
            }
        }
        Err(e) => {
            if matches!(e, Error::Conflict { .. } | Error::Busy { .. }) {
                counters::SAVE_CONFLICTS.add(1);
            }
            span.record("error", trace::display(e));
        }
    }
}

/// A kind with an automatic shard count, on a store that does not keep
/// them (Redis Cluster), is refused at its first use, before the store
/// sees it: [`Error::Unsupported`](crate::Error::Unsupported).
///
/// So is a kind with a ranked field on a store that cannot write its
/// boards (`seam/ranked.rs`); every store here can.
pub(crate) fn auto_supported<T: Shardable>(store: &(impl Backend + ?Sized)) -> Result<()> {
    if Kind::of::<T>().has_auto() {
        store.__entities().0.automatic_shards()?;
    }
    if T::__RANKED.any() {
        store.__entities().0.ranked_boards()?;
    }
    Ok(())
}

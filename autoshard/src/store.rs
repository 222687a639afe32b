//! The [`Store`] trait: what every backend offers.

use crate::entity::Shardable;
use crate::error::Result;

/// A database that persists [`Shardable`] entities with property sharding.
///
/// The semantics are the AutoShard paper's and are the same for every
/// backend; `docs/design.md` states them in full.
pub trait Store {
    /// Writes a new entity: its document, and for each sharded field either
    /// `shards` rows (static: the first holds the current value, the rest the
    /// neutral element) or one row (dynamic). Resets the entity's pending
    /// deltas, since the stored rows now include them.
    ///
    /// Fails with [`Error::AlreadyExists`](crate::Error::AlreadyExists) if the
    /// id is taken; nothing is written then.
    fn insert<T: Shardable>(&self, entity: &T) -> Result<()>;

    /// Reads an entity and folds each sharded field over all its shard rows.
    /// `Ok(None)` if no entity has this id.
    fn load<T: Shardable>(&self, id: &T::Id) -> Result<Option<T>>;

    /// Writes what changed since the entity was loaded, inserted or last
    /// saved, in one short transaction: the document only if an unsharded
    /// field changed, then each non-neutral pending delta, folded into one
    /// random shard (static) or appended as a new shard row (dynamic).
    ///
    /// The pending deltas are reset only after the commit, so after an error
    /// the same entity can be saved again and nothing is lost or counted
    /// twice. An entity with nothing to write costs no transaction.
    fn save<T: Shardable>(&self, entity: &mut T) -> Result<Saved>;

    /// Removes an entity and all its shard rows. Returns whether it existed.
    fn delete<T: Shardable>(&self, id: &T::Id) -> Result<bool>;

    /// The compaction job: folds the shard rows of every entity of kind `T`
    /// so that each dynamic field keeps one row and each static field keeps
    /// rows only within `0..shards`. Safe to run while others save, and to
    /// kill at any point: each batch commits atomically.
    fn compact<T: Shardable>(&self) -> Result<CompactionStats> {
        self.compact_with::<T>(&mut |_| {})
    }

    /// [`compact`](Store::compact), calling `progress` after every committed
    /// batch with the totals so far.
    fn compact_with<T: Shardable>(
        &self,
        progress: &mut dyn FnMut(&CompactionStats),
    ) -> Result<CompactionStats>;

    /// How many shard rows `field` of entity `id` has now: operators use it to
    /// watch dynamic shards pile up and compaction catch up.
    fn shard_count<T: Shardable>(&self, id: &T::Id, field: &str) -> Result<u64>;
}

/// What one [`Store::save`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Saved {
    /// Transactions tried: 0 when there was nothing to write, more than 1
    /// when the store was busy and the transaction was retried.
    pub attempts: u32,
    /// Whether the unsharded document was written.
    pub document_written: bool,
    /// Shard rows written (updated or appended).
    pub shard_writes: u32,
}

/// Totals of a compaction run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionStats {
    /// Entities whose shard rows were read.
    pub entities_visited: u64,
    /// Entities that had rows to fold.
    pub entities_compacted: u64,
    /// Shard rows read.
    pub rows_scanned: u64,
    /// Shard rows folded into another row and deleted.
    pub rows_merged: u64,
    /// Transactions committed.
    pub batches: u64,
}

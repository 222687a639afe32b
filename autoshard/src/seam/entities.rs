//! The entity half of the seam: a kind described without generics, and the
//! operations a store runs for it.

use super::plans::{BatchPlan, InsertPlan, Resume, SavePlan};
use crate::entity::{EntityId, FieldSpec, Key, KeyKind, Shardable};
use crate::error::{Error, Result};
use crate::fold::FoldError;
use crate::seam::query::{ScanPlan, Scanned};
use crate::sum::{self, Probed, Sum};
use crate::value::Value;
use std::fmt;

/// The fold of every sharded field of a kind: `(field index, values)`.
pub(crate) type FoldFn = fn(usize, &mut dyn Iterator<Item = Value>) -> Result<Value, FoldError>;

/// What a store knows of an entity kind: the struct behind it stays in the
/// mapper, so a store is not generic over it.
#[derive(Clone, Copy)]
pub(crate) struct Kind {
    /// The stored kind (`#[shard(kind = ..)]` or the struct's name).
    pub name: &'static str,
    /// Integer or string ids.
    pub key_kind: KeyKind,
    /// The sharded fields, in declaration order; a field is named by its
    /// index here.
    pub fields: &'static [FieldSpec],
    /// Rows a compaction batch reads, when the caller (a
    /// [`Compactor`](crate::Compactor)) chose; `None`: the store's
    /// `compaction_batch_rows`. Stores need not look: [`BatchScan::new`]
    /// applies it.
    ///
    /// [`BatchScan::new`]: crate::seam::compaction::BatchScan::new
    pub batch_rows: Option<usize>,
    /// How long an entity must be quiet before compaction lowers its
    /// automatic counts; `None`: [`DEFAULT_QUIET_PERIOD`].
    ///
    /// [`DEFAULT_QUIET_PERIOD`]: crate::seam::compaction::counts::DEFAULT_QUIET_PERIOD
    pub quiet: Option<std::time::Duration>,
    pub(super) fold: FoldFn,
    /// Which fields' folds add numbers (probed once per process).
    pub(super) sums: &'static [Probed],
    /// The fields that feed ranking boards (`seam/ranked.rs`).
    pub(super) ranked: crate::seam::Ranked,
}

impl Kind {
    pub fn of<T: Shardable>() -> Self {
        Kind {
            name: T::KIND,
            key_kind: T::Id::KEY_KIND,
            fields: T::__FIELDS,
            batch_rows: None,
            quiet: None,
            fold: T::__fold,
            sums: sum::sums_of(T::__fold, T::__FIELDS.len()),
            ranked: T::__RANKED,
        }
    }

    /// A kind from its parts, for unit tests of the code that uses one.
    #[cfg(test)]
    pub fn for_tests(fields: &'static [FieldSpec], fold: FoldFn) -> Self {
        Kind {
            name: "Test",
            key_kind: KeyKind::Int,
            fields,
            batch_rows: None,
            quiet: None,
            fold,
            sums: sum::sums_of(fold, fields.len()),
            ranked: crate::seam::Ranked::NONE,
        }
    }

    /// Whether a field feeds a ranking board (`#[shard(ranked = ..)]`).
    pub fn has_ranked(&self) -> bool {
        self.ranked.any()
    }

    /// Whether a field has an automatic shard count (`shards = LOW..=HIGH`).
    pub fn has_auto(&self) -> bool {
        self.fields.iter().any(|f| f.auto_range().is_some())
    }

    pub fn quiet_period(&self) -> std::time::Duration {
        self.quiet
            .unwrap_or(crate::seam::compaction::counts::DEFAULT_QUIET_PERIOD)
    }

    /// The index of the sharded field `name`, if the struct declares it.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// Folds stored values of field `index` of entity `id` (the fold of
    /// nothing is the neutral element). For a field that adds, the exact
    /// total ([`crate::sum`]), in any order of the values.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))] // Redis compaction's
    pub fn fold(
        &self,
        id: &dyn fmt::Display,
        index: usize,
        values: &mut dyn Iterator<Item = Value>,
    ) -> Result<Value> {
        self.raw_fold(index, values)
            .map_err(|e| self.fold_error(id, index, e))
    }

    /// [`fold`](Kind::fold) without error context, for the batch scan.
    pub(crate) fn raw_fold(
        &self,
        index: usize,
        values: &mut dyn Iterator<Item = Value>,
    ) -> Result<Value, FoldError> {
        if self.sum(index) == Sum::Other {
            return (self.fold)(index, values);
        }
        let values: Vec<Value> = values.collect();
        self.total(index, &values)
    }

    /// The new value of a static shard row: the stored value folded with the
    /// delta (a missing row counts as neutral, the fold's identity).
    pub fn fold_delta(
        &self,
        id: &dyn fmt::Display,
        index: usize,
        stored: Option<Value>,
        delta: &Value,
    ) -> Result<Value> {
        // The field's own fold, not the exact total of a sum: a row must
        // hold its value in the field's type, and a refusal is the fold's
        // own error (`fold::Overflow`), not a stored total out of range.
        match stored {
            Some(stored) => (self.fold)(index, &mut [stored, delta.clone()].into_iter())
                .map_err(|e| self.fold_error(id, index, e)),
            None => Ok(delta.clone()),
        }
    }

    pub(super) fn fold_error(&self, id: &dyn fmt::Display, index: usize, e: FoldError) -> Error {
        e.into_error(self.name, &id.to_string(), self.fields[index].name)
    }

    /// Whether field `index` folds like [`fold::checked_sum`] over `i64`
    /// (the derive does not say; the fold is probed), so a store may add in
    /// SQL instead of reading, folding in Rust and writing. Only the
    /// non-overflowing behaviour is probed, because a plain `a + b` panics on
    /// overflow in a debug build: a store that sums in SQL must fall back to
    /// [`fold`](Kind::fold) when the sum would overflow, which then does
    /// whatever the user's fold does there.
    ///
    /// [`fold::checked_sum`]: crate::fold::checked_sum
    #[allow(dead_code)] // for stores with an SQL sum; not every store has one
    pub fn adds_integers(&self, index: usize) -> bool {
        let fold = |a: i64, b: i64| {
            (self.fold)(
                index,
                &mut [Value::Integer(a), Value::Integer(b)].into_iter(),
            )
        };
        let adds = [
            (2, 3),
            (-7, 3),
            (i64::MAX - 1, 1),
            (i64::MIN + 1, -1),
            (0, 0),
        ]
        .into_iter()
        .all(|(a, b)| matches!(fold(a, b), Ok(Value::Integer(s)) if s == a + b));
        let neutral = matches!(
            (self.fold)(index, &mut std::iter::empty()),
            Ok(Value::Integer(0))
        );
        adds && neutral
    }

    /// A corrupt stored value of `field` of entity `id`.
    pub fn corrupt(&self, id: &dyn fmt::Display, field: &str, reason: String) -> Error {
        Error::Corrupt {
            kind: self.name,
            id: id.to_string(),
            field: field.to_owned(),
            reason,
        }
    }

    /// The entity is not stored.
    pub fn not_found(&self, id: impl fmt::Display) -> Error {
        Error::not_found(self.name, id)
    }
}

/// An entity key read back from a store (by a compaction scan), owned.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum StoredKey {
    Int(i64),
    Text(String),
}

impl StoredKey {
    pub fn as_key(&self) -> Key<'_> {
        match self {
            StoredKey::Int(i) => Key::Int(*i),
            StoredKey::Text(s) => Key::Text(s),
        }
    }
}

impl From<Key<'_>> for StoredKey {
    fn from(key: Key<'_>) -> Self {
        match key {
            Key::Int(i) => StoredKey::Int(i),
            Key::Text(s) => StoredKey::Text(s.to_owned()),
        }
    }
}

impl fmt::Display for StoredKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_key().fmt(f)
    }
}

/// An entity as a store read it: the document and its shard rows of
/// declared fields (rows of fields the struct no longer declares are left
/// out, and stay in the store), each value or why it did not decode.
pub(crate) struct Stored {
    pub document: String,
    /// Which insert created the entity ([`InsertPlan::incarnation`]).
    pub incarnation: i64,
    pub rows: Vec<(usize, Result<Value, String>)>,
}

/// What a store counts for [`Store::stats`](crate::Store::stats), in one
/// read snapshot; `crate::stats` says what the counts mean.
#[derive(Debug, Default)]
pub(crate) struct Census {
    /// Entities stored.
    pub entities: u64,
    /// Per sharded field of the kind, in its order.
    pub fields: Vec<FieldCensus>,
}

/// The shard rows of one field, over every entity.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FieldCensus {
    /// Rows.
    pub rows: u64,
    /// Distinct entities among them.
    pub entities: u64,
    /// Rows whose shard number is `shards` or more (a static field's
    /// surplus); 0 for a dynamic field.
    pub surplus: u64,
    /// How long ago, by the database's clock, the oldest row that
    /// compaction would fold was appended: a row above its entity's first
    /// one (dynamic) or numbered `shards` or more (static). `None` if no
    /// such row carries an append time (`docs/design/compaction.md`, "Stats").
    pub oldest_pending: Option<std::time::Duration>,
}

impl FieldCensus {
    /// An age the database computed in milliseconds; a clock stepped back
    /// since the append gives 0, not an error.
    pub fn age(ms: i64) -> std::time::Duration {
        std::time::Duration::from_millis(ms.max(0) as u64)
    }
}

/// The entity operations a store implements, each one transaction (retried
/// whole as the store's concurrency demands). `docs/design/sharding.md` states the
/// semantics; the mapper computes what to write.
pub(crate) trait EntityStore: Send + Sync {
    /// Writes the document, `plan.rows` and `plan.incarnation`;
    /// [`Error::AlreadyExists`] if the id is taken, nothing written then.
    fn insert(&self, kind: &Kind, key: Key<'_>, plan: &InsertPlan) -> Result<()>;

    /// The document and every shard row, in one snapshot.
    fn load(&self, kind: &Kind, key: Key<'_>) -> Result<Option<Stored>>;

    /// Writes the document if it changed, then each delta: folded into a
    /// random shard in `0..shards` ([`pick_shard`](super::pick_shard)) or
    /// appended. [`Error::NotFound`] if the entity is gone, or if
    /// `plan.incarnation` is set and the stored entity is another
    /// incarnation: the check and the writes must see the same entity
    /// (checked in the transaction, with nothing able to delete the entity
    /// between the check and the commit). Returns the attempts made.
    fn save(&self, kind: &Kind, key: Key<'_>, plan: &SavePlan) -> Result<u32>;

    /// Removes the entity and its shard rows; whether it existed.
    fn delete(&self, kind: &Kind, key: Key<'_>) -> Result<bool>;

    /// One committed compaction transaction from `from`: the store scans
    /// rows in `(entity, field, shard)` order into a
    /// [`BatchScan`](crate::seam::compaction::BatchScan) and runs the statements
    /// of the plans it returns.
    fn compact_batch(&self, kind: &Kind, from: &Resume) -> Result<BatchPlan>;

    /// Shard rows of field `field` of the entity; [`Error::NotFound`] if it
    /// is not stored.
    fn shard_count(&self, kind: &Kind, key: Key<'_>, field: &str) -> Result<u64>;

    /// Counts the kind's entities and, per declared sharded field, its rows,
    /// the distinct entities they belong to, and (static fields) the rows
    /// numbered `shards` or above, all in one read snapshot. Rows of fields
    /// the kind no longer declares are not counted. A full scan is fine:
    /// it is an operator's call, not a hot path.
    fn census(&self, kind: &Kind) -> Result<Census>;

    /// The store's name in errors (`Error::Unsupported::store`).
    fn store_name(&self) -> &'static str;

    /// `Ok` if the store keeps automatic shard counts
    /// (`crate::seam::compaction::counts`); the public `Store` refuses a kind with an
    /// automatic field on a store that does not, before it reaches it.
    fn automatic_shards(&self) -> Result<()> {
        Err(Error::Unsupported {
            store: self.store_name(),
            operation: "an automatic shard count (`shards = LOW..=HIGH`)",
        })
    }

    /// The automatic counts of field `index` over the kind's entities, and
    /// its rows numbered at or above their entity's count, in one snapshot.
    fn auto_census(&self, kind: &Kind, index: usize) -> Result<AutoCensus> {
        let _ = (kind, index);
        self.automatic_shards().map(|()| AutoCensus::default())
    }

    /// `Ok` if the store writes entity boards (`seam/ranked.rs`): in the
    /// entity's transaction, or, on Redis Cluster, after the entity's
    /// pieces, each exactly once (`stores/redis/ranked.rs`); the public
    /// `Store` refuses a kind with a ranked field on a store that does
    /// not, before it reaches it.
    fn ranked_boards(&self) -> Result<()> {
        Err(Error::Unsupported {
            store: self.store_name(),
            operation: "a ranked field (`#[shard(ranked = ..)]`)",
        })
    }

    /// Runs a query's pushed-down part in one read snapshot: the entities
    /// meeting `plan`, in its order and page, each with its document and
    /// every shard row of its declared fields (as [`load`](Self::load)
    /// reads them). `crate::seam::query` states the plan's semantics.
    /// Stores without SQL need not implement it.
    fn query(&self, _kind: &Kind, _plan: &ScanPlan) -> Result<Scanned> {
        Err(Error::Unsupported {
            store: self.store_name(),
            operation: "query",
        })
    }
}

pub(crate) use crate::seam::compaction::counts::AutoCensus;

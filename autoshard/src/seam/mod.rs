//! The store seam: what a store implements, and nothing else.
//!
//! A store is a handle type (say `Sqlite`) that implements two crate-private
//! traits over store-neutral descriptions:
//!
//! - [`EntityStore`]: insert, load, save, delete, one compaction batch, a
//!   shard count and a census of the rows for a [`Kind`], with the rows the
//!   mapper planned (`crate::mapper`) and the compaction batch scan decided
//!   (`crate::seam::compaction`), both as the plan types of `plans.rs`. The
//!   store only runs statements.
//! - [`BoardStore`]: ranking boards: create and open a board, run one read
//!   or write transaction on it through [`Storage`], and the queue's
//!   primitives.
//!
//! The public traits ([`Store`](crate::Store),
//! [`RankingStore`](crate::ranking::RankingStore)) are implemented once, on
//! top, for every [`Backend`]; `docs/design/adding-a-store.md` ("Adding a store") lists
//! exactly what a new store writes.

mod approx;
mod boards;
mod catalog;
pub(crate) mod compaction;
mod entities;
mod native;
mod plans;
pub(crate) mod query;
mod ranked;
mod storage;
mod sums;

pub(crate) use self::approx::{signed, unsigned, ApproxStore, Bucket, ScoreSink, StoredSnapshot};
pub use self::boards::DeadLetter;
// Only the Redis Cluster store names these from outside the seam.
#[cfg(feature = "redis")]
pub(crate) use self::boards::{not_found, NativeUpdate};
pub(crate) use self::boards::{
    queue_shards, Board, BoardStore, NativeRefused, NativeStep, NativeSubmitted, NativeTogether,
    NativeTrim, NativeValue, Placement, QueuedRow, QueuedUpdate, NOTHING_APPLIED, PART_SEPARATOR,
};
pub(crate) use self::catalog::{
    dims_from_text, dims_text, BoardSpec, Columns, DimSpec, DEFAULT_ORDER, DEFAULT_POLICY,
    RECORD_POLICY,
};
pub(crate) use self::entities::{
    Census, EntityStore, FieldCensus, FoldFn, Kind, Stored, StoredKey,
};
pub(crate) use self::native::{Member, NativeBoard, NativeEntry, NativeRead, Placed, RankKind};
pub(crate) use self::plans::{pick_shard, BatchPlan, Delta, InsertPlan, Plan, Resume, SavePlan};
pub use self::plans::{CompactionStats, Skipped};
pub(crate) use self::ranked::{player as entity_player, BoardTx, BoardWrite};
pub use self::ranked::{Ranked, RankedHook};
pub(crate) use self::storage::{
    NodeRow, Part, Prefetch, ReadPlan, ScannedArrival, ScannedNode, Storage,
};
pub(crate) use self::sums::StaticRead;

use std::sync::Arc;

/// A store the public traits are implemented for. Sealed: it is public only
/// so that [`Store`](crate::Store) can name it, and it lives in a private
/// module, so no other crate can implement it.
pub trait Backend {
    #[doc(hidden)]
    fn __entities(&self) -> Entities<'_>;
    #[doc(hidden)]
    fn __boards(&self) -> Boards;
}

/// A store's entity operations (opaque outside the crate).
#[doc(hidden)]
pub struct Entities<'a>(pub(crate) &'a dyn EntityStore);

/// A store's board operations, shared by the boards opened on it (opaque
/// outside the crate).
#[doc(hidden)]
pub struct Boards(pub(crate) Arc<dyn BoardStore>);

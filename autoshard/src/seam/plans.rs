//! The plans the layers above hand a store and the results a store hands
//! back: what an insert, a save and a compaction batch write (made by the
//! mapper and compaction, run by a store), and what a compaction run did
//! (made by the stores' batches). They live here, at the seam both sides
//! meet at, so neither imports the other's floor.

use super::{BoardWrite, StoredKey};
use crate::entity::FieldSpec;
use crate::error::Error;
use crate::value::Value;
use std::time::Instant;

/// The rows a new entity is stored as.
pub(crate) struct InsertPlan {
    pub document: String,
    /// `(field, shard, value)`: static fields get `shards` rows (the current
    /// value in shard 0, the neutral element elsewhere), dynamic fields one.
    pub rows: Vec<(&'static str, i64, Value)>,
    /// The new incarnation of the id: a random number, never 0 (the
    /// incarnation of entities stored before incarnations existed).
    pub incarnation: i64,
    /// The entity's initial totals, added to the boards of its ranked
    /// fields in the insert's transaction (`seam/ranked.rs`).
    pub boards: Vec<BoardWrite>,
}

/// What a save writes; `None` from `mapper::plan_save` means nothing.
pub(crate) struct SavePlan {
    pub document: String,
    pub document_changed: bool,
    pub deltas: Vec<Delta>,
    /// The incarnation the save must find stored, or `None` to write into
    /// whatever entity has the id (an entity without a `Pending` field,
    /// which has nowhere to remember one).
    pub incarnation: Option<i64>,
    /// `(field, value)`: the new aggregate of each field with a delta,
    /// encoded, for the object once the save commits.
    pub(crate) bases: Vec<(usize, Value)>,
    /// What the store did with the first automatic field's count, for
    /// `Saved::shard_count`; the store sets it (`crate::seam::compaction::counts`).
    pub counted: std::cell::Cell<Option<crate::seam::compaction::counts::ShardCount>>,
    /// The deltas of ranked fields, added to their boards in the save's
    /// transaction (`seam/ranked.rs`).
    pub boards: Vec<BoardWrite>,
}

/// The static shard a save's store folds its delta into: one of `0..shards`, at
/// random, chosen anew by every attempt of a retried transaction so that
/// two conflicting writers do not meet again.
pub(crate) fn pick_shard(shards: u32) -> i64 {
    i64::from(crate::random::range(..shards))
}

/// One non-neutral pending delta.
pub(crate) struct Delta {
    pub index: usize,
    pub spec: &'static FieldSpec,
    pub value: Value,
}

/// The rewrite of one (entity, field) group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// Shard row that receives the folded value (created if missing).
    pub target: i64,
    /// The folded value of the target and every removed row.
    pub value: Value,
    /// Shard numbers whose rows are deleted.
    pub removed: Vec<i64>,
    /// Rows numbered from here on are folded away; the kept ones are below.
    pub keep_below: i64,
    /// Whether the target row was among the rows read (a static field's
    /// shard 0 may be missing). A store that cannot exclude concurrent
    /// writers must then fold into the row rather than overwrite it.
    pub target_read: bool,
}

/// Where the next compaction batch starts.
#[derive(Debug, Clone)]
pub(crate) enum Resume {
    /// From the first entity (before the first batch), or nothing left
    /// (after the last one).
    Done,
    /// After this entity: every row up to it was read.
    After(StoredKey),
    /// At this entity again: one of its groups was too large for one batch
    /// and was folded only partly.
    At(StoredKey),
}

/// What one batch rewrites.
pub(crate) struct BatchPlan {
    /// This batch's counts (`batches` left at 0 for the caller, and the
    /// skipped groups in `skipped`).
    pub stats: CompactionStats,
    /// `(entity, field index, plan)` in scan order.
    pub plans: Vec<(StoredKey, usize, Plan)>,
    /// `(entity, field, why)` of the groups left as they were.
    pub skipped: Vec<(StoredKey, &'static str, Error)>,
    pub resume: Resume,
    /// When the scan began: stores start it inside the write transaction,
    /// so the time from here to the commit is how long the batch held the
    /// writer (the compactor's cap is on that).
    pub started: Instant,
}

/// Totals of a compaction run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// Batches the server cancelled for running past its
    /// `statement_timeout` (PostgreSQL), each re-run with half as many
    /// rows (down to one), a size the rest of the run keeps. Always 0 on
    /// SQLite.
    pub timeouts: u64,
    /// Automatic shard counts halved because their entity was quiet (see
    /// [`Compactor::quiet_period`](crate::Compactor::quiet_period)).
    pub counts_lowered: u64,
    /// Entities with a field whose rows could not be folded, left as they
    /// were (their other fields are compacted).
    pub entities_skipped: u64,
    /// The first skipped fields (at most 16), in key order: what
    /// compaction could not fold, and why.
    pub skipped: Vec<Skipped>,
}

/// A field of one entity that compaction left as it was, because its rows
/// cannot be folded: `load` of the entity fails with the same error. See
/// [`Store::save_delta`](crate::Store::save_delta) for repairing a total out of range.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skipped {
    /// The entity's id, rendered as errors render it (`42`, `"alice"`).
    pub id: String,
    /// The sharded field.
    pub field: &'static str,
    /// Why its rows could not be folded: the error, rendered.
    pub error: String,
}

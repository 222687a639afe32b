//! Automatic shard counts (`#[shard(shards = LOW..=HIGH)]`): what a store
//! records per entity, when a count goes up or down, and what compaction
//! folds when it lowers one. Stores run the statements
//! (`stores/<store>/counts.rs`); everything they decide is decided here, the
//! same for every store.
//!
//! The protocol (`docs/design/auto-shards.md`, "Automatic shard counts"): a load folds
//! every stored row of a field whatever the count, so the count only steers
//! where new deltas go, and a saver that still holds an old count can only
//! write a row that compaction treats as surplus, never lose or repeat a
//! delta.

use crate::entity::FieldSpec;
use crate::fold::FoldError;
use crate::seam::{Plan, StoredKey};
use crate::value::Value;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long an entity must go without observed contention before
/// compaction halves its automatic shard count, unless
/// [`Compactor::quiet_period`](crate::Compactor::quiet_period) says
/// otherwise. Five minutes: long enough that a question that is hot for a
/// few minutes keeps its shards through lulls between bursts, short enough
/// that one that cooled down gives its rows back within the hour (from
/// 256 to 1 in eight halvings).
pub const DEFAULT_QUIET_PERIOD: Duration = Duration::from_secs(300);

/// Why an entity's automatic shard count has its current value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CountChange {
    /// Never changed: the low end of the range.
    Start,
    /// Raised after a save of the field failed with a serialization failure
    /// on its shard row (PostgreSQL, optimistic concurrency).
    Conflict,
    /// Raised after a save found its shard row locked by another
    /// transaction (PostgreSQL, locking concurrency).
    LockWait,
    /// Raised after a save waited at least
    /// [`SqliteBuilder::contention_wait`](crate::SqliteBuilder::contention_wait)
    /// for SQLite's writer lock (off by default: see there).
    WriterWait,
    /// Halved by compaction after the entity was quiet for the quiet period.
    Quiet,
}

impl CountChange {
    /// The number a store records.
    pub(crate) fn code(self) -> i64 {
        match self {
            CountChange::Start => 0,
            CountChange::Conflict => 1,
            CountChange::LockWait => 2,
            CountChange::WriterWait => 3,
            CountChange::Quiet => 4,
        }
    }

    /// A recorded number; an unknown one (a newer version wrote it) reads
    /// as `Start`, since the reason is only reported, never acted on.
    pub(crate) fn from_code(code: i64) -> Self {
        match code {
            1 => CountChange::Conflict,
            2 => CountChange::LockWait,
            3 => CountChange::WriterWait,
            4 => CountChange::Quiet,
            _ => CountChange::Start,
        }
    }
}

/// What a save did with an automatic field's shard count
/// ([`Saved::shard_count`](crate::Saved::shard_count)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardCount {
    /// The field (the first automatic field the save wrote, if several).
    pub field: &'static str,
    /// The entity's count for the field after the save.
    pub shards: u32,
    /// Why the count has that value.
    pub reason: CountChange,
    /// Whether this save raised it (it observed contention).
    pub raised: bool,
}

/// The automatic counts of one field over all entities of its kind
/// ([`FieldStats::automatic`](crate::FieldStats::automatic)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AutoStats {
    /// `LOW` of `shards = LOW..=HIGH`.
    pub low: u32,
    /// `HIGH`.
    pub high: u32,
    /// `(count, entities with that count)`, ascending by count; entities
    /// never raised count at `low`.
    pub counts: Vec<(u32, u64)>,
    /// `(reason, entities whose count has it)`, over entities whose count
    /// was ever changed.
    pub reasons: Vec<(CountChange, u64)>,
}

/// What a store counts for [`AutoStats`] and a field's pending rows.
#[derive(Debug, Default)]
pub(crate) struct AutoCensus {
    /// `(stored count, entities)`, entities without a recorded count
    /// included under `LOW`; held to the range by [`AutoCensus::stats`].
    pub counts: Vec<(i64, u64)>,
    /// `(reason code, entities)` over recorded counts.
    pub reasons: Vec<(i64, u64)>,
    /// Rows numbered at or above their entity's count.
    pub surplus: u64,
}

impl AutoCensus {
    pub fn stats(&self, spec: &FieldSpec) -> AutoStats {
        let (low, high) = spec.auto_range().unwrap_or((1, 1));
        let mut counts = std::collections::BTreeMap::new();
        for &(shards, n) in &self.counts {
            let shards = u32::try_from(shards).unwrap_or(high).clamp(low, high);
            *counts.entry(shards).or_insert(0) += n;
        }
        let mut reasons = std::collections::BTreeMap::new();
        for &(code, n) in &self.reasons {
            *reasons.entry(CountChange::from_code(code)).or_insert(0) += n;
        }
        AutoStats {
            low,
            high,
            counts: counts.into_iter().collect(),
            reasons: reasons.into_iter().collect(),
        }
    }
}

/// An entity's count as a store recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoredCount {
    pub shards: u32,
    pub reason: CountChange,
    /// The later of the last change and the last observed contention, in
    /// milliseconds since the Unix epoch.
    pub active_ms: i64,
}

impl StoredCount {
    /// The count of an entity without a recorded one: the low end.
    pub fn start(spec: &FieldSpec) -> Self {
        StoredCount {
            shards: spec.initial_shards(),
            reason: CountChange::Start,
            active_ms: 0,
        }
    }

    /// A recorded count, held to the declared range: a declaration changed
    /// since (`1..=256` to `1..=64`) takes effect at once.
    pub fn read(spec: &FieldSpec, shards: i64, reason: i64, active_ms: i64) -> Self {
        let (low, high) = spec.auto_range().unwrap_or((1, 1));
        StoredCount {
            shards: u32::try_from(shards).unwrap_or(high).clamp(low, high),
            reason: CountChange::from_code(reason),
            active_ms,
        }
    }
}

/// The count after contention observed by a saver that used `seen`:
/// doubled, at most `HIGH`. Stores record it as the greater of this and
/// what is stored, so concurrent observers of one count double it once.
pub(crate) fn raised(spec: &FieldSpec, seen: u32) -> u32 {
    let (_, high) = spec.auto_range().unwrap_or((1, 1));
    seen.saturating_mul(2).min(high)
}

/// Milliseconds since the Unix epoch: what stores record as times.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A count compaction changes, written in the batch that folds its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountUpdate {
    pub entity: StoredKey,
    pub index: usize,
    /// The count the batch read; stores change it only if still stored.
    pub from: u32,
    pub to: u32,
}

/// What compaction does to one automatic field of one entity: halves the
/// count if the entity was quiet for `quiet` (not below `LOW`), and folds
/// every row numbered at or above the count it keeps into shard 0.
pub(crate) fn plan_group(
    spec: &FieldSpec,
    stored: StoredCount,
    quiet: Duration,
    now_ms: i64,
    rows: &[(i64, Value)],
    fold: impl FnOnce(&mut dyn Iterator<Item = Value>) -> Result<Value, FoldError>,
) -> Result<(Option<Plan>, Option<u32>), FoldError> {
    let (low, _) = spec.auto_range().unwrap_or((1, 1));
    let idle = Duration::from_millis(now_ms.saturating_sub(stored.active_ms).max(0) as u64);
    let lowered = (stored.shards > low && idle >= quiet).then(|| (stored.shards / 2).max(low));
    let keep = FieldSpec {
        shards: Some(lowered.unwrap_or(stored.shards)),
        min_shards: None,
        ..*spec
    };
    let plan = crate::seam::compaction::plan(&keep, rows, fold)?;
    Ok((plan, lowered))
}

#[cfg(test)]
mod tests {
    use super::*;

    const AUTO: FieldSpec = FieldSpec {
        name: "votes",
        shards: Some(256),
        min_shards: Some(1),
    };

    fn sum(values: &mut dyn Iterator<Item = Value>) -> Result<Value, FoldError> {
        Ok(Value::Integer(
            values
                .map(|v| match v {
                    Value::Integer(i) => i,
                    _ => unreachable!(),
                })
                .sum(),
        ))
    }

    fn rows(n: i64) -> Vec<(i64, Value)> {
        (0..n).map(|s| (s, Value::Integer(s + 1))).collect()
    }

    fn count(shards: u32, active_ms: i64) -> StoredCount {
        StoredCount {
            shards,
            reason: CountChange::Conflict,
            active_ms,
        }
    }

    /// A store that keeps no automatic counts (Redis Cluster today) says so
    /// with a typed error, which `Store` returns at a kind's first use.
    #[test]
    fn a_store_without_automatic_counts_refuses_them() {
        use crate::entity::Key;
        use crate::error::{Error, Result};
        use crate::seam::{
            BatchPlan, Census, EntityStore, InsertPlan, Kind, Resume, SavePlan, Stored,
        };
        struct NoCounts;
        impl EntityStore for NoCounts {
            fn insert(&self, _: &Kind, _: Key<'_>, _: &InsertPlan) -> Result<()> {
                unreachable!()
            }
            fn load(&self, _: &Kind, _: Key<'_>) -> Result<Option<Stored>> {
                unreachable!()
            }
            fn save(&self, _: &Kind, _: Key<'_>, _: &SavePlan) -> Result<u32> {
                unreachable!()
            }
            fn delete(&self, _: &Kind, _: Key<'_>) -> Result<bool> {
                unreachable!()
            }
            fn compact_batch(&self, _: &Kind, _: &Resume) -> Result<BatchPlan> {
                unreachable!()
            }
            fn shard_count(&self, _: &Kind, _: Key<'_>, _: &str) -> Result<u64> {
                unreachable!()
            }
            fn census(&self, _: &Kind) -> Result<Census> {
                unreachable!()
            }
            fn store_name(&self) -> &'static str {
                "NoCounts"
            }
        }
        let err = NoCounts.automatic_shards().unwrap_err();
        assert!(
            matches!(
                err,
                Error::Unsupported {
                    store: "NoCounts",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("automatic shard count"), "{err}");
    }

    #[test]
    fn raising_doubles_up_to_the_high_end() {
        assert_eq!(raised(&AUTO, 1), 2);
        assert_eq!(raised(&AUTO, 100), 200);
        assert_eq!(raised(&AUTO, 200), 256);
        assert_eq!(raised(&AUTO, 256), 256);
    }

    #[test]
    fn a_quiet_entity_is_halved_and_its_surplus_folded() {
        let quiet = Duration::from_secs(60);
        let (plan, lowered) = plan_group(&AUTO, count(8, 0), quiet, 60_000, &rows(8), sum).unwrap();
        assert_eq!(lowered, Some(4));
        let plan = plan.unwrap();
        assert_eq!(plan.removed, vec![4, 5, 6, 7]);
        // Shard 0 (1) and the removed rows (5 + 6 + 7 + 8): the total of the
        // removed rows moves, nothing is lost.
        assert_eq!(plan.value, Value::Integer(1 + 5 + 6 + 7 + 8));
    }

    #[test]
    fn an_entity_active_within_the_period_keeps_its_count() {
        // Control for the test above: one millisecond less idle time.
        let quiet = Duration::from_secs(60);
        let (plan, lowered) = plan_group(&AUTO, count(8, 1), quiet, 60_000, &rows(8), sum).unwrap();
        assert_eq!((plan, lowered), (None, None));
    }

    #[test]
    fn rows_above_the_count_are_folded_even_without_lowering() {
        // A saver that still held the count 8 after it was lowered to 2.
        let (plan, lowered) =
            plan_group(&AUTO, count(2, 10), Duration::MAX, 10, &rows(7), sum).unwrap();
        assert_eq!(lowered, None);
        assert_eq!(plan.unwrap().removed, vec![2, 3, 4, 5, 6]);
    }

    #[test]
    fn the_low_end_is_a_floor_and_a_narrowed_range_applies_at_once() {
        let (_, lowered) =
            plan_group(&AUTO, count(1, 0), Duration::ZERO, 5, &rows(1), sum).unwrap();
        assert_eq!(lowered, None);
        let narrowed = FieldSpec {
            shards: Some(64),
            ..AUTO
        };
        assert_eq!(StoredCount::read(&narrowed, 256, 1, 0).shards, 64);
        assert_eq!(StoredCount::read(&narrowed, 0, 1, 0).shards, 1);
        assert_eq!(
            StoredCount::read(&narrowed, 9, 77, 0).reason,
            CountChange::Start
        );
    }
}

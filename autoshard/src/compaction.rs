//! What compaction does to one field of one entity, independent of the store.
//!
//! Dynamic fields fold every row into the lowest-numbered one. Static fields
//! keep rows `0..shards` and fold any surplus (left behind when `shards` was
//! lowered, or by a field that used to be dynamic) into shard 0. Either way
//! the fold of all rows is unchanged, which is the invariant every store's
//! compaction must keep.

use crate::__private::{FieldSpec, FoldError};
use crate::auto_shards::{self, CountUpdate, StoredCount};
use crate::error::{Error, Result};
use crate::seam::{Kind, StoredKey};
use crate::store::CompactionStats;
use crate::value::Value;
use std::time::Instant;

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

/// Plans the rewrite of one group, given its rows in shard order; `None` when
/// the group is already compact.
pub(crate) fn plan(
    spec: &FieldSpec,
    rows: Vec<(i64, Value)>,
    fold: impl FnOnce(&mut dyn Iterator<Item = Value>) -> Result<Value, FoldError>,
) -> Result<Option<Plan>, FoldError> {
    let (target, keep_below) = match spec.shards {
        None if rows.len() > 1 => (rows[0].0, rows[0].0 + 1),
        None => return Ok(None),
        Some(n) => (0, i64::from(n)),
    };
    if rows.iter().all(|(shard, _)| *shard < keep_below) {
        return Ok(None);
    }
    let mut removed = Vec::new();
    let mut values = Vec::new();
    let mut target_read = false;
    for (shard, value) in rows {
        if shard == target || shard >= keep_below {
            if shard == target {
                target_read = true;
            } else {
                removed.push(shard);
            }
            values.push(value);
        }
    }
    let value = fold(&mut values.into_iter())?;
    Ok(Some(Plan {
        target,
        value,
        removed,
        keep_below,
        target_read,
    }))
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

/// The compaction job's driver, the same for every store: runs `batch` (one
/// committed transaction from where the last one stopped) until the scan is
/// done, adding up the batches' counts and reporting after each.
pub(crate) fn run_batches(
    progress: &mut dyn FnMut(&CompactionStats),
    mut batch: impl FnMut(&Resume) -> Result<BatchPlan>,
) -> Result<CompactionStats> {
    let mut stats = CompactionStats::default();
    let mut from = Resume::Done;
    loop {
        let done = batch(&from)?;
        stats.entities_visited += done.stats.entities_visited;
        stats.entities_compacted += done.stats.entities_compacted;
        stats.rows_scanned += done.stats.rows_scanned;
        stats.rows_merged += done.stats.rows_merged;
        stats.timeouts += done.stats.timeouts;
        stats.counts_lowered += done.stats.counts_lowered;
        stats.batches += 1;
        progress(&stats);
        match done.resume {
            Resume::Done => return Ok(stats),
            resume => from = resume,
        }
    }
}

/// One batch's reading of the shard table, fed rows in key order
/// `(entity, field, shard)`: decides where the batch stops and what it
/// rewrites. Stores only run the scan and the resulting statements, so every
/// store batches (and splits oversized groups) the same way.
pub(crate) struct BatchScan<'k> {
    kind: &'k Kind,
    max_rows: usize,
    /// A partly folded entity the previous batch already counted.
    revisited: Option<StoredKey>,
    stats: CompactionStats,
    plans: Vec<(StoredKey, usize, Plan)>,
    current: Option<StoredKey>,
    group: Option<Group>,
    /// Groups of automatic fields, planned at the end, once the store has
    /// read their entities' counts ([`BatchScan::finish_counted`]).
    auto_groups: Vec<(StoredKey, usize, Vec<(i64, Value)>)>,
    resume: Resume,
    started: Instant,
}

/// What one batch rewrites.
pub(crate) struct BatchPlan {
    /// This batch's counts (`batches` left at 0 for the caller).
    pub stats: CompactionStats,
    /// `(entity, field index, plan)` in scan order.
    pub plans: Vec<(StoredKey, usize, Plan)>,
    pub resume: Resume,
    /// When the scan began: stores start it inside the write transaction,
    /// so the time from here to the commit is how long the batch held the
    /// writer (the compactor's cap is on that).
    pub started: Instant,
}

impl<'k> BatchScan<'k> {
    /// A batch's scan; `max_rows` is the store's default, which a
    /// [`Kind::batch_rows`] chosen by the caller overrides.
    pub fn new(kind: &'k Kind, from: &Resume, max_rows: usize) -> Self {
        BatchScan {
            kind,
            max_rows: kind.batch_rows.unwrap_or(max_rows).max(1),
            revisited: match from {
                Resume::At(entity) => Some(entity.clone()),
                _ => None,
            },
            stats: CompactionStats::default(),
            plans: Vec::new(),
            current: None,
            group: None,
            auto_groups: Vec::new(),
            resume: Resume::Done,
            started: Instant::now(),
        }
    }

    /// Feeds the next row. Returns `Ok(false)` when the batch is complete
    /// without this row: stop scanning, the row belongs to a later batch.
    /// `value` is only decoded for declared fields.
    pub fn push(
        &mut self,
        entity: StoredKey,
        field: &str,
        shard: i64,
        value: impl FnOnce() -> Result<Value, String>,
    ) -> Result<bool> {
        let full = self.stats.rows_scanned as usize >= self.max_rows;
        let index = self.kind.field_index(field);
        if self.current.as_ref() != Some(&entity) {
            if let (true, Some(current)) = (full, &self.current) {
                self.resume = Resume::After(current.clone());
                return Ok(false);
            }
            self.flush_group()?;
            if self.revisited.as_ref() != Some(&entity) {
                self.stats.entities_visited += 1;
            }
            self.current = Some(entity);
        } else if full
            && self
                .group
                .as_ref()
                .is_some_and(|g| Some(g.index) == index && g.makes_progress(self.kind))
        {
            self.resume = Resume::At(entity);
            return Ok(false);
        }
        self.stats.rows_scanned += 1;
        let Some(index) = index else {
            return Ok(true);
        };
        let value = value().map_err(|reason| Error::Corrupt {
            kind: self.kind.name,
            id: self.current_label(),
            field: field.to_owned(),
            reason,
        })?;
        if self.group.as_ref().is_some_and(|g| g.index != index) {
            self.flush_group()?;
        }
        self.group
            .get_or_insert_with(|| Group {
                index,
                rows: Vec::new(),
            })
            .rows
            .push((shard, value));
        Ok(true)
    }

    /// The batch's groups of automatic fields, `(entity, field index)`, in
    /// scan order: the store reads their counts (`None`: none recorded)
    /// and hands them to [`finish_counted`](Self::finish_counted).
    pub fn auto_groups(&mut self) -> Result<Vec<(StoredKey, usize)>> {
        self.flush_group()?;
        Ok(self
            .auto_groups
            .iter()
            .map(|(entity, index, _)| (entity.clone(), *index))
            .collect())
    }

    /// [`finish`](Self::finish) for a kind with automatic fields: `counts`
    /// are the stored counts of [`auto_groups`](Self::auto_groups), read in
    /// the batch's transaction. Also returns the counts to lower, which
    /// the store writes in the same transaction as the plans.
    pub fn finish_counted(
        mut self,
        counts: Vec<Option<StoredCount>>,
    ) -> Result<(BatchPlan, Vec<CountUpdate>)> {
        let now = auto_shards::now_ms();
        let quiet = self.kind.quiet_period();
        let mut updates = Vec::new();
        for ((entity, index, rows), stored) in std::mem::take(&mut self.auto_groups)
            .into_iter()
            .zip(counts)
        {
            let spec = &self.kind.fields[index];
            let stored = stored.unwrap_or_else(|| StoredCount::start(spec));
            let (plan, lowered) =
                auto_shards::plan_group(spec, stored, quiet, now, rows, |values| {
                    self.kind.raw_fold(index, values)
                })
                .map_err(|e| e.into_error(self.kind.name, &entity.to_string(), spec.name))?;
            if let Some(to) = lowered {
                updates.push(CountUpdate {
                    entity: entity.clone(),
                    index,
                    from: stored.shards,
                    to,
                });
            }
            if let Some(plan) = plan {
                self.plans.push((entity, index, plan));
            }
        }
        self.stats.counts_lowered = updates.len() as u64;
        Ok((self.finish()?, updates))
    }

    pub fn finish(mut self) -> Result<BatchPlan> {
        self.flush_group()?;
        let mut compacted: Vec<&StoredKey> = Vec::new();
        for (entity, _, plan) in &self.plans {
            self.stats.rows_merged += plan.removed.len() as u64;
            if compacted.last() != Some(&entity) && self.revisited.as_ref() != Some(entity) {
                compacted.push(entity);
            }
        }
        self.stats.entities_compacted = compacted.len() as u64;
        Ok(BatchPlan {
            stats: self.stats,
            plans: self.plans,
            resume: self.resume,
            started: self.started,
        })
    }

    fn current_label(&self) -> String {
        self.current
            .as_ref()
            .map_or_else(String::new, ToString::to_string)
    }

    fn flush_group(&mut self) -> Result<()> {
        let Some(Group { index, rows }) = self.group.take() else {
            return Ok(());
        };
        let spec = &self.kind.fields[index];
        if spec.auto_range().is_some() {
            if let Some(entity) = &self.current {
                self.auto_groups.push((entity.clone(), index, rows));
            }
            return Ok(());
        }
        let plan = plan(spec, rows, |values| self.kind.raw_fold(index, values))
            .map_err(|e| e.into_error(self.kind.name, &self.current_label(), spec.name))?;
        if let (Some(plan), Some(entity)) = (plan, &self.current) {
            self.plans.push((entity.clone(), index, plan));
        }
        Ok(())
    }
}

/// The rows of one field of one entity read so far, in shard order.
struct Group {
    index: usize,
    rows: Vec<(i64, Value)>,
}

impl Group {
    /// Whether folding the rows read so far would remove at least one row;
    /// a batch only stops inside a group once it does, so every batch
    /// makes progress.
    /// A group of an automatic field is never split: its plan needs the
    /// entity's count, read once per batch.
    fn makes_progress(&self, kind: &Kind) -> bool {
        let spec = &kind.fields[self.index];
        if spec.auto_range().is_some() {
            return false;
        }
        match spec.shards {
            None => self.rows.len() > 1,
            Some(n) => self.rows.iter().any(|(shard, _)| *shard >= i64::from(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn rows(pairs: &[(i64, i64)]) -> Vec<(i64, Value)> {
        pairs.iter().map(|&(s, v)| (s, Value::Integer(v))).collect()
    }

    const DYNAMIC: FieldSpec = FieldSpec {
        name: "f",
        shards: None,
        min_shards: None,
    };
    const STATIC3: FieldSpec = FieldSpec {
        name: "f",
        shards: Some(3),
        min_shards: None,
    };

    #[test]
    fn dynamic_folds_everything_into_the_first_row() {
        let plan = plan(&DYNAMIC, rows(&[(4, 1), (7, 2), (9, 3)]), sum)
            .unwrap()
            .unwrap();
        assert_eq!(plan.target, 4);
        assert_eq!(plan.value, Value::Integer(6));
        assert_eq!(plan.removed, vec![7, 9]);
        assert!(plan.target_read);
        assert_eq!(super::plan(&DYNAMIC, rows(&[(4, 1)]), sum).unwrap(), None);
    }

    #[test]
    fn static_folds_only_surplus_into_shard_zero() {
        assert_eq!(
            plan(&STATIC3, rows(&[(0, 1), (1, 1), (2, 1)]), sum).unwrap(),
            None
        );
        let plan = plan(&STATIC3, rows(&[(0, 5), (2, 1), (3, 10), (8, 100)]), sum)
            .unwrap()
            .unwrap();
        assert_eq!(plan.target, 0);
        assert_eq!(plan.value, Value::Integer(115));
        assert_eq!(plan.removed, vec![3, 8]);
        assert!(plan.target_read);
    }

    #[test]
    fn static_without_shard_zero_creates_it() {
        let plan = plan(&STATIC3, rows(&[(1, 1), (5, 2)]), sum)
            .unwrap()
            .unwrap();
        assert_eq!(
            (plan.target, plan.value, plan.removed),
            (0, Value::Integer(2), vec![5])
        );
        assert!(!plan.target_read);
    }
}

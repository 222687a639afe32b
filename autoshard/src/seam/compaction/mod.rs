//! What compaction does to one field of one entity, independent of the store.
//!
//! Dynamic fields fold every row into the lowest-numbered one. Static fields
//! keep rows `0..shards` and fold any surplus (left behind when `shards` was
//! lowered, or by a field that used to be dynamic) into shard 0. Either way
//! the fold of all rows is unchanged, which is the invariant every store's
//! compaction must keep.
//!
//! A group whose rows cannot be folded (a total out of its type's range, a
//! corrupt row) is left as it is and reported in
//! [`CompactionStats::skipped`]; the batch goes on with the other groups,
//! so one broken entity never stops the compaction of its kind.

pub(crate) mod counts;
use self::counts::{CountUpdate, StoredCount};
use crate::counters;
use crate::entity::FieldSpec;
use crate::error::{Error, Result};
use crate::fold::FoldError;
use crate::seam::{BatchPlan, CompactionStats, Kind, Plan, Resume, Skipped, StoredKey};
use crate::trace;
use crate::value::Value;
use std::time::Instant;

/// How many skipped groups a run lists in [`CompactionStats::skipped`]
/// (all are counted).
pub(crate) const SKIPPED_LISTED: usize = 16;

/// Plans the rewrite of one group, given its rows in shard order; `None` when
/// the group is already compact.
pub(crate) fn plan(
    spec: &FieldSpec,
    rows: &[(i64, Value)],
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
    for &(shard, ref value) in rows {
        if shard == target || shard >= keep_below {
            if shard == target {
                target_read = true;
            } else {
                removed.push(shard);
            }
            values.push(value.clone());
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

/// The compaction job's driver, the same for every store: runs `batch` (one
/// committed transaction from where the last one stopped) until the scan is
/// done, adding up the batches' counts and reporting after each.
pub(crate) fn run_batches(
    progress: &mut dyn FnMut(&CompactionStats),
    mut batch: impl FnMut(&Resume) -> Result<BatchPlan>,
) -> Result<CompactionStats> {
    let mut stats = CompactionStats::default();
    let mut from = Resume::Done;
    let mut last_skipped = None;
    loop {
        let done = batch(&from)?;
        stats.entities_visited += done.stats.entities_visited;
        stats.entities_compacted += done.stats.entities_compacted;
        stats.rows_scanned += done.stats.rows_scanned;
        stats.rows_merged += done.stats.rows_merged;
        stats.timeouts += done.stats.timeouts;
        stats.counts_lowered += done.stats.counts_lowered;
        stats.batches += 1;
        stats.entities_skipped += newly_skipped(&mut last_skipped, &done.skipped);
        for (entity, field, error) in done.skipped {
            let skipped = Skipped {
                id: entity.to_string(),
                field,
                error: error.to_string(),
            };
            if stats.skipped.len() < SKIPPED_LISTED && !stats.skipped.contains(&skipped) {
                stats.skipped.push(skipped);
            }
        }
        progress(&stats);
        match done.resume {
            Resume::Done => return Ok(stats),
            resume => from = resume,
        }
    }
}

/// Runs one compaction batch of `kind` in its span, recording what it did.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn traced_batch(
    kind: &Kind,
    batch: impl FnOnce() -> Result<BatchPlan>,
) -> Result<BatchPlan> {
    let span = trace::span!(
        DEBUG,
        "autoshard.compaction_batch",
        kind = kind.name,
        entities = tracing::field::Empty,
        rows = tracing::field::Empty,
        merged = tracing::field::Empty,
        lowered = tracing::field::Empty,
        error = tracing::field::Empty
    );
    let done = batch();
    match &done {
        Ok(done) => {
            counters::COMPACTION_BATCHES.add(1);
            counters::ROWS_MERGED.add(done.stats.rows_merged);
            counters::COUNTS_LOWERED.add(done.stats.counts_lowered);
            span.record("entities", done.stats.entities_visited);
            span.record("rows", done.stats.rows_scanned);
            span.record("merged", done.stats.rows_merged);
            span.record("lowered", done.stats.counts_lowered);
        }
        Err(e) => span.record("error", trace::display(e)),
    }
    done
}

/// How many entities among one batch's skipped groups a pass has not
/// counted yet, given the last entity it counted (`last`, updated). A batch
/// that starts again at an entity (`Resume::At`) rereads its skipped groups,
/// and an entity's groups come one after another, so comparing with the
/// last one is enough.
pub(crate) fn newly_skipped(
    last: &mut Option<StoredKey>,
    skipped: &[(StoredKey, &'static str, Error)],
) -> u64 {
    let mut new = 0;
    for (entity, _, _) in skipped {
        if last.as_ref() != Some(entity) {
            new += 1;
            *last = Some(entity.clone());
        }
    }
    new
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
    skipped: Vec<(StoredKey, &'static str, Error)>,
    current: Option<StoredKey>,
    group: Option<Group>,
    /// Groups of automatic fields, planned at the end, once the store has
    /// read their entities' counts ([`BatchScan::finish_counted`]).
    auto_groups: Vec<(StoredKey, usize, Rows)>,
    resume: Resume,
    started: Instant,
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
            skipped: Vec::new(),
            current: None,
            group: None,
            auto_groups: Vec::new(),
            resume: Resume::Done,
            started: Instant::now(),
        }
    }

    /// Feeds the next row. Returns `false` when the batch is complete
    /// without this row: stop scanning, the row belongs to a later batch.
    /// `value` is only decoded for declared fields; one that does not
    /// decode makes its group skipped.
    pub fn push(
        &mut self,
        entity: StoredKey,
        field: &str,
        shard: i64,
        value: impl FnOnce() -> Result<Value, String>,
    ) -> bool {
        let full = self.stats.rows_scanned as usize >= self.max_rows;
        let index = self.kind.field_index(field);
        if self.current.as_ref() != Some(&entity) {
            if let (true, Some(current)) = (full, &self.current) {
                self.resume = Resume::After(current.clone());
                return false;
            }
            self.flush_group();
            if self.revisited.as_ref() != Some(&entity) {
                self.stats.entities_visited += 1;
            }
            self.current = Some(entity);
        } else if full
            && self
                .group
                .as_ref()
                .is_some_and(|g| Some(g.index) == index && g.may_split(self.kind))
            && self.plan_part()
        {
            self.resume = Resume::At(entity);
            return false;
        }
        self.stats.rows_scanned += 1;
        let Some(index) = index else {
            return true;
        };
        if self.group.as_ref().is_some_and(|g| g.index != index) {
            self.flush_group();
        }
        let group = self.group.get_or_insert_with(|| Group {
            index,
            rows: Vec::new(),
            broken: None,
            whole: false,
        });
        match value() {
            Ok(value) if group.broken.is_none() => group.rows.push((shard, value)),
            Ok(_) => {}
            Err(reason) => {
                group.broken.get_or_insert(reason);
                group.rows = Vec::new();
            }
        }
        true
    }

    /// The batch's groups of automatic fields, `(entity, field index)`, in
    /// scan order: the store reads their counts (`None`: none recorded)
    /// and hands them to [`finish_counted`](Self::finish_counted).
    pub fn auto_groups(&mut self) -> Vec<(StoredKey, usize)> {
        self.flush_group();
        self.auto_groups
            .iter()
            .map(|(entity, index, _)| (entity.clone(), *index))
            .collect()
    }

    /// [`finish`](Self::finish) for a kind with automatic fields: `counts`
    /// are the stored counts of [`auto_groups`](Self::auto_groups), read in
    /// the batch's transaction. Also returns the counts to lower, which
    /// the store writes in the same transaction as the plans; a group that
    /// does not fold is skipped, its count left alone.
    pub fn finish_counted(
        mut self,
        counts: Vec<Option<StoredCount>>,
    ) -> (BatchPlan, Vec<CountUpdate>) {
        let now = counts::now_ms();
        let quiet = self.kind.quiet_period();
        let mut updates = Vec::new();
        let groups = std::mem::take(&mut self.auto_groups);
        for ((entity, index, rows), stored) in groups.into_iter().zip(counts) {
            let spec = &self.kind.fields[index];
            let stored = stored.unwrap_or_else(|| StoredCount::start(spec));
            let planned = counts::plan_group(spec, stored, quiet, now, &rows, |values| {
                self.kind.raw_fold(index, values)
            });
            match planned {
                Ok((plan, lowered)) => {
                    if let Some(to) = lowered {
                        trace::event!(INFO, kind = self.kind.name, id = %entity,
                            field = spec.name, from = stored.shards, to,
                            "autoshard: shard count lowered");
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
                Err(e) => {
                    let error = e.into_error(self.kind.name, &entity.to_string(), spec.name);
                    self.skipped.push((entity, spec.name, error));
                }
            }
        }
        self.stats.counts_lowered = updates.len() as u64;
        (self.finish(), updates)
    }

    pub fn finish(mut self) -> BatchPlan {
        self.flush_group();
        let mut compacted: Vec<&StoredKey> = Vec::new();
        for (entity, _, plan) in &self.plans {
            self.stats.rows_merged += plan.removed.len() as u64;
            if compacted.last() != Some(&entity) && self.revisited.as_ref() != Some(entity) {
                compacted.push(entity);
            }
        }
        self.stats.entities_compacted = compacted.len() as u64;
        BatchPlan {
            stats: self.stats,
            plans: self.plans,
            skipped: self.skipped,
            resume: self.resume,
            started: self.started,
        }
    }

    fn current_label(&self) -> String {
        self.current
            .as_ref()
            .map_or_else(String::new, ToString::to_string)
    }

    /// The rewrite of a group, or why it cannot be folded.
    fn plan_group(&self, group: &Group) -> Result<Option<Plan>> {
        let spec = &self.kind.fields[group.index];
        let id = self.current_label();
        if let Some(reason) = &group.broken {
            return Err(self.kind.corrupt(&id, spec.name, reason.clone()));
        }
        plan(spec, &group.rows, |values| {
            self.kind.raw_fold(group.index, values)
        })
        .map_err(|e| e.into_error(self.kind.name, &id, spec.name))
    }

    /// Folds the part of the current group read so far, to stop the batch
    /// inside it. A part that does not fold is no reason to stop (the next
    /// batch would meet it again): the group is then read whole, and skipped
    /// or folded as a whole.
    fn plan_part(&mut self) -> bool {
        let Some(group) = self.group.take() else {
            return false;
        };
        match self.plan_group(&group) {
            Ok(plan) => {
                if let (Some(plan), Some(entity)) = (plan, &self.current) {
                    self.plans.push((entity.clone(), group.index, plan));
                }
                true
            }
            Err(_) => {
                self.group = Some(Group {
                    whole: true,
                    ..group
                });
                false
            }
        }
    }

    fn flush_group(&mut self) {
        let Some(group) = self.group.take() else {
            return;
        };
        let Some(entity) = self.current.clone() else {
            return;
        };
        if self.kind.fields[group.index].auto_range().is_some() && group.broken.is_none() {
            self.auto_groups.push((entity, group.index, group.rows));
            return;
        }
        match self.plan_group(&group) {
            Ok(Some(plan)) => self.plans.push((entity, group.index, plan)),
            Ok(None) => {}
            Err(e) => {
                let field = self.kind.fields[group.index].name;
                self.skipped.push((entity, field, e));
            }
        }
    }
}

/// `(shard, value)` of one field of one entity, in shard order.
type Rows = Vec<(i64, Value)>;

/// The rows of one field of one entity read so far, in shard order.
struct Group {
    index: usize,
    rows: Vec<(i64, Value)>,
    /// Why a row did not decode: the group is skipped (its rows are not
    /// kept).
    broken: Option<String>,
    /// Read to its end in this batch: a part of it did not fold.
    whole: bool,
}

impl Group {
    /// Whether the batch may stop inside this group: folding the rows read
    /// so far would remove at least one row (so every batch makes
    /// progress), and nothing showed yet that they do not fold.
    /// A group of an automatic field is never split: its plan needs the
    /// entity's count, read once per batch.
    fn may_split(&self, kind: &Kind) -> bool {
        if kind.fields[self.index].auto_range().is_some() {
            return false;
        }
        let progress = match kind.fields[self.index].shards {
            None => self.rows.len() > 1,
            Some(n) => self.rows.iter().any(|(shard, _)| *shard >= i64::from(n)),
        };
        progress && !self.whole && self.broken.is_none()
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
        let plan = plan(&DYNAMIC, &rows(&[(4, 1), (7, 2), (9, 3)]), sum)
            .unwrap()
            .unwrap();
        assert_eq!(plan.target, 4);
        assert_eq!(plan.value, Value::Integer(6));
        assert_eq!(plan.removed, vec![7, 9]);
        assert!(plan.target_read);
        assert_eq!(super::plan(&DYNAMIC, &rows(&[(4, 1)]), sum).unwrap(), None);
    }

    #[test]
    fn static_folds_only_surplus_into_shard_zero() {
        assert_eq!(
            plan(&STATIC3, &rows(&[(0, 1), (1, 1), (2, 1)]), sum).unwrap(),
            None
        );
        let plan = plan(&STATIC3, &rows(&[(0, 5), (2, 1), (3, 10), (8, 100)]), sum)
            .unwrap()
            .unwrap();
        assert_eq!(plan.target, 0);
        assert_eq!(plan.value, Value::Integer(115));
        assert_eq!(plan.removed, vec![3, 8]);
        assert!(plan.target_read);
    }

    /// Runs a whole compaction over rows held in memory, as a store would:
    /// each batch scans from where the last one stopped and its plans are
    /// applied before the next.
    fn compact(
        kind: &Kind,
        rows: &mut std::collections::BTreeMap<(i64, i64), Value>,
        max_rows: usize,
    ) -> CompactionStats {
        let mut batches = 0;
        run_batches(&mut |_| {}, |from| {
            batches += 1;
            assert!(batches < 100, "compaction does not end");
            let mut scan = BatchScan::new(kind, from, max_rows);
            for (&(entity, shard), value) in rows.iter() {
                let skip = match from {
                    Resume::Done => false,
                    Resume::After(StoredKey::Int(k)) => entity <= *k,
                    Resume::At(StoredKey::Int(k)) => entity < *k,
                    _ => unreachable!(),
                };
                if !skip && !scan.push(StoredKey::Int(entity), "f", shard, || Ok(value.clone())) {
                    break;
                }
            }
            let batch = scan.finish();
            for (entity, _, plan) in &batch.plans {
                let StoredKey::Int(entity) = *entity else {
                    unreachable!()
                };
                for shard in &plan.removed {
                    rows.remove(&(entity, *shard));
                }
                rows.insert((entity, plan.target), plan.value.clone());
            }
            Ok(batch)
        })
        .unwrap()
    }

    #[test]
    fn a_group_that_does_not_fold_is_skipped_and_the_others_compacted() {
        const FIELDS: &[FieldSpec] = &[DYNAMIC];
        fn fold(_: usize, values: &mut dyn Iterator<Item = Value>) -> Result<Value, FoldError> {
            crate::__private::fold_values(values, 0i64, crate::fold::checked_sum)
        }
        let kind = Kind::for_tests(FIELDS, fold);
        // Entity 2's first rows already leave i64, entity 4's only at the
        // end; the others fold. With 3 rows a batch, a batch that stops
        // inside entity 2 would meet the same part again and again: with
        // `plan_part` returning `true` for a part that does not fold, this
        // test fails with "compaction does not end".
        let layout: &[(i64, &[i64])] = &[
            (1, &[1, 1, 1, 1]),
            (2, &[i64::MAX, 1, 1, 1, 1, 1, 1]),
            (3, &[1, 2]),
            (4, &[1, 1, 1, 1, i64::MAX]),
            (5, &[i64::MAX, 1, -2]),
        ];
        for max_rows in [1, 3, 10_000] {
            let mut rows = std::collections::BTreeMap::new();
            for &(entity, values) in layout {
                for (shard, &v) in values.iter().enumerate() {
                    rows.insert((entity, shard as i64), Value::Integer(v));
                }
            }
            let stats = compact(&kind, &mut rows, max_rows);
            let left = |entity: i64| rows.keys().filter(|(e, _)| *e == entity).count();
            assert_eq!(
                (1..=5).map(left).collect::<Vec<_>>(),
                [1, 7, 1, left(4), 1],
                "{max_rows}: {stats:?}"
            );
            assert_eq!(rows[&(1, 0)], Value::Integer(4));
            assert_eq!(rows[&(5, 0)], Value::Integer(i64::MAX - 1));
            assert_eq!(stats.entities_skipped, 2, "{max_rows}: {stats:?}");
            let skipped: Vec<&str> = stats.skipped.iter().map(|s| s.id.as_str()).collect();
            assert_eq!(skipped, ["2", "4"], "{max_rows}");
            assert!(stats.skipped[0].error.contains("does not fit"), "{stats:?}");
            assert_eq!(stats.entities_visited, 5);
        }
    }

    #[test]
    fn static_without_shard_zero_creates_it() {
        let plan = plan(&STATIC3, &rows(&[(1, 1), (5, 2)]), sum)
            .unwrap()
            .unwrap();
        assert_eq!(
            (plan.target, plan.value, plan.removed),
            (0, Value::Integer(2), vec![5])
        );
        assert!(!plan.target_read);
    }
}

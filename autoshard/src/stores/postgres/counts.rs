//! Automatic shard counts on PostgreSQL (`crate::seam::compaction::counts` decides;
//! this runs the statements).
//!
//! Per kind with an automatic field, `as_count_k (entity, field, shards,
//! reason, changed_at, contended_at)`: one row per entity and field whose
//! count ever changed (none: the low end), deleted with the entity. A
//! schema made before automatic counts gets the table when a handle first
//! uses such a kind; its entities start at the low end.
//!
//! A save reads the count in its own transaction (a plain read: savers
//! never lock the count row, so they do not contend on it) and picks a
//! shard below it. What counts as contention:
//!
//! - [`Concurrency::Optimistic`]: the shard row's write failed with a
//!   serialization failure (40001), because another save changed the row
//!   since the snapshot;
//! - [`Concurrency::Locking`]: the shard row is locked by another
//!   transaction, seen by a `FOR UPDATE SKIP LOCKED` probe before the
//!   write; the save then picks among the doubled count at once.
//!
//! Either way the raise is a short statement of its own, outside the save's
//! transaction (after the failed attempt, before a retry; or after the
//! save), that sets the greater of the stored count and the doubled one.
//! It is advice: if it fails (the entity was deleted, the connection was
//! lost), the save's own outcome stands and the count stays.

use super::entities::sql_state;
use super::schema::KindTables;
use super::{Concurrency, Postgres, Tx};
use crate::entity::FieldSpec;
use crate::error::{Error, Result};
use crate::seam::compaction::counts::{
    self as shard_counts, AutoCensus, CountChange, CountUpdate, ShardCount, StoredCount,
};
use crate::seam::{Delta, Kind, SavePlan, StoredKey};
use std::cell::RefCell;

pub(crate) struct CountSql {
    pub create: String,
    select: String,
    select_many: String,
    probe: String,
    raise: String,
    lower: String,
    census_counts: String,
    census_reasons: String,
    census_surplus: String,
}

/// The names [`CountSql::new`] needs: quoted, schema-qualified tables and
/// quoted constraint names.
pub(crate) struct CountNames<'a> {
    pub counts: &'a str,
    pub entity: &'a str,
    pub shard: &'a str,
    pub pk: &'a str,
    pub fk: &'a str,
    pub key_type: &'a str,
}

impl CountSql {
    pub fn new(n: CountNames<'_>) -> Self {
        let CountNames {
            counts,
            entity,
            shard,
            pk,
            fk,
            key_type,
        } = n;
        let active = "greatest(c.changed_at, c.contended_at)";
        let one_shard = "entity = $1 AND field = $2 AND shard = $3";
        CountSql {
            create: format!(
                "CREATE TABLE IF NOT EXISTS {counts} (
                     entity {key_type} NOT NULL,
                     field text COLLATE \"C\" NOT NULL,
                     shards bigint NOT NULL,
                     reason bigint NOT NULL,
                     changed_at bigint NOT NULL,
                     contended_at bigint NOT NULL,
                     CONSTRAINT {pk} PRIMARY KEY (entity, field),
                     CONSTRAINT {fk} FOREIGN KEY (entity)
                         REFERENCES {entity} (id) ON DELETE CASCADE
                 );"
            ),
            select: format!(
                "SELECT c.shards, c.reason, {active} FROM {counts} c \
                 WHERE c.entity = $1 AND c.field = $2"
            ),
            select_many: format!(
                "SELECT u.i, c.shards, c.reason, {active} \
                 FROM unnest($1::{key_type}[], $2::text[]) WITH ORDINALITY AS u(entity, field, i) \
                 JOIN {counts} c ON c.entity = u.entity AND c.field = u.field"
            ),
            // Whether this transaction got the row's lock without waiting,
            // and whether the row exists: existing but not got is a lock
            // another transaction holds.
            probe: format!(
                "WITH got AS (SELECT 1 FROM {shard} WHERE {one_shard} FOR UPDATE SKIP LOCKED) \
                 SELECT EXISTS (SELECT 1 FROM got), \
                        EXISTS (SELECT 1 FROM {shard} WHERE {one_shard})"
            ),
            raise: format!(
                "INSERT INTO {counts} AS c (entity, field, shards, reason, changed_at, contended_at) \
                 VALUES ($1, $2, $3, $4, $5, $5) \
                 ON CONFLICT (entity, field) DO UPDATE SET \
                     shards = greatest(c.shards, excluded.shards), \
                     reason = CASE WHEN excluded.shards > c.shards \
                              THEN excluded.reason ELSE c.reason END, \
                     changed_at = CASE WHEN excluded.shards > c.shards \
                                  THEN excluded.changed_at ELSE c.changed_at END, \
                     contended_at = excluded.contended_at \
                 RETURNING shards, reason"
            ),
            lower: format!(
                "UPDATE {counts} SET shards = $4, reason = $5, changed_at = $6 \
                 WHERE entity = $1 AND field = $2 AND shards = $3"
            ),
            census_counts: format!(
                "SELECT coalesce(c.shards, $2), count(*) \
                 FROM (SELECT DISTINCT entity FROM {shard} WHERE field = $1) s \
                 LEFT JOIN {counts} c ON c.entity = s.entity AND c.field = $1 GROUP BY 1"
            ),
            census_reasons: format!(
                "SELECT reason, count(*) FROM {counts} WHERE field = $1 GROUP BY reason"
            ),
            census_surplus: format!(
                "SELECT count(*) FROM {shard} s \
                 LEFT JOIN {counts} c ON c.entity = s.entity AND c.field = s.field \
                 WHERE s.field = $1 \
                   AND s.shard >= least(greatest(coalesce(c.shards, $2), $2), $3)"
            ),
        }
    }
}

fn sql(tables: &KindTables) -> &CountSql {
    tables
        .counts
        .as_ref()
        .expect("a kind with an automatic field has a counts table")
}

/// Contention one save observed, and the raises it made, shared by its
/// attempts and the hook between them.
#[derive(Default)]
pub(super) struct Observed {
    /// `(field index, count seen, why)` not raised yet.
    pending: RefCell<Vec<(usize, u32, CountChange)>>,
    /// `(field index, count now, reason)` after a raise.
    raised: RefCell<Vec<(usize, u32, CountChange)>>,
}

impl Observed {
    /// Notes a serialization failure of the shard write of `index`, which
    /// used the count `seen`; other errors are not contention.
    pub fn on_write_error(&self, error: &Error, index: usize, seen: u32) {
        if matches!(error, Error::Postgres(e) if sql_state(e) == Some("40001")) {
            self.pending
                .borrow_mut()
                .push((index, seen, CountChange::Conflict));
        }
    }
}

/// The shard a save folds `delta` of an automatic field into, and the
/// count it picked under. Notes the count in the plan for `Saved`.
pub(super) fn pick(
    tx: &mut Tx<'_>,
    tables: &KindTables,
    key: &StoredKey,
    delta: &Delta,
    plan: &SavePlan,
    observed: &Observed,
) -> Result<(i64, u32)> {
    let spec = delta.spec;
    let sql = sql(tables);
    let count = read(tx, sql, spec, key)?;
    if plan.counted.get().is_none_or(|c| c.field == spec.name) {
        plan.counted.set(Some(ShardCount {
            field: spec.name,
            shards: count.shards,
            reason: count.reason,
            raised: false,
        }));
    }
    let shard = crate::seam::pick_shard(count.shards);
    if tx.mode == Concurrency::Locking {
        let row = tx.query_opt(&sql.probe, &[key, &spec.name, &shard])?;
        let (got, exists): (bool, bool) = row.map_or((true, false), |r| (r.get(0), r.get(1)));
        if exists && !got {
            observed
                .pending
                .borrow_mut()
                .push((delta.index, count.shards, CountChange::LockWait));
            let wider = shard_counts::raised(spec, count.shards);
            return Ok((crate::seam::pick_shard(wider), count.shards));
        }
    }
    Ok((shard, count.shards))
}

fn read(tx: &mut Tx<'_>, sql: &CountSql, spec: &FieldSpec, key: &StoredKey) -> Result<StoredCount> {
    Ok(match tx.query_opt(&sql.select, &[key, &spec.name])? {
        Some(row) => StoredCount::read(spec, row.try_get(0)?, row.try_get(1)?, row.try_get(2)?),
        None => StoredCount::start(spec),
    })
}

/// Raises the counts `observed` noted since the last call, each in a
/// statement of its own; see the module docs for why failures are ignored.
pub(super) fn raise(
    store: &Postgres,
    kind: &Kind,
    tables: &KindTables,
    key: &StoredKey,
    observed: &Observed,
) {
    let pending = std::mem::take(&mut *observed.pending.borrow_mut());
    let mut done: Vec<usize> = Vec::new();
    for (index, seen, why) in pending {
        if done.contains(&index) {
            continue;
        }
        done.push(index);
        let spec = &kind.fields[index];
        let to = shard_counts::raised(spec, seen);
        let now = shard_counts::now_ms();
        let row = store.read(|tx| {
            Ok(tx.query_opt(
                &sql(tables).raise,
                &[key, &spec.name, &i64::from(to), &why.code(), &now],
            )?)
        });
        if let Ok(Some(row)) = row {
            let stored = StoredCount::read(spec, row.get(0), row.get(1), now);
            observed
                .raised
                .borrow_mut()
                .push((index, stored.shards, stored.reason));
        }
    }
}

/// Reports the raises in the plan's [`ShardCount`].
pub(super) fn report(kind: &Kind, plan: &SavePlan, observed: &Observed) {
    let Some(mut counted) = plan.counted.get() else {
        return;
    };
    for &(index, shards, reason) in observed.raised.borrow().iter() {
        if kind.fields[index].name == counted.field {
            counted.shards = counted.shards.max(shards);
            counted.reason = reason;
            counted.raised = true;
        }
    }
    plan.counted.set(Some(counted));
}

/// The counts of a compaction batch's automatic groups, in its transaction.
pub(super) fn read_all(
    tx: &mut Tx<'_>,
    kind: &Kind,
    tables: &KindTables,
    groups: &[(StoredKey, usize)],
) -> Result<Vec<Option<StoredCount>>> {
    let mut counts = vec![None; groups.len()];
    if groups.is_empty() {
        return Ok(counts);
    }
    let entities: Vec<&StoredKey> = groups.iter().map(|(e, _)| e).collect();
    let fields: Vec<&str> = groups.iter().map(|(_, i)| kind.fields[*i].name).collect();
    for row in tx.query(&sql(tables).select_many, &[&entities, &fields])? {
        let at = row.try_get::<_, i64>(0)? as usize - 1;
        let spec = &kind.fields[groups[at].1];
        counts[at] = Some(StoredCount::read(
            spec,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        ));
    }
    Ok(counts)
}

/// Writes the counts a compaction batch lowered.
pub(super) fn lower(
    tx: &mut Tx<'_>,
    kind: &Kind,
    tables: &KindTables,
    updates: &[CountUpdate],
) -> Result<()> {
    let now = shard_counts::now_ms();
    for u in updates {
        tx.execute(
            &sql(tables).lower,
            &[
                &u.entity,
                &kind.fields[u.index].name,
                &i64::from(u.from),
                &i64::from(u.to),
                &CountChange::Quiet.code(),
                &now,
            ],
        )?;
    }
    Ok(())
}

impl Postgres {
    pub(super) fn count_census(&self, kind: &Kind, index: usize) -> Result<AutoCensus> {
        let tables = self.tables(kind)?;
        let sql = sql(&tables);
        let spec = &kind.fields[index];
        let (low, high) = spec.auto_range().expect("an automatic field");
        let (low, high) = (i64::from(low), i64::from(high));
        self.read_snapshot(|tx| {
            let mut pairs = |query: &str, low: Option<&i64>| -> Result<Vec<(i64, u64)>> {
                let rows = match low {
                    Some(low) => tx.query(query, &[&spec.name, low])?,
                    None => tx.query(query, &[&spec.name])?,
                };
                Ok(rows
                    .iter()
                    .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1) as u64))
                    .collect())
            };
            let counts = pairs(&sql.census_counts, Some(&low))?;
            let reasons = pairs(&sql.census_reasons, None)?;
            let surplus: i64 = tx
                .query_opt(&sql.census_surplus, &[&spec.name, &low, &high])?
                .expect("one row")
                .get(0);
            Ok(AutoCensus {
                counts,
                reasons,
                surplus: surplus as u64,
            })
        })
    }
}

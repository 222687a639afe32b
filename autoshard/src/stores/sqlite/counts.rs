//! Automatic shard counts on SQLite (`crate::seam::compaction::counts` decides; this
//! runs the statements).
//!
//! Per kind with an automatic field, `as_count_k (entity, field, shards,
//! reason, changed_at, contended_at)`: one row per entity and field whose
//! count ever changed (none: the low end), deleted with the entity. A
//! database made before automatic counts gets the table when a handle first
//! uses such a kind; its entities start at the low end.
//!
//! SQLite has one writer at a time, so two saves never contend for an
//! entity's shard row; the only wait is for the database-wide writer lock,
//! which more shard rows do not shorten. Counts rise only when
//! [`SqliteBuilder::contention_wait`](crate::SqliteBuilder::contention_wait)
//! is set, and then inside the save's own transaction (the writer lock
//! makes that free of races).

use super::schema::KindTables;
use super::Sqlite;
use crate::entity::Key;
use crate::error::Result;
use crate::naming::quote;
use crate::seam::compaction::counts::{
    self as shard_counts, AutoCensus, CountChange, CountUpdate, ShardCount, StoredCount,
};
use crate::seam::{Delta, Kind, SavePlan, StoredKey};
use rusqlite::{OptionalExtension, Transaction};

pub(crate) struct CountSql {
    pub create: String,
    select: String,
    raise: String,
    lower: String,
    census_counts: String,
    census_reasons: String,
    census_surplus: String,
}

impl CountSql {
    /// `entity` and `shard` are the kind's quoted table names.
    pub fn new(base: &str, key_type: &str, entity: &str, shard: &str) -> Self {
        let counts = quote(&format!("as_count_{base}"));
        CountSql {
            create: format!(
                "CREATE TABLE IF NOT EXISTS {counts} (
                     entity {key_type} NOT NULL REFERENCES {entity} (id) ON DELETE CASCADE,
                     field TEXT NOT NULL,
                     shards INTEGER NOT NULL,
                     reason INTEGER NOT NULL,
                     changed_at INTEGER NOT NULL,
                     contended_at INTEGER NOT NULL,
                     PRIMARY KEY (entity, field)
                 ) STRICT, WITHOUT ROWID;"
            ),
            select: format!(
                "SELECT shards, reason, max(changed_at, contended_at) FROM {counts} \
                 WHERE entity = ?1 AND field = ?2"
            ),
            // The greater of the stored count and the raised one: observers
            // of one count double it once between them.
            raise: format!(
                "INSERT INTO {counts} (entity, field, shards, reason, changed_at, contended_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5) \
                 ON CONFLICT (entity, field) DO UPDATE SET \
                     shards = max(shards, excluded.shards), \
                     reason = iif(excluded.shards > shards, excluded.reason, reason), \
                     changed_at = iif(excluded.shards > shards, excluded.changed_at, changed_at), \
                     contended_at = excluded.contended_at \
                 RETURNING shards, reason"
            ),
            lower: format!(
                "UPDATE {counts} SET shards = ?4, reason = ?5, changed_at = ?6 \
                 WHERE entity = ?1 AND field = ?2 AND shards = ?3"
            ),
            census_counts: format!(
                "SELECT coalesce(c.shards, ?2), count(*) \
                 FROM (SELECT DISTINCT entity FROM {shard} WHERE field = ?1) s \
                 LEFT JOIN {counts} c ON c.entity = s.entity AND c.field = ?1 GROUP BY 1"
            ),
            census_reasons: format!(
                "SELECT reason, count(*) FROM {counts} WHERE field = ?1 GROUP BY reason"
            ),
            census_surplus: format!(
                "SELECT count(*) FROM {shard} s \
                 LEFT JOIN {counts} c ON c.entity = s.entity AND c.field = s.field \
                 WHERE s.field = ?1 AND s.shard >= min(max(coalesce(c.shards, ?2), ?2), ?3)"
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

/// The shard a save folds `delta` of an automatic field into: one of
/// `0..count`, after raising the count if the transaction waited for the
/// writer lock at least `contention_wait`. Notes the count in the plan.
pub(super) fn pick(
    store: &Sqlite,
    tx: &Transaction<'_>,
    tables: &KindTables,
    key: Key<'_>,
    delta: &Delta,
    plan: &SavePlan,
) -> Result<i64> {
    let sql = sql(tables);
    let spec = delta.spec;
    let mut count = read(tx, sql, spec, &key.into())?;
    let waited = store
        .contention_wait()
        .is_some_and(|wait| Sqlite::lock_waited() >= wait);
    let raised = waited && count.shards < shard_counts::raised(spec, count.shards);
    if raised {
        let (shards, reason): (i64, i64) = tx.prepare_cached(&sql.raise)?.query_row(
            (
                key,
                spec.name,
                shard_counts::raised(spec, count.shards),
                CountChange::WriterWait.code(),
                shard_counts::now_ms(),
            ),
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        count = StoredCount::read(spec, shards, reason, 0);
    }
    if plan.counted.get().is_none() {
        plan.counted.set(Some(ShardCount {
            field: spec.name,
            shards: count.shards,
            reason: count.reason,
            raised,
        }));
    }
    Ok(crate::seam::pick_shard(count.shards))
}

fn read(
    tx: &Transaction<'_>,
    sql: &CountSql,
    spec: &crate::entity::FieldSpec,
    entity: &StoredKey,
) -> Result<StoredCount> {
    let stored = tx
        .prepare_cached(&sql.select)?
        .query_row((entity.as_key(), spec.name), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    Ok(match stored {
        Some((shards, reason, active)) => StoredCount::read(spec, shards, reason, active),
        None => StoredCount::start(spec),
    })
}

/// The counts of a compaction batch's automatic groups, in its transaction.
pub(super) fn read_all(
    tx: &Transaction<'_>,
    kind: &Kind,
    tables: &KindTables,
    groups: &[(StoredKey, usize)],
) -> Result<Vec<Option<StoredCount>>> {
    let sql = sql(tables);
    groups
        .iter()
        .map(|(entity, index)| read(tx, sql, &kind.fields[*index], entity).map(Some))
        .collect()
}

/// Writes the counts a compaction batch lowered.
pub(super) fn lower(
    tx: &Transaction<'_>,
    kind: &Kind,
    tables: &KindTables,
    updates: &[CountUpdate],
) -> Result<()> {
    let now = shard_counts::now_ms();
    for update in updates {
        tx.prepare_cached(&sql(tables).lower)?.execute((
            update.entity.as_key(),
            kind.fields[update.index].name,
            update.from,
            update.to,
            CountChange::Quiet.code(),
            now,
        ))?;
    }
    Ok(())
}

impl Sqlite {
    pub(super) fn count_census(&self, kind: &Kind, index: usize) -> Result<AutoCensus> {
        let tables = self.tables(kind)?;
        let sql = sql(&tables);
        let spec = &kind.fields[index];
        let (low, high) = spec.auto_range().expect("an automatic field");
        self.read(|tx| {
            let pairs = |query: &str, params: &[&dyn rusqlite::ToSql]| {
                let mut statement = tx.prepare_cached(query)?;
                let rows = statement.query_map(params, |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64))
                })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            };
            Ok(AutoCensus {
                counts: pairs(&sql.census_counts, &[&spec.name, &low])?,
                reasons: pairs(&sql.census_reasons, &[&spec.name])?,
                surplus: tx
                    .prepare_cached(&sql.census_surplus)?
                    .query_row((spec.name, low, high), |r| r.get::<_, i64>(0))?
                    as u64,
            })
        })
    }
}

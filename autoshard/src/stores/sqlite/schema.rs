//! Tables of one entity kind, and the SQL that touches them.
//!
//! Per kind `K` (lower-cased `k`):
//!
//! - `as_entity_k (id PRIMARY KEY, doc TEXT, incarnation INTEGER)`: the
//!   main entity, unsharded fields as a JSON document, and which insert
//!   created it (tables made before incarnations existed get the column,
//!   holding 0, when a handle first uses the kind).
//! - `as_shard_k (entity, field, shard, value)`: one row per shard, keyed
//!   `(entity, field, shard)` and clustered on it (`WITHOUT ROWID`), so all
//!   shards of one entity are adjacent. `ON DELETE CASCADE` from the entity,
//!   and the foreign key makes a save to a deleted entity fail instead of
//!   leaving orphan shards. `appended_ms` is when an append wrote the row
//!   (Unix milliseconds by SQLite's clock), NULL for rows written in place
//!   or folded into; tables made before it existed get the column, NULL in
//!   every old row, when a handle first uses the kind.
//!
//! Both are `STRICT`: a value of the wrong type is an error, never a silent
//! conversion. `autoshard_kinds` records which kind owns which table names.

use crate::entity::KeyKind;
use crate::error::Result;
use crate::naming::{quote, table_base};
use crate::seam::Kind;
use crate::stores::registry;
use rusqlite::{OptionalExtension, Transaction};
use std::sync::atomic::{AtomicBool, Ordering};

/// Now, in Unix milliseconds, as the database has it: every writer stamps
/// rows with one clock, and `'now'` is read once per statement.
const NOW_MS: &str = "CAST(unixepoch('now', 'subsec') * 1000 AS INTEGER)";

pub(crate) struct KindTables {
    base: String,
    key_kind: KeyKind,
    pub insert_entity: String,
    pub select_entity: String,
    pub select_incarnation: String,
    pub update_entity: String,
    pub delete_entity: String,
    pub insert_shard: String,
    pub select_shards: String,
    pub select_shard: String,
    pub select_field: String,
    pub sum_field: String,
    pub upsert_shard: String,
    append_shard: [String; 2],
    pub count_shards: String,
    pub count_entities: String,
    count_field: [String; 2],
    pub scan_first: String,
    pub scan_after: String,
    pub scan_from: String,
    pub delete_range: String,
    create: String,
    /// The counts table of a kind with automatic shard counts.
    pub counts: Option<super::counts::CountSql>,
    entity_name: String,
    add_incarnation: String,
    shard_name: String,
    add_appended: String,
    /// Whether the shard table has `appended_ms`: it lacks it when the
    /// kind's tables predate it and the database was read-only when this
    /// handle first used them.
    timed: AtomicBool,
}

impl KindTables {
    pub fn new(kind: &Kind) -> Result<Self> {
        let base = table_base(kind.name)?;
        let entity = quote(&format!("as_entity_{base}"));
        let shard = quote(&format!("as_shard_{base}"));
        let key_type = match kind.key_kind {
            KeyKind::Int => "INTEGER",
            KeyKind::Text => "TEXT",
        };
        let scan = format!("SELECT entity, field, shard, value FROM {shard}");
        Ok(KindTables {
            key_kind: kind.key_kind,
            insert_entity: format!(
                "INSERT INTO {entity} (id, doc, incarnation) VALUES (?1, ?2, ?3)"
            ),
            select_entity: format!("SELECT doc, incarnation FROM {entity} WHERE id = ?1"),
            select_incarnation: format!("SELECT incarnation FROM {entity} WHERE id = ?1"),
            // `?3` NULL: an entity without a `Pending` field, which has no
            // incarnation to check.
            update_entity: format!(
                "UPDATE {entity} SET doc = ?2 WHERE id = ?1 AND (?3 IS NULL OR incarnation = ?3)"
            ),
            delete_entity: format!("DELETE FROM {entity} WHERE id = ?1"),
            insert_shard: format!(
                "INSERT INTO {shard} (entity, field, shard, value) VALUES (?1, ?2, ?3, ?4)"
            ),
            select_shards: format!("SELECT field, value FROM {shard} WHERE entity = ?1"),
            select_shard: format!(
                "SELECT value FROM {shard} WHERE entity = ?1 AND field = ?2 AND shard = ?3"
            ),
            select_field: format!(
                "SELECT shard, value FROM {shard} WHERE entity = ?1 AND field = ?2"
            ),
            // The picked row, and the field's total as SQLite's `sum` has
            // it: exact for integers, or an error if a partial sum leaves
            // i64; a real if any row is not an integer.
            sum_field: format!(
                "SELECT (SELECT value FROM {shard} WHERE entity = ?1 AND field = ?2 AND shard = ?3), \
                        sum(value) \
                 FROM {shard} WHERE entity = ?1 AND field = ?2"
            ),
            upsert_shard: format!(
                "INSERT INTO {shard} (entity, field, shard, value) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (entity, field, shard) DO UPDATE SET value = excluded.value"
            ),
            // Unstamped and stamped (`timed`).
            append_shard: [
                (String::new(), String::new()),
                (", appended_ms".to_owned(), format!(", {NOW_MS}")),
            ]
            // The key comes in through a one-row subquery, not as `?1`/`?2`
            // in the `WHERE`: compared with bound parameters there, the
            // `max()` lookup made SQLite re-prepare the statement on nearly
            // every save (`sqlite3Reprepare`, more than half of a dynamic
            // save's instructions); as column values it plans once.
            .map(|(column, time)| {
                format!(
                    "INSERT INTO {shard} (entity, field, shard, value{column}) \
                     SELECT k.e, k.f, coalesce((SELECT max(shard) FROM {shard} \
                     WHERE entity = k.e AND field = k.f) + 1, 0), ?3{time} \
                     FROM (SELECT ?1 AS e, ?2 AS f) AS k"
                )
            }),
            count_shards: format!("SELECT count(*) FROM {shard} WHERE entity = ?1 AND field = ?2"),
            count_entities: format!("SELECT count(*) FROM {entity}"),
            // Then the age in ms of the oldest stamped row compaction would
            // fold: numbered `?2` or above, or (`?3`, a dynamic field) above
            // its entity's first row, which compaction folds into and keeps.
            count_field: [
                // Untimed: no age, with the same parameters.
                "nullif(?3, ?3)".to_owned(),
                format!(
                    "{NOW_MS} - min(CASE WHEN appended_ms IS NOT NULL AND (shard >= ?2 OR (?3 AND \
                     shard > (SELECT min(o.shard) FROM {shard} o \
                              WHERE o.entity = s.entity AND o.field = s.field))) \
                     THEN appended_ms END)"
                ),
            ]
            .map(|age| {
                format!(
                    "SELECT count(*), count(DISTINCT entity), coalesce(sum(shard >= ?2), 0), \
                     {age} FROM {shard} s WHERE field = ?1"
                )
            }),
            scan_first: format!("{scan} ORDER BY entity, field, shard"),
            scan_after: format!("{scan} WHERE entity > ?1 ORDER BY entity, field, shard"),
            scan_from: format!("{scan} WHERE entity >= ?1 ORDER BY entity, field, shard"),
            delete_range: format!(
                "DELETE FROM {shard} WHERE entity = ?1 AND field = ?2 AND shard > ?3 AND shard <= ?4"
            ),
            create: format!(
                "CREATE TABLE IF NOT EXISTS {entity} (
                     id {key_type} PRIMARY KEY NOT NULL,
                     doc TEXT NOT NULL,
                     incarnation INTEGER NOT NULL DEFAULT 0
                 ) STRICT;
                 CREATE TABLE IF NOT EXISTS {shard} (
                     entity {key_type} NOT NULL REFERENCES {entity} (id) ON DELETE CASCADE,
                     field TEXT NOT NULL,
                     shard INTEGER NOT NULL,
                     value ANY NOT NULL,
                     appended_ms INTEGER,
                     PRIMARY KEY (entity, field, shard)
                 ) STRICT, WITHOUT ROWID;"
            ),
            counts: kind
                .has_auto()
                .then(|| super::counts::CountSql::new(&base, key_type, &entity, &shard)),
            entity_name: format!("as_entity_{base}"),
            add_incarnation: format!(
                "ALTER TABLE {entity} ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0"
            ),
            shard_name: format!("as_shard_{base}"),
            add_appended: format!("ALTER TABLE {shard} ADD COLUMN appended_ms INTEGER"),
            timed: AtomicBool::new(true),
            base,
        })
    }

    /// Registers the kind and creates its tables, refusing a kind whose
    /// table names another kind already owns or whose id type changed.
    pub fn ensure(&self, tx: &Transaction<'_>, kind: &Kind) -> Result<()> {
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS autoshard_kinds (
                 kind TEXT PRIMARY KEY NOT NULL,
                 base TEXT NOT NULL UNIQUE,
                 id_type TEXT NOT NULL
             ) STRICT;",
        )?;
        let owner: Option<(String, String)> = tx
            .query_row(
                "SELECT kind, id_type FROM autoshard_kinds WHERE base = ?1",
                [&self.base],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if registry::check_owner(kind, owner)? {
            tx.execute(
                "INSERT INTO autoshard_kinds (kind, base, id_type) VALUES (?1, ?2, ?3)",
                [kind.name, &self.base, kind.key_kind.registry_name()],
            )?;
        }
        tx.execute_batch(&self.create)?;
        if let Some(counts) = &self.counts {
            tx.execute_batch(&counts.create)?;
        }
        // An entity table made before incarnations existed: its entities
        // become incarnation 0, which no insert hands out.
        let has_incarnation: bool = tx.query_row(
            "SELECT count(*) > 0 FROM pragma_table_info(?1) WHERE name = 'incarnation'",
            [&self.entity_name],
            |r| r.get(0),
        )?;
        if !has_incarnation {
            tx.execute_batch(&self.add_incarnation)?;
        }
        let has_appended: bool = tx.query_row(
            "SELECT count(*) > 0 FROM pragma_table_info(?1) WHERE name = 'appended_ms'",
            [&self.shard_name],
            |r| r.get(0),
        )?;
        // A read-only database stays usable: it goes on without append
        // times (its appends fail anyway until it is writable, and then
        // write no time until a handle adds the column).
        let timed = has_appended
            || match tx.execute_batch(&self.add_appended) {
                Ok(()) => true,
                Err(e) if super::error::needs_reopening(&e) => false,
                Err(e) => return Err(e.into()),
            };
        self.timed.store(timed, Ordering::Relaxed);
        Ok(())
    }

    /// Appends a row to a dynamic field: `(entity, field, value)`.
    pub fn append_shard(&self) -> &str {
        &self.append_shard[usize::from(self.timed.load(Ordering::Relaxed))]
    }

    /// Counts a field's rows: `(field, surplus from, dynamic)` gives rows,
    /// entities, surplus rows, and the oldest pending row's age in ms.
    pub fn count_field(&self) -> &str {
        &self.count_field[usize::from(self.timed.load(Ordering::Relaxed))]
    }
}

impl registry::KindTables for KindTables {
    fn key_kind(&self) -> KeyKind {
        self.key_kind
    }
}

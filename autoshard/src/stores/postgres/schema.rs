//! Tables and SQL of the PostgreSQL store.
//!
//! In the store's schema:
//!
//! - `autoshard_kinds (kind, base, id_type)`: which kind owns which table
//!   names, as in SQLite.
//! - `autoshard_writers (writer, seq, pid, started, touched)`: one row per
//!   pooled connection that writes, holding the number of its last
//!   committed operation (the exactly-once evidence). Compaction never
//!   touches it.
//! - per kind `K` (lower-cased `k`): `as_entity_k (id, doc, incarnation)`
//!   (tables made before incarnations existed get the column, holding 0,
//!   when a handle first uses the kind),
//!   `as_shard_k (entity, field, shard, int_value, real_value, text_value)`
//!   with exactly one value column set, and the sequence `as_seq_k` that
//!   numbers dynamic shard rows.
//!
//! PostgreSQL truncates identifiers longer than 63 bytes, so two long names
//! could silently become one table. Every identifier built here goes
//! through [`identifier`], which refuses such a name instead.

use super::{Concurrency, Tx};
use crate::entity::KeyKind;
use crate::error::{Error, Result};
use crate::naming::{quote, table_base};
use crate::seam::Kind;
use crate::stores::registry;
use postgres::Client;
use std::sync::atomic::AtomicUsize;

/// PostgreSQL's limit (`NAMEDATALEN - 1`).
const MAX_IDENTIFIER: usize = 63;

/// Dynamic shard numbers start here, above any static shard (at most
/// 10,000), so a field switched from static to dynamic appends after its
/// static rows, as on SQLite.
const FIRST_DYNAMIC_SHARD: i64 = 1 << 20;

/// Quotes a generated identifier, refusing one PostgreSQL would truncate.
pub(crate) fn identifier(name: &str) -> Result<String> {
    if name.len() > MAX_IDENTIFIER {
        return Err(Error::InvalidName {
            name: name.to_owned(),
            reason: format!(
                "longer than PostgreSQL's {MAX_IDENTIFIER}-byte identifier limit \
                 (it would be truncated and could collide with another name)"
            ),
        });
    }
    Ok(quote(name))
}

fn schema_name(name: &str) -> Result<String> {
    let invalid = |reason: &str| Error::InvalidName {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    if name.is_empty() {
        return Err(invalid("a schema name must not be empty"));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        return Err(invalid("must start with an ASCII letter or `_`"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(invalid("may only contain ASCII letters, digits and `_`"));
    }
    identifier(name)
}

/// The schema's own tables, and the statements on them.
pub(crate) struct Names {
    pub schema: String,
    /// `schema` as a string literal, for the advisory lock.
    schema_literal: String,
    kinds: String,
    writers: String,
    writer_ids: String,
    pub register_writer: String,
    pub cleanup_writers: String,
    pub terminate_writer: String,
    pub lock_writer: String,
}

impl Names {
    pub fn new(schema: &str) -> Result<Self> {
        let quoted = schema_name(schema)?;
        let writers = format!("{quoted}.autoshard_writers");
        let writer_ids = format!("{quoted}.autoshard_writer_ids");
        Ok(Names {
            schema_literal: format!("'{schema}'"),
            kinds: format!("{quoted}.autoshard_kinds"),
            register_writer: format!(
                "INSERT INTO {writers} (writer, seq, pid, started, touched) \
                 SELECT nextval('{writer_ids}'), 0, pid, backend_start, now() \
                 FROM pg_stat_activity WHERE pid = pg_backend_pid() RETURNING writer"
            ),
            // A row is evidence only while a check of its writer may still
            // come: that is while its backend lives, and briefly after.
            cleanup_writers: format!(
                "DELETE FROM {writers} WHERE writer IN (\
                     SELECT writer FROM {writers} w WHERE touched < now() - interval '1 day' \
                     AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a \
                                     WHERE a.pid = w.pid AND a.backend_start = w.started) \
                     FOR UPDATE SKIP LOCKED)"
            ),
            terminate_writer: format!(
                "SELECT pg_terminate_backend(a.pid) FROM {writers} w \
                 JOIN pg_stat_activity a ON a.pid = w.pid AND a.backend_start = w.started \
                 WHERE w.writer = $1"
            ),
            lock_writer: format!("SELECT seq FROM {writers} WHERE writer = $1 FOR SHARE"),
            schema: quoted,
            writers,
            writer_ids,
        })
    }

    /// Records operation `seq` of `writer`; runs right after `BEGIN`.
    pub fn mark(&self, writer: i64, seq: i64) -> String {
        format!(
            "UPDATE {} SET seq = {seq}, touched = now() WHERE writer = {writer}",
            self.writers
        )
    }

    /// Serializes DDL on this schema across processes: concurrent
    /// `CREATE ... IF NOT EXISTS` of one table can fail on a catalog
    /// unique index.
    pub(crate) fn ddl_lock(&self) -> String {
        format!(
            "SELECT pg_advisory_xact_lock(1634952050, hashtext({}))",
            self.schema_literal
        )
    }
}

/// Creates the schema and its bookkeeping tables if missing.
pub(crate) fn ensure_base(client: &mut Client, names: &Names) -> Result<()> {
    let exists: Option<String> = client
        .query_one("SELECT to_regclass($1)::text", &[&names.writers])?
        .get(0);
    if exists.is_some() {
        return Ok(());
    }
    let schema = &names.schema;
    client.batch_execute(&format!(
        "BEGIN;
         {lock};
         CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {kinds} (
             kind text COLLATE \"C\" PRIMARY KEY,
             base text COLLATE \"C\" NOT NULL UNIQUE,
             id_type text NOT NULL
         );
         CREATE SEQUENCE IF NOT EXISTS {writer_ids};
         CREATE TABLE IF NOT EXISTS {writers} (
             writer bigint PRIMARY KEY,
             seq bigint NOT NULL,
             pid integer NOT NULL,
             started timestamptz,
             touched timestamptz NOT NULL
         );
         COMMIT;",
        lock = names.ddl_lock(),
        kinds = names.kinds,
        writer_ids = names.writer_ids,
        writers = names.writers,
    ))?;
    Ok(())
}

pub(crate) struct KindTables {
    base: String,
    pub key_kind: KeyKind,
    /// Per sharded field: whether its fold adds `i64`s and its type is
    /// `i64`'s range ([`Kind::adds_i64`]), so the locking mode may add in
    /// SQL.
    pub sums: Vec<bool>,
    pub insert_entity: String,
    pub load: String,
    pub update_entity: String,
    pub select_incarnation: String,
    pub delete_entity: String,
    pub insert_shards: String,
    pub select_shard: String,
    pub select_field: String,
    pub sum_field: String,
    pub select_shard_locked: String,
    pub lock_field: String,
    pub upsert_shard: String,
    pub insert_shard_if_absent: String,
    pub update_shard: String,
    pub add_to_shard: String,
    pub add_to_shard_total: String,
    pub append_shard: String,
    pub count_shards: String,
    pub census: String,
    /// Compaction scans, per mode: `[first, after, from, next]`.
    scans: [[String; 4]; 2],
    pub delete_shards: String,
    create: String,
    /// The counts table of a kind with automatic shard counts.
    pub counts: Option<super::counts::CountSql>,
    /// `as_entity_k` as a `regclass` literal, and the column it may lack.
    entity_regclass: String,
    add_incarnation: String,
    /// `as_shard_k` likewise, and the append-time column it may lack.
    shard_regclass: String,
    add_appended: String,
    /// Rows per compaction batch in the run under way, once a batch was
    /// cancelled by the server's `statement_timeout`; 0: the handle's
    /// `compaction_batch_rows`.
    pub compaction_rows: AtomicUsize,
}

/// Now, in Unix milliseconds, as the server has it: every writer stamps
/// rows with one clock, and a statement reads it once.
const NOW_MS: &str = "(extract(epoch FROM statement_timestamp()) * 1000)::bigint";

/// The value columns, in table order.
pub(crate) const VALUES: &str = "int_value, real_value, text_value";

impl KindTables {
    pub fn new(kind: &Kind, names: &Names) -> Result<Self> {
        let base = table_base(kind.name)?;
        let schema = &names.schema;
        let name = |prefix: &str| -> Result<String> {
            Ok(format!(
                "{schema}.{}",
                identifier(&format!("{prefix}{base}"))?
            ))
        };
        let entity = name("as_entity_")?;
        let shard = name("as_shard_")?;
        let sequence = name("as_seq_")?;
        let constraint = |prefix: &str| identifier(&format!("{prefix}{base}"));
        let key_type = match kind.key_kind {
            KeyKind::Int => "bigint",
            KeyKind::Text => "text COLLATE \"C\"",
        };
        let row = "entity, field, shard";
        let scan = format!("SELECT {row}, {VALUES} FROM {shard}");
        let order = format!("ORDER BY {row} LIMIT $");
        let scans = ["", " FOR UPDATE"].map(|lock| {
            [
                format!("{scan} {order}1{lock}"),
                format!("{scan} WHERE entity > $1 {order}2{lock}"),
                format!("{scan} WHERE entity >= $1 {order}2{lock}"),
                format!("{scan} WHERE ({row}) > ($1, $2, $3) {order}4{lock}"),
            ]
        });
        let one_shard = "entity = $1 AND field = $2 AND shard = $3";
        let counts = match kind.has_auto() {
            true => Some(super::counts::CountSql::new(super::counts::CountNames {
                counts: &name("as_count_")?,
                entity: &entity,
                shard: &shard,
                pk: &constraint("as_count_pk_")?,
                fk: &constraint("as_count_fk_")?,
                key_type,
            })),
            false => None,
        };
        Ok(KindTables {
            counts,
            key_kind: kind.key_kind,
            sums: (0..kind.fields.len()).map(|i| kind.adds_i64(i)).collect(),
            insert_entity: format!(
                "INSERT INTO {entity} (id, doc, incarnation) VALUES ($1, $2, $3)"
            ),
            // One statement, so one snapshot, without BEGIN and COMMIT; the
            // document's row carries the incarnation in the integer column.
            load: format!(
                "SELECT doc, NULL::text, incarnation, NULL::float8, NULL::text \
                 FROM {entity} WHERE id = $1 \
                 UNION ALL \
                 SELECT NULL, field, {VALUES} FROM {shard} WHERE entity = $1"
            ),
            // `$3` NULL: an entity without a `Pending` field, which has no
            // incarnation to check.
            update_entity: format!(
                "UPDATE {entity} SET doc = $2 \
                 WHERE id = $1 AND ($3::bigint IS NULL OR incarnation = $3)"
            ),
            select_incarnation: format!("SELECT incarnation FROM {entity} WHERE id = $1"),
            delete_entity: format!("DELETE FROM {entity} WHERE id = $1"),
            insert_shards: format!(
                "INSERT INTO {shard} ({row}, {VALUES}) \
                 SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::bigint[], \
                                          $5::float8[], $6::text[])"
            ),
            select_shard: format!("SELECT {VALUES} FROM {shard} WHERE {one_shard}"),
            select_field: format!(
                "SELECT shard, {VALUES} FROM {shard} WHERE entity = $1 AND field = $2"
            ),
            // The picked row (`exists`, then its values) and the exact
            // total of the field's integer rows as of the same snapshot
            // (numeric, as text), with whether every row is an integer:
            // one statement, no row of the field read into Rust.
            sum_field: format!(
                "SELECT p.shard IS NOT NULL, p.int_value, p.real_value, p.text_value, \
                        a.total::text, a.integers \
                 FROM (SELECT coalesce(sum(int_value), 0) AS total, \
                              count(*) = count(*) FILTER (WHERE int_value IS NOT NULL \
                                  AND real_value IS NULL AND text_value IS NULL) AS integers \
                       FROM {shard} WHERE entity = $1 AND field = $2) a \
                 LEFT JOIN {shard} p ON p.entity = $1 AND p.field = $2 AND p.shard = $3"
            ),
            select_shard_locked: format!(
                "SELECT {VALUES} FROM {shard} WHERE {one_shard} FOR UPDATE"
            ),
            // The picked row as locked (its latest version), the field's
            // other rows as of the statement's snapshot.
            lock_field: format!(
                "WITH locked AS (SELECT shard, {VALUES} FROM {shard} WHERE {one_shard} FOR UPDATE) \
                 SELECT true, shard, {VALUES} FROM locked \
                 UNION ALL \
                 SELECT false, shard, {VALUES} FROM {shard} \
                 WHERE entity = $1 AND field = $2 AND shard <> $3"
            ),
            upsert_shard: format!(
                "INSERT INTO {shard} ({row}, {VALUES}) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT ({row}) DO UPDATE SET int_value = excluded.int_value, \
                 real_value = excluded.real_value, text_value = excluded.text_value"
            ),
            insert_shard_if_absent: format!(
                "INSERT INTO {shard} ({row}, {VALUES}) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT ({row}) DO NOTHING"
            ),
            update_shard: format!(
                "UPDATE {shard} SET int_value = $4, real_value = $5, text_value = $6 \
                 WHERE {one_shard}"
            ),
            // Adds unless the sum leaves bigint's range or the stored value
            // is not an integer: then no row is written (the row is locked
            // all the same) and the caller folds in Rust.
            add_to_shard: format!(
                "INSERT INTO {shard} AS s ({row}, int_value) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT ({row}) DO UPDATE SET int_value = s.int_value + excluded.int_value \
                 WHERE s.int_value::numeric + excluded.int_value \
                       BETWEEN -9223372036854775808 AND 9223372036854775807"
            ),
            // `add_to_shard`, returning the row's new value and the sum of
            // the field's other rows (numeric, as text: exact).
            add_to_shard_total: format!(
                "INSERT INTO {shard} AS s ({row}, int_value) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT ({row}) DO UPDATE SET int_value = s.int_value + excluded.int_value \
                 WHERE s.int_value::numeric + excluded.int_value \
                       BETWEEN -9223372036854775808 AND 9223372036854775807 \
                 RETURNING s.int_value, (SELECT coalesce(sum(o.int_value), 0) FROM {shard} o \
                     WHERE o.entity = $1 AND o.field = $2 AND o.shard <> $3)::text"
            ),
            append_shard: format!(
                "INSERT INTO {shard} ({row}, {VALUES}, appended_ms) \
                 VALUES ($1, $2, nextval('{sequence}'), $3, $4, $5, {NOW_MS})"
            ),
            count_shards: format!(
                "SELECT EXISTS (SELECT 1 FROM {entity} WHERE id = $1), \
                 (SELECT count(*) FROM {shard} WHERE entity = $1 AND field = $2)"
            ),
            // One statement, so one snapshot: a row per field named in $1
            // (one row with a NULL name if none), rows at or above its $2
            // counted apart, and the age in ms of the oldest stamped row
            // compaction would fold: one of those, or ($3, a dynamic field)
            // one above its entity's first row, which compaction folds into
            // and keeps.
            census: format!(
                "SELECT e.n, c.name, c.rows, c.entities, c.surplus, c.age \
                 FROM (SELECT count(*) AS n FROM {entity}) e LEFT JOIN ( \
                     SELECT f.name, count(s.entity) AS rows, \
                            count(DISTINCT s.entity) AS entities, \
                            count(s.entity) FILTER (WHERE s.shard >= f.threshold) AS surplus, \
                            {NOW_MS} - min(s.appended_ms) FILTER (WHERE \
                                s.appended_ms IS NOT NULL AND (s.shard >= f.threshold \
                                OR (f.dynamic AND s.shard > (SELECT min(o.shard) FROM {shard} o \
                                    WHERE o.entity = s.entity AND o.field = s.field)))) AS age \
                     FROM unnest($1::text[], $2::bigint[], $3::bool[]) \
                          AS f(name, threshold, dynamic) \
                     LEFT JOIN {shard} s ON s.field = f.name \
                     GROUP BY f.name, f.threshold, f.dynamic \
                 ) c ON true"
            ),
            scans,
            delete_shards: format!(
                "DELETE FROM {shard} WHERE entity = $1 AND field = $2 AND shard = ANY($3)"
            ),
            create: format!(
                "CREATE TABLE IF NOT EXISTS {entity} (
                     id {key_type} NOT NULL,
                     doc text NOT NULL,
                     incarnation bigint NOT NULL DEFAULT 0,
                     CONSTRAINT {entity_pk} PRIMARY KEY (id)
                 );
                 CREATE TABLE IF NOT EXISTS {shard} (
                     entity {key_type} NOT NULL,
                     field text COLLATE \"C\" NOT NULL,
                     shard bigint NOT NULL,
                     int_value bigint,
                     real_value double precision,
                     text_value text,
                     appended_ms bigint,
                     CONSTRAINT {shard_pk} PRIMARY KEY (entity, field, shard),
                     CONSTRAINT {shard_fk} FOREIGN KEY (entity)
                         REFERENCES {entity} (id) ON DELETE CASCADE,
                     CONSTRAINT {one_value}
                         CHECK (num_nonnulls(int_value, real_value, text_value) = 1)
                 ) WITH (fillfactor = 70);
                 CREATE SEQUENCE IF NOT EXISTS {sequence}
                     MINVALUE {FIRST_DYNAMIC_SHARD} START WITH {FIRST_DYNAMIC_SHARD};",
                entity_pk = constraint("as_entity_pk_")?,
                shard_pk = constraint("as_shard_pk_")?,
                shard_fk = constraint("as_shard_fk_")?,
                one_value = constraint("as_one_value_")?,
            ),
            entity_regclass: format!("'{}'", entity.replace('\'', "''")),
            add_incarnation: format!(
                "ALTER TABLE {entity} ADD COLUMN incarnation bigint NOT NULL DEFAULT 0"
            ),
            shard_regclass: format!("'{}'", shard.replace('\'', "''")),
            add_appended: format!("ALTER TABLE {shard} ADD COLUMN appended_ms bigint"),
            base,
            compaction_rows: AtomicUsize::new(0),
        })
    }

    /// The compaction scan: from the start, after or at an entity, or after
    /// a row; locking the rows it returns in [`Concurrency::Locking`].
    pub fn scan(&self, mode: Concurrency, which: usize) -> &str {
        let lock = usize::from(mode == Concurrency::Locking);
        &self.scans[lock][which]
    }

    /// Registers the kind and creates its tables, refusing a kind whose
    /// table names another kind already owns or whose id type changed.
    pub fn ensure(&self, tx: &mut Tx<'_>, kind: &Kind, names: &Names) -> Result<()> {
        tx.batch(&names.ddl_lock())?;
        let owner = tx.query_opt(
            &format!("SELECT kind, id_type FROM {} WHERE base = $1", names.kinds),
            &[&self.base],
        )?;
        let owner = owner.map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)));
        if registry::check_owner(kind, owner)? {
            tx.execute(
                &format!(
                    "INSERT INTO {} (kind, base, id_type) VALUES ($1, $2, $3)",
                    names.kinds
                ),
                &[&kind.name, &self.base, &kind.key_kind.registry_name()],
            )?;
        }
        tx.batch(&self.create)?;
        if let Some(counts) = &self.counts {
            tx.batch(&counts.create)?;
        }
        // An entity table made before incarnations existed: its entities
        // become incarnation 0, which no insert hands out. Looked up first,
        // because `ALTER TABLE` locks the table even when it has nothing to
        // do; the DDL lock above keeps two handles from both adding it.
        let has_incarnation: bool = tx
            .query_opt(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM pg_attribute \
                     WHERE attrelid = {}::regclass AND attname = 'incarnation' \
                     AND NOT attisdropped)",
                    self.entity_regclass
                ),
                &[],
            )?
            .expect("one row")
            .get(0);
        if !has_incarnation {
            tx.batch(&self.add_incarnation)?;
        }
        // A shard table made before append times: its rows keep NULL, so
        // `stats` reports no age for them.
        if !has_column(tx, &self.shard_regclass, "appended_ms")? {
            tx.batch(&self.add_appended)?;
        }
        Ok(())
    }
}

/// Whether the table `regclass` (a literal) has the live column `name`.
fn has_column(tx: &mut Tx<'_>, regclass: &str, name: &str) -> Result<bool> {
    Ok(tx
        .query_opt(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM pg_attribute \
                 WHERE attrelid = {regclass}::regclass AND attname = $1 \
                 AND NOT attisdropped)"
            ),
            &[&name],
        )?
        .expect("one row")
        .get(0))
}

impl registry::KindTables for KindTables {
    fn key_kind(&self) -> KeyKind {
        self.key_kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_postgres_would_truncate_are_refused() {
        assert_eq!(
            identifier(&"a".repeat(63)).unwrap(),
            format!("\"{}\"", "a".repeat(63))
        );
        let err = identifier(&"a".repeat(64)).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(Names::new("public").is_ok());
        assert!(Names::new("_app_2").is_ok());
        for bad in ["", "2app", "a b", "a\"b", "a;b", "ü", &"s".repeat(64)] {
            let err = Names::new(bad).err().expect(bad);
            assert!(matches!(err, Error::InvalidName { .. }), "{bad:?}: {err:?}");
        }
    }
}

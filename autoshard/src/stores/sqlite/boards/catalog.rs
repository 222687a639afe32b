//! The board table on SQLite: creating a board (with the tables, or the
//! columns an older table lacks) and reading one's stored shape.

use crate::error::{Error, Result};
use crate::seam::{BoardSpec, Columns, RECORD_POLICY};
use crate::stores::sqlite::{approx, Sqlite};
use rusqlite::{params, OptionalExtension, Transaction};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS autoshard_rank_boards (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    min INTEGER NOT NULL,
    max INTEGER NOT NULL,
    branching INTEGER NOT NULL,
    shards INTEGER NOT NULL,
    queues INTEGER NOT NULL,
    policy TEXT NOT NULL DEFAULT 'replace',
    score_order TEXT NOT NULL DEFAULT 'higher_is_better',
    entry_data INTEGER NOT NULL DEFAULT 0,
    record TEXT
) STRICT;
CREATE TABLE IF NOT EXISTS autoshard_rank_nodes (
    board INTEGER NOT NULL,
    height INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    part INTEGER NOT NULL,
    shard INTEGER NOT NULL,
    v BLOB NOT NULL,
    PRIMARY KEY (board, height, idx, part, shard)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS autoshard_rank_arrivals (
    board INTEGER NOT NULL,
    score INTEGER NOT NULL,
    height INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    v BLOB NOT NULL,
    PRIMARY KEY (board, score, height, idx)
) STRICT, WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS autoshard_rank_players (
    board INTEGER NOT NULL,
    player TEXT NOT NULL,
    score INTEGER NOT NULL,
    arrival INTEGER NOT NULL,
    data BLOB,
    PRIMARY KEY (board, player)
) STRICT, WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS autoshard_rank_players_order
    ON autoshard_rank_players (board, score DESC, arrival);
";

/// The board table.
const BOARDS: &str = "autoshard_rank_boards";

/// Adds the columns of policies and orders to a board table made before
/// them.
const ADD_POLICY: &str = "
ALTER TABLE autoshard_rank_boards ADD COLUMN policy TEXT NOT NULL DEFAULT 'replace';
ALTER TABLE autoshard_rank_boards ADD COLUMN score_order TEXT NOT NULL DEFAULT 'higher_is_better';
ALTER TABLE autoshard_rank_boards ADD COLUMN entry_data INTEGER NOT NULL DEFAULT 0;
";

/// Adds the catalog record's column to a board table made before it.
const ADD_RECORD: &str = "ALTER TABLE autoshard_rank_boards ADD COLUMN record TEXT";

/// Whether `table` has `column` (`pragma_table_info`: ~30 k instructions,
/// so never on an entity save's path).
fn has_column(tx: &Transaction<'_>, table: &str, column: &str) -> Result<bool> {
    Ok(tx
        .prepare_cached("SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2")?
        .exists([table, column])?)
}

/// Creates board `name` shaped `spec`, with the tables, or the columns
/// its shape needs, that are not there yet.
pub(super) fn create(db: &Sqlite, name: &str, spec: &BoardSpec) -> Result<i64> {
    let (id, _) = db.write(|tx| {
        tx.execute_batch(SCHEMA)?;
        if !has_column(tx, BOARDS, "policy")? {
            tx.execute_batch(ADD_POLICY)?;
        }
        if !has_column(tx, BOARDS, "record")? {
            tx.execute_batch(ADD_RECORD)?;
        }
        if spec.entry_data > 0 && !has_column(tx, "autoshard_rank_players", "data")? {
            tx.execute_batch("ALTER TABLE autoshard_rank_players ADD COLUMN data BLOB")?;
        }
        let taken = tx
            .prepare_cached("SELECT 1 FROM autoshard_rank_boards WHERE name = ?1")?
            .exists([name])?;
        if taken {
            return Err(Error::RankingExists { name: name.into() });
        }
        // The older columns hold what they can (they are `NOT NULL`); the
        // policy's is one no version before the record knows.
        tx.prepare_cached(
            "INSERT INTO autoshard_rank_boards \
             (name, min, max, branching, shards, queues, policy, score_order, entry_data, record) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )?
        .execute(params![
            name,
            spec.min,
            spec.max,
            spec.branching,
            spec.shards,
            spec.queues,
            RECORD_POLICY,
            spec.order,
            spec.entry_data,
            spec.record(),
        ])?;
        let id = tx.last_insert_rowid();
        if spec.buckets > 0 {
            approx::init(tx, id, spec)?;
        }
        Ok(id)
    })?;
    Ok(id)
}

/// Board `name`'s id and stored shape, read in `tx` (a read or a write
/// transaction).
pub(super) fn open_in(tx: &Transaction<'_>, name: &str) -> Result<Option<(i64, BoardSpec)>> {
    open(tx, name, true)
}

/// [`open_in`] without the dimensions of a composite board stored before
/// the catalog record, which an entity save reads its boards with on every
/// write: its boards are `Increment` boards, which cannot be composite,
/// and the dimensions' column check is the costliest statement of the
/// lookup.
pub(in crate::stores::sqlite) fn open_flat_in(
    tx: &Transaction<'_>,
    name: &str,
) -> Result<Option<(i64, BoardSpec)>> {
    open(tx, name, false)
}

fn open(tx: &Transaction<'_>, name: &str, dims: bool) -> Result<Option<(i64, BoardSpec)>> {
    let Some(row) = lookup(tx, name)? else {
        return Ok(None);
    };
    let spec = match &row.record {
        Some(record) => BoardSpec::from_record(record),
        None => {
            let (buckets, exact_top) = approx::mode(tx, row.id)?;
            let dims = match dims && has_column(tx, BOARDS, "dims")? {
                true => tx
                    .prepare_cached("SELECT dims FROM autoshard_rank_boards WHERE id = ?1")?
                    .query_row([row.id], |r| r.get(0))?,
                false => String::new(),
            };
            BoardSpec::from_columns(Columns {
                min: row.min,
                max: row.max,
                branching: row.branching,
                shards: row.shards,
                queues: row.queues,
                policy: row.policy.as_deref(),
                order: row.order.as_deref(),
                entry_data: row.entry_data,
                dims: &dims,
                buckets,
                exact_top,
            })
        }
    };
    let spec = spec.map_err(|e| e.for_board(name))?;
    Ok(Some((row.id, spec)))
}

/// A board's row: its catalog record, or the columns of a board stored
/// before it (`policy` and `order` `None` in a table from before them).
struct Row {
    id: i64,
    min: i64,
    max: i64,
    branching: u32,
    shards: u32,
    queues: u32,
    policy: Option<String>,
    order: Option<String>,
    entry_data: u32,
    record: Option<String>,
}

/// The board row of `name`, with the columns its table has.
fn lookup(tx: &Transaction<'_>, name: &str) -> Result<Option<Row>> {
    const COLUMNS: &str = "policy, score_order, entry_data, record";
    // A table with every column (any this version made) is read with one
    // cached statement, which entity saves run on each write; it fails on
    // an older table, or none, which the checks below tell apart.
    if let Ok(row) = select_board(tx, COLUMNS, name) {
        return Ok(row);
    }
    let exists = tx
        .prepare_cached(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'autoshard_rank_boards'",
        )?
        .exists([])?;
    if !exists {
        return Ok(None);
    }
    // A read transaction cannot add the columns: a table without
    // them holds boards of the defaults.
    let policy = match has_column(tx, BOARDS, "policy")? {
        true => "policy, score_order, entry_data",
        false => "NULL, NULL, 0",
    };
    let record = match has_column(tx, BOARDS, "record")? {
        true => "record",
        false => "NULL",
    };
    Ok(select_board(tx, &format!("{policy}, {record}"), name)?)
}

fn select_board(tx: &Transaction<'_>, columns: &str, name: &str) -> rusqlite::Result<Option<Row>> {
    let select = format!(
        "SELECT id, min, max, branching, shards, queues, {columns} \
         FROM autoshard_rank_boards WHERE name = ?1"
    );
    tx.prepare_cached(&select)?
        .query_row([name], |r| {
            Ok(Row {
                id: r.get(0)?,
                min: r.get(1)?,
                max: r.get(2)?,
                branching: r.get(3)?,
                shards: r.get(4)?,
                queues: r.get(5)?,
                policy: r.get(6)?,
                order: r.get(7)?,
                entry_data: r.get(8)?,
                record: r.get(9)?,
            })
        })
        .optional()
}

//! The board table on SQLite: creating a board (with the tables, or the
//! columns an older table lacks) and reading one's stored shape.

use crate::error::{Error, Result};
use crate::seam::{BoardSpec, DEFAULT_ORDER, DEFAULT_POLICY};
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
    entry_data INTEGER NOT NULL DEFAULT 0
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

/// Adds the columns of policies and orders to a board table made before
/// them.
const ADD_POLICY: &str = "
ALTER TABLE autoshard_rank_boards ADD COLUMN policy TEXT NOT NULL DEFAULT 'replace';
ALTER TABLE autoshard_rank_boards ADD COLUMN score_order TEXT NOT NULL DEFAULT 'higher_is_better';
ALTER TABLE autoshard_rank_boards ADD COLUMN entry_data INTEGER NOT NULL DEFAULT 0;
";

/// Whether the players table has the entry data column.
fn has_data(tx: &Transaction<'_>) -> Result<bool> {
    Ok(tx
        .prepare_cached(
            "SELECT 1 FROM pragma_table_info('autoshard_rank_players') WHERE name = 'data'",
        )?
        .exists([])?)
}

/// Whether the board table has the columns of policies and orders (added
/// together, in one transaction).
fn has_policy(tx: &Transaction<'_>) -> Result<bool> {
    Ok(tx
        .prepare_cached(
            "SELECT 1 FROM pragma_table_info('autoshard_rank_boards') WHERE name = 'policy'",
        )?
        .exists([])?)
}

/// Adds the column of composite boards' dimensions.
const ADD_DIMS: &str = "ALTER TABLE autoshard_rank_boards ADD COLUMN dims TEXT NOT NULL DEFAULT ''";

/// Whether the board table has the dimensions column.
fn has_dims(tx: &Transaction<'_>) -> Result<bool> {
    Ok(tx
        .prepare_cached(
            "SELECT 1 FROM pragma_table_info('autoshard_rank_boards') WHERE name = 'dims'",
        )?
        .exists([])?)
}

/// `spec` with board `id`'s stored dimensions.
fn with_dims(tx: &Transaction<'_>, id: i64, spec: BoardSpec) -> Result<BoardSpec> {
    let dims = tx
        .prepare_cached("SELECT dims FROM autoshard_rank_boards WHERE id = ?1")?
        .query_row([id], |r| r.get(0))?;
    Ok(BoardSpec { dims, ..spec })
}

/// Creates board `name` shaped `spec`, with the tables, or the columns
/// its shape needs, that are not there yet.
pub(super) fn create(db: &Sqlite, name: &str, spec: &BoardSpec) -> Result<i64> {
    let (id, _) = db.write(|tx| {
        tx.execute_batch(SCHEMA)?;
        if !has_policy(tx)? {
            tx.execute_batch(ADD_POLICY)?;
        }
        if spec.entry_data > 0 && !has_data(tx)? {
            tx.execute_batch("ALTER TABLE autoshard_rank_players ADD COLUMN data BLOB")?;
        }
        if !spec.dims.is_empty() && !has_dims(tx)? {
            tx.execute_batch(ADD_DIMS)?;
        }
        let taken = tx
            .prepare_cached("SELECT 1 FROM autoshard_rank_boards WHERE name = ?1")?
            .exists([name])?;
        if taken {
            return Err(Error::RankingExists { name: name.into() });
        }
        tx.prepare_cached(
            "INSERT INTO autoshard_rank_boards \
             (name, min, max, branching, shards, queues, policy, score_order, entry_data) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            name,
            spec.min,
            spec.max,
            spec.branching,
            spec.shards,
            spec.queues,
            spec.policy,
            spec.order,
            spec.entry_data,
        ])?;
        let id = tx.last_insert_rowid();
        if !spec.dims.is_empty() {
            tx.prepare_cached("UPDATE autoshard_rank_boards SET dims = ?2 WHERE id = ?1")?
                .execute(params![id, spec.dims])?;
        }
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
    let Some((id, spec)) = open_flat_in(tx, name)? else {
        return Ok(None);
    };
    match has_dims(tx)? {
        true => Ok(Some((id, with_dims(tx, id, spec)?))),
        false => Ok(Some((id, spec))),
    }
}

/// [`open_in`] without a composite board's dimensions, which an entity
/// save reads its boards with on every write: its boards are `Increment`
/// boards, which cannot be composite, and the column check is the costliest
/// statement of the lookup (`pragma_table_info`, ~30 k instructions).
pub(in crate::stores::sqlite) fn open_flat_in(
    tx: &Transaction<'_>,
    name: &str,
) -> Result<Option<(i64, BoardSpec)>> {
    let Some((id, spec)) = lookup(tx, name)? else {
        return Ok(None);
    };
    let (buckets, exact_top) = approx::mode(tx, id)?;
    Ok(Some((
        id,
        BoardSpec {
            buckets,
            exact_top,
            ..spec
        },
    )))
}

/// The board row of `name`, with the columns every version has.
fn lookup(tx: &Transaction<'_>, name: &str) -> Result<Option<(i64, BoardSpec)>> {
    const COLUMNS: &str = "policy, score_order, entry_data";
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
    let columns = if has_policy(tx)? {
        COLUMNS.to_owned()
    } else {
        format!("'{DEFAULT_POLICY}', '{DEFAULT_ORDER}', 0")
    };
    Ok(select_board(tx, &columns, name)?)
}

fn select_board(
    tx: &Transaction<'_>,
    columns: &str,
    name: &str,
) -> rusqlite::Result<Option<(i64, BoardSpec)>> {
    let select = format!(
        "SELECT id, min, max, branching, shards, queues, {columns} \
         FROM autoshard_rank_boards WHERE name = ?1"
    );
    tx.prepare_cached(&select)?
        .query_row([name], |r| {
            let spec = BoardSpec {
                min: r.get(1)?,
                max: r.get(2)?,
                branching: r.get(3)?,
                shards: r.get(4)?,
                queues: r.get(5)?,
                policy: r.get(6)?,
                order: r.get(7)?,
                entry_data: r.get(8)?,
                dims: String::new(),
                buckets: 0,
                exact_top: 0,
            };
            Ok((r.get::<_, i64>(0)?, spec))
        })
        .optional()
}

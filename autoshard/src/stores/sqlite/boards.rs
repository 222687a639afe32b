//! Ranking boards on SQLite: the tables and [`Storage`] over one
//! transaction.
//!
//! All boards share four tables, keyed by the board's row id, so a board
//! name is only ever a bound value, never part of SQL:
//!
//! - `autoshard_rank_boards`: name and configuration. `policy` and
//!   `score_order` and `entry_data` came later: a table made before them
//!   gets the columns, with the defaults every board then had (`replace`,
//!   `higher_is_better`, 0), when the next board is created, and `open`
//!   reads a table without them as holding those defaults. `dims` (a
//!   composite board's dimensions, `''` for one score) came later still:
//!   creating the first composite board adds it.
//! - `autoshard_rank_nodes (board, height, idx, part, shard, v)`: score-tree
//!   rows, one per vector (`part` 0 = players, 1 = distinct scores or
//!   arrival counters) and shard, clustered (`WITHOUT ROWID`) so a node's
//!   shard rows are adjacent: summing them is one seek and a short scan.
//!   Splitting the two vectors keeps a row of `8 * B` bytes inside its
//!   b-tree page up to B = 120 (an index b-tree spills rows over ~1000 bytes
//!   into overflow pages), and lets a standard rank read only part 0.
//! - `autoshard_rank_arrivals (board, score, height, idx, a)`: arrival-tree
//!   nodes, usually a few bytes (trimmed), hence `WITHOUT ROWID`.
//! - `autoshard_rank_players (board, player, score, arrival, data)` plus an index
//!   in ranking order `(board, score DESC, arrival)`, which also covers
//!   `player` (the primary key), so a page is one index range scan. `data`
//!   (entry data) came later too: creating the first board that keeps
//!   entry data adds it; boards that keep none never name it.
//!
//! The ranking-order index is deliberately not `UNIQUE`, although
//! `(score, arrival)` is unique among present players: a batch may swap two
//! players' places, and no order of single-row writes would then keep a
//! unique index satisfied in between. `check_integrity` checks uniqueness.

use super::{approx, lifecycle, queue, Sqlite};
use crate::error::{Error, Result};
use crate::seam::{
    Board, BoardSpec, BoardStore, DeadLetter, NodeRow, Part, QueuedRow, QueuedUpdate,
    ScannedArrival, ScannedNode, Storage, DEFAULT_ORDER, DEFAULT_POLICY,
};
use rusqlite::types::ValueRef;
use rusqlite::{params, OptionalExtension, Transaction};
use std::sync::OnceLock;

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

impl BoardStore for Sqlite {
    fn create_board(&self, name: &str, spec: &BoardSpec) -> Result<i64> {
        let (id, _) = self.write(|tx| {
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

    fn open_board(&self, name: &str) -> Result<Option<(i64, BoardSpec)>> {
        self.read(|tx| open_in(tx, name))
    }

    fn read_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        self.read(|tx| {
            lifecycle::check_alive(tx, board)?;
            f(&SqliteTx::new(self, tx, board))
        })
    }

    fn write_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        self.ensure_generations()?;
        self.write(|tx| {
            lifecycle::check_alive(tx, board)?;
            f(&SqliteTx::new(self, tx, board))
        })
        .map(drop)
    }

    fn write_boards(
        &self,
        boards: &[Board<'_>],
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        self.ensure_generations()?;
        self.write(|tx| {
            for &board in boards {
                lifecycle::check_alive(tx, board)?;
            }
            let txs: Vec<SqliteTx<'_>> = boards
                .iter()
                .map(|&board| SqliteTx::new(self, tx, board))
                .collect();
            let storages: Vec<&dyn Storage> = txs.iter().map(|t| t as &dyn Storage).collect();
            f(&storages)
        })
        .map(drop)
    }

    fn prepare_queue(&self) -> Result<Option<String>> {
        queue::prepare(self)
    }

    fn append_queue(&self, board: i64, items: &[QueuedUpdate]) -> Result<()> {
        queue::append(self, board, items)
    }

    fn queued(&self, board: i64) -> Result<u64> {
        queue::queued(self, board)
    }

    fn queue_marks(&self, board: i64) -> Result<Vec<(u32, i64)>> {
        queue::marks(self, board)
    }

    fn queued_below(&self, board: i64, marks: &[(u32, i64)], count: bool) -> Result<u64> {
        queue::unapplied_below(self, board, marks, count)
    }

    fn delete_queued(&self, board: i64, through: &[(u32, i64)]) -> Result<()> {
        queue::delete(self, board, through)
    }

    fn dead_letters(&self, board: i64) -> Result<Vec<DeadLetter>> {
        queue::dead_letters(self, board)
    }

    fn delete_dead_letter(&self, board: i64, id: i64) -> Result<bool> {
        queue::delete_dead_letter(self, board, id)
    }

    fn tree_store(&self, tree: u32) -> Result<Option<std::sync::Arc<dyn BoardStore>>> {
        Ok(Some(std::sync::Arc::new(self.tree_db(tree)?)))
    }

    fn list_boards(&self) -> Result<Vec<String>> {
        lifecycle::list(self)
    }

    fn delete_board(&self, name: &str) -> Result<bool> {
        lifecycle::delete(self, name)
    }

    fn approx(&self) -> Result<&dyn crate::seam::ApproxStore> {
        Ok(self)
    }
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
pub(super) fn open_flat_in(tx: &Transaction<'_>, name: &str) -> Result<Option<(i64, BoardSpec)>> {
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

/// [`Storage`] over one SQLite transaction.
pub(crate) struct SqliteTx<'a> {
    /// The handle, for the queue's database.
    db: &'a Sqlite,
    tx: &'a Transaction<'a>,
    board: i64,
    name: &'a str,
}

impl<'a> SqliteTx<'a> {
    pub(super) fn new(db: &'a Sqlite, tx: &'a Transaction<'a>, board: Board<'a>) -> Self {
        SqliteTx {
            db,
            tx,
            board: board.id,
            name: board.name,
        }
    }

    fn blob<'r>(&self, value: ValueRef<'r>, what: &str) -> Result<&'r [u8]> {
        match value {
            ValueRef::Blob(blob) => Ok(blob),
            other => Err(self.corrupt(what.into(), format!("not a blob: {:?}", other.data_type()))),
        }
    }

    fn part(&self, value: i64) -> Result<Part> {
        Part::from_stored(value)
            .ok_or_else(|| self.corrupt("node part".into(), format!("{value} is not 0 or 1")))
    }

    fn unsigned<T: TryFrom<i64>>(&self, value: i64, what: &str) -> Result<T> {
        T::try_from(value)
            .map_err(|_| self.corrupt(what.into(), format!("{value} is out of range")))
    }
}

/// One `SELECT` per node of a path, as one statement: a rank reads its
/// whole root-to-leaf path in one round trip. Parameters: `?1` board, then
/// `(height, idx, with_b)` per node.
fn node_path_sql(len: usize) -> &'static str {
    static SQL: [OnceLock<String>; MAX_PATH + 1] = [const { OnceLock::new() }; MAX_PATH + 1];
    SQL[len].get_or_init(|| {
        (0..len)
            .map(|i| {
                format!(
                    "SELECT height, part, shard, v FROM autoshard_rank_nodes \
                     WHERE board = ?1 AND height = ?{} AND idx = ?{} AND part <= ?{}",
                    3 * i + 2,
                    3 * i + 3,
                    3 * i + 4
                )
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    })
}

/// Like [`node_path_sql`] for an arrival tree: `?1` board, `?2` score,
/// then `(height, idx)` per node.
fn arrival_path_sql(len: usize) -> &'static str {
    static SQL: [OnceLock<String>; MAX_PATH + 1] = [const { OnceLock::new() }; MAX_PATH + 1];
    SQL[len].get_or_init(|| {
        (0..len)
            .map(|i| {
                format!(
                    "SELECT height, v FROM autoshard_rank_arrivals \
                     WHERE board = ?1 AND score = ?2 AND height = ?{} AND idx = ?{}",
                    2 * i + 3,
                    2 * i + 4
                )
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    })
}

/// Longest path: a tree over `2^64` positions with B = 2.
const MAX_PATH: usize = 64;

/// Positions are below 2^63 by construction; see [`Storage`].
fn int(position: u64) -> i64 {
    i64::try_from(position).expect("positions are below 2^63")
}

fn limit(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Storage for SqliteTx<'_> {
    fn path_rows(&self, path: &[(u32, u64, bool)], f: &mut NodeRow<'_>) -> Result<()> {
        let mut stmt = self.tx.prepare_cached(node_path_sql(path.len()))?;
        stmt.raw_bind_parameter(1, self.board)?;
        for (i, &(height, idx, with_b)) in path.iter().enumerate() {
            stmt.raw_bind_parameter(3 * i + 2, height)?;
            stmt.raw_bind_parameter(3 * i + 3, int(idx))?;
            stmt.raw_bind_parameter(3 * i + 4, with_b as i64)?;
        }
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            f(
                self.unsigned(row.get(0)?, "node height")?,
                self.part(row.get(1)?)?,
                self.unsigned(row.get(2)?, "node shard")?,
                self.blob(row.get_ref(3)?, "node vector")?,
            )?;
        }
        Ok(())
    }

    fn node_shard(
        &self,
        height: u32,
        idx: u64,
        shard: u32,
        f: &mut dyn FnMut(Part, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut stmt = self.tx.prepare_cached(
            "SELECT part, v FROM autoshard_rank_nodes \
             WHERE board = ?1 AND height = ?2 AND idx = ?3 AND part IN (0, 1) AND shard = ?4",
        )?;
        let mut rows = stmt.query(params![self.board, height, int(idx), shard])?;
        while let Some(row) = rows.next()? {
            f(
                self.part(row.get(0)?)?,
                self.blob(row.get_ref(1)?, "node vector")?,
            )?;
        }
        Ok(())
    }

    fn put_node_part(&self, height: u32, idx: u64, part: Part, shard: u32, v: &[u8]) -> Result<()> {
        let (idx, part) = (int(idx), part as i64);
        if v.is_empty() {
            self.tx
                .prepare_cached(
                    "DELETE FROM autoshard_rank_nodes \
                     WHERE board = ?1 AND height = ?2 AND idx = ?3 AND part = ?4 AND shard = ?5",
                )?
                .execute(params![self.board, height, idx, part, shard])?;
        } else {
            self.tx
                .prepare_cached(
                    "INSERT INTO autoshard_rank_nodes (board, height, idx, part, shard, v) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (board, height, idx, part, shard) DO UPDATE SET v = excluded.v",
                )?
                .execute(params![self.board, height, idx, part, shard, v])?;
        }
        Ok(())
    }

    fn arrival_path(
        &self,
        score: i64,
        path: &[(u32, u64)],
        f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut stmt = self.tx.prepare_cached(arrival_path_sql(path.len()))?;
        stmt.raw_bind_parameter(1, self.board)?;
        stmt.raw_bind_parameter(2, score)?;
        for (i, &(height, idx)) in path.iter().enumerate() {
            stmt.raw_bind_parameter(2 * i + 3, height)?;
            stmt.raw_bind_parameter(2 * i + 4, int(idx))?;
        }
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            f(
                self.unsigned(row.get(0)?, "arrival node height")?,
                self.blob(row.get_ref(1)?, "arrival vector")?,
            )?;
        }
        Ok(())
    }

    fn put_arrival_node(&self, score: i64, height: u32, idx: u64, v: &[u8]) -> Result<()> {
        if v.is_empty() {
            self.tx
                .prepare_cached(
                    "DELETE FROM autoshard_rank_arrivals \
                     WHERE board = ?1 AND score = ?2 AND height = ?3 AND idx = ?4",
                )?
                .execute(params![self.board, score, height, int(idx)])?;
        } else {
            self.tx
                .prepare_cached(
                    "INSERT INTO autoshard_rank_arrivals (board, score, height, idx, v) \
                     VALUES (?1, ?2, ?3, ?4, ?5) \
                     ON CONFLICT (board, score, height, idx) DO UPDATE SET v = excluded.v",
                )?
                .execute(params![self.board, score, height, int(idx), v])?;
        }
        Ok(())
    }

    fn player(&self, player: &str) -> Result<Option<(i64, u64)>> {
        let row = self
            .tx
            .prepare_cached(
                "SELECT score, arrival FROM autoshard_rank_players WHERE board = ?1 AND player = ?2",
            )?
            .query_row(params![self.board, player], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })
            .optional()?;
        match row {
            Some((score, arrival)) => Ok(Some((score, self.unsigned(arrival, "player arrival")?))),
            None => Ok(None),
        }
    }

    fn put_player(&self, player: &str, score: i64, arrival: u64) -> Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO autoshard_rank_players (board, player, score, arrival) \
                 VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (board, player) DO UPDATE SET score = excluded.score, arrival = excluded.arrival",
            )?
            .execute(params![self.board, player, score, int(arrival)])?;
        Ok(())
    }

    fn delete_player(&self, player: &str) -> Result<()> {
        self.tx
            .prepare_cached("DELETE FROM autoshard_rank_players WHERE board = ?1 AND player = ?2")?
            .execute(params![self.board, player])?;
        Ok(())
    }

    fn put_player_data(&self, player: &str, data: Option<&[u8]>) -> Result<()> {
        self.tx
            .prepare_cached(
                "UPDATE autoshard_rank_players SET data = ?3 WHERE board = ?1 AND player = ?2",
            )?
            .execute(params![self.board, player, data])?;
        Ok(())
    }

    fn players_data(
        &self,
        players: &[&str],
        f: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        // One statement for the whole list, bound as one JSON array: no
        // limit on bound parameters, and names stay data.
        let list = serde_json::to_string(players).expect("strings serialize");
        let mut stmt = self.tx.prepare_cached(
            "SELECT player, data FROM autoshard_rank_players \
             WHERE board = ?1 AND data IS NOT NULL \
             AND player IN (SELECT value FROM json_each(?2))",
        )?;
        let mut rows = stmt.query(params![self.board, list])?;
        while let Some(row) = rows.next()? {
            f(&row.get::<_, String>(0)?, &row.get::<_, Vec<u8>>(1)?)?;
        }
        Ok(())
    }

    fn entries_at(
        &self,
        score: i64,
        arrival: u64,
        n: u64,
        out: &mut Vec<(String, i64)>,
    ) -> Result<()> {
        let mut stmt = self.tx.prepare_cached(
            "SELECT player FROM autoshard_rank_players \
             WHERE board = ?1 AND score = ?2 AND arrival >= ?3 ORDER BY arrival LIMIT ?4",
        )?;
        let mut rows = stmt.query(params![self.board, score, int(arrival), limit(n)])?;
        while let Some(row) = rows.next()? {
            out.push((row.get(0)?, score));
        }
        Ok(())
    }

    fn entries_below(&self, score: i64, n: u64, out: &mut Vec<(String, i64)>) -> Result<()> {
        let mut stmt = self.tx.prepare_cached(
            "SELECT player, score FROM autoshard_rank_players \
             WHERE board = ?1 AND score < ?2 ORDER BY score DESC, arrival LIMIT ?3",
        )?;
        let mut rows = stmt.query(params![self.board, score, limit(n)])?;
        while let Some(row) = rows.next()? {
            out.push((row.get(0)?, row.get(1)?));
        }
        Ok(())
    }

    fn scan_players(&self, f: &mut dyn FnMut(i64, u64) -> Result<()>) -> Result<()> {
        let mut stmt = self
            .tx
            .prepare_cached("SELECT score, arrival FROM autoshard_rank_players WHERE board = ?1")?;
        let mut rows = stmt.query([self.board])?;
        while let Some(row) = rows.next()? {
            f(row.get(0)?, self.unsigned(row.get(1)?, "player arrival")?)?;
        }
        Ok(())
    }

    fn scan_nodes(&self, f: &mut ScannedNode<'_>) -> Result<()> {
        let mut stmt = self.tx.prepare_cached(
            "SELECT height, idx, part, shard, v FROM autoshard_rank_nodes WHERE board = ?1 \
             ORDER BY height, idx, part, shard",
        )?;
        let mut rows = stmt.query([self.board])?;
        while let Some(row) = rows.next()? {
            f(
                (
                    self.unsigned(row.get(0)?, "node height")?,
                    self.unsigned(row.get(1)?, "node idx")?,
                ),
                self.part(row.get(2)?)?,
                self.unsigned(row.get(3)?, "node shard")?,
                self.blob(row.get_ref(4)?, "node vector")?,
            )?;
        }
        Ok(())
    }

    fn scan_arrival_nodes(&self, f: &mut ScannedArrival<'_>) -> Result<()> {
        let mut stmt = self.tx.prepare_cached(
            "SELECT score, height, idx, v FROM autoshard_rank_arrivals WHERE board = ?1 \
             ORDER BY score, height, idx",
        )?;
        let mut rows = stmt.query([self.board])?;
        while let Some(row) = rows.next()? {
            f(
                row.get(0)?,
                self.unsigned(row.get(1)?, "arrival node height")?,
                self.unsigned(row.get(2)?, "arrival node idx")?,
                self.blob(row.get_ref(3)?, "arrival vector")?,
            )?;
        }
        Ok(())
    }

    // SQLite has one writer at a time: a shard is never held by another.
    fn claim_queue(&self, _queue: u32) -> Result<bool> {
        Ok(true)
    }

    fn applied_through(&self, queue: u32) -> Result<i64> {
        queue::applied(self.tx, self.board, queue)
    }

    // SQLite has one writer at a time: a worker may cache (see the trait).
    fn bump_generation(&self) -> Result<Option<u64>> {
        queue::bump_generation(self.tx, self.board).map(Some)
    }

    fn set_applied_through(&self, queue: u32, seq: i64) -> Result<()> {
        queue::set_applied(self.tx, self.board, queue, seq)
    }

    fn take_queued(
        &self,
        queue: u32,
        after: i64,
        limit: usize,
        out: &mut Vec<QueuedRow>,
    ) -> Result<()> {
        queue::take(self.db, self.board, (queue, after), limit, out)
    }

    fn dead_letter(
        &self,
        queue: u32,
        seq: i64,
        player: &str,
        score: Option<i64>,
        reason: &str,
    ) -> Result<()> {
        queue::dead_letter(self.tx, self.board, queue, seq, player, score, reason)
    }

    fn clear(&self) -> Result<()> {
        lifecycle::clear(self.tx, self.board)
    }

    fn board_name(&self) -> &str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use crate::ranking::memory::conformance;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// After the same batches SQLite holds exactly the reference's rows.
        #[test]
        fn holds_the_rows_the_reference_holds((shape, ops) in conformance::cases()) {
            let db = super::Sqlite::memory()?;
            let shown = conformance::check(&db, "board", shape, &ops)?;
            prop_assert!(shown.is_none(), "{}", shown.unwrap_or_default());
        }
    }
}

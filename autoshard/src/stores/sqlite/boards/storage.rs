//! [`Storage`] over one SQLite transaction: one board's tree nodes,
//! arrival nodes, players and entry data, and its queue marks. No locks:
//! SQLite has one writer at a time.

use super::SqliteTx;
use crate::error::Result;
use crate::seam::{signed, NodeRow, Part, QueuedRow, ScannedArrival, ScannedNode, Storage};
use crate::stores::sqlite::{lifecycle, queue};
use rusqlite::params;
use rusqlite::types::ValueRef;
use rusqlite::OptionalExtension;
use std::sync::OnceLock;

impl SqliteTx<'_> {
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

    // An `UPDATE` first, an `INSERT` only if nobody was there: most writes
    // move a player who is on the board, and an upsert pays for a failed
    // insert (a descent of the primary key) before its update (another).
    fn put_player(&self, player: &str, score: i64, arrival: u64) -> Result<()> {
        let values = params![self.board, player, score, int(arrival)];
        let moved = self
            .tx
            .prepare_cached(
                "UPDATE autoshard_rank_players SET score = ?3, arrival = ?4 \
                 WHERE board = ?1 AND player = ?2",
            )?
            .execute(values)?;
        if moved == 0 {
            self.tx
                .prepare_cached(
                    "INSERT INTO autoshard_rank_players (board, player, score, arrival) \
                     VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(values)?;
        }
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
        let mut rows = stmt.query(params![self.board, score, int(arrival), signed(n)])?;
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
        let mut rows = stmt.query(params![self.board, score, signed(n)])?;
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

//! [`Storage`] over one PostgreSQL transaction: one board's tree nodes,
//! arrival nodes, players and entry data, read and written with the
//! statements of `sql.rs`; a writer first locks the keys it reads
//! (`locks.rs`). The queue's marks and rows are in this database too, so
//! the queue steps run in the same transaction (`queue.rs`).

use super::locks::EXCLUSIVE_ABOVE;
use super::{small, BoardLock, PgTx};
use crate::error::{Error, Result};
use crate::seam::{
    signed, NodeRow, Part, Prefetch, QueuedRow, ScannedArrival, ScannedNode, Storage,
};
use crate::stores::postgres::{lifecycle, queue};

/// Positions are below 2^63 by construction; see [`Storage`].
fn int(position: u64) -> i64 {
    i64::try_from(position).expect("positions are below 2^63")
}

impl PgTx<'_, '_> {
    pub(super) fn unsigned<T: TryFrom<i64>>(&self, value: impl Into<i64>, what: &str) -> Result<T> {
        let value = value.into();
        T::try_from(value)
            .map_err(|_| self.corrupt(what.into(), format!("{value} is out of range")))
    }

    pub(super) fn part(&self, value: i16) -> Result<Part> {
        Part::from_stored(value.into())
            .ok_or_else(|| self.corrupt("node part".into(), format!("{value} is not 0 or 1")))
    }
}

impl Storage for PgTx<'_, '_> {
    fn lock_players(&self, players: &[&str]) -> Result<()> {
        let mut keys: Vec<i64> = players
            .iter()
            .map(|p| self.key(b'p', p.as_bytes()))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        if self.board_lock.get() == BoardLock::None && keys.len() > EXCLUSIVE_ABOVE {
            self.lock_exclusive()?;
            return Ok(());
        }
        self.lock(keys)
    }

    fn lock_leaves(&self, leaves: &[u64]) -> Result<()> {
        self.lock(leaves.iter().map(|&idx| self.node_key(1, idx, 0)).collect())
    }

    fn writes_alone(&self) -> bool {
        self.board_lock.get() == BoardLock::Exclusive
    }

    fn prefetch(&self, rows: &Prefetch<'_>) -> Result<()> {
        self.prefetch_rows(rows)
    }

    fn flush_writes(&self) -> Result<()> {
        self.flush_staged()
    }

    fn path_rows(&self, path: &[(u32, u64, bool)], f: &mut NodeRow<'_>) -> Result<()> {
        self.flush_staged()?;
        let heights: Vec<i32> = path.iter().map(|p| small(p.0)).collect();
        let idxs: Vec<i64> = path.iter().map(|p| int(p.1)).collect();
        let tops: Vec<i16> = path.iter().map(|p| i16::from(p.2)).collect();
        let rows = self.query(&self.sql.path, &[&self.board, &heights, &idxs, &tops])?;
        for row in &rows {
            f(
                self.unsigned(row.try_get::<_, i32>(0)?, "node height")?,
                self.part(row.try_get(1)?)?,
                self.unsigned(row.try_get::<_, i32>(2)?, "node shard")?,
                row.try_get(3)?,
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
        if self.staged_node((height, idx, shard), f)? {
            return Ok(());
        }
        self.flush_staged()?;
        self.lock(vec![self.node_key(height, idx, shard)])?;
        let rows = self.query(
            &self.sql.node_shard,
            &[&self.board, &small(height), &int(idx), &small(shard)],
        )?;
        for row in &rows {
            f(self.part(row.try_get(0)?)?, row.try_get(1)?)?;
        }
        Ok(())
    }

    fn put_node_part(&self, height: u32, idx: u64, part: Part, shard: u32, v: &[u8]) -> Result<()> {
        if self.hold_node((height, idx, part, shard), v) {
            return Ok(());
        }
        let (height, idx, part, shard) = (small(height), int(idx), part as i16, small(shard));
        if v.is_empty() {
            self.execute(
                &self.sql.delete_node,
                &[&self.board, &height, &idx, &part, &shard],
            )
        } else {
            self.execute(
                &self.sql.upsert_node,
                &[&self.board, &height, &idx, &part, &shard, &v],
            )
        }
    }

    fn arrival_path(
        &self,
        score: i64,
        path: &[(u32, u64)],
        f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<()> {
        if self.staged_arrivals(score, path, f)? {
            return Ok(());
        }
        self.flush_staged()?;
        let heights: Vec<i32> = path.iter().map(|p| small(p.0)).collect();
        let idxs: Vec<i64> = path.iter().map(|p| int(p.1)).collect();
        let rows = self.query(
            &self.sql.arrival_path,
            &[&self.board, &score, &heights, &idxs],
        )?;
        for row in &rows {
            f(
                self.unsigned(row.try_get::<_, i32>(0)?, "arrival node height")?,
                row.try_get(1)?,
            )?;
        }
        Ok(())
    }

    fn put_arrival_node(&self, score: i64, height: u32, idx: u64, v: &[u8]) -> Result<()> {
        if self.hold_arrival((score, height, idx), v) {
            return Ok(());
        }
        let (height, idx) = (small(height), int(idx));
        if v.is_empty() {
            self.execute(
                &self.sql.delete_arrival,
                &[&self.board, &score, &height, &idx],
            )
        } else {
            self.execute(
                &self.sql.upsert_arrival,
                &[&self.board, &score, &height, &idx, &v],
            )
        }
    }

    fn player(&self, player: &str) -> Result<Option<(i64, u64)>> {
        if let Some(place) = self.staged_player(player) {
            return Ok(place);
        }
        self.flush_staged()?;
        let rows = self.query(&self.sql.player, &[&self.board, &player])?;
        match rows.first() {
            Some(row) => Ok(Some((
                row.try_get(0)?,
                self.unsigned(row.try_get::<_, i64>(1)?, "player arrival")?,
            ))),
            None => Ok(None),
        }
    }

    fn players(
        &self,
        players: &[&str],
        f: &mut dyn FnMut(&str, i64, u64) -> Result<()>,
    ) -> Result<()> {
        self.flush_staged()?;
        for row in &self.query(&self.sql.players, &[&self.board, &players])? {
            let arrival = self.unsigned(row.try_get::<_, i64>(2)?, "player arrival")?;
            f(row.try_get(0)?, row.try_get(1)?, arrival)?;
        }
        Ok(())
    }

    fn put_player(&self, player: &str, score: i64, arrival: u64) -> Result<()> {
        if self.hold_player(player, Some((score, arrival))) {
            return Ok(());
        }
        self.execute(
            &self.sql.upsert_player,
            &[&self.board, &player, &score, &int(arrival)],
        )
    }

    fn delete_player(&self, player: &str) -> Result<()> {
        if self.hold_player(player, None) {
            return Ok(());
        }
        self.execute(&self.sql.delete_player, &[&self.board, &player])
    }

    fn put_player_data(&self, player: &str, data: Option<&[u8]>) -> Result<()> {
        // The row must be written first: it is updated, not inserted.
        self.flush_staged()?;
        self.execute(&self.sql.put_player_data, &[&self.board, &player, &data])
    }

    fn players_data(
        &self,
        players: &[&str],
        f: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.flush_staged()?;
        for row in &self.query(&self.sql.players_data, &[&self.board, &players])? {
            f(row.try_get(0)?, row.try_get(1)?)?;
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
        self.flush_staged()?;
        let rows = self.query(
            &self.sql.entries_at,
            &[&self.board, &score, &int(arrival), &signed(n)],
        )?;
        for row in &rows {
            out.push((row.try_get(0)?, score));
        }
        Ok(())
    }

    fn entries_below(&self, score: i64, n: u64, out: &mut Vec<(String, i64)>) -> Result<()> {
        self.flush_staged()?;
        let rows = self.query(&self.sql.entries_below, &[&self.board, &score, &signed(n)])?;
        for row in &rows {
            out.push((row.try_get(0)?, row.try_get(1)?));
        }
        Ok(())
    }

    fn scan_players(&self, f: &mut dyn FnMut(i64, u64) -> Result<()>) -> Result<()> {
        self.flush_staged()?;
        for row in &self.query(&self.sql.scan_players, &[&self.board])? {
            f(
                row.try_get(0)?,
                self.unsigned(row.try_get::<_, i64>(1)?, "player arrival")?,
            )?;
        }
        Ok(())
    }

    fn scan_nodes(&self, f: &mut ScannedNode<'_>) -> Result<()> {
        self.flush_staged()?;
        for row in &self.query(&self.sql.scan_nodes, &[&self.board])? {
            f(
                (
                    self.unsigned(row.try_get::<_, i32>(0)?, "node height")?,
                    self.unsigned(row.try_get::<_, i64>(1)?, "node idx")?,
                ),
                self.part(row.try_get(2)?)?,
                self.unsigned(row.try_get::<_, i32>(3)?, "node shard")?,
                row.try_get(4)?,
            )?;
        }
        Ok(())
    }

    fn scan_arrival_nodes(&self, f: &mut ScannedArrival<'_>) -> Result<()> {
        self.flush_staged()?;
        for row in &self.query(&self.sql.scan_arrivals, &[&self.board])? {
            f(
                row.try_get(0)?,
                self.unsigned(row.try_get::<_, i32>(1)?, "arrival node height")?,
                self.unsigned(row.try_get::<_, i64>(2)?, "arrival node idx")?,
                row.try_get(3)?,
            )?;
        }
        Ok(())
    }

    fn claim_queue(&self, queue: u32) -> Result<bool> {
        let sql = &self.sql.queue;
        queue::try_lock(
            &mut self.tx.borrow_mut(),
            sql,
            sql.shard_key(self.board, queue),
        )
    }

    fn applied_through(&self, queue: u32) -> Result<i64> {
        queue::applied(
            &mut self.tx.borrow_mut(),
            &self.sql.queue,
            self.board,
            queue,
        )
    }

    fn set_applied_through(&self, queue: u32, seq: i64) -> Result<()> {
        let sql = &self.sql.queue;
        queue::set_applied(&mut self.tx.borrow_mut(), sql, self.board, queue, seq)
    }

    // The queue's tables are in this database: read in this transaction,
    // without locks (rows above the mark are only ever inserted, and a
    // shard's rows become visible in sequence order).
    fn take_queued(
        &self,
        queue: u32,
        after: i64,
        limit: usize,
        out: &mut Vec<QueuedRow>,
    ) -> Result<()> {
        let sql = &self.sql.queue;
        let at = (queue, after);
        queue::take(&mut self.tx.borrow_mut(), sql, self.board, at, limit, out)
    }

    fn dead_letter(
        &self,
        queue: u32,
        seq: i64,
        player: &str,
        score: Option<i64>,
        reason: &str,
    ) -> Result<()> {
        let tx = &mut self.tx.borrow_mut();
        let at = (queue, seq);
        queue::dead_letter(tx, &self.sql.queue, self.board, at, player, score, reason)
    }

    fn clear(&self) -> Result<()> {
        // Nothing staged may outlive the clear.
        self.flush_staged()?;
        *self.staged.borrow_mut() = None;
        match self.board_lock.get() {
            BoardLock::Exclusive => {}
            BoardLock::None => self.lock_exclusive()?,
            // Upgrading could deadlock with another upgrader.
            BoardLock::Shared => {
                return Err(Error::InvalidRanking {
                    reason: "clear must come first in its transaction".into(),
                })
            }
        }
        lifecycle::clear(&mut self.tx.borrow_mut(), &self.sql.lifecycle, self.board)
    }

    fn board_name(&self) -> &str {
        self.name
    }
}

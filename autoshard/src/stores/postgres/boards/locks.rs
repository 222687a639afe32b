//! The advisory locks of a board write on PostgreSQL.
//!
//! Writers decide from exact values, and `FOR UPDATE` cannot lock a row that
//! does not exist yet, so a write transaction takes transaction-scoped
//! advisory locks on the keys it is about to read, present or not, in the
//! canonical order `Storage` announces (players, leaves, inner shard rows;
//! sorted within each step), and reads after each lock at `READ COMMITTED`.
//! Every such lock sits under a board lock the writer holds in shared mode;
//! a batch naming more than [`EXCLUSIVE_ABOVE`] players takes the board lock
//! exclusively instead and no other (lock escalation: the server's lock
//! table holds a few thousand locks for all sessions together). A write
//! over several boards takes every board's lock first. `docs/design/ranking-tree.md`
//! ("Ranking tree", "On PostgreSQL") gives the reasons.

use super::{BoardLock, PgTx};
use crate::error::Result;
use crate::hash::fnv;
use crate::seam::Board;
use crate::stores::postgres::{lifecycle, Tx};
use std::cell::RefCell;

/// A write transaction naming more distinct players than this locks the
/// whole board exclusively instead of each player, leaf and inner shard row.
/// Per-key locking holds up to about (3 + 2 x tree height) locks per player,
/// and PostgreSQL's lock table has room for `max_locks_per_transaction` (64
/// by default) times `max_connections` locks, shared by every session: at
/// this size a batch holds a few hundred.
pub(super) const EXCLUSIVE_ABOVE: usize = 64;

impl PgTx<'_, '_> {
    /// A lock key for `(board, class, key)` in this schema.
    pub(super) fn key(&self, class: u8, key: &[u8]) -> i64 {
        let hash = fnv(self.sql.lock_seed, &self.board.to_le_bytes());
        fnv(fnv(hash, &[class]), key) as i64
    }

    /// Takes the advisory locks on `keys` this transaction does not hold
    /// yet, in ascending key order, in one round trip; the board's lock in
    /// shared mode first, in the same round trip, if it holds none yet.
    /// Nothing if it holds the board exclusively.
    pub(super) fn lock(&self, mut keys: Vec<i64>) -> Result<()> {
        let board_first = match self.board_lock.get() {
            BoardLock::Exclusive => return Ok(()),
            BoardLock::Shared => false,
            BoardLock::None => true,
        };
        {
            let held = self.held.borrow();
            keys.retain(|k| !held.contains(k));
        }
        keys.sort_unstable();
        keys.dedup();
        let mut taken = keys.clone();
        if board_first {
            taken.insert(0, self.key(b'b', &[]));
        }
        if taken.is_empty() {
            return Ok(());
        }
        self.execute(&self.sql.lock, &[&taken, &board_first])?;
        if board_first {
            self.check_alive()?;
        }
        self.board_lock.set(BoardLock::Shared);
        self.held.borrow_mut().extend(keys);
        Ok(())
    }

    /// Takes the board alone (no lock held yet) and checks it still
    /// exists.
    pub(super) fn lock_exclusive(&self) -> Result<()> {
        self.execute(&self.sql.lock_board, &[&self.key(b'b', &[])])?;
        self.board_lock.set(BoardLock::Exclusive);
        self.check_alive()
    }

    /// Called right after the board's lock is taken: a delete that
    /// committed while this transaction waited for it shows now (`READ
    /// COMMITTED`), and nothing gets written under a deleted board's id.
    fn check_alive(&self) -> Result<()> {
        let board = Board {
            id: self.board,
            name: self.name,
        };
        lifecycle::check_alive(&mut self.tx.borrow_mut(), &self.sql.lifecycle, board)
    }

    pub(super) fn node_key(&self, height: u32, idx: u64, shard: u32) -> i64 {
        let mut key = [0; 16];
        key[..4].copy_from_slice(&height.to_le_bytes());
        key[4..12].copy_from_slice(&idx.to_le_bytes());
        key[12..].copy_from_slice(&shard.to_le_bytes());
        self.key(b'n', &key)
    }
}

/// Takes the lock of every board of one multi-board write, shared, in
/// ascending key order, in one statement: then each board's writes take
/// only the locks of its own keys, board after board in the order given,
/// as a lone write would.
pub(super) fn lock_boards(tx: &RefCell<&mut Tx<'_>>, boards: &[PgTx<'_, '_>]) -> Result<()> {
    let mut keys: Vec<i64> = boards.iter().map(|t| t.key(b'b', &[])).collect();
    keys.sort_unstable();
    if !keys.is_empty() {
        tx.borrow_mut().execute(
            "SELECT pg_advisory_xact_lock_shared(k) \
             FROM unnest($1::int8[]) WITH ORDINALITY AS t(k, n) ORDER BY n",
            &[&keys],
        )?;
    }
    // Every board's delete that committed while this waited shows now
    // (`READ COMMITTED`): checked for all of them in one statement.
    let seam: Vec<Board<'_>> = boards
        .iter()
        .map(|t| Board {
            id: t.board,
            name: t.name,
        })
        .collect();
    let sql = boards.first().map(|t| t.sql);
    if let Some(sql) = sql {
        super::check_all_alive(&mut tx.borrow_mut(), sql, &seam)?;
    }
    for t in boards {
        t.board_lock.set(BoardLock::Shared);
    }
    Ok(())
}

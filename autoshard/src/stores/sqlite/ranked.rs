//! Entity boards on SQLite: the boards live in the entities' database file,
//! so a save's board write is a few more statements in its own
//! `BEGIN IMMEDIATE` transaction (`seam/ranked.rs`).

use super::boards::{open_flat_in, SqliteTx};
use super::{lifecycle, Sqlite};
use crate::error::Result;
use crate::seam::{Board, BoardSpec, BoardTx, BoardWrite, Kind, Storage};
use rusqlite::Transaction;

/// The boards, inside one entity write transaction.
struct SqliteBoards<'a> {
    db: &'a Sqlite,
    tx: &'a Transaction<'a>,
}

impl BoardTx for SqliteBoards<'_> {
    fn open(&self, name: &str) -> Result<Option<(i64, BoardSpec)>> {
        open_flat_in(self.tx, name)
    }

    fn with_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        lifecycle::check_alive(self.tx, board)?;
        f(&SqliteTx::new(self.db, self.tx, board))
    }
}

impl Sqlite {
    /// Before a transaction that may write entity boards: the tables a
    /// board write needs and that only a transaction of their own creates.
    pub(super) fn prepare_ranked(&self, kind: &Kind) -> Result<()> {
        match kind.has_ranked() {
            true => self.ensure_generations(),
            false => Ok(()),
        }
    }

    /// Runs `writes` on the boards in `tx`, the entity's transaction.
    pub(super) fn write_entity_boards(
        &self,
        tx: &Transaction<'_>,
        kind: &Kind,
        writes: &[BoardWrite],
    ) -> Result<()> {
        kind.write_boards(&SqliteBoards { db: self, tx }, writes)
    }
}

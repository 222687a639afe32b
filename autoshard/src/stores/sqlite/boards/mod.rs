//! Ranking boards on SQLite: [`BoardStore`], the tables, and [`Storage`]
//! over one transaction.
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
//!
//! - `catalog.rs`: creating a board and reading its stored shape;
//! - `storage.rs`: one board's rows, read and written in one transaction.

mod catalog;
mod storage;

pub(super) use catalog::open_flat_in;

use super::{lifecycle, queue, Sqlite};
use crate::error::Result;
use crate::seam::{Board, BoardSpec, BoardStore, DeadLetter, Placement, QueuedUpdate, Storage};
use rusqlite::Transaction;

impl BoardStore for Sqlite {
    /// One database holds every board: `placement` changes nothing.
    fn create_board(&self, name: &str, spec: &BoardSpec, _: Placement<'_>) -> Result<i64> {
        catalog::create(self, name, spec)
    }

    fn open_board(&self, name: &str) -> Result<Option<(i64, BoardSpec)>> {
        self.read(|tx| catalog::open_in(tx, name))
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
        self.write_boards_tx(|tx| {
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
        self.write_boards_tx(|tx| {
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

    fn append_queue(&self, board: Board<'_>, items: &[QueuedUpdate]) -> Result<()> {
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

    fn dead_letter_count(&self, board: i64) -> Result<u64> {
        queue::dead_letter_count(self, board)
    }

    fn oldest_queued_age(&self, board: i64) -> Result<Option<std::time::Duration>> {
        queue::oldest_age(self, board)
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

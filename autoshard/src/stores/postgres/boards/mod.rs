//! Ranking boards on PostgreSQL: [`BoardStore`] and the [`Storage`] of one
//! transaction. The tables are SQLite's (`stores/sqlite/boards/`) in the
//! store's schema, with `bytea` vectors.
//!
//! Readers use one `REPEATABLE READ READ ONLY` transaction; writers run at
//! `READ COMMITTED` and lock each key before they read it (`locks.rs`).
//! `docs/design/ranking-tree.md` ("Ranking tree", "On PostgreSQL") gives the reasons.
//!
//! - `sql.rs`: the statements, built once per store handle;
//! - `catalog.rs`: creating and opening a board, and the columns a board
//!   table made by an older version lacks;
//! - `locks.rs`: the advisory locks of a write, one board or several;
//! - `planned.rs`: a read whose rows are known up front in one statement;
//! - `batched.rs`: a write batch's rows loaded, and its writes sent, in a
//!   bounded number of statements;
//! - `storage.rs`: one board's rows (tree nodes, arrival nodes, players,
//!   entry data) and queue marks, read and written in one transaction.

mod batched;
mod catalog;
mod locks;
mod planned;
mod sql;
mod storage;

pub(super) use sql::Sql;

use super::{lifecycle, queue, Concurrency, Postgres, Tx};
use crate::error::Result;
use crate::seam::{
    Board, BoardSpec, BoardStore, DeadLetter, Placement, QueuedUpdate, ReadPlan, Storage,
};
use ::postgres::Row;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;

impl Postgres {
    fn boards_sql(&self) -> &Sql {
        self.inner
            .boards
            .get_or_init(|| Sql::new(self.quoted_schema()))
    }

    /// The one-statement read's texts (`planned.rs`), for the test of their
    /// plans (`__private::pg_hooks::planned_read_sql`).
    #[cfg(feature = "failpoints")]
    pub(crate) fn planned_read_sql(&self) -> [&str; 2] {
        let sql = self.boards_sql();
        [&sql.planned, &sql.planned_arrivals]
    }

    /// [`Storage`] for `board` over `tx`.
    pub(super) fn board_tx<'t, 'c>(
        &'t self,
        tx: &'t RefCell<&'t mut Tx<'c>>,
        board: Board<'t>,
    ) -> PgTx<'t, 'c> {
        PgTx {
            tx,
            sql: self.boards_sql(),
            board: board.id,
            name: board.name,
            held: RefCell::new(HashSet::new()),
            board_lock: Cell::new(BoardLock::None),
            staged: RefCell::new(None),
            repeatable: false,
        }
    }

    /// [`board_tx`](Self::board_tx) in a transaction of the store's own
    /// isolation (an entity save's), `REPEATABLE READ` in `Optimistic` mode.
    pub(super) fn board_tx_in_save<'t, 'c>(
        &'t self,
        tx: &'t RefCell<&'t mut Tx<'c>>,
        board: Board<'t>,
    ) -> PgTx<'t, 'c> {
        PgTx {
            repeatable: self.inner.options.concurrency == Concurrency::Optimistic
                && !unlocked_loads(),
            ..self.board_tx(tx, board)
        }
    }
}

/// The control of `tests/postgres/pg_optimistic_boards.rs`: loads that lock
/// nothing, as before the fix.
#[cfg(feature = "failpoints")]
fn unlocked_loads() -> bool {
    super::ranked::save_hooks::unlocked_loads()
}

#[cfg(not(feature = "failpoints"))]
fn unlocked_loads() -> bool {
    false
}

impl BoardStore for Postgres {
    /// One database holds every board: `placement` changes nothing.
    fn create_board(&self, name: &str, spec: &BoardSpec, _: Placement<'_>) -> Result<i64> {
        catalog::create(self, name, spec)
    }

    fn open_board(&self, name: &str) -> Result<Option<(i64, BoardSpec)>> {
        self.open_alone(name)
    }

    fn read_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        let sql = &self.boards_sql().lifecycle;
        self.read_snapshot(|tx| {
            lifecycle::check_alive(tx, sql, board)?;
            f(&self.board_tx(&RefCell::new(tx), board))
        })
    }

    fn read_board_planned(
        &self,
        board: Board<'_>,
        plan: &ReadPlan<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        match planned::run(self, board, plan, f)? {
            true => Ok(()),
            false => self.read_board(board, f),
        }
    }

    // All trees of a split board live in this database: one connection and
    // one snapshot read them all (issue 21), whatever the pool's size.
    fn read_boards(
        &self,
        boards: &[Board<'_>],
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        let sql = self.boards_sql();
        self.read_snapshot(|tx| {
            check_all_alive(tx, sql, boards)?;
            let cell = RefCell::new(tx);
            let txs: Vec<PgTx<'_, '_>> = boards.iter().map(|&b| self.board_tx(&cell, b)).collect();
            let storages: Vec<&dyn Storage> = txs.iter().map(|t| t as &dyn Storage).collect();
            f(&storages)
        })
    }

    // READ COMMITTED whatever the store's mode: the writer locks what it
    // reads and must then see the latest commit (see the module docs).
    fn write_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        self.write_read_committed(|tx| {
            let cell = RefCell::new(tx);
            let t = self.board_tx(&cell, board);
            f(&t)?;
            // The apply flushes its batch; this covers any write held after.
            t.flush_writes()
        })
        .map(drop)
    }

    // Every board's lock first (`locks.rs`), then `f`.
    fn write_boards(
        &self,
        boards: &[Board<'_>],
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        self.write_read_committed(|tx| {
            let cell = RefCell::new(tx);
            let txs: Vec<PgTx<'_, '_>> = boards.iter().map(|&b| self.board_tx(&cell, b)).collect();
            locks::lock_boards(&cell, &txs)?;
            let storages: Vec<&dyn Storage> = txs.iter().map(|t| t as &dyn Storage).collect();
            f(&storages)?;
            txs.iter().try_for_each(|t| t.flush_writes())
        })
        .map(drop)
    }

    fn prepare_queue(&self) -> Result<Option<String>> {
        queue::prepare(self, &self.boards_sql().queue)
    }

    fn append_queue(&self, board: Board<'_>, items: &[QueuedUpdate]) -> Result<()> {
        queue::append(self, &self.boards_sql().queue, board, items)
    }

    fn queued(&self, board: i64) -> Result<u64> {
        queue::queued(self, &self.boards_sql().queue, board)
    }

    fn queue_marks(&self, board: i64) -> Result<Vec<(u32, i64)>> {
        queue::marks(self, &self.boards_sql().queue, board)
    }

    fn queued_below(&self, board: i64, marks: &[(u32, i64)], count: bool) -> Result<u64> {
        queue::below(self, &self.boards_sql().queue, board, marks, count)
    }

    fn delete_queued(&self, board: i64, through: &[(u32, i64)]) -> Result<()> {
        queue::delete(self, &self.boards_sql().queue, board, through)
    }

    fn dead_letters(&self, board: i64) -> Result<Vec<DeadLetter>> {
        queue::dead_letters(self, &self.boards_sql().queue, board)
    }

    fn delete_dead_letter(&self, board: i64, id: i64) -> Result<bool> {
        queue::delete_dead_letter(self, &self.boards_sql().queue, board, id)
    }

    fn dead_letter_count(&self, board: i64) -> Result<u64> {
        queue::dead_letter_count(self, &self.boards_sql().queue, board)
    }

    fn oldest_queued_age(&self, board: i64) -> Result<Option<std::time::Duration>> {
        queue::oldest_age(self, &self.boards_sql().queue, board)
    }

    fn list_boards(&self) -> Result<Vec<String>> {
        let sql = self.boards_sql();
        self.list(&sql.lifecycle, &sql.probe)
    }

    fn delete_board(&self, name: &str) -> Result<bool> {
        let sql = self.boards_sql();
        self.delete(&sql.lifecycle, sql.lock_seed, &sql.probe, name)
    }

    fn approx(&self) -> Result<&dyn crate::seam::ApproxStore> {
        Ok(self)
    }
}

/// [`Storage`] over one PostgreSQL transaction.
/// [`Error::RankingNotFound`](crate::Error::RankingNotFound) for the
/// first of `boards` whose id no longer names it, in one statement for all
/// of them.
pub(super) fn check_all_alive(tx: &mut Tx<'_>, sql: &Sql, boards: &[Board<'_>]) -> Result<()> {
    let ids: Vec<i64> = boards.iter().map(|b| b.id).collect();
    let mut names = Vec::with_capacity(boards.len());
    for row in tx.query(&sql.names_of, &[&ids])? {
        names.push((row.try_get::<_, i64>(0)?, row.try_get::<_, String>(1)?));
    }
    match boards
        .iter()
        .find(|b| !names.iter().any(|(id, name)| *id == b.id && name == b.name))
    {
        Some(gone) => Err(gone.not_found()),
        None => Ok(()),
    }
}

pub(crate) struct PgTx<'t, 'c> {
    /// Shared by the boards of one multi-board write.
    tx: &'t RefCell<&'t mut Tx<'c>>,
    sql: &'t Sql,
    board: i64,
    name: &'t str,
    /// Advisory lock keys this transaction holds (until it ends).
    held: RefCell<HashSet<i64>>,
    board_lock: Cell<BoardLock>,
    /// A write batch's loaded rows and held writes (`batched.rs`), from its
    /// first prefetch on.
    staged: RefCell<Option<batched::Staged>>,
    /// The transaction is `REPEATABLE READ` (an entity board's write in an
    /// `Optimistic` save): a batch's loads lock the rows they read, see
    /// `batched.rs`.
    repeatable: bool,
}

/// How a write transaction holds its board's advisory lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BoardLock {
    None,
    /// With locks on the keys it reads.
    Shared,
    /// Alone on the board: no other lock needed.
    Exclusive,
}

/// Heights (at most 64), shards, branching and queues (validated, at most
/// 1024) as `integer`.
fn small(value: u32) -> i32 {
    i32::try_from(value).expect("validated small counts")
}

impl PgTx<'_, '_> {
    fn query(
        &self,
        sql: &str,
        params: &[&(dyn ::postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        Ok(self.tx.borrow_mut().query(sql, params)?)
    }

    fn execute(&self, sql: &str, params: &[&(dyn ::postgres::types::ToSql + Sync)]) -> Result<()> {
        self.tx.borrow_mut().execute(sql, params)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::ranking::memory::conformance;
    use crate::Postgres;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// The server the integration tests use (`autoshard-test-servers`).
    fn url() -> String {
        autoshard_test_servers::postgres_url()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// After the same batches PostgreSQL holds exactly the reference's
        /// rows. Each case gets a schema of its own, dropped afterwards.
        #[test]
        fn holds_the_rows_the_reference_holds((shape, ops) in conformance::cases()) {
            static CASE: AtomicU32 = AtomicU32::new(0);
            let schema = format!(
                "conformance_{}_{}",
                std::process::id(),
                CASE.fetch_add(1, Ordering::Relaxed)
            );
            let db = Postgres::builder(&url()).schema(&schema).open()?;
            let shown = conformance::check(&db, "board", shape, &ops);
            let mut client = postgres::Client::connect(&url(), postgres::NoTls)?;
            client.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))?;
            let shown = shown?;
            prop_assert!(shown.is_none(), "{}", shown.unwrap_or_default());
        }
    }
}

//! Entity boards on PostgreSQL: the boards live in the entities' database,
//! so a save's board write runs in the save's own transaction
//! (`seam/ranked.rs`), under the board's advisory locks (`boards/locks.rs`).

use super::tx::Tx;
use super::Postgres;
use crate::error::Result;
use crate::seam::{Board, BoardSpec, BoardTx, BoardWrite, Kind, Storage};
use std::cell::RefCell;

/// The boards, inside one entity write transaction.
struct PgBoards<'t, 'c> {
    db: &'t Postgres,
    tx: RefCell<&'t mut Tx<'c>>,
}

impl BoardTx for PgBoards<'_, '_> {
    fn open(&self, name: &str) -> Result<Option<(i64, BoardSpec)>> {
        self.db.open_in(&mut self.tx.borrow_mut(), name)
    }

    fn with_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        let mut tx = self.tx.borrow_mut();
        // A cell of this call's own: a board's storage shares its
        // transaction through one (`PgTx` in `boards/mod.rs`).
        let tx = RefCell::new(&mut **tx);
        f(&self.db.board_tx_in_save(&tx, board))
    }
}

impl Postgres {
    /// Runs `writes` on the boards in `tx`, the entity's transaction.
    pub(super) fn write_entity_boards(
        &self,
        tx: &mut Tx<'_>,
        kind: &Kind,
        writes: &[BoardWrite],
    ) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        #[cfg(feature = "failpoints")]
        save_hooks::before_board_writes();
        let boards = PgBoards {
            db: self,
            tx: RefCell::new(tx),
        };
        kind.write_boards(&boards, writes)
    }
}

/// The switches of `__private::pg_hooks` a save reads, per thread: the
/// saving thread is the one that runs its board writes.
#[cfg(feature = "failpoints")]
pub(crate) mod save_hooks {
    use std::cell::{Cell, RefCell};

    thread_local! {
        pub(crate) static BEFORE_BOARD_WRITES: RefCell<Option<Box<dyn FnMut()>>> =
            RefCell::new(None);
        pub(crate) static UNLOCKED_LOADS: Cell<bool> = const { Cell::new(false) };
    }

    /// Runs the hook, if set; it is taken while it runs, so a write the
    /// hook makes runs none.
    pub(super) fn before_board_writes() {
        let hook = BEFORE_BOARD_WRITES.with(|h| h.borrow_mut().take());
        if let Some(mut hook) = hook {
            hook();
            BEFORE_BOARD_WRITES.with(|h| {
                h.borrow_mut().get_or_insert(hook);
            });
        }
    }

    pub(crate) fn unlocked_loads() -> bool {
        UNLOCKED_LOADS.with(Cell::get)
    }
}

//! A store's board storage held to the reference: after the same batches,
//! the store holds exactly the rows the memory storage holds (players by
//! name, both trees byte for byte), and its scans keep their promised
//! orders. Each store's unit tests run [`check`] in a proptest.
//!
//! Control, reverted: with the memory storage storing empty node vectors
//! instead of deleting them, the SQLite run failed with
//! `+ node (1, 7, A, 0): []`.

use super::diff;
use super::harness::{self, Board, Op};
use crate::ranking::policy::Rules;
use crate::ranking::{apply_updates, RankingConfig};
use crate::seam::{Board as BoardRef, BoardStore};
use proptest::prelude::*;
use std::ops::Range;

/// A board's range, branching, shards, and the scores its players draw from.
pub(crate) type Shape = (Range<i64>, u32, u32, Vec<i64>);

/// The cases a store's conformance proptest draws.
pub(crate) fn cases() -> impl Strategy<Value = (Shape, Vec<Op>)> {
    (
        harness::board_shape(),
        proptest::collection::vec(harness::op(), 1..15),
    )
}

/// Applies `ops` to a new board `name` in `store` and to a memory board;
/// the difference of their rows, if any.
pub(crate) fn check(
    store: &dyn BoardStore,
    name: &str,
    (range, branching, shards, pool): Shape,
    ops: &[Op],
) -> Result<Option<String>, TestCaseError> {
    let config = RankingConfig::new(range.clone())
        .branching(branching)
        .shards(shards);
    let id = store.create_board(name, &config.spec())?;
    let at = BoardRef { id, name };
    let board = Board::new(range, branching, shards);
    let mut oracle = harness::Oracle::default();
    for op in ops {
        harness::run(&board, &mut oracle, &pool, op)?;
        let names = op.names();
        let updates = op.updates(&names, &pool);
        store.write_board(at, &mut |st| {
            let rules = Rules::default();
            apply_updates(st, board.g(), rules, op.shard % shards, &updates, None).map(drop)
        })?;
    }
    let mut shown = None;
    store.read_board(at, &mut |st| {
        shown = board.st.read(|m| diff(st, m))?;
        Ok(())
    })?;
    Ok(shown)
}

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
#[cfg(feature = "redis")]
use crate::seam::RankKind;
use crate::seam::{Board as BoardRef, BoardStore, Placement};
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
        .node_shards(shards);
    let id = store.create_board(name, &config.as_built().spec(), Placement::Anywhere)?;
    let at = BoardRef { id, name };
    let board = Board::new(range, branching, shards);
    let mut oracle = harness::Oracle::default();
    for op in ops {
        let names = op.names();
        let updates = op.updates(&names, &pool);
        let mut alone = false;
        store.write_board(at, &mut |st| {
            let rules = Rules {
                shards,
                ..Rules::default()
            };
            let applied = apply_updates(st, board.g(), rules, op.shard % shards, &updates, None);
            alone = st.writes_alone();
            applied.map(drop)
        })?;
        // The reference folds shard rows where the store did.
        let op = Op {
            alone,
            ..op.clone()
        };
        harness::run(&board, &mut oracle, &pool, &op)?;
    }
    let mut shown = None;
    store.read_board(at, &mut |st| {
        shown = board.st.read(|m| diff(st, m))?;
        Ok(())
    })?;
    Ok(shown)
}

/// [`check`] for a board the store orders natively (no rows to compare):
/// after each op, the store's native range over the whole board is the
/// oracle's list, ranks and places included, and each player's place and
/// the counts above every pool score agree with it. The difference, if
/// any. `name` must make a native board (only Redis Cluster's are).
#[cfg(feature = "redis")]
pub(crate) fn check_native(
    store: &dyn BoardStore,
    name: &str,
    (range, branching, shards, pool): Shape,
    ops: &[Op],
) -> Result<Option<String>, TestCaseError> {
    let config = RankingConfig::new(range.clone())
        .branching(branching)
        .node_shards(shards);
    let id = store.create_board(name, &config.as_built().spec(), Placement::Anywhere)?;
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
        let want = oracle.entries();
        let mut shown = None;
        store.read_board(at, &mut |st| {
            let native = st.native().expect("a native board");
            let got = native.range(1, u64::MAX)?;
            let got: Vec<_> = got
                .iter()
                .map(|e| (e.player.as_str(), e.score, e.rank, e.dense, e.position))
                .collect();
            let expected: Vec<_> = want
                .iter()
                .map(|e| (e.player.as_str(), e.score, e.rank, e.dense, e.position))
                .collect();
            if got != expected {
                shown = Some(format!("range: got {got:?}, want {expected:?}"));
                return Ok(());
            }
            for e in &want {
                let mut seen = Vec::new();
                for kind in [RankKind::Standard, RankKind::Dense, RankKind::Ordinal] {
                    seen.push(native.rank_of(&e.player, kind)?);
                }
                if seen != [Some(e.rank), Some(e.dense), Some(e.position)] {
                    shown = Some(format!("ranks of {}: {seen:?}, want {e:?}", e.player));
                    return Ok(());
                }
            }
            if native.rank_of("nobody", RankKind::Standard)?.is_some() {
                shown = Some("a rank for a player not on the board".into());
            }
            for &score in &pool {
                let above = want.iter().filter(|e| e.score > score).count() as u64;
                let mut distinct: Vec<i64> = want
                    .iter()
                    .filter(|e| e.score > score)
                    .map(|e| e.score)
                    .collect();
                distinct.dedup();
                let got = native.above(score, true)?;
                if got != (above, distinct.len() as u64) {
                    shown = Some(format!("above {score}: {got:?}"));
                    return Ok(());
                }
            }
            if native.len()? != want.len() as u64 {
                shown = Some(format!("len {}", native.len()?));
            }
            native.check()
        })?;
        if shown.is_some() {
            return Ok(shown);
        }
    }
    Ok(None)
}

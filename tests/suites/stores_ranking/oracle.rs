//! Every query against a sorted list, on random boards and random updates
//! (a property test; its saved cases are in
//! `oracle.proptest-regressions`).

use crate::boards::{self, Boards};
use crate::policy_oracle::{range, verify, Oracle};
use autoshard::ranking::{Ranking, RankingConfig};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestRunner};

every_store_tests!(every_query_agrees_with_a_sorted_list);

#[derive(Debug, Clone)]
enum Op {
    Set(usize, usize),
    Remove(usize),
    Batch(Vec<(usize, usize)>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..12usize, 0..8usize).prop_map(|(p, s)| Op::Set(p, s)),
        2 => (0..12usize).prop_map(Op::Remove),
        2 => prop::collection::vec((0..12usize, 0..8usize), 0..12).prop_map(Op::Batch),
    ]
}

/// A board's shape plus a small pool of its scores (so players tie), always
/// including both ends of the range.
fn board_shape() -> impl Strategy<Value = (i64, i64, u32, u32, Vec<i64>)> {
    let branching = prop_oneof![2u32..=4, 5u32..=30, 31u32..=1000];
    (range(), branching, 1u32..=4).prop_flat_map(|((min, max), b, shards)| {
        let width = max.wrapping_sub(min) as u64;
        prop::collection::vec(any::<u64>(), 6).prop_map(move |raw| {
            let mut pool: Vec<i64> = raw
                .iter()
                .map(|r| min.wrapping_add((r % width) as i64))
                .collect();
            pool[0] = min;
            pool[1] = max - 1;
            (min, max, b, shards, pool)
        })
    })
}

fn every_query_agrees_with_a_sorted_list<S: Boards>() {
    let store = S::fresh();
    // Proptest's default puts saved cases beside the nearest directory with
    // a `main.rs` (`tests/proptest-regressions/oracle.txt`, shared by every
    // binary so split); they stay beside this file instead.
    let mut config = boards::runner::<S>(file!()).config().clone();
    config.failure_persistence = Some(Box::new(FileFailurePersistence::WithSource(
        "proptest-regressions",
    )));
    let mut runner = TestRunner::new(config);
    let case = std::cell::Cell::new(0);
    let strategy = (board_shape(), prop::collection::vec(op(), 1..20));
    let outcome = runner.run(&strategy, |((min, max, branching, shards, pool), ops)| {
        // One store for all cases, a board each: a PostgreSQL schema per
        // case would cost more than the case.
        case.set(case.get() + 1);
        let config = RankingConfig::new(min..max)
            .branching(branching)
            .node_shards(shards);
        let board = Ranking::create(store.db(), &format!("prop-{}", case.get()), config)?;
        let mut oracle = Oracle::default();
        let name = |p: usize| format!("player-{p}");
        let last = ops.len() - 1;
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                Op::Set(p, s) => {
                    board.set_score(&name(p), pool[s % pool.len()])?;
                    oracle.set(&name(p), pool[s % pool.len()]);
                }
                Op::Remove(p) => {
                    prop_assert_eq!(board.remove(&name(p))?, oracle.remove(&name(p)));
                }
                Op::Batch(sets) => {
                    let names: Vec<_> = sets.iter().map(|&(p, _)| name(p)).collect();
                    let batch: Vec<_> = sets
                        .iter()
                        .zip(&names)
                        .map(|(&(_, s), n)| (n.as_str(), pool[s % pool.len()]))
                        .collect();
                    board.set_scores(&batch)?;
                    oracle.set_all(&batch);
                }
            }
            // Probe every pool score plus both range ends: rank_of_score
            // needs no player there.
            if i % S::VERIFY_EVERY == 0 || i == last {
                verify(&board, &oracle, &pool)?;
            }
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{}: {e}", S::NAME);
    }
}

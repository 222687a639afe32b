//! The operations and board shapes of the composite proptest
//! (`stores_ranking_composite.rs`), and running one case against the model
//! of `composite_oracle.rs`.

use crate::composite_oracle::{report, verify, Oracle, Tuple};
use autoshard::ranking::Update;
use autoshard::ranking::{Dim, Policy, Ranking, ScoreOrder, MAX_DIMENSIONS};
use autoshard::Error;
use proptest::prelude::*;

/// A tuple as indices into each dimension's candidate values, 0..32: 30
/// and 31 name the two values outside the range (so a 4-dimension tuple is
/// refused about a quarter of the time), the rest the values inside.
pub type Pick = Vec<usize>;

#[derive(Debug, Clone)]
pub enum Op {
    Set(usize, Pick),
    Submit(usize, Pick),
    Remove(usize),
    Batch(Vec<(usize, Pick)>),
    /// Enqueued (`None`: a removal), then drained by one worker batch.
    Queue(Vec<(usize, Option<Pick>)>),
}

pub fn pick() -> impl Strategy<Value = Pick> {
    prop::collection::vec(0..32usize, MAX_DIMENSIONS)
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..8usize, pick()).prop_map(|(p, t)| Op::Set(p, t)),
        3 => (0..8usize, pick()).prop_map(|(p, t)| Op::Submit(p, t)),
        1 => (0..8usize).prop_map(Op::Remove),
        2 => prop::collection::vec((0..8usize, pick()), 0..8).prop_map(Op::Batch),
        2 => prop::collection::vec((0..8usize, prop::option::weighted(0.9, pick())), 1..8)
            .prop_map(Op::Queue),
    ]
}

/// A dimension and the values submitted in it: both ends of its range and
/// a few inside (few, so tuples tie in it and the next dimension decides),
/// and rarely one just outside.
pub fn dim(width_bits: u32) -> impl Strategy<Value = (Dim, Vec<i64>)> {
    let start = prop_oneof![
        (-50i64..50).boxed(),
        Just(i64::MIN).boxed(),
        any::<i64>().boxed(),
    ];
    let order = prop_oneof![
        Just(ScoreOrder::HigherIsBetter),
        Just(ScoreOrder::LowerIsBetter)
    ];
    (
        start,
        0..=width_bits,
        any::<u64>(),
        order,
        prop::collection::vec(any::<u64>(), 2),
    )
        .prop_map(|(start, bits, raw, order, inner)| {
            let width = 1 + raw % (1u64 << bits);
            // Shifted down where the range would pass i64::MAX.
            let min = start.min(i64::MAX.wrapping_sub(width as i64));
            let max = min.wrapping_add(width as i64);
            let mut values = vec![min, max - 1];
            values.extend(inner.iter().map(|r| min.wrapping_add((r % width) as i64)));
            values.push(values[2]);
            // Last, the two values just outside (see `tuple`).
            values.extend([min.wrapping_sub(1), max]);
            (Dim::new(min..max, order), values)
        })
}

/// 1 to 4 dimensions whose widths' product fits: mostly at most 2^60, and
/// one case in five at the limit, where encoded scores start at `i64::MIN`
/// (the whole of `i64` in one dimension, or 2^32 × (2^32 - 1)).
pub fn dims() -> impl Strategy<Value = Vec<(Dim, Vec<i64>)>> {
    let usual = (1..=MAX_DIMENSIONS).prop_flat_map(|n| {
        let bits = match n {
            1 => 60,
            2 => 30,
            _ => 3,
        };
        prop::collection::vec(dim(bits), n)
    });
    prop_oneof![4 => usual, 1 => widest()]
}

pub fn widest() -> impl Strategy<Value = Vec<(Dim, Vec<i64>)>> {
    let order = || {
        prop_oneof![
            Just(ScoreOrder::HigherIsBetter),
            Just(ScoreOrder::LowerIsBetter)
        ]
    };
    let inside = || prop::collection::vec(any::<u64>(), 2);
    let whole = (order(), inside()).prop_map(|(o, r)| {
        let r: Vec<i64> = r.into_iter().map(|r| r as i64).collect();
        vec![(
            Dim::new(i64::MIN..i64::MAX, o),
            // i64::MAX is outside, twice (`tuple` wants two).
            vec![i64::MIN, i64::MAX - 1, r[0], r[1], r[0], i64::MAX, i64::MAX],
        )]
    });
    let start = || -(1i64 << 40)..(1i64 << 40);
    let two = (start(), start(), order(), order(), inside(), inside()).prop_map(
        |(a, b, oa, ob, ra, rb)| {
            [(a, 1u64 << 32, oa, ra), (b, (1u64 << 32) - 1, ob, rb)]
                .into_iter()
                .map(|(min, width, o, r)| {
                    let max = min + width as i64;
                    let mut values = vec![min, max - 1];
                    values.extend(r.iter().map(|r| min + (r % width) as i64));
                    values.extend([values[2], min - 1, max]);
                    (Dim::new(min..max, o), values)
                })
                .collect()
        },
    );
    prop_oneof![whole, two]
}

pub fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::Replace),
        Just(Policy::Best),
        Just(Policy::Worst)
    ]
}

/// The candidate tuple a pick names; a dimension's values end with the two
/// outside its range.
pub fn tuple(dims: &[(Dim, Vec<i64>)], pick: &[usize]) -> Tuple {
    dims.iter()
        .zip(pick)
        .map(|((_, values), &i)| {
            let inside = values.len() - 2;
            match i % 32 {
                30 | 31 => values[inside + i % 32 - 30],
                i => values[i % inside],
            }
        })
        .collect()
}

pub fn refused<T: std::fmt::Debug>(r: autoshard::Result<T>) -> Result<(), TestCaseError> {
    match r {
        Err(Error::DimensionOutOfRange { .. }) => Ok(()),
        other => Err(TestCaseError::fail(format!("{other:?}"))),
    }
}

/// Runs `ops` on `board` (of `dims`) and on `oracle` (of the same
/// dimensions, except in the control), checking every query every
/// `verify_every` operations and after the last.
pub fn run_case(
    board: &Ranking,
    mut oracle: Oracle,
    dims: &[(Dim, Vec<i64>)],
    ops: Vec<Op>,
    verify_every: usize,
) -> Result<(), TestCaseError> {
    let name = |p: usize| format!("player-{p}");
    // Every accepted tuple of the first candidates, for `rank_of_dims`.
    let probes: Vec<Tuple> = (0..6)
        .map(|i| tuple(dims, &[i, (i + 1) % 6, (i + 2) % 6, i]))
        .filter(|t| oracle.accepts(t))
        .collect();
    let last = ops.len() - 1;
    for (i, op) in ops.into_iter().enumerate() {
        match op {
            Op::Set(p, pick) => {
                let t = tuple(dims, &pick);
                match oracle.accepts(&t) {
                    true => {
                        board.write(Update::dims(&name(p), &t))?;
                        oracle.batch(&[(&name(p), Some(t))]);
                    }
                    false => refused(board.write(Update::dims(&name(p), &t)))?,
                }
            }
            Op::Submit(p, pick) => {
                let t = tuple(dims, &pick);
                match oracle.accepts(&t) {
                    true => {
                        let done = report(board, board.submit_update(Update::dims(&name(p), &t))?)?;
                        prop_assert_eq!(done, oracle.submit(&name(p), &t));
                    }
                    false => refused(board.submit_update(Update::dims(&name(p), &t)))?,
                }
            }
            Op::Remove(p) => prop_assert_eq!(board.remove(&name(p))?, oracle.remove(&name(p))),
            Op::Batch(sets) => {
                let batch: Vec<(String, Tuple)> = sets
                    .iter()
                    .map(|(p, pick)| (name(*p), tuple(dims, pick)))
                    .collect();
                let refs: Vec<(&str, &[i64])> = batch
                    .iter()
                    .map(|(p, t)| (p.as_str(), t.as_slice()))
                    .collect();
                match batch.iter().all(|(_, t)| oracle.accepts(t)) {
                    true => {
                        board.set_dims_batch(&refs)?;
                        let updates: Vec<_> = batch
                            .iter()
                            .map(|(p, t)| (p.as_str(), Some(t.clone())))
                            .collect();
                        oracle.batch(&updates);
                    }
                    false => refused(board.set_dims_batch(&refs))?,
                }
            }
            Op::Queue(updates) => {
                let mut queued = Vec::new();
                for (p, pick) in updates {
                    let t = pick.map(|pick| tuple(dims, &pick));
                    let done = match &t {
                        Some(t) => board.enqueue_update(Update::dims(&name(p), t)),
                        None => board.enqueue_remove(&name(p)),
                    };
                    match &t {
                        Some(t) if !oracle.accepts(t) => refused(done)?,
                        _ => {
                            done?;
                            queued.push((name(p), t));
                        }
                    }
                }
                let stats = board.worker().batch_size(100).drain()?;
                prop_assert_eq!(stats.updates, queued.len() as u64);
                let refs: Vec<_> = queued
                    .iter()
                    .map(|(p, t)| (p.as_str(), t.clone()))
                    .collect();
                oracle.batch(&refs);
            }
        }
        if i % verify_every == 0 || i == last {
            verify(board, &oracle, &probes)?;
        }
    }
    Ok(())
}

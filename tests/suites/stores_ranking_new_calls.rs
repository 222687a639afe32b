//! Issue 21's six new calls against the brute-force oracle
//! (`common/policy_oracle.rs`), written once and
//! run on SQLite, PostgreSQL and Redis Cluster: random operation sequences
//! mixing the old writes with `remove_data`, `remove_between`, `keep_top`
//! and a queue drained by a worker that keeps the board trimmed
//! (`BoardWorker::keep_top`), on every shape (1, 2 and 4 trees; plain or
//! composite scores; higher or lower is better; every policy), every query
//! (the new reads `entry`, `count_between`, `between`, `percentile`,
//! `score_at_percentile`, `page_number`, `page_count` too) checked after
//! each step.
//!
//! Control (kept as a test, `an_off_by_one_oracle_fails`): the same case
//! runner with the oracle keeping one player too many on `keep_top` fails.

use autoshard::ranking::Update;
use autoshard::ranking::{Dim, Policy, Ranking, RankingConfig, ScoreOrder};
use autoshard::Error;
use proptest::prelude::*;

use crate::boards;
use crate::policy_oracle;
use boards::Boards;
use policy_oracle::{order, policy, verify, Oracle};

every_store_tests!(
    new_calls_agree_with_the_oracle_on_every_shape,
    trims_span_several_batches,
    bad_input_is_a_typed_error,
    a_trim_beside_a_writer_keeps_what_left_the_range,
);

const TREES: [u32; 3] = [1, 2, 4];
const DATA: [&[u8]; 3] = [b"", b"e1", b"effort-8"];
const PLAYERS: usize = 10;

#[derive(Debug, Clone)]
enum Op {
    Set(usize, usize),
    SubmitWith(usize, usize, usize),
    Remove(usize),
    Batch(Vec<(usize, usize)>),
    RemoveData(usize),
    /// Two indices into the shape's range ends (sorted before the call).
    RemoveBetween(usize, usize),
    KeepTop(u64),
    /// Enqueued, then drained by a worker, trimming to `Some(n)`.
    Queue(Vec<(usize, Option<usize>)>, Option<u64>),
}

fn op() -> impl Strategy<Value = Op> {
    let pair = (0..PLAYERS, 0..12usize);
    prop_oneof![
        3 => pair.clone().prop_map(|(p, v)| Op::Set(p, v)),
        2 => (pair.clone(), 0..DATA.len()).prop_map(|((p, v), d)| Op::SubmitWith(p, v, d)),
        1 => (0..PLAYERS).prop_map(Op::Remove),
        2 => prop::collection::vec(pair, 0..10).prop_map(Op::Batch),
        2 => (0..PLAYERS).prop_map(Op::RemoveData),
        2 => (0..16usize, 0..16usize).prop_map(|(a, b)| Op::RemoveBetween(a, b)),
        2 => (1u64..8).prop_map(Op::KeepTop),
        1 => (
            prop::collection::vec((0..PLAYERS, prop::option::weighted(0.9, 0..12usize)), 1..8),
            prop::option::of(1u64..6),
        )
            .prop_map(|(u, n)| Op::Queue(u, n)),
    ]
}

/// A board's shape, the values its players submit, and the ends
/// `remove_between` draws its ranges from.
#[derive(Debug, Clone)]
struct Shape {
    trees: u32,
    composite: bool,
    policy: Policy,
    order: ScoreOrder,
    min: i64,
    max: i64,
    values: Vec<i64>,
    ends: Vec<i64>,
}

impl Shape {
    fn config(&self) -> RankingConfig {
        let config = if self.composite {
            RankingConfig::dimensions([Dim::higher(0..4), Dim::lower(0..3)])
        } else {
            RankingConfig::new(self.min..self.max)
                .branching(3)
                .order(self.order)
        };
        config.policy(self.policy).entry_data(8).trees(self.trees)
    }
}

fn shape() -> impl Strategy<Value = Shape> {
    let bounds = prop_oneof![
        Just((0i64, 12i64)),
        (-50i64..50).prop_map(|m| (m, m + 12)),
        Just((i64::MIN, i64::MIN + 12)),
        Just((i64::MAX - 12, i64::MAX)),
    ];
    let trees = prop::sample::select(&TREES[..]);
    (trees, any::<bool>(), policy(), order(), bounds).prop_map(
        |(trees, composite, p, o, (min, max))| {
            let values: Vec<i64> = (min..max).collect();
            let mut ends = values.clone();
            ends.extend([min.wrapping_sub(1), max, i64::MIN, i64::MAX]);
            Shape {
                trees,
                composite,
                // A composite board takes no increments.
                policy: if composite && p == Policy::Increment {
                    Policy::Replace
                } else {
                    p
                },
                order: if composite {
                    ScoreOrder::HigherIsBetter
                } else {
                    o
                },
                min,
                max,
                values,
                ends,
            }
        },
    )
}

/// How the oracle is told about `keep_top`: right, or (the control)
/// keeping one player too many.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Control {
    None,
    OffByOne,
}

fn out_of_range<T: std::fmt::Debug>(r: autoshard::Result<T>) -> Result<(), TestCaseError> {
    match r {
        Err(Error::ScoreOutOfRange { .. }) => Ok(()),
        other => Err(TestCaseError::fail(format!("{other:?}"))),
    }
}

/// Runs `ops` on a new board of `shape` called `name` beside the oracle,
/// checking every query after every step.
fn run_case(
    db: &impl autoshard::ranking::RankingStore,
    name: &str,
    shape: &Shape,
    ops: &[Op],
    (control, every): (Control, usize),
) -> Result<(), TestCaseError> {
    let board = Ranking::create(db, name, shape.config())?;
    let mut values = shape.values.clone();
    let mut ends = shape.ends.clone();
    let (mut min, mut max) = (shape.min, shape.max);
    if shape.composite {
        // Every tuple of the two dimensions, and the encoded range's ends.
        values = (0..4)
            .flat_map(|a| (0..3).map(move |b| [a, b]))
            .map(|t| board.encode(&t).unwrap())
            .collect();
        values.sort_unstable();
        (min, max) = (values[0], values[values.len() - 1] + 1);
        ends = values.clone();
        ends.extend([min - 1, max, i64::MIN, i64::MAX]);
    }
    let mut oracle = Oracle::new(shape.policy, shape.order, min, max);
    let player = |p: usize| format!("player-{p}");
    let value = |v: usize| values[v % values.len()];
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Set(p, v) => {
                let refused = oracle.batch(&[(&player(*p), Some(value(*v)))], false);
                let done = board.set_score(&player(*p), value(*v));
                match refused.is_empty() {
                    true => done?,
                    false => out_of_range(done)?,
                }
            }
            Op::SubmitWith(p, v, d) => {
                let done =
                    board.submit_update(Update::score(&player(*p), value(*v)).with_data(DATA[*d]));
                match oracle.submit_with(&player(*p), value(*v), DATA[*d]) {
                    Some(_) => drop(done?),
                    None => out_of_range(done)?,
                }
            }
            Op::Remove(p) => {
                prop_assert_eq!(board.remove(&player(*p))?, oracle.remove(&player(*p)));
            }
            Op::Batch(sets) => {
                let names: Vec<String> = sets.iter().map(|&(p, _)| player(p)).collect();
                let batch: Vec<(&str, i64)> = names
                    .iter()
                    .zip(sets)
                    .map(|(n, &(_, v))| (n.as_str(), value(v)))
                    .collect();
                let updates: Vec<_> = batch.iter().map(|&(p, v)| (p, Some(v))).collect();
                let mut trial = oracle.clone();
                // A refused batch is atomic per tree only: not sent then.
                if trial.batch(&updates, false).is_empty() {
                    board.set_scores(&batch)?;
                    oracle = trial;
                }
            }
            Op::RemoveData(p) => {
                let want = oracle.remove_data(&player(*p));
                prop_assert_eq!(board.remove_data(&player(*p))?, want, "remove_data");
            }
            Op::RemoveBetween(a, b) => {
                let (x, y) = (ends[a % ends.len()], ends[b % ends.len()]);
                let (lo, hi) = (x.min(y), x.max(y));
                let want = oracle.remove_between(lo, hi);
                prop_assert_eq!(
                    board.remove_between(lo..=hi)?,
                    want,
                    "remove_between({}..={})",
                    lo,
                    hi
                );
            }
            Op::KeepTop(n) => {
                let want = match control {
                    Control::None => oracle.keep_top(*n),
                    Control::OffByOne => oracle.keep_top(*n + 1),
                };
                prop_assert_eq!(board.keep_top(*n)?, want, "keep_top({})", n);
            }
            Op::Queue(updates, trim) => {
                queue(&board, &mut oracle, updates, *trim, &player, &value)?
            }
        }
        // Every `every` steps and after the last (the store's pace, as
        // `Boards::VERIFY_EVERY` sets it): every read, the new ones too
        // (`verify` ends with `verify_issue_21_reads`), and the score
        // ranges across and past the board's ends that trims are given.
        if i % every == 0 || i == ops.len() - 1 {
            verify(&board, &oracle, &values)?;
            verify_ranges(&board, &oracle, &ends)?;
        }
    }
    Ok(())
}

/// `count_between` and `between` on ranges between any two of `ends`
/// (every third as the low end), some past the board's ends.
fn verify_ranges(board: &Ranking, oracle: &Oracle, ends: &[i64]) -> Result<(), TestCaseError> {
    for &lo in ends.iter().step_by(3) {
        for &hi in ends.iter().filter(|&&hi| hi >= lo) {
            let count = board.count_between(lo..=hi)?;
            prop_assert_eq!(count, oracle.count_between(lo..=hi), "{}..={}", lo, hi);
            let got = board.between(lo..=hi, 2)?;
            prop_assert_eq!(
                got,
                oracle.between(lo..=hi, 2),
                "between({}..={}, 2)",
                lo,
                hi
            );
        }
    }
    Ok(())
}

/// Enqueues `updates` and drains them tree by tree (one batch each), the
/// worker keeping each tree it applied to at its top `trim`; refused
/// increments become dead letters.
fn queue(
    board: &Ranking,
    oracle: &mut Oracle,
    updates: &[(usize, Option<usize>)],
    trim: Option<u64>,
    player: &dyn Fn(usize) -> String,
    value: &dyn Fn(usize) -> i64,
) -> Result<(), TestCaseError> {
    let k = board.config().trees() as usize;
    let mut per_tree = vec![Vec::new(); k];
    for &(p, v) in updates {
        let (name, v) = (player(p), v.map(value));
        match v {
            Some(v) => board.enqueue(&name, v)?,
            None => board.enqueue_remove(&name)?,
        }
        per_tree[board.tree_of(&name) as usize].push((name, v));
    }
    let mut worker = board.worker().batch_size(100);
    if let Some(n) = trim {
        worker = worker.keep_top(n);
    }
    let stats = worker.drain()?;
    let mut trimmed = 0;
    for (t, queued) in per_tree.iter().enumerate() {
        let as_refs: Vec<_> = queued.iter().map(|(p, v)| (p.as_str(), *v)).collect();
        let refused = oracle.batch(&as_refs, true);
        let (Some(n), true) = (trim, refused.len() < queued.len()) else {
            continue;
        };
        // The tree's worker keeps its tree's top n: the board's order,
        // restricted to the tree.
        let below: Vec<String> = oracle
            .entries()
            .into_iter()
            .filter(|e| board.tree_of(&e.player) as usize == t)
            .skip(n as usize)
            .map(|e| e.player)
            .collect();
        trimmed += below.len() as u64;
        below.iter().for_each(|p| {
            oracle.remove(p);
        });
    }
    prop_assert_eq!(stats.trimmed, trimmed, "trimmed by the worker");
    Ok(())
}

fn new_calls_agree_with_the_oracle_on_every_shape<S: Boards>() {
    let store = S::fresh();
    // Batches of 4 players: a trim of the suite's 10 crosses batches.
    autoshard::__private::trim_hooks::batch(4);
    let mut runner = boards::runner::<S>(file!());
    let case = std::cell::Cell::new(0);
    let strategy = (shape(), prop::collection::vec(op(), 1..10));
    let outcome = runner.run(&strategy, |(shape, ops)| {
        case.set(case.get() + 1);
        let name = format!("new-calls-{}", case.get());
        run_case(
            store.db(),
            &name,
            &shape,
            &ops,
            (Control::None, S::VERIFY_EVERY),
        )
    });
    if let Err(e) = outcome {
        panic!("{}: {e}", S::NAME);
    }
}

/// The control: `keep_top(1)` of three players, told to the oracle as
/// `keep_top(2)`, fails; told right, passes.
#[test]
fn an_off_by_one_oracle_fails() {
    let db = autoshard::Sqlite::memory().unwrap();
    let shape = Shape {
        trees: 2,
        composite: false,
        policy: Policy::Replace,
        order: ScoreOrder::LowerIsBetter,
        min: 0,
        max: 12,
        values: (0..12).collect(),
        ends: (0..12).collect(),
    };
    let ops = [Op::Set(0, 3), Op::Set(1, 5), Op::Set(2, 7), Op::KeepTop(1)];
    run_case(&db, "right", &shape, &ops, (Control::None, 1)).unwrap();
    let wrong = run_case(&db, "off-by-one", &shape, &ops, (Control::OffByOne, 1));
    let message = format!("{:?}", wrong.expect_err("the control must fail"));
    assert!(message.contains("keep_top(1)"), "{message}");
}

/// Trims of this suite's threads remove at most this many players per
/// batch (`__private::trim_hooks`), so a few hundred players cross batches.
const BATCH: u64 = 64;

/// More players than one batch removes: the batches go on until the range
/// (or everything below the top n) is empty, on one tree and on three (each
/// tree over several batches too).
fn trims_span_several_batches<S: Boards>() {
    let store = S::fresh();
    autoshard::__private::trim_hooks::batch(BATCH);
    let n = 8 * BATCH as usize;
    let names: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
    for k in [1, 3] {
        let config = RankingConfig::new(0..10_000).branching(16).trees(k);
        let board = Ranking::create(store.db(), &format!("many-{k}"), config).unwrap();
        let scores: Vec<(&str, i64)> = names
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_str(), (i * 7 % 5_000) as i64))
            .collect();
        board.set_scores(&scores).unwrap();
        let mut oracle = Oracle::new(Policy::Replace, ScoreOrder::HigherIsBetter, 0, 10_000);
        oracle.set_all(&scores);
        let want = oracle.remove_between(100, 4_000);
        assert!(
            want > 2 * BATCH * u64::from(k),
            "{want}: several batches per tree"
        );
        assert_eq!(board.remove_between(100..=4_000).unwrap(), want);
        assert_eq!(board.keep_top(7).unwrap(), oracle.keep_top(7));
        let top: Vec<_> = board.top(100).unwrap();
        assert_eq!(top, oracle.entries(), "{}: k = {k}", S::NAME);
        board.check_integrity().unwrap();
    }
}

fn bad_input_is_a_typed_error<S: Boards>() {
    let store = S::fresh();
    for k in [1, 2] {
        let config = RankingConfig::new(0..100).trees(k);
        let board = Ranking::create(store.db(), &format!("bad-{k}"), config).unwrap();
        board.set_score("ann", 5).unwrap();
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = board.remove_between(9..=8);
        assert!(
            matches!(reversed, Err(Error::InvalidRanking { .. })),
            "{reversed:?}"
        );
        assert!(matches!(
            board.keep_top(0),
            Err(Error::InvalidRanking { .. })
        ));
        assert!(matches!(
            board.remove_data(""),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            board.remove_data("a\0b"),
            Err(Error::InvalidName { .. })
        ));
        board.enqueue("bo", 7).unwrap();
        let worker = board.worker().keep_top(0).drain();
        assert!(
            matches!(worker, Err(Error::InvalidRanking { .. })),
            "{worker:?}"
        );
        assert_eq!(board.queued().unwrap(), 1, "the worker applied nothing");
        board.enqueue_remove("bo").unwrap();
        board.worker().drain().unwrap();
        assert_eq!(board.len().unwrap(), 1, "nothing removed on error");
        // Ranges past the board's ends hold nobody but are no error.
        assert_eq!(board.remove_between(i64::MIN..=-1).unwrap(), 0);
        assert_eq!(board.keep_top(u64::MAX).unwrap(), 0);
        assert_eq!(board.remove_between(i64::MIN..=i64::MAX).unwrap(), 1);
    }
    // Approximate boards (SQLite and PostgreSQL) refuse the trims.
    let approx = RankingConfig::new(0..100).approximate(10);
    if let Ok(board) = Ranking::create(store.db(), "approx", approx) {
        let refused = board.keep_top(3);
        assert!(
            matches!(refused, Err(Error::ApproximateBoard { .. })),
            "{refused:?}"
        );
        let refused = board.remove_between(1..=2);
        assert!(
            matches!(refused, Err(Error::ApproximateBoard { .. })),
            "{refused:?}"
        );
    }
}

/// Players below `RANGE_END` at the start are trimmed by
/// `remove_between(0..=RANGE_END - 1)` while a writer thread moves some of
/// them out of the range (and adds others, never into it). Whatever the
/// interleaving: everyone the writer moved or added is on the board at
/// their new score, every other player of the range is gone, and nobody
/// outside it was touched.
const RANGE_END: i64 = 1_000;

fn a_trim_beside_a_writer_keeps_what_left_the_range<S: Boards>() {
    let store = S::fresh();
    autoshard::__private::trim_hooks::batch(BATCH);
    let n = 10 * BATCH as usize;
    for k in [1, 2] {
        let config = RankingConfig::new(0..10_000).branching(16).trees(k);
        let board = Ranking::create(store.db(), &format!("writer-{k}"), config).unwrap();
        let inside: Vec<String> = (0..n).map(|i| format!("in{i}")).collect();
        let outside: Vec<String> = (0..50).map(|i| format!("out{i}")).collect();
        let mut start: Vec<(&str, i64)> = inside
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_str(), (i as i64 * 13) % RANGE_END))
            .collect();
        start.extend(outside.iter().map(|p| (p.as_str(), 5_000)));
        board.set_scores(&start).unwrap();
        // Every 5th player of the range leaves it, one write at a time,
        // from the last (the trim's first batches) back; new players
        // arrive above it.
        let moved: Vec<(String, i64)> = inside
            .iter()
            .rev()
            .step_by(5)
            .enumerate()
            .map(|(i, p)| (p.clone(), RANGE_END + i as i64))
            .collect();
        let removed = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                for (i, (p, score)) in moved.iter().enumerate() {
                    board.set_score(p, *score).unwrap();
                    board.set_score(&format!("new{i}"), 9_000).unwrap();
                }
            });
            let removed = board.remove_between(0..=RANGE_END - 1).unwrap();
            writer.join().unwrap();
            removed
        });
        check_after_trim(&board, &moved, outside.len())
            .unwrap_or_else(|e| panic!("{}: k = {k}: {e}", S::NAME));
        // Moved players removed before the writer reached them count as
        // removed; the rest of the range is gone either way.
        assert!(removed >= (n - moved.len()) as u64, "{removed}");
        assert!(removed <= n as u64, "{removed}");
        board.check_integrity().unwrap();
    }
}

/// What `a_trim_beside_a_writer_keeps_what_left_the_range` asserts.
fn check_after_trim(
    board: &Ranking,
    moved: &[(String, i64)],
    outside: usize,
) -> Result<(), String> {
    for (p, score) in moved {
        let got = board.score(p).map_err(|e| e.to_string())?;
        if got != Some(*score) {
            return Err(format!("{p} moved to {score}, the board says {got:?}"));
        }
    }
    let left = board
        .count_between(0..=RANGE_END - 1)
        .map_err(|e| e.to_string())?;
    let len = board.len().map_err(|e| e.to_string())?;
    let want = (outside + 2 * moved.len()) as u64;
    match (left, len) {
        (0, len) if len == want => Ok(()),
        _ => Err(format!(
            "{left} left in the range, {len} on the board, not 0 and {want}"
        )),
    }
}

/// Control: a trim that lists the range and then removes the list (no
/// re-check once the rows are locked) removes a player the writer moved
/// out of the range in between, and the check above fails.
#[test]
fn a_trim_from_a_stale_list_fails_the_check() {
    let db = autoshard::Sqlite::memory().unwrap();
    let board = Ranking::create(&db, "stale", RankingConfig::new(0..10_000)).unwrap();
    board
        .set_scores(&[("in0", 5), ("in1", 6), ("out0", 5_000)])
        .unwrap();
    let listed = board.between(0..=RANGE_END - 1, u64::MAX).unwrap();
    board.set_score("in1", RANGE_END).unwrap(); // the writer, in between
    board.set_score("new0", 9_000).unwrap();
    for e in &listed {
        board.remove(&e.player).unwrap();
    }
    let moved = [("in1".to_owned(), RANGE_END)];
    let failed = check_after_trim(&board, &moved, 1).expect_err("the stale trim must fail");
    assert!(failed.contains("in1 moved to 1000"), "{failed}");
}

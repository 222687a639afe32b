//! Boards split into trees (`RankingConfig::trees`, issue 13 item 2)
//! against the brute-force oracle (`common/policy_oracle.rs`), written once
//! and run on SQLite (a file per tree), PostgreSQL and Redis Cluster (a
//! slot per tree): k = 1, 2 and 4 trees,
//! every policy × both orders, every query under every tie rule, through
//! direct writes, `submit` and the queue; the Code Jam and Redis tie
//! examples on 1, 2 and 4 trees; how the tree count is stored.
//!
//! Control (kept as a test, `a_merge_that_concatenates_trees_fails_the_oracle`):
//! with the merge ordering ties tree after tree instead of by who reached
//! the score first (`__private::tree_hooks::concatenate_ties`), the Redis
//! tie example on 2 and 4 trees fails. Control, reverted: with the dense
//! rank taken as the sum of the trees' distinct counts (`union_under`
//! returning the sum of `b[c]` over the trees holding players), the
//! proptest failed at once on SQLite (a dense rank one too high, a score
//! held in two trees counted twice).

use autoshard::ranking::Update;
use autoshard::ranking::{Policy, Ranking, RankingConfig, Submission, Tie};
use autoshard::Error;
use proptest::prelude::*;

use crate::boards;
use crate::policy_oracle;
use boards::Boards;
use policy_oracle::{order, policy, range, verify, Oracle, Report};

every_store_tests!(
    every_query_agrees_with_the_oracle_on_1_2_4_trees,
    code_jam_example_on_1_2_4_trees,
    redis_tie_example_on_1_2_4_trees,
    a_merge_that_concatenates_trees_fails_the_oracle,
    the_tree_count_is_stored_and_checked,
    queued_updates_drain_through_one_worker_per_tree,
    every_read_merges_the_trees,
);

const TREES: [u32; 3] = [1, 2, 4];

fn report(s: Submission) -> Report {
    (s.old_score, s.new_score, s.old_rank, s.new_rank, s.new_best)
}

fn out_of_range<T: std::fmt::Debug>(r: autoshard::Result<T>) -> Result<(), TestCaseError> {
    match r {
        Err(Error::ScoreOutOfRange { .. }) => Ok(()),
        other => Err(TestCaseError::fail(format!("{other:?}"))),
    }
}

// ------------------------------------------------------------ proptest

#[derive(Debug, Clone)]
enum Op {
    Set(usize, usize),
    Submit(usize, usize, Option<usize>),
    Remove(usize),
    Batch(Vec<(usize, usize)>),
    /// Enqueued (`None`: a removal), then drained tree by tree.
    Queue(Vec<(usize, Option<usize>)>),
}

const DATA: [&[u8]; 3] = [b"", b"e1", b"effort-8"];

fn op() -> impl Strategy<Value = Op> {
    let pair = (0..10usize, 0..12usize);
    prop_oneof![
        3 => pair.clone().prop_map(|(p, v)| Op::Set(p, v)),
        2 => (pair.clone(), prop::option::of(0..DATA.len()))
            .prop_map(|((p, v), d)| Op::Submit(p, v, d)),
        1 => (0..10usize).prop_map(Op::Remove),
        2 => prop::collection::vec(pair, 0..10).prop_map(Op::Batch),
        1 => prop::collection::vec((0..10usize, prop::option::weighted(0.9, 0..12usize)), 1..8)
            .prop_map(Op::Queue),
    ]
}

/// A board's shape (trees, range, branching, shards) and the values its
/// players submit: few scores of the range (so players tie, in several
/// trees), both ends, one on each side, and steps for increments.
fn board_shape() -> impl Strategy<Value = (u32, i64, i64, u32, u32, Vec<i64>)> {
    let branching = prop_oneof![2u32..=4, 5u32..=40];
    let trees = prop::sample::select(&TREES[..]);
    (trees, range(), branching, 1u32..=3).prop_flat_map(|(k, (min, max), b, shards)| {
        let width = max.wrapping_sub(min) as u64;
        prop::collection::vec(any::<u64>(), 4).prop_map(move |raw| {
            let mut scores: Vec<i64> = raw
                .iter()
                .map(|r| min.wrapping_add((r % width) as i64))
                .collect();
            scores[0] = min;
            scores[1] = max - 1;
            let mut values = scores.clone();
            values.extend([max, min.wrapping_sub(1)]);
            values.extend([scores[2].wrapping_sub(scores[3]), 1, -1]);
            (k, min, max, b, shards, values)
        })
    })
}

fn every_query_agrees_with_the_oracle_on_1_2_4_trees<S: Boards>() {
    let store = S::fresh();
    // Half the store's usual cases: a split board's query reads k trees,
    // and the suite must stay within its share of the CI time.
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: (S::CASES / 2).max(2),
        source_file: Some(file!()),
        ..proptest::test_runner::Config::default()
    });
    let case = std::cell::Cell::new(0);
    let strategy = (
        (policy(), order()),
        board_shape(),
        prop::collection::vec(op(), 1..12),
    );
    let outcome = runner.run(&strategy, |((policy, order), shape, ops)| {
        let (k, min, max, branching, shards, values) = shape;
        case.set(case.get() + 1);
        let config = RankingConfig::new(min..max)
            .branching(branching)
            .node_shards(shards)
            .policy(policy)
            .order(order)
            .entry_data(8)
            .trees(k);
        let board = Ranking::create(store.db(), &format!("prop-{}", case.get()), config)?;
        let mut oracle = Oracle::new(policy, order, min, max);
        let name = |p: usize| format!("player-{p}");
        let value = |v: usize| values[v % values.len()];
        let probes: Vec<i64> = values
            .iter()
            .copied()
            .filter(|s| (min..max).contains(s))
            .collect();
        let last = ops.len() - 1;
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                Op::Set(p, v) => {
                    let refused = oracle.batch(&[(&name(p), Some(value(v)))], false);
                    let done = board.set_score(&name(p), value(v));
                    match refused.is_empty() {
                        true => done?,
                        false => out_of_range(done)?,
                    }
                }
                Op::Submit(p, v, data) => {
                    let (player, value) = (name(p), value(v));
                    let (done, want) = match data {
                        None => (board.submit(&player, value), oracle.submit(&player, value)),
                        Some(d) => (
                            board.submit_update(Update::score(&player, value).with_data(DATA[d])),
                            oracle.submit_with(&player, value, DATA[d]),
                        ),
                    };
                    match want {
                        Some(want) => prop_assert_eq!(report(done?), want),
                        None => out_of_range(done)?,
                    }
                }
                Op::Remove(p) => {
                    prop_assert_eq!(board.remove(&name(p))?, oracle.remove(&name(p)));
                }
                Op::Batch(sets) => {
                    let names: Vec<_> = sets.iter().map(|&(p, _)| name(p)).collect();
                    let batch: Vec<_> = names
                        .iter()
                        .zip(&sets)
                        .map(|(n, &(_, v))| (n.as_str(), value(v)))
                        .collect();
                    let updates: Vec<_> = batch.iter().map(|&(p, v)| (p, Some(v))).collect();
                    let mut trial = oracle.clone();
                    match trial.batch(&updates, false).is_empty() {
                        true => {
                            board.set_scores(&batch)?;
                            oracle = trial;
                        }
                        // A refused batch writes nothing on one tree; on a
                        // split board it is atomic per tree only (see
                        // `Ranking::set_scores`), so it is not sent there.
                        false if k == 1 => out_of_range(board.set_scores(&batch))?,
                        false => {}
                    }
                }
                Op::Queue(updates) => queue(&board, &mut oracle, &updates, &name, &value)?,
            }
            if i % S::VERIFY_EVERY == 0 || i == last {
                verify(&board, &oracle, &probes)?;
            }
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{}: {e}", S::NAME);
    }
}

/// Enqueues `updates` and drains them: one batch per tree, tree after tree
/// (`BoardWorker::drain`), each in queue order, so the oracle replays them tree
/// by tree; refused increments become dead letters, tree after tree.
fn queue(
    board: &Ranking,
    oracle: &mut Oracle,
    updates: &[(usize, Option<usize>)],
    name: &dyn Fn(usize) -> String,
    value: &dyn Fn(usize) -> i64,
) -> Result<(), TestCaseError> {
    let k = board.config().trees();
    let mut per_tree = vec![Vec::new(); k as usize];
    for &(p, v) in updates {
        let (player, v) = (name(p), v.map(value));
        let enqueued = match v {
            Some(v) => board.enqueue(&player, v),
            None => board.enqueue_remove(&player),
        };
        let refusable = oracle.policy != Policy::Increment;
        match v {
            Some(v) if refusable && !(oracle.min..oracle.max).contains(&v) => {
                out_of_range(enqueued)?
            }
            _ => {
                enqueued?;
                per_tree[board.tree_of(&player) as usize].push((player, v));
            }
        }
    }
    let seen: std::collections::HashSet<i64> = board.dead_letters()?.iter().map(|l| l.id).collect();
    let stats = board.worker().batch_size(100).drain()?;
    let mut want = Vec::new();
    for queued in &per_tree {
        let as_refs: Vec<_> = queued.iter().map(|(p, v)| (p.as_str(), *v)).collect();
        let refused = oracle.batch(&as_refs, true);
        want.extend(refused.iter().map(|&i| queued[i].clone()));
    }
    let total: usize = per_tree.iter().map(Vec::len).sum();
    prop_assert_eq!(stats.updates, (total - want.len()) as u64);
    // A split board's dead letter ids are `id * k + tree`: the new ones
    // tree after tree, each tree's in order.
    let mut letters = board.dead_letters()?;
    letters.retain(|l| !seen.contains(&l.id));
    letters.sort_by_key(|l| (l.id % i64::from(k), l.id / i64::from(k)));
    let letters: Vec<_> = letters.into_iter().map(|l| (l.player, l.score)).collect();
    prop_assert_eq!(letters, want);
    Ok(())
}

// --------------------------------------------------------- named tests

/// The article's figure 5 (22 players above 30), on 1, 2 and 4 trees.
fn code_jam_example_on_1_2_4_trees<S: Boards>() {
    let store = S::fresh();
    for k in TREES {
        let config = RankingConfig::new(0..81).branching(3).trees(k);
        let board = Ranking::create(store.db(), &format!("codejam-{k}"), config).unwrap();
        let above = [31, 32, 33, 34, 35, 36, 40, 44, 44, 45, 50, 53]
            .into_iter()
            .chain([54, 60, 61, 70, 72, 75, 78, 79, 80, 80]);
        let mut players: Vec<(String, i64)> = above
            .enumerate()
            .map(|(i, s)| (format!("a{i}"), s))
            .collect();
        players.extend((0..10).map(|i| (format!("b{i}"), i * 3)));
        players.push(("me".into(), 30));
        players.push(("tied".into(), 30));
        let batch: Vec<_> = players.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        board.set_scores(&batch).unwrap();
        assert_eq!(board.rank_of_score(30).unwrap(), 23, "k = {k}");
        assert_eq!(board.rank("me", Tie::Standard).unwrap(), Some(23));
        assert_eq!(board.rank("tied", Tie::Standard).unwrap(), Some(23));
        assert_eq!(board.rank("me", Tie::Ordinal).unwrap(), Some(23));
        assert_eq!(board.rank("tied", Tie::Ordinal).unwrap(), Some(24));
        // 20 distinct scores above 30 (44 and 80 are held twice).
        assert_eq!(board.rank("me", Tie::Dense).unwrap(), Some(21));
        assert_eq!(board.score_at_rank(24).unwrap(), Some(30));
        let near: Vec<_> = board.around("me", 1).unwrap();
        let near: Vec<_> = near
            .iter()
            .map(|e| (e.player.as_str(), e.position))
            .collect();
        assert_eq!(near, [("a0", 22), ("me", 23), ("tied", 24)], "k = {k}");
        board.check_integrity().unwrap();
    }
}

/// The Redis article's tie example (18, 15, 15, 7, 7, 7, 3) on 1, 2 and 4
/// trees; with `concatenate`, the merge that orders ties tree after tree.
fn redis_ties(store: &impl Boards, k: u32, concatenate: bool) -> Result<(), String> {
    let config = RankingConfig::new(0..100).branching(4).trees(k);
    let name = format!("redis-{k}-{concatenate}");
    let board = Ranking::create(store.db(), &name, config).unwrap();
    let scores = [
        ("a", 18),
        ("b", 15),
        ("c", 15),
        ("d", 7),
        ("e", 7),
        ("f", 7),
        ("g", 3),
    ];
    for (p, s) in scores {
        board.set_score(p, s).unwrap();
    }
    autoshard::__private::tree_hooks::concatenate_ties(concatenate);
    let outcome = (|| {
        let ranks = |tie| -> Vec<u64> {
            scores
                .iter()
                .map(|(p, _)| board.rank(p, tie).unwrap().unwrap())
                .collect()
        };
        let check = |what: &str, got: Vec<u64>, want: [u64; 7]| match got == want {
            true => Ok(()),
            false => Err(format!("k = {k}: {what} {got:?}, not {want:?}")),
        };
        check("standard", ranks(Tie::Standard), [1, 2, 2, 4, 4, 4, 7])?;
        check("dense", ranks(Tie::Dense), [1, 2, 2, 3, 3, 3, 4])?;
        check("ordinal", ranks(Tie::Ordinal), [1, 2, 3, 4, 5, 6, 7])?;
        board.set_score("d", 7).unwrap();
        board.set_score("d", 8).unwrap();
        board.set_score("d", 7).unwrap();
        check("ordinal", ranks(Tie::Ordinal), [1, 2, 3, 6, 4, 5, 7])?;
        let page: Vec<_> = board.page(4, 6).unwrap();
        let page: Vec<_> = page
            .into_iter()
            .map(|e| (e.player, e.rank, e.dense, e.position))
            .collect();
        let want = [("e", 4, 3, 4), ("f", 4, 3, 5), ("d", 4, 3, 6)];
        let want: Vec<_> = want.map(|(p, r, d, o)| (p.to_owned(), r, d, o)).into();
        match page == want {
            true => Ok(()),
            false => Err(format!("k = {k}: page {page:?}")),
        }
    })();
    autoshard::__private::tree_hooks::concatenate_ties(false);
    board.check_integrity().unwrap();
    outcome
}

fn redis_tie_example_on_1_2_4_trees<S: Boards>() {
    let store = S::fresh();
    for k in TREES {
        redis_ties(&*store, k, false).unwrap();
    }
}

/// The control: ordering ties tree after tree breaks "first to reach the
/// score ranks higher" as soon as the tied players live in two trees.
fn a_merge_that_concatenates_trees_fails_the_oracle<S: Boards>() {
    let store = S::fresh();
    // One tree has nothing to merge: the wrong merge is the right one there.
    redis_ties(&*store, 1, true).unwrap();
    for k in [2, 4] {
        let failed = redis_ties(&*store, k, true);
        assert!(failed.is_err(), "k = {k}: the wrong merge passed");
    }
}

fn the_tree_count_is_stored_and_checked<S: Boards>() {
    let store = S::fresh();
    let config = RankingConfig::new(0..100).trees(4);
    let board = Ranking::create(store.db(), "split", config.clone()).unwrap();
    board
        .set_scores(&[("ann", 5), ("bo", 6), ("cy", 7)])
        .unwrap();
    let opened = Ranking::open(store.db(), "split").unwrap();
    assert_eq!(opened.config(), &config);
    assert_eq!(opened.len().unwrap(), 3);
    assert_eq!(Ranking::list(store.db()).unwrap(), ["split"]);
    // A board of one tree is stored as before (no tag), and a mismatch in
    // the tree count is refused by `open_or_create`.
    let one = Ranking::open_or_create(store.db(), "one", RankingConfig::new(0..100)).unwrap();
    assert_eq!(one.config().trees(), 1);
    for (name, k) in [("split", 2), ("one", 4)] {
        let other = Ranking::open_or_create(store.db(), name, RankingConfig::new(0..100).trees(k));
        assert!(
            matches!(other, Err(Error::RankingMismatch { ref reason, .. }) if reason.contains("trees")),
            "{other:?}"
        );
    }
    for bad in [0, autoshard::ranking::MAX_TREES + 1] {
        let refused = Ranking::create(store.db(), "bad", RankingConfig::new(0..100).trees(bad));
        assert!(
            matches!(refused, Err(Error::InvalidRanking { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(Ranking::list(store.db()).unwrap(), ["one", "split"]);
    // Deleting the board deletes its trees: the name starts empty again.
    board.reset().unwrap();
    assert_eq!(board.len().unwrap(), 0);
    board.set_score("dee", 1).unwrap();
    assert!(Ranking::delete(store.db(), "split").unwrap());
    assert!(matches!(board.len(), Err(Error::RankingNotFound { .. })));
    let again = Ranking::create(store.db(), "split", config).unwrap();
    assert_eq!(again.len().unwrap(), 0);
    again.check_integrity().unwrap();
    let worker = again.tree_worker(4);
    assert!(matches!(worker, Err(Error::InvalidRanking { .. })));
}

/// A worker per tree (`BoardWorker::spawn` on a split board), queued updates of
/// many players: all applied, every tree intact, ranks as a board of one
/// tree gives them.
fn queued_updates_drain_through_one_worker_per_tree<S: Boards>() {
    let store = S::fresh();
    let split = Ranking::create(store.db(), "q4", RankingConfig::new(0..50).trees(4)).unwrap();
    let one = Ranking::create(store.db(), "q1", RankingConfig::new(0..50)).unwrap();
    let worker = split.worker().spawn().unwrap();
    let scores: Vec<(String, i64)> = (0..200).map(|i| (format!("p{i}"), i * 7 % 50)).collect();
    for (p, s) in &scores {
        split.enqueue(p, *s).unwrap();
    }
    split.flush().unwrap();
    let stats = worker.stop().unwrap();
    assert_eq!(stats.updates, 200);
    assert_eq!(split.queued().unwrap(), 0);
    let batch: Vec<_> = scores.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    one.set_scores(&batch).unwrap();
    for (p, _) in &scores {
        for tie in [Tie::Standard, Tie::Dense] {
            assert_eq!(
                split.rank(p, tie).unwrap(),
                one.rank(p, tie).unwrap(),
                "{p}"
            );
        }
    }
    let (a, b) = (split.page(1, 200).unwrap(), one.page(1, 200).unwrap());
    let scores_of = |e: &[autoshard::ranking::Entry]| {
        e.iter()
            .map(|e| (e.score, e.rank, e.dense))
            .collect::<Vec<_>>()
    };
    assert_eq!(scores_of(&a), scores_of(&b));
    split.check_integrity().unwrap();
}

// ----------------------------------------------------- every public read

/// What every read is checked against: the oracle's entries, and the same
/// board kept in one tree (for the composite reads, which the oracle does
/// not model; they are checked against the oracle elsewhere).
struct Expect<'a> {
    oracle: &'a Oracle,
    one_tree: &'a Ranking,
    names: &'a [String],
}

type Read = fn(&Ranking, &Expect) -> Result<(), String>;

fn same<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    match got == want {
        true => Ok(()),
        false => Err(format!("{what}: {got:?}, not {want:?}")),
    }
}

fn ok<T>(what: &str, r: autoshard::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// Every public read of `Ranking`, by name, with its check against the
/// oracle. A read added to `Ranking` must join this list (or `NOT_READS`,
/// with the reason): `every_read_of_ranking_is_listed` scans the crate's
/// `impl Ranking` (`facade.rs`) and fails on any other `pub fn`.
const EVERY_READ: &[(&str, Read)] = &[
    ("rank_of_score", |b, x| {
        for s in 0..12 {
            let got = ok("rank_of_score", b.rank_of_score(s))?;
            same(
                &format!("rank_of_score({s})"),
                got,
                x.oracle.rank_of_score(s),
            )?;
        }
        Ok(())
    }),
    ("rank", |b, x| {
        for e in x.oracle.entries() {
            for (tie, want) in [
                (Tie::Standard, e.rank),
                (Tie::Dense, e.dense),
                (Tie::Ordinal, e.position),
            ] {
                let got = ok("rank", b.rank(&e.player, tie))?;
                same(&format!("rank({}, {tie:?})", e.player), got, Some(want))?;
            }
        }
        same(
            "rank(nobody)",
            ok("rank", b.rank("nobody", Tie::Dense))?,
            None,
        )
    }),
    ("score", |b, x| {
        for e in x.oracle.entries() {
            same(
                &format!("score({})", e.player),
                ok("score", b.score(&e.player))?,
                Some(e.score),
            )?;
        }
        same("score(nobody)", ok("score", b.score("nobody"))?, None)
    }),
    ("score_at_rank", |b, x| {
        let entries = x.oracle.entries();
        for r in 0..=entries.len() as u64 + 1 {
            let want = r
                .checked_sub(1)
                .and_then(|i| entries.get(i as usize))
                .map(|e| e.score);
            same(
                &format!("score_at_rank({r})"),
                ok("score_at_rank", b.score_at_rank(r))?,
                want,
            )?;
        }
        Ok(())
    }),
    ("top", |b, x| {
        let entries = x.oracle.entries();
        for n in [0, 1, 7, entries.len() as u64 + 3] {
            let want = &entries[..(n as usize).min(entries.len())];
            same(&format!("top({n})"), &ok("top", b.top(n))?[..], want)?;
        }
        Ok(())
    }),
    ("page", |b, x| {
        let entries = x.oracle.entries();
        let n = entries.len() as u64;
        for (from, to) in [(1, 1), (3, 9), (n - 2, n + 5), (n + 1, n + 2)] {
            let want =
                &entries[(from as usize - 1).min(entries.len())..(to as usize).min(entries.len())];
            same(
                &format!("page({from}, {to})"),
                &ok("page", b.page(from, to))?[..],
                want,
            )?;
        }
        Ok(())
    }),
    ("around", |b, x| {
        let entries = x.oracle.entries();
        for e in &entries {
            let at = e.position as usize - 1;
            let want = &entries[at.saturating_sub(2)..(at + 3).min(entries.len())];
            same(
                &format!("around({})", e.player),
                &ok("around", b.around(&e.player, 2))?[..],
                want,
            )?;
        }
        same(
            "around(nobody)",
            ok("around", b.around("nobody", 1))?,
            vec![],
        )
    }),
    ("among", |b, x| {
        // Every third name, one twice, one not on the board: ranked among
        // themselves as a board of only them would rank them.
        let mut set: Vec<&str> = x.names.iter().step_by(3).map(String::as_str).collect();
        set.extend(["nobody", set[0]]);
        same(
            "among",
            ok("among", b.among(&set))?,
            among_oracle(x.oracle, &set),
        )
    }),
    ("len", |b, x| {
        same("len", ok("len", b.len())?, x.oracle.entries().len() as u64)
    }),
    ("is_empty", |b, x| {
        same(
            "is_empty",
            ok("is_empty", b.is_empty())?,
            x.oracle.entries().is_empty(),
        )
    }),
    ("check_integrity", |b, _| {
        ok("check_integrity", b.check_integrity())
    }),
    ("queued", |b, _| {
        same("queued", ok("queued", b.queued())?, 0)
    }),
    ("dead_letters", |b, _| {
        same(
            "dead_letters",
            ok("dead_letters", b.dead_letters())?.len(),
            0,
        )
    }),
    ("entry", |b, x| {
        for e in x.oracle.entries() {
            same(
                &format!("entry({})", e.player),
                ok("entry", b.entry(&e.player))?,
                Some(e.clone()),
            )?;
        }
        same("entry(nobody)", ok("entry", b.entry("nobody"))?, None)
    }),
    ("count_between", |b, x| {
        for (lo, hi) in [(0, 11), (3, 3), (2, 7), (5, 40), (-9, 0), (12, 20)] {
            same(
                &format!("count_between({lo}..={hi})"),
                ok("count_between", b.count_between(lo..=hi))?,
                x.oracle.count_between(lo..=hi),
            )?;
        }
        Ok(())
    }),
    ("between", |b, x| {
        for (lo, hi, limit) in [(0, 11, 100), (3, 3, 2), (2, 7, 5), (5, 40, 1), (12, 20, 9)] {
            same(
                &format!("between({lo}..={hi}, {limit})"),
                ok("between", b.between(lo..=hi, limit))?,
                x.oracle.between(lo..=hi, limit),
            )?;
        }
        Ok(())
    }),
    ("percentile", |b, x| {
        for e in x.oracle.entries() {
            same(
                &format!("percentile({})", e.player),
                ok("percentile", b.percentile(&e.player))?,
                x.oracle.percentile(&e.player),
            )?;
        }
        same(
            "percentile(nobody)",
            ok("percentile", b.percentile("nobody"))?,
            None,
        )
    }),
    ("score_at_percentile", |b, x| {
        for p in [0.0, 2.5, 10.0, 33.3, 50.0, 97.5, 100.0] {
            same(
                &format!("score_at_percentile({p})"),
                ok("score_at_percentile", b.score_at_percentile(p))?,
                x.oracle.score_at_percentile(p),
            )?;
        }
        Ok(())
    }),
    ("page_number", |b, x| {
        for (n, size) in [(1, 7), (2, 7), (6, 7), (7, 7), (1, 100), (40, 1)] {
            same(
                &format!("page_number({n}, {size})"),
                ok("page_number", b.page_number(n, size))?,
                x.oracle.page_number(n, size),
            )?;
        }
        Ok(())
    }),
    ("page_count", |b, x| {
        for size in [1, 7, 100] {
            same(
                &format!("page_count({size})"),
                ok("page_count", b.page_count(size))?,
                x.oracle.page_count(size),
            )?;
        }
        Ok(())
    }),
    ("rank_of_dims", |b, x| {
        for s in 0..12 {
            let (got, want) = (b.rank_of_dims(&[s]), x.one_tree.rank_of_dims(&[s]));
            same(
                &format!("rank_of_dims([{s}])"),
                ok("rank_of_dims", got)?,
                ok("one tree", want)?,
            )?;
        }
        Ok(())
    }),
    ("dims", |b, x| {
        for p in x.names {
            same(
                &format!("dims({p})"),
                ok("dims", b.dims(p))?,
                ok("one tree", x.one_tree.dims(p))?,
            )?;
        }
        Ok(())
    }),
    ("dims_at_rank", |b, x| {
        for r in 0..=x.names.len() as u64 + 1 {
            let (got, want) = (b.dims_at_rank(r), x.one_tree.dims_at_rank(r));
            same(
                &format!("dims_at_rank({r})"),
                ok("dims_at_rank", got)?,
                ok("one tree", want)?,
            )?;
        }
        Ok(())
    }),
];

/// Public `&self` calls of `Ranking` that are not reads of its players,
/// each with why it needs no merge check.
const NOT_READS: &[&str] = &[
    // Accessors and routing: no stored rows.
    "name",
    "config",
    "tree_of",
    "encode",
    "decode",
    // Writes, each checked against the oracle by the proptest above.
    "set_score",
    "set_scores",
    "remove",
    "submit",
    "enqueue",
    "enqueue_remove",
    "set_dims_batch",
    // The update value's writes: every form above forwards to one of them.
    "write",
    "submit_update",
    "enqueue_update",
    "remove_data",
    "remove_between",
    "keep_top",
    "reset",
    "delete_dead_letter",
    // Queue work, drained by the proptest's queue steps.
    "worker",
    "tree_worker",
    "flush",
    "flush_within",
    // Approximate boards are one tree: `trees` with `approximate` is refused.
    "approx_rank",
    "approx_snapshot",
    "refresh",
    "refresher",
];

/// `among(set)` by hand from the oracle's board: the set's entries in board
/// order, ranks counted among them.
fn among_oracle(oracle: &Oracle, set: &[&str]) -> Vec<autoshard::ranking::Entry> {
    let mut out: Vec<autoshard::ranking::Entry> = Vec::new();
    for mut e in oracle
        .entries()
        .into_iter()
        .filter(|e| set.contains(&e.player.as_str()))
    {
        e.position = out.len() as u64 + 1;
        (e.rank, e.dense) = match out.last() {
            Some(last) if last.score == e.score => (last.rank, last.dense),
            Some(last) => (e.position, last.dense + 1),
            None => (1, 1),
        };
        out.push(e);
    }
    out
}

/// Every read in `EVERY_READ`, on boards of 1, 2 and 4 trees holding the
/// same players (40 on 12 scores, so players tie within and across trees,
/// with entry data), against the oracle.
///
/// Before the fix this failed on every store: `k = 2: among: [], not
/// [Entry { player: "p30", .. }, ..]` (the split board's own row holds no
/// players). Control (`a_read_that_skips_the_merge_fails`): that answer
/// fails the `among` check.
fn every_read_merges_the_trees<S: Boards>() {
    let store = S::fresh();
    let names: Vec<String> = (0..40).map(|i| format!("p{i}")).collect();
    let mut oracle = Oracle::new(
        Policy::Replace,
        autoshard::ranking::ScoreOrder::HigherIsBetter,
        0,
        12,
    );
    let config = |k| {
        RankingConfig::new(0..12)
            .branching(3)
            .entry_data(8)
            .trees(k)
    };
    let boards: Vec<Ranking> = TREES
        .iter()
        .map(|&k| Ranking::create(store.db(), &format!("every-read-{k}"), config(k)).unwrap())
        .collect();
    for i in 0..80usize {
        let (player, score) = (&names[i * 7 % 40], (i * 5 % 12) as i64);
        let data = format!("d{i}");
        oracle.submit_with(player, score, data.as_bytes());
        for board in &boards {
            board
                .submit_update(Update::score(player, score).with_data(data.as_bytes()))
                .unwrap();
        }
    }
    let expect = Expect {
        oracle: &oracle,
        one_tree: &boards[0],
        names: &names,
    };
    for (board, k) in boards.iter().zip(TREES) {
        for (read, check) in EVERY_READ {
            if let Err(e) = check(board, &expect) {
                panic!("{}: k = {k}: {read}: {e}", S::NAME);
            }
        }
    }
}

#[test]
fn a_read_that_skips_the_merge_fails() {
    let db = autoshard::Sqlite::memory().unwrap();
    let mut oracle = Oracle::new(
        Policy::Replace,
        autoshard::ranking::ScoreOrder::HigherIsBetter,
        0,
        12,
    );
    let names: Vec<String> = (0..9).map(|i| format!("p{i}")).collect();
    for (i, p) in names.iter().enumerate() {
        oracle.set(p, i as i64);
    }
    let board = Ranking::create(&db, "skip", RankingConfig::new(0..12)).unwrap();
    let expect = Expect {
        oracle: &oracle,
        one_tree: &board,
        names: &names,
    };
    let set: Vec<&str> = names.iter().step_by(3).map(String::as_str).collect();
    assert!(!among_oracle(expect.oracle, &set).is_empty());
    // The defect's answer, checked as `EVERY_READ` checks `among`.
    let skipped: Vec<autoshard::ranking::Entry> = Vec::new();
    assert!(same("among", skipped, among_oracle(expect.oracle, &set)).is_err());
}

/// The public `&self` calls in `source`'s `impl Ranking` block.
fn ranking_calls(source: &str) -> Vec<String> {
    let mut calls = Vec::new();
    let mut in_ranking = false;
    for line in source.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            in_ranking = line.starts_with("impl Ranking {");
        }
        let Some(rest) = line.strip_prefix("    pub fn ") else {
            continue;
        };
        if in_ranking && line.contains("&self") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            calls.push(name);
        }
    }
    calls
}

#[test]
fn every_read_of_ranking_is_listed() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("autoshard/src/ranking");
    // The API is one `impl Ranking`, in `facade.rs`: a block elsewhere
    // would add calls this scan (and a reader of the facade) misses.
    let mut blocks = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let source = std::fs::read_to_string(&path).unwrap();
                let n = source
                    .lines()
                    .filter(|l| l.starts_with("impl Ranking {"))
                    .count();
                blocks.extend(std::iter::repeat_n(path.display().to_string(), n));
            }
        }
    }
    let facade = root.join("facade.rs").display().to_string();
    assert_eq!(
        blocks,
        std::slice::from_ref(&facade),
        "`impl Ranking` blocks"
    );
    let calls = ranking_calls(&std::fs::read_to_string(&facade).unwrap());
    assert!(
        calls.len() > 30,
        "the scan found {} calls: is `impl Ranking` still spelled so?",
        calls.len()
    );
    let unlisted: Vec<&String> = calls
        .iter()
        .filter(|call| {
            !EVERY_READ.iter().any(|(r, _)| r == call) && !NOT_READS.contains(&call.as_str())
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "public calls of `Ranking` in neither EVERY_READ nor NOT_READS: {unlisted:?}"
    );
    // Control: a new read is caught.
    let new = "impl Ranking {\n    pub fn new_read(&self) -> u64 {\n        0\n    }\n}\n";
    assert_eq!(ranking_calls(new), ["new_read"]);
}

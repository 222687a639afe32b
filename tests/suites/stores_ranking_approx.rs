//! Approximate boards (issue 13 item 4), written once and run against real
//! SQLite files, the PostgreSQL server and Redis Cluster (see
//! `common/stores.rs`):
//! `approx_rank` against an exact in-memory model, what updates write, the
//! typed errors, and a reader during a refresh (real threads). The kill -9
//! tests of a refresh are in `approx_crash.rs`.
//!
//! The controls: the bound check here is the one the unit test
//! `ranking::approx::snapshot::tests::a_wrong_interpolation_fails_the_check`
//! runs against a deliberately backwards interpolation, which it fails;
//! the snapshot-consistency check is the one `approx_crash.rs`'s control
//! (refreshes writing over the published rows) fails.

use autoshard::ranking::{
    ApproxBucket, Policy, Ranking, RankingConfig, ScoreOrder, Tie, MAX_BUCKETS, MAX_EXACT_TOP,
};
use autoshard::Error;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::boards;
use boards::Boards;

every_store_tests!(
    approx_rank_is_exact_at_bucket_edges_and_within_the_bound_inside,
    updates_write_only_player_rows_under_the_boards_policy_and_order,
    exact_calls_and_bad_input_are_typed_errors_and_write_nothing,
    a_reader_answers_from_the_previous_snapshot_while_a_refresh_runs,
    concurrent_refreshes_all_succeed_and_an_overtaken_one_publishes_false,
);

/// Exact standard ranks of every score of `range` among `scores`, under
/// `order`: the model.
fn exact_rank(scores: &[i64], order: ScoreOrder, score: i64) -> u64 {
    1 + scores
        .iter()
        .filter(|&&s| order.is_better(s, score))
        .count() as u64
}

fn set_all(board: &Ranking, scores: &[(String, i64)]) {
    let scores: Vec<(&str, i64)> = scores.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    board.set_scores(&scores).unwrap();
}

fn approx_rank_is_exact_at_bucket_edges_and_within_the_bound_inside<S: Boards>() {
    let store = S::fresh();
    let seed = rand::random::<u64>();
    let mut rng = SmallRng::seed_from_u64(seed);
    let cases = if S::NAME == "sqlite" { 12 } else { 3 };
    for case in 0..cases {
        let order = [ScoreOrder::HigherIsBetter, ScoreOrder::LowerIsBetter][case % 2];
        let (width, n, b) = (
            rng.random_range(1..400i64),
            rng.random_range(0..300usize),
            rng.random_range(1..40u32),
        );
        let top = [0u32, 0, 5, 20][rng.random_range(0..4usize)];
        // Skewed and clustered scores, with ties.
        let scores: Vec<i64> = (0..n)
            .map(|_| {
                let u: f64 = rng.random();
                ((u * u * width as f64) as i64).min(width - 1)
            })
            .collect();
        let config = RankingConfig::new(0..width)
            .order(order)
            .approximate(b)
            .exact_top(top);
        let board = Ranking::create(store.db(), &format!("b{case}"), config).unwrap();
        let named: Vec<(String, i64)> = scores
            .iter()
            .enumerate()
            .map(|(i, &s)| (format!("p{i}"), s))
            .collect();
        set_all(&board, &named);
        let refreshed = board.refresh().unwrap();
        assert!(refreshed.published && refreshed.players == n as u64);
        let snapshot = board.approx_snapshot().unwrap();
        let bound = snapshot.error_bound();
        let why =
            format!("seed {seed}, case {case}: n {n}, b {b}, top {top}, width {width}, {order:?}");
        let rest = (n as u64).saturating_sub(u64::from(top));
        assert!(
            bound <= rest.div_ceil(u64::from(b)).saturating_sub(2),
            "{why}"
        );
        assert!(snapshot.buckets().len() <= (b + top) as usize, "{why}");
        let buckets = snapshot.buckets();
        let edges: Vec<i64> = buckets.iter().flat_map(|k| [k.best, k.worst]).collect();
        let inside = |s: i64| {
            buckets
                .iter()
                .any(|k| order.is_better(s, k.worst) && order.is_better(k.best, s))
        };
        let mut previous: Option<u64> = None;
        // Best score first, so the estimate may only grow.
        let all: Vec<i64> = match order {
            ScoreOrder::HigherIsBetter => (0..width).rev().collect(),
            ScoreOrder::LowerIsBetter => (0..width).collect(),
        };
        for s in all {
            let approx = board.approx_rank(s).unwrap();
            let exact = exact_rank(&scores, order, s);
            // The exact top: every score whose rank is within the top.
            if edges.contains(&s) || !inside(s) || exact <= u64::from(top) {
                assert_eq!(approx, exact, "{why}: score {s} at an edge");
            }
            assert!(
                approx.abs_diff(exact) <= bound,
                "{why}: score {s}: {approx} vs {exact}"
            );
            assert!(previous.is_none_or(|p| p <= approx), "{why}: score {s}");
            previous = Some(approx);
        }
    }
}

fn updates_write_only_player_rows_under_the_boards_policy_and_order<S: Boards>() {
    let store = S::fresh();
    let config = RankingConfig::new(1..86_400)
        .policy(Policy::Best)
        .order(ScoreOrder::LowerIsBetter)
        .approximate(4);
    let board = Ranking::create(store.db(), "segment", config.clone()).unwrap();
    board
        .set_scores(&[("ann", 300), ("bo", 320), ("cy", 340), ("ann", 310)])
        .unwrap();
    board.set_score("cy", 360).unwrap(); // slower: Best keeps 340
    board.set_score("bo", 290).unwrap(); // faster: taken
    assert_eq!(board.score("ann").unwrap(), Some(300));
    assert_eq!(board.score("cy").unwrap(), Some(340));
    assert_eq!(board.score("bo").unwrap(), Some(290));
    // Queued updates go the same way, through a worker.
    board.enqueue("dan", 500).unwrap();
    board.enqueue("dan", 450).unwrap();
    board.enqueue("ann", 305).unwrap(); // slower: Best keeps 300
    board.worker().drain().unwrap();
    assert_eq!(board.score("dan").unwrap(), Some(450));
    assert_eq!(board.score("ann").unwrap(), Some(300));
    assert!(board.remove("dan").unwrap());
    // No tree: the board's only rows are its players.
    assert!(store.rank_nodes("segment").is_empty());
    // `top` and `page` are exact, from the score index.
    let top = board.top(3).unwrap();
    let got: Vec<(&str, i64, u64)> = top
        .iter()
        .map(|e| (e.player.as_str(), e.score, e.rank))
        .collect();
    assert_eq!(got, [("bo", 290, 1), ("ann", 300, 2), ("cy", 340, 3)]);
    assert_eq!(board.page(2, 5).unwrap()[0].player, "ann");
    assert_eq!(board.len().unwrap(), 3);
    board.refresh().unwrap();
    assert_eq!(board.approx_rank(300).unwrap(), 2);
    assert_eq!(board.approx_rank(1).unwrap(), 1);
    assert_eq!(board.approx_rank(86_399).unwrap(), 4);
    assert!(board.remove("bo").unwrap());
    assert_eq!(board.len().unwrap(), 2);
    // The snapshot is the last refresh's until the next one.
    assert_eq!(board.approx_rank(86_399).unwrap(), 4);
    board.refresh().unwrap();
    assert_eq!(board.approx_rank(86_399).unwrap(), 3);
    // Ties share standard and dense ranks; positions follow arrival (the
    // last change in a batch, as on an exact board).
    let points = RankingConfig::new(0..100)
        .policy(Policy::Increment)
        .approximate(2);
    let points = Ranking::create(store.db(), "points", points).unwrap();
    points
        .set_scores(&[("a", 5), ("b", 7), ("a", 2), ("c", 3)])
        .unwrap();
    let page = points.top(10).unwrap();
    let got: Vec<(&str, i64, u64, u64, u64)> = page
        .iter()
        .map(|e| (e.player.as_str(), e.score, e.rank, e.dense, e.position))
        .collect();
    // b reached 7 at its last change (index 1), a at index 2.
    assert_eq!(
        got,
        [("b", 7, 1, 1, 1), ("a", 7, 1, 1, 2), ("c", 3, 3, 2, 3)]
    );
    // Another handle opens the board as approximate.
    let again = Ranking::open(&store.open_another(), "segment").unwrap();
    assert_eq!(again.config(), &config);
    assert_eq!(again.approx_rank(300).unwrap(), 1);
    if S::NAME == "redis_cluster" {
        // No SQL: `tests/redis/redis_ranking.rs` checks that a delete
        // unlinks the snapshots' hash.
        return;
    }
    // Deleting a board deletes its snapshot pointer and buckets too
    // (counted by updates that change nothing).
    let orphans = |table: &str| {
        store.execute(&format!(
            "UPDATE {table} SET board = board WHERE board NOT IN \
             (SELECT id FROM autoshard_rank_boards)"
        ))
    };
    let rows = |table: &str| store.execute(&format!("UPDATE {table} SET board = board"));
    assert!(rows("autoshard_rank_approx_buckets") > 0);
    assert!(Ranking::delete(store.db(), "segment").unwrap());
    assert!(Ranking::delete(store.db(), "points").unwrap());
    for table in ["autoshard_rank_approx", "autoshard_rank_approx_buckets"] {
        assert_eq!(orphans(table), 0, "{table}");
        assert_eq!(rows(table), 0, "{table}");
    }
}

fn exact_calls_and_bad_input_are_typed_errors_and_write_nothing<S: Boards>() {
    let store = S::fresh();
    let db = store.db();
    let range = || RankingConfig::new(0..1_000);
    for bad in [
        range().approximate(0),
        range().approximate(MAX_BUCKETS + 1),
        range().approximate(10).entry_data(8),
        range().exact_top(10),
        range().approximate(10).exact_top(MAX_EXACT_TOP + 1),
    ] {
        let made = Ranking::create(db, "bad", bad.clone());
        assert!(
            matches!(made, Err(Error::InvalidRanking { .. })),
            "{made:?}"
        );
        let made = Ranking::open_or_create(db, "bad", bad);
        assert!(
            matches!(made, Err(Error::InvalidRanking { .. })),
            "{made:?}"
        );
    }
    assert!(Ranking::list(db).unwrap().is_empty());

    let board = Ranking::create(db, "approx", range().approximate(10)).unwrap();
    assert!(matches!(
        board.approx_rank(5),
        Err(Error::NoSnapshot { .. })
    ));
    board.set_score("ann", 500).unwrap();
    let refused = |call: &str, e: Error| match e {
        Error::ApproximateBoard { call: c, .. } => assert_eq!(c, call),
        other => panic!("{call}: {other:?}"),
    };
    refused("rank", board.rank("ann", Tie::Standard).unwrap_err());
    refused("rank_of_score", board.rank_of_score(5).unwrap_err());
    refused("score_at_rank", board.score_at_rank(1).unwrap_err());
    refused("around", board.around("ann", 1).unwrap_err());
    refused("check_integrity", board.check_integrity().unwrap_err());
    refused("submit", board.submit("ann", 600).unwrap_err());
    assert_eq!(board.score("ann").unwrap(), Some(500), "nothing written");
    board.refresh().unwrap();
    assert!(matches!(
        board.approx_rank(1_000),
        Err(Error::ScoreOutOfRange { .. })
    ));

    let exact = Ranking::create(db, "exact", range()).unwrap();
    refused("approx_rank", exact.approx_rank(5).unwrap_err());
    refused("refresh", exact.refresh().unwrap_err());
    refused(
        "refresher",
        exact.refresher(Duration::from_secs(1)).spawn().unwrap_err(),
    );

    for (name, other) in [
        ("approx", range()),
        ("approx", range().approximate(20)),
        ("exact", range().approximate(10)),
        ("approx", range().approximate(10).exact_top(5)),
    ] {
        let opened = Ranking::open_or_create(db, name, other);
        assert!(
            matches!(opened, Err(Error::RankingMismatch { .. })),
            "{opened:?}"
        );
    }
    Ranking::open_or_create(db, "approx", range().approximate(10)).unwrap();
}

/// A snapshot's buckets, for comparing whole snapshots.
fn shape(buckets: &[ApproxBucket]) -> Vec<(i64, i64, u64, u64, u64)> {
    buckets
        .iter()
        .map(|b| (b.best, b.worst, b.players, b.at_best, b.at_worst))
        .collect()
}

fn a_reader_answers_from_the_previous_snapshot_while_a_refresh_runs<S: Boards>() {
    let store = S::fresh();
    // One bucket per transaction, 2 ms apart: the refresh below takes a
    // while, and the reader reads all through it. (Process-wide: other
    // tests of this binary only refresh a little slower.)
    autoshard::__private::approx_hooks::refresh_chunks(1, Duration::from_millis(2));
    let board = Ranking::create(
        store.db(),
        "b",
        RankingConfig::new(0..10_000).approximate(40),
    )
    .unwrap();
    let old: Vec<(String, i64)> = (0..400).map(|i| (format!("p{i}"), i * 10)).collect();
    set_all(&board, &old);
    board.refresh().unwrap();
    let before = board.approx_snapshot().unwrap();
    let new: Vec<(String, i64)> = (0..400).map(|i| (format!("p{i}"), 9_999 - i * 3)).collect();
    set_all(&board, &new);

    let reader = Ranking::open(&store.open_another(), "b").unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let seen = std::thread::spawn({
        let done = done.clone();
        move || {
            let mut seen = Vec::new();
            while !done.load(Ordering::Acquire) {
                let s = reader.approx_snapshot().unwrap();
                // Every answer of a snapshot comes from that snapshot.
                let rank = reader.approx_rank(5_000).unwrap();
                seen.push((s.id(), shape(&s.buckets()), s.players(), rank));
            }
            seen
        }
    });
    let refreshed = board.refresh().unwrap();
    done.store(true, Ordering::Release);
    let seen = seen.join().unwrap();
    let after = board.approx_snapshot().unwrap();
    assert_eq!(after.id(), refreshed.snapshot);
    assert!(after.id() > before.id());
    let (old_shape, new_shape) = (shape(&before.buckets()), shape(&after.buckets()));
    assert_ne!(old_shape, new_shape);
    let mut during = 0;
    for (id, buckets, players, _) in &seen {
        let expected = if *id == before.id() {
            during += 1;
            &old_shape
        } else {
            assert_eq!(*id, after.id());
            &new_shape
        };
        assert_eq!(buckets, expected, "snapshot {id} read incomplete or mixed");
        assert_eq!(*players, 400);
    }
    // The refresh writes 40 transactions 2 ms apart: the reader answered
    // from the previous snapshot meanwhile, not blocked and not failing.
    assert!(during > 0, "{} reads, none during the refresh", seen.len());
    let old_rank = before.rank(5_000).unwrap();
    assert!(seen.iter().all(|(id, _, _, rank)| *id != before.id()
        || *rank == old_rank
        || *rank == after.rank(5_000).unwrap()));
}

/// Two threads refreshing and a `Refresher` beside them, no writers: every
/// call succeeds (a refresh overtaken by a later one publishes `false`), the
/// refresher keeps running, and the snapshot left counts every player.
///
/// On the old code (the count check ran before the "a newer snapshot is
/// current" check, so an overtaken publish counted rows the newer publish had
/// just deleted), sqlite failed with
/// `Corrupt { kind: "ranking", id: "board 1", field: "snapshot 17", reason:
/// "0 bucket rows counting 0 players, not 16 counting 300" }`, and postgres
/// the same way.
fn concurrent_refreshes_all_succeed_and_an_overtaken_one_publishes_false<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(
        store.db(),
        "b",
        RankingConfig::new(0..1_000).approximate(16),
    )
    .unwrap();
    let scores: Vec<(String, i64)> = (0..300).map(|i| (format!("p{i}"), i * 3)).collect();
    set_all(&board, &scores);
    let refresher = board.refresher(Duration::from_millis(1)).spawn().unwrap();
    let calls = if S::NAME == "sqlite" { 200 } else { 100 };
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let board = Ranking::open(&store.open_another(), "b").unwrap();
            std::thread::spawn(move || {
                let mut overtaken = 0;
                for _ in 0..calls {
                    let r = board.refresh().unwrap();
                    assert_eq!((r.players, r.buckets), (300, 16));
                    overtaken += u32::from(!r.published);
                }
                overtaken
            })
        })
        .collect();
    let overtaken: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(!refresher.is_finished(), "the refresher thread died");
    refresher.stop().unwrap();
    let last = board.refresh().unwrap();
    assert!(last.published);
    let snapshot = board.approx_snapshot().unwrap();
    assert_eq!((snapshot.id(), snapshot.players()), (last.snapshot, 300));
    eprintln!("{overtaken} of {} refreshes overtaken", 2 * calls);
}

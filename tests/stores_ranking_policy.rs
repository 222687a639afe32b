//! Update policies and score order (issue 10, items 1 and 2) against a
//! brute-force oracle (`common/policy_oracle.rs`), written once and run
//! against every store: every policy × both orders, each query under every
//! tie rule, through direct writes, `submit` and the queue. Then the seed's
//! shapes (a Strava segment; points through the queue), and the input a
//! board must refuse with nothing written.
//!
//! Control, reverted: with the queue's and batches' coalescing back to
//! last-wins for increments (`apply_updates` computing each increment from
//! the stored score instead of the batch's running one),
//! `policies_and_orders_agree_with_a_sorted_list` failed on SQLite with
//! "score 0 is outside the board's range 10..38" for a batch the oracle
//! applied: a new player's +10 then +0, the second counted from nothing.
//! The case is kept in `stores_ranking_policy.proptest-regressions`.

use autoshard::ranking::{Order, Policy, Ranking, RankingConfig, Submission};
use autoshard::Error;
use proptest::prelude::*;

#[path = "common/boards.rs"]
mod boards;
#[path = "common/stores.rs"]
mod stores;
use boards::Boards;
#[path = "common/policy_oracle.rs"]
mod policy_oracle;
use policy_oracle::{range, verify, Oracle, Report};

store_tests!(
    policies_and_orders_agree_with_a_sorted_list,
    strava_best_elapsed_time_lower_is_better,
    points_add_up_through_direct_writes_and_the_queue,
    a_board_of_another_shape_is_refused_by_open_or_create,
    boards_stored_before_policies_open_as_replace_higher_is_better,
    an_increment_past_the_range_is_refused_and_writes_nothing,
    a_queued_increment_past_the_range_is_dead_lettered_and_the_rest_applies,
);

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
    Submit(usize, usize),
    Remove(usize),
    Batch(Vec<(usize, usize)>),
    /// Enqueued (`None`: a removal), then drained by one worker batch.
    Queue(Vec<(usize, Option<usize>)>),
}

fn op() -> impl Strategy<Value = Op> {
    let pair = (0..8usize, 0..12usize);
    prop_oneof![
        3 => pair.clone().prop_map(|(p, v)| Op::Set(p, v)),
        3 => pair.clone().prop_map(|(p, v)| Op::Submit(p, v)),
        1 => (0..8usize).prop_map(Op::Remove),
        2 => prop::collection::vec(pair, 0..10).prop_map(Op::Batch),
        2 => prop::collection::vec((0..8usize, prop::option::weighted(0.9, 0..12usize)), 1..10)
            .prop_map(Op::Queue),
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::Replace),
        Just(Policy::Best),
        Just(Policy::Worst),
        Just(Policy::Increment),
    ]
}

fn order() -> impl Strategy<Value = Order> {
    prop_oneof![Just(Order::HigherIsBetter), Just(Order::LowerIsBetter)]
}

/// A board's shape and the values its players submit: scores of the range
/// (both ends included, few, so players tie), a score on each side of it,
/// and for increments also the steps between those scores, so sums land in
/// range, on its ends and past them.
fn board_shape() -> impl Strategy<Value = (i64, i64, u32, u32, Vec<i64>)> {
    let branching = prop_oneof![2u32..=4, 5u32..=40];
    (range(), branching, 1u32..=3).prop_flat_map(|((min, max), b, shards)| {
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
            values.extend([
                scores[1].wrapping_sub(scores[0]),
                scores[0].wrapping_sub(scores[1]),
            ]);
            values.push(i64::MAX);
            (min, max, b, shards, values)
        })
    })
}

fn policies_and_orders_agree_with_a_sorted_list<S: Boards>() {
    let store = S::fresh();
    let mut runner = boards::runner::<S>(file!());
    let case = std::cell::Cell::new(0);
    let strategy = (
        policy(),
        order(),
        board_shape(),
        prop::collection::vec(op(), 1..16),
    );
    let outcome = runner.run(&strategy, |(policy, order, shape, ops)| {
        let (min, max, branching, shards, values) = shape;
        case.set(case.get() + 1);
        // One queue shard: a drain batch then takes the rows in enqueue
        // order, which the oracle replays (several shards interleave
        // players by a hash the oracle does not know).
        let config = RankingConfig::new(min..max)
            .branching(branching)
            .shards(shards)
            .policy(policy)
            .order(order);
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
                Op::Submit(p, v) => match oracle.submit(&name(p), value(v)) {
                    Some(want) => prop_assert_eq!(report(board.submit(&name(p), value(v))?), want),
                    None => out_of_range(board.submit(&name(p), value(v)))?,
                },
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
                    match oracle.batch(&updates, false).is_empty() {
                        true => board.set_scores(&batch)?,
                        false => out_of_range(board.set_scores(&batch))?,
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

/// Enqueues `updates` (those `enqueue` refuses are refused before anything
/// is queued, as the oracle predicts) and drains them in one worker batch:
/// the increments the worker refuses become dead letters, in order.
fn queue(
    board: &Ranking,
    oracle: &mut Oracle,
    updates: &[(usize, Option<usize>)],
    name: &dyn Fn(usize) -> String,
    value: &dyn Fn(usize) -> i64,
) -> Result<(), TestCaseError> {
    let mut queued = Vec::new();
    for &(p, v) in updates {
        let (player, v) = (name(p), v.map(value));
        let enqueued = match v {
            Some(v) => board.enqueue(&player, v),
            None => board.enqueue_remove(&player),
        };
        // `enqueue` refuses a score outside the range (not an increment,
        // whose sum it cannot know).
        let refusable = oracle.policy != Policy::Increment;
        match v {
            Some(v) if refusable && !(oracle.min..oracle.max).contains(&v) => {
                out_of_range(enqueued)?
            }
            _ => {
                enqueued?;
                queued.push((player, v));
            }
        }
    }
    let before = board.dead_letters()?.len();
    let stats = board.worker().batch_size(100).drain()?;
    let as_refs: Vec<_> = queued.iter().map(|(p, v)| (p.as_str(), *v)).collect();
    let refused = oracle.batch(&as_refs, true);
    prop_assert_eq!(stats.updates, (queued.len() - refused.len()) as u64);
    prop_assert_eq!(stats.dead_letters, refused.len() as u64);
    let letters: Vec<_> = board.dead_letters()?[before..]
        .iter()
        .map(|l| (l.player.clone(), l.score))
        .collect();
    let want: Vec<_> = refused.iter().map(|&i| queued[i].clone()).collect();
    prop_assert_eq!(letters, want);
    Ok(())
}

// --------------------------------------------------------- named tests

/// Seed 002: a Strava segment ranks each rider's best elapsed time, lowest
/// first; a slower effort changes nothing, a faster one is a personal
/// record that moves the rider up, through `submit` and through the queue.
fn strava_best_elapsed_time_lower_is_better<S: Boards>() {
    let store = S::fresh();
    let config = RankingConfig::new(1..86_400)
        .branching(16)
        .policy(Policy::Best)
        .order(Order::LowerIsBetter);
    let segment = Ranking::create(store.db(), "hawk-hill", config).unwrap();
    let efforts = [
        ("ann", 301),
        ("bo", 287),
        ("cy", 340),
        ("di", 287),
        ("ed", 412),
    ];
    segment.set_scores(&efforts).unwrap();
    let top: Vec<_> = segment
        .top(5)
        .unwrap()
        .into_iter()
        .map(|e| (e.player, e.score))
        .collect();
    let want = [
        ("bo", 287),
        ("di", 287),
        ("ann", 301),
        ("cy", 340),
        ("ed", 412),
    ];
    assert_eq!(top, want.map(|(p, s)| (p.to_string(), s)));
    assert_eq!(
        segment.rank_of_score(300).unwrap(),
        3,
        "two riders under 300 s"
    );
    assert_eq!(segment.score_at_rank(4).unwrap(), Some(340));

    let slower = segment.submit("cy", 355).unwrap();
    assert_eq!(report(slower), (Some(340), 340, Some(4), 4, false));
    assert!(!slower.changed());
    let pr = segment.submit("ed", 290).unwrap();
    assert_eq!(report(pr), (Some(412), 290, Some(5), 3, true), "5th to 3rd");
    let first = segment.submit("fay", 280).unwrap();
    assert_eq!(report(first), (None, 280, None, 1, true));
    assert_eq!(
        segment
            .rank("ann", autoshard::ranking::Tie::Standard)
            .unwrap(),
        Some(5)
    );

    let worker = segment.worker().spawn().unwrap();
    segment.enqueue("fay", 299).unwrap(); // slower: kept at 280
    segment.enqueue("ann", 250).unwrap();
    segment.enqueue("ann", 260).unwrap(); // best of the batch wins
    segment.flush().unwrap();
    worker.stop().unwrap();
    let top: Vec<_> = segment
        .top(3)
        .unwrap()
        .into_iter()
        .map(|e| (e.player, e.score))
        .collect();
    let want = [("ann", 250), ("fay", 280), ("bo", 287)];
    assert_eq!(top, want.map(|(p, s)| (p.to_string(), s)));
    let around = segment.around("ed", 1).unwrap();
    let near: Vec<_> = around.iter().map(|e| (e.player.as_str(), e.rank)).collect();
    assert_eq!(near, [("di", 3), ("ed", 5), ("cy", 6)]);
    segment.check_integrity().unwrap();
}

/// Points: every submission adds, through `set_score`, `set_scores` (a
/// player twice in one batch gets both), `submit`, and the queue (two
/// queued increments of one player in one worker batch both count).
fn points_add_up_through_direct_writes_and_the_queue<S: Boards>() {
    let store = S::fresh();
    let config = RankingConfig::new(0..1_000_000)
        .policy(Policy::Increment)
        .queues(2);
    let points = Ranking::create(store.db(), "points", config).unwrap();
    points.set_score("ann", 10).unwrap();
    points.set_score("ann", 5).unwrap();
    points
        .set_scores(&[("bo", 7), ("bo", 7), ("ann", -3)])
        .unwrap();
    assert_eq!(points.score("ann").unwrap(), Some(12));
    assert_eq!(points.score("bo").unwrap(), Some(14));
    let up = points.submit("bo", 1).unwrap();
    assert_eq!(report(up), (Some(14), 15, Some(1), 1, true));
    let down = points.submit("bo", -10).unwrap();
    assert_eq!(report(down), (Some(15), 5, Some(1), 2, false));
    for _ in 0..3 {
        points.enqueue("cy", 4).unwrap();
        points.enqueue("ann", 1).unwrap();
    }
    let stats = points.worker().drain().unwrap();
    assert_eq!(
        (stats.batches, stats.updates),
        (1, 6),
        "one batch, every update"
    );
    assert_eq!(points.score("cy").unwrap(), Some(12));
    assert_eq!(points.score("ann").unwrap(), Some(15));
    assert_eq!(points.worker().drain().unwrap().updates, 0, "applied once");
    assert_eq!(points.score("ann").unwrap(), Some(15));
    points.check_integrity().unwrap();
}

/// `open_or_create` creates a missing board, opens one of the same shape,
/// and refuses one of another policy, order or range with
/// `RankingMismatch` naming what differs; nothing is written.
fn a_board_of_another_shape_is_refused_by_open_or_create<S: Boards>() {
    let store = S::fresh();
    let config = RankingConfig::new(0..100).policy(Policy::Best);
    let board = Ranking::open_or_create(store.db(), "b", config.clone()).unwrap();
    board.set_score("ann", 40).unwrap();
    let again = Ranking::open_or_create(store.db(), "b", config.clone()).unwrap();
    assert_eq!(again.config(), &config);
    let rows = store.rank_nodes("b");
    for (other, what) in [
        (
            config.clone().policy(Policy::Replace),
            "policy is Best, not Replace",
        ),
        (
            config.clone().order(Order::LowerIsBetter),
            "order is HigherIsBetter, not LowerIsBetter",
        ),
        (
            RankingConfig::new(0..101).policy(Policy::Best),
            "range is 0..100, not 0..101",
        ),
    ] {
        match Ranking::open_or_create(store.db(), "b", other) {
            Err(Error::RankingMismatch { name, reason }) => {
                assert_eq!(name, "b");
                assert_eq!(reason, what);
            }
            other => panic!("{other:?}"),
        }
    }
    let bad = Ranking::open_or_create(store.db(), "c", RankingConfig::new(5..5));
    assert!(matches!(bad, Err(Error::InvalidRanking { .. })), "{bad:?}");
    assert!(matches!(
        Ranking::open(store.db(), "c"),
        Err(Error::RankingNotFound { .. })
    ));
    assert_eq!(store.rank_nodes("b"), rows);
    let opened = Ranking::open(store.db(), "b").unwrap();
    assert_eq!(opened.config().update_policy(), Policy::Best);
    opened.set_score("ann", 30).unwrap();
    assert_eq!(opened.score("ann").unwrap(), Some(40), "still Best");
}

/// A database whose board table predates policies (no `policy` or
/// `score_order` column) opens its boards as `Replace` and
/// `HigherIsBetter`; creating the next board adds the columns, with the old
/// boards keeping those defaults.
fn boards_stored_before_policies_open_as_replace_higher_is_better<S: Boards>() {
    let store = S::fresh();
    let old = Ranking::create(store.db(), "old", RankingConfig::new(0..100)).unwrap();
    old.set_scores(&[("ann", 5), ("bo", 9)]).unwrap();
    store.execute("ALTER TABLE autoshard_rank_boards DROP COLUMN policy");
    store.execute("ALTER TABLE autoshard_rank_boards DROP COLUMN score_order");
    let reopened = Ranking::open(store.db(), "old").unwrap();
    assert_eq!(reopened.config(), &RankingConfig::new(0..100));
    reopened.set_score("ann", 3).unwrap();
    assert_eq!(reopened.top(1).unwrap()[0].player, "bo");
    assert_eq!(reopened.score("ann").unwrap(), Some(3), "replaced");

    let config = RankingConfig::new(0..100)
        .policy(Policy::Worst)
        .order(Order::LowerIsBetter);
    let new = Ranking::create(store.db(), "new", config.clone()).unwrap();
    assert_eq!(Ranking::open(store.db(), "new").unwrap().config(), &config);
    let old = Ranking::open(store.db(), "old").unwrap();
    assert_eq!(old.config(), &RankingConfig::new(0..100));
    new.set_scores(&[("ann", 5), ("ann", 9), ("ann", 2)])
        .unwrap();
    assert_eq!(
        new.score("ann").unwrap(),
        Some(9),
        "worst of a lower-is-better board"
    );
}

/// An increment whose sum leaves the range is refused with
/// `ScoreOutOfRange` carrying the sum, by `set_score`, `submit` and
/// `set_scores` (the whole batch), and nothing is written: not the score,
/// not a tree row.
fn an_increment_past_the_range_is_refused_and_writes_nothing<S: Boards>() {
    let store = S::fresh();
    let config = RankingConfig::new(-100..100)
        .policy(Policy::Increment)
        .shards(2);
    let board = Ranking::create(store.db(), "inc", config).unwrap();
    board.set_scores(&[("ann", 90), ("bo", -90)]).unwrap();
    let rows = store.rank_nodes("inc");
    let refused = |r: autoshard::Result<()>, sum: i64| match r {
        Err(Error::ScoreOutOfRange {
            score,
            min: -100,
            max: 100,
        }) => assert_eq!(score, sum),
        other => panic!("{other:?}"),
    };
    refused(board.set_score("ann", 10), 100);
    refused(board.set_score("bo", -11), -101);
    refused(board.set_score("bo", i64::MIN), i64::MIN);
    refused(board.set_score("cy", 100), 100);
    refused(board.submit("ann", 1_000).map(drop), 1_090);
    refused(board.set_scores(&[("cy", 1), ("ann", 5), ("ann", 5)]), 100);
    assert_eq!(store.rank_nodes("inc"), rows, "a refused write wrote");
    assert_eq!(board.score("ann").unwrap(), Some(90));
    assert_eq!(board.score("cy").unwrap(), None);
    board.set_score("ann", 9).unwrap();
    assert_eq!(board.score("ann").unwrap(), Some(99));
    board.check_integrity().unwrap();
}

/// A queued increment cannot be checked at `enqueue` (its sum depends on
/// what is applied before it), so the worker refuses it where it falls in
/// the player's sequence: into the dead letters, the player's later
/// increments applied without it. A worker without dead letters stops at
/// it with `ScoreOutOfRange` and applies nothing of that batch.
fn a_queued_increment_past_the_range_is_dead_lettered_and_the_rest_applies<S: Boards>() {
    let store = S::fresh();
    let config = RankingConfig::new(0..100).policy(Policy::Increment);
    let board = Ranking::create(store.db(), "q", config).unwrap();
    for (player, delta) in [("ann", 60), ("ann", 50), ("bo", 1), ("ann", 30)] {
        board.enqueue(player, delta).unwrap();
    }
    let strict = board.worker().dead_letter(false).drain();
    assert!(
        matches!(strict, Err(Error::ScoreOutOfRange { score: 110, .. })),
        "{strict:?}"
    );
    assert_eq!(board.queued().unwrap(), 4, "nothing of the batch applied");
    assert_eq!(board.len().unwrap(), 0);

    let stats = board.worker().drain().unwrap();
    assert_eq!((stats.updates, stats.dead_letters), (3, 1));
    assert_eq!(
        board.score("ann").unwrap(),
        Some(90),
        "60 + 30, the 50 set aside"
    );
    assert_eq!(board.score("bo").unwrap(), Some(1));
    let letters = board.dead_letters().unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].player.as_str(), letters[0].score),
        ("ann", Some(50))
    );
    assert!(
        letters[0].reason.contains("score 110 is outside"),
        "{}",
        letters[0].reason
    );
    assert_eq!(board.queued().unwrap(), 0);
    board.check_integrity().unwrap();
}

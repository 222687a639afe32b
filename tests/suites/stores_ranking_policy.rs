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
//!
//! Control, reverted: with entry data written by every `submit_with` on a
//! `Best` board (not only when the score changed), the same test failed on
//! SQLite in `around`: a player kept their record but showed the data of a
//! slower effort. That case is kept there too.

use autoshard::ranking::Update;
use autoshard::ranking::{Policy, Ranking, RankingConfig, ScoreOrder, Submission};
use autoshard::Error;
use proptest::prelude::*;

use crate::boards;
use crate::policy_oracle;
use boards::Boards;
use policy_oracle::{order, policy, range, verify, Oracle, Report};

store_tests!(
    policies_and_orders_agree_with_a_sorted_list,
    strava_best_elapsed_time_lower_is_better,
    points_add_up_through_direct_writes_and_the_queue,
    a_board_of_another_shape_is_refused_by_open_or_create,
    boards_stored_before_policies_open_as_replace_higher_is_better,
    an_increment_past_the_range_is_refused_and_writes_nothing,
    a_queued_increment_past_the_range_is_dead_lettered_and_the_rest_applies,
    entry_data_is_the_records_and_is_bounded,
);
// Policies and orders live above the seam, so they hold on Redis Cluster
// as they are; the migration test edits SQL tables.
redis_cluster_tests!(
    entry_data_is_the_records_and_is_bounded,
    policies_and_orders_agree_with_a_sorted_list,
    strava_best_elapsed_time_lower_is_better,
    points_add_up_through_direct_writes_and_the_queue,
    a_board_of_another_shape_is_refused_by_open_or_create,
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
    /// `submit`, or with entry data `submit_with` (an index into [`DATA`]).
    Submit(usize, usize, Option<usize>),
    Remove(usize),
    Batch(Vec<(usize, usize)>),
    /// Enqueued (`None`: a removal), then drained by one worker batch.
    Queue(Vec<(usize, Option<usize>)>),
}

/// Entry data submitted: empty, short, the limit (8 bytes), one over it.
const DATA: [&[u8]; 4] = [b"", b"e1", b"effort-8", b"effort-09"];
const DATA_LIMIT: u32 = 8;

fn op() -> impl Strategy<Value = Op> {
    let pair = (0..8usize, 0..12usize);
    prop_oneof![
        3 => pair.clone().prop_map(|(p, v)| Op::Set(p, v)),
        3 => (pair.clone(), prop::option::of(0..DATA.len()))
            .prop_map(|((p, v), d)| Op::Submit(p, v, d)),
        1 => (0..8usize).prop_map(Op::Remove),
        2 => prop::collection::vec(pair, 0..10).prop_map(Op::Batch),
        2 => prop::collection::vec((0..8usize, prop::option::weighted(0.9, 0..12usize)), 1..10)
            .prop_map(Op::Queue),
    ]
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
        (policy(), order(), any::<bool>()),
        board_shape(),
        prop::collection::vec(op(), 1..16),
    );
    let outcome = runner.run(&strategy, |((policy, order, keeps_data), shape, ops)| {
        let (min, max, branching, shards, values) = shape;
        case.set(case.get() + 1);
        // One queue shard: a drain batch then takes the rows in enqueue
        // order, which the oracle replays (several shards interleave
        // players by a hash the oracle does not know).
        let config = RankingConfig::new(min..max)
            .branching(branching)
            .node_shards(shards)
            .policy(policy)
            .order(order)
            .entry_data(if keeps_data { DATA_LIMIT } else { 0 });
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
                Op::Submit(p, v, None) => match oracle.submit(&name(p), value(v)) {
                    Some(want) => prop_assert_eq!(report(board.submit(&name(p), value(v))?), want),
                    None => out_of_range(board.submit(&name(p), value(v)))?,
                },
                Op::Submit(p, v, Some(d)) => {
                    let (player, value, data) = (name(p), value(v), DATA[d]);
                    let done = board.submit_update(Update::score(&player, value).with_data(data));
                    let limit = if keeps_data { DATA_LIMIT as usize } else { 0 };
                    if data.len() > limit {
                        match done {
                            Err(Error::EntryDataTooLarge { len, max }) => {
                                prop_assert_eq!((len, max), (data.len(), limit))
                            }
                            other => prop_assert!(false, "{:?}", other),
                        }
                    } else {
                        let want = match keeps_data {
                            true => oracle.submit_with(&player, value, data),
                            false => oracle.submit(&player, value),
                        };
                        match want {
                            Some(want) => prop_assert_eq!(report(done?), want),
                            None => out_of_range(done)?,
                        }
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
        .order(ScoreOrder::LowerIsBetter);
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
            config.clone().order(ScoreOrder::LowerIsBetter),
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
    match Ranking::open_or_create(store.db(), "b", config.clone().entry_data(8)) {
        Err(Error::RankingMismatch { reason, .. }) => assert_eq!(reason, "entry data is 0, not 8"),
        other => panic!("{other:?}"),
    }
    let too_much = RankingConfig::new(0..5).entry_data(autoshard::ranking::MAX_ENTRY_DATA + 1);
    for bad in [RankingConfig::new(5..5), too_much] {
        let bad = Ranking::open_or_create(store.db(), "c", bad);
        assert!(matches!(bad, Err(Error::InvalidRanking { .. })), "{bad:?}");
    }
    assert!(matches!(
        Ranking::open(store.db(), "c"),
        Err(Error::RankingNotFound { .. })
    ));
    assert_eq!(store.rank_nodes("b"), rows);
    let opened = Ranking::open(store.db(), "b").unwrap();
    assert_eq!(opened.config().policy(), Policy::Best);
    opened.set_score("ann", 30).unwrap();
    assert_eq!(opened.score("ann").unwrap(), Some(40), "still Best");
}

/// A database whose tables predate issue 10 (no `policy`, `score_order` or
/// `entry_data` on boards, no `data` on players) opens its boards as
/// `Replace`, `HigherIsBetter`, no entry data, and they work as before;
/// creating the next board adds the columns (the players' `data` once a
/// board keeps entry data), the old boards keeping those defaults.
fn boards_stored_before_policies_open_as_replace_higher_is_better<S: Boards>() {
    let store = S::fresh();
    let old = Ranking::create(store.db(), "old", RankingConfig::new(0..100)).unwrap();
    old.set_scores(&[("ann", 5), ("bo", 9)]).unwrap();
    // The catalog record came later still: a table that predates policies
    // predates it too.
    for column in ["policy", "score_order", "entry_data", "record"] {
        store.execute(&format!(
            "ALTER TABLE autoshard_rank_boards DROP COLUMN {column}"
        ));
    }
    store.execute("ALTER TABLE autoshard_rank_players DROP COLUMN data");
    let reopened = Ranking::open(store.db(), "old").unwrap();
    assert_eq!(reopened.config(), &RankingConfig::new(0..100));
    reopened.set_score("ann", 3).unwrap();
    assert_eq!(
        reopened
            .submit_update(Update::score("ann", 4).with_data(b""))
            .unwrap()
            .new_score,
        4
    );
    assert_eq!(reopened.top(1).unwrap()[0].player, "bo");
    assert_eq!(reopened.score("ann").unwrap(), Some(4), "replaced");
    assert_eq!(reopened.around("ann", 1).unwrap()[1].data, None);

    let config = RankingConfig::new(0..100)
        .policy(Policy::Worst)
        .order(ScoreOrder::LowerIsBetter);
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
    let with_data = RankingConfig::new(0..100).entry_data(16);
    let tagged = Ranking::create(store.db(), "tagged", with_data).unwrap();
    tagged
        .submit_update(Update::score("cy", 7).with_data(b"hello"))
        .unwrap();
    assert_eq!(
        tagged.top(1).unwrap()[0].data.as_deref(),
        Some(&b"hello"[..])
    );
    assert_eq!(old.top(1).unwrap()[0].data, None);
}

/// An increment whose sum leaves the range is refused with
/// `ScoreOutOfRange` carrying the sum, by `set_score`, `submit` and
/// `set_scores` (the whole batch), and nothing is written: not the score,
/// not a tree row.
fn an_increment_past_the_range_is_refused_and_writes_nothing<S: Boards>() {
    let store = S::fresh();
    let config = RankingConfig::new(-100..100)
        .policy(Policy::Increment)
        .node_shards(2);
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

/// Issue 10 item 4 on seed 002's shape: each entry carries the effort that
/// set the record, written with the score; a slower effort leaves it,
/// `remove` deletes it; data over the board's limit, or any data on a board
/// that keeps none, is refused with `EntryDataTooLarge` and nothing is
/// written.
fn entry_data_is_the_records_and_is_bounded<S: Boards>() {
    let store = S::fresh();
    let config = RankingConfig::new(1..86_400)
        .policy(Policy::Best)
        .order(ScoreOrder::LowerIsBetter)
        .entry_data(12);
    let segment = Ranking::create(store.db(), "seg", config).unwrap();
    segment
        .submit_update(Update::score("ann", 301).with_data(b"effort-1"))
        .unwrap();
    segment
        .submit_update(Update::score("bo", 287).with_data(b"effort-2"))
        .unwrap();
    segment.set_score("cy", 340).unwrap(); // no data
    let pr = segment
        .submit_update(Update::score("ann", 280).with_data(b"effort-3"))
        .unwrap();
    assert!(pr.new_best);
    segment
        .submit_update(Update::score("bo", 299).with_data(b"effort-4"))
        .unwrap(); // slower
    let data = |entries: Vec<autoshard::ranking::Entry>| -> Vec<(String, Option<Vec<u8>>)> {
        entries.into_iter().map(|e| (e.player, e.data)).collect()
    };
    let want = vec![
        ("ann".to_string(), Some(b"effort-3".to_vec())),
        ("bo".to_string(), Some(b"effort-2".to_vec())),
        ("cy".to_string(), None),
    ];
    assert_eq!(data(segment.top(3).unwrap()), want);
    assert_eq!(data(segment.page(2, 3).unwrap()), want[1..]);
    assert_eq!(data(segment.around("bo", 1).unwrap()), want);

    let rows = store.rank_nodes("seg");
    match segment.submit_update(Update::score("cy", 200).with_data(b"thirteen-byte")) {
        Err(Error::EntryDataTooLarge { len: 13, max: 12 }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(store.rank_nodes("seg"), rows, "a refused submission wrote");
    assert_eq!(data(segment.top(3).unwrap()), want);

    assert!(segment.remove("ann").unwrap());
    segment.submit("ann", 300).unwrap();
    let ann = segment.around("ann", 0).unwrap();
    assert_eq!(
        (ann[0].score, ann[0].data.clone()),
        (300, None),
        "removed with the player"
    );

    let plain = Ranking::create(store.db(), "plain", RankingConfig::new(0..10)).unwrap();
    match plain.submit_update(Update::score("ann", 5).with_data(b"x")) {
        Err(Error::EntryDataTooLarge { len: 1, max: 0 }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(plain.len().unwrap(), 0);
    segment.check_integrity().unwrap();
}

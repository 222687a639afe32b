//! Ranking boards on Redis Cluster where the shared suites
//! (`stores_ranking/`, `stores_ranking_queue/`) cannot look: where a
//! board's keys live, and queue entries written behind the store's back
//! into its streams (the shared dead-letter test edits rows with SQL).
//! docs/design/store-redis.md, "Ranking boards on Redis Cluster".
//!
//! Runs on `AUTOSHARD_REDIS_CLUSTER_URL`, else on a cluster the test run
//! starts by itself (`autoshard-test-servers`).
#![cfg(feature = "redis")]

use autoshard::ranking::Update;
use autoshard::ranking::{Ranking, RankingConfig, Tie};
use autoshard::RedisCluster;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::stores;
use stores::redis_cluster as rc;
use stores::TestStore;

/// The master (index into `rc::masters()`) and slot of every key of each
/// board under `prefix`, by board id.
fn board_keys(prefix: &str) -> BTreeMap<String, BTreeSet<(usize, i64)>> {
    let mut masters = rc::masters();
    let mut boards: BTreeMap<String, BTreeSet<(usize, i64)>> = BTreeMap::new();
    for (master, key) in rc::scan(&format!("{prefix}:*:rk*")) {
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&key)
            .query(&mut masters[master])
            .unwrap();
        let board = key.rsplit(':').nth(1).unwrap().to_owned();
        boards.entry(board).or_default().insert((master, slot));
    }
    boards
}

/// A board is one slot (so one master), and boards spread over masters.
#[test]
fn a_board_lives_in_one_slot_and_boards_spread_over_masters() {
    let store = RedisCluster::fresh();
    for i in 0..12 {
        let board = Ranking::create(&*store, &format!("b{i}"), RankingConfig::new(0..10)).unwrap();
        board.set_score("a", 1).unwrap();
        board.enqueue("b", 2).unwrap();
        board.worker().drain().unwrap();
        board.enqueue("c", 3).unwrap();
    }
    let boards = board_keys(store.prefix());
    assert_eq!(boards.len(), 12, "{boards:?}");
    let mut used = BTreeSet::new();
    for (board, places) in &boards {
        assert_eq!(places.len(), 1, "board {board} spans {places:?}");
        used.extend(places.iter().map(|&(master, _)| master));
    }
    // 12 random slots all on one of 3 masters: (1/3)^11, about 6 in a
    // million.
    assert!(used.len() >= 2, "12 boards on masters {used:?}");
}

/// An approximate board's snapshots are one hash in the board's slot
/// (`:x`), beside its players and ranking order and no count tree; a
/// refresh fills it, and deleting the board unlinks it with the rest.
#[test]
fn an_approximate_boards_snapshots_live_in_its_slot_and_go_with_it() {
    let store = RedisCluster::fresh();
    let config = RankingConfig::new(0..1_000).approximate(4);
    let board = Ranking::create(&*store, "approx", config).unwrap();
    let scores: Vec<(String, i64)> = (0..40).map(|i| (format!("p{i}"), i * 7)).collect();
    let scores: Vec<(&str, i64)> = scores.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    board.set_scores(&scores).unwrap();
    board.refresh().unwrap();
    board.refresh().unwrap();
    assert_eq!(board.approx_rank(273).unwrap(), 1);
    let keys = |store: &RedisCluster| -> BTreeSet<String> {
        rc::scan(&format!("{}:*:rk*", store.prefix()))
            .into_iter()
            .map(|(_, key)| key.rsplit(':').next().unwrap().to_owned())
            .collect()
    };
    let found = keys(&store);
    assert!(found.contains("x") && found.contains("o"), "{found:?}");
    assert!(!found.contains("n") && !found.contains("a"), "{found:?}");
    let places = board_keys(store.prefix());
    assert!(places.values().all(|p| p.len() == 1), "{places:?}");
    let snapshots: BTreeMap<String, String> = {
        let (master, key) = rc::scan(&format!("{}:*:rk*:x", store.prefix())).remove(0);
        redis::cmd("HGETALL")
            .arg(&key)
            .query(&mut rc::masters()[master])
            .unwrap()
    };
    // The second refresh's 4 rows, its pointer fields; the first's rows
    // were deleted when it published.
    let rows: Vec<&String> = snapshots.keys().filter(|k| k.contains(':')).collect();
    assert_eq!(rows.len(), 4, "{snapshots:?}");
    assert!(rows.iter().all(|k| k.starts_with("2:")), "{snapshots:?}");
    assert!(Ranking::delete(&*store, "approx").unwrap());
    assert_eq!(keys(&store), BTreeSet::from(["v".to_owned()]));
}

/// A board of one tree is stored natively: its keys are the ranking
/// order, players, distinct scores, their counts, the arrival counter, the
/// version and the queue's heads and stream; no count-tree rows (`:n`, `:a`), whatever wrote
/// it (direct writes of each kind, a submission, a drained queue). So are
/// a split board's trees (`redis_split_boards.rs` checks their reads).
///
/// Control: with `stored_natively` in `stores/redis/boards.rs` answering
/// `false`, the test fails at the first `assert_eq!` with `left: {"a",
/// "h", "n", "o", "p", "q0", "v"}`.
#[test]
fn a_board_of_one_tree_keeps_no_count_tree_on_redis() {
    use autoshard::ranking::Policy;
    let store = RedisCluster::fresh();
    let board = Ranking::create(&*store, "native", RankingConfig::new(0..100)).unwrap();
    board.set_score("a", 5).unwrap();
    board.set_scores(&[("b", 7), ("c", 7)]).unwrap();
    board.submit("d", 9).unwrap();
    assert!(board.remove("c").unwrap());
    board.enqueue("e", 3).unwrap();
    board.worker().drain().unwrap();
    let inc = RankingConfig::new(0..100).policy(Policy::Increment);
    let sums = Ranking::create(&*store, "sums", inc).unwrap();
    sums.set_score("a", 2).unwrap();
    let all: BTreeSet<String> = rc::scan(&format!("{}:*:rk*", store.prefix()))
        .into_iter()
        .map(|(_, key)| key.rsplit(':').next().unwrap().to_owned())
        .collect();
    // `q0`: the queue shard's stream, emptied by the drain's commit.
    let want: BTreeSet<String> = ["c", "h", "m", "o", "p", "q0", "s", "v"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(all, want);
    assert_eq!(board.rank("b", Tie::Ordinal).unwrap(), Some(2));
    assert_eq!(board.page(1, 4).unwrap().len(), 4);
    assert_eq!(sums.score("a").unwrap(), Some(2));
    board.check_integrity().unwrap();

    let split = RankingConfig::new(0..100).trees(2);
    let split = Ranking::create(&*store, "split", split).unwrap();
    split.set_scores(&[("a", 1), ("b", 2), ("c", 3)]).unwrap();
    split.enqueue("d", 4).unwrap();
    for t in 0..2 {
        split.tree_worker(t).unwrap().drain().unwrap();
    }
    let all: BTreeSet<String> = rc::scan(&format!("{}:*:rk*", store.prefix()))
        .into_iter()
        .map(|(_, key)| key.rsplit(':').next().unwrap().to_owned())
        .collect();
    assert!(!all.contains("n") && !all.contains("a"), "{all:?}");
    assert!(all.contains("o") && all.contains("c"), "{all:?}");
    assert_eq!(split.rank("d", Tie::Ordinal).unwrap(), Some(1));
    split.check_integrity().unwrap();
}

/// Entry data is a hash in the board's slot, and a reset unlinks every key
/// of the board's data (entry data included) but its version and the
/// dead-letter counter, while a board next to it keeps everything.
///
/// Control: with the entry-data key left out of the reset's script
/// (`CLEARED` in `board_tx/mod.rs` without `Hash::Data`), the `:e` key outlives
/// the reset and the test fails at `after`.
/// A trim of a native board is one script per batch however busy its
/// writer (docs/design/ranking-tree.md, "Trimming"): 640 players of a range
/// go in batches of 64 while a writer moves every 5th out of it and adds
/// players above it, one `set_score` at a time, throughout. The trim takes
/// at most one script per full batch and one more that finds the rest;
/// the writer's players all stay. Control: on the transaction path (a batch
/// of reads, then an optimistic commit retried after every writer's
/// commit) `native_batches` stays 0 and the bound's lower end fails.
#[test]
fn a_trim_beside_a_writer_is_one_script_per_batch() {
    const BATCH: u64 = 64;
    let store = RedisCluster::fresh();
    autoshard::__private::trim_hooks::batch(BATCH);
    let config = RankingConfig::new(0..10_000).entry_data(16);
    let board = Ranking::create(&*store, "trim", config).unwrap();
    let n = 10 * BATCH as usize;
    let inside: Vec<String> = (0..n).map(|i| format!("in{i}")).collect();
    let start: Vec<(&str, i64)> = inside
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_str(), (i as i64 * 13) % 1_000))
        .collect();
    board.set_scores(&start).unwrap();
    board
        .submit_update(Update::score("keep", 5_000).with_data(b"kept data"))
        .unwrap();
    board
        .submit_update(Update::score("in1", 13).with_data(b"trimmed data"))
        .unwrap();
    let moved: Vec<(&str, i64)> = inside
        .iter()
        .step_by(5)
        .enumerate()
        .map(|(i, p)| (p.as_str(), 1_000 + i as i64))
        .collect();
    autoshard::__private::trim_hooks::native_batches();
    let removed = std::thread::scope(|s| {
        s.spawn(|| {
            for (i, &(p, score)) in moved.iter().enumerate() {
                board.set_score(p, score).unwrap();
                board.set_score(&format!("new{i}"), 9_000).unwrap();
            }
        });
        board.remove_between(0..=999).unwrap()
    });
    let scripts = autoshard::__private::trim_hooks::native_batches();
    assert!(
        (1..=n as u64 / BATCH + 1).contains(&scripts),
        "{scripts} scripts for {n} players in batches of {BATCH}"
    );
    assert!(
        removed >= (n - moved.len()) as u64 && removed <= n as u64,
        "{removed}"
    );
    assert_eq!(board.count_between(0..=999).unwrap(), 0);
    for &(p, score) in &moved {
        assert_eq!(board.score(p).unwrap(), Some(score), "{p}");
    }
    assert_eq!(board.len().unwrap(), 1 + 2 * moved.len() as u64);
    let kept = board.entry("keep").unwrap().unwrap().data;
    assert_eq!(kept.as_deref(), Some(&b"kept data"[..]));
    // A trimmed player's entry data went with them.
    board.set_score("in1", 2_000).unwrap();
    assert_eq!(board.entry("in1").unwrap().unwrap().data, None);
    board.remove("in1").unwrap();
    // `keep_top` too: one script per batch, the best by ordinal rank kept.
    assert_eq!(
        board.keep_top(100).unwrap(),
        2 * moved.len() as u64 + 1 - 100
    );
    let scripts = autoshard::__private::trim_hooks::native_batches();
    assert!((1..=4).contains(&scripts), "{scripts}");
    let top = board.top(200).unwrap();
    assert_eq!(top.len(), 100);
    assert!(top.iter().all(|e| e.score == 9_000), "the newcomers lead");
    board.check_integrity().unwrap();
}

/// Every direct write to a native board is one request, one script
/// (docs/design/store-redis.md, "Boards stored natively"): `set_score`,
/// `set_scores` and `submit` (its ranks counted in the script) under every
/// policy, `Increment` too (its sums in the script, exact, since
/// 2026-11-30), an increment out of the range refused with nothing
/// written, and `remove` of a player who is there or not (its answer from
/// the script's count of players found). Control: the counter sees every
/// request: a worker batch (a transaction: reads, then the commit) counts
/// more than one, and so did every `submit` before it was a script (3,
/// before 2026-11-29, ninth session) and `remove` (2).
#[test]
fn every_direct_write_to_a_native_board_is_one_round_trip() {
    use autoshard::__private::redis_hooks::round_trips;
    use autoshard::ranking::Policy;
    let store = RedisCluster::fresh();
    let trips = |f: &mut dyn FnMut()| {
        let before = round_trips();
        f();
        round_trips() - before
    };
    for (i, policy) in [
        Policy::Replace,
        Policy::Best,
        Policy::Worst,
        Policy::Increment,
    ]
    .into_iter()
    .enumerate()
    {
        let config = RankingConfig::new(0..1_000).policy(policy).entry_data(8);
        let board = Ranking::create(&*store, &format!("trips{i}"), config).unwrap();
        // The board's record cached, the scripts loaded.
        board
            .submit_update(Update::score("warm", 1).with_data(b"w"))
            .unwrap();
        board.remove("warm").unwrap();
        assert_eq!(trips(&mut || board.set_score("a", 5).unwrap()), 1);
        assert_eq!(trips(&mut || board.set_score("a", 7).unwrap()), 1);
        let batch = [("b", 3), ("c", 4), ("a", 2)];
        assert_eq!(trips(&mut || board.set_scores(&batch).unwrap()), 1);
        let want = match policy {
            Policy::Best => 7,
            Policy::Increment => 14,
            _ => 2,
        };
        assert_eq!(board.score("a").unwrap(), Some(want), "{policy:?}");
        assert_eq!(board.score("c").unwrap(), Some(4));
        if policy == Policy::Increment {
            let mut refused = None;
            let batch = [("c", 5), ("a", 990)];
            assert_eq!(trips(&mut || refused = Some(board.set_scores(&batch))), 1);
            assert!(
                matches!(
                    refused,
                    Some(Err(autoshard::Error::ScoreOutOfRange { score: 1_004, .. }))
                ),
                "{refused:?}"
            );
            assert_eq!(board.score("c").unwrap(), Some(4), "nothing written");
        }
        let mut found = None;
        assert_eq!(trips(&mut || found = Some(board.remove("a").unwrap())), 1);
        assert_eq!(found, Some(true), "{policy:?}");
        assert_eq!(trips(&mut || found = Some(board.remove("a").unwrap())), 1);
        assert_eq!(found, Some(false), "{policy:?}");
        assert_eq!(board.score("a").unwrap(), None);
        let submit = trips(&mut || assert!(board.submit("d", 9).unwrap().changed()));
        let next = if policy == Policy::Worst { 8 } else { 11 };
        let again = trips(&mut || assert!(board.submit("d", next).unwrap().changed()));
        assert_eq!((submit, again), (1, 1), "{policy:?}");
        board.enqueue("e", 3).unwrap();
        let batch = trips(&mut || assert_eq!(board.worker().drain().unwrap().updates, 1));
        assert!(batch > 1, "{policy:?}: a worker batch counted {batch}");
        board.check_integrity().unwrap();
    }
}

/// A family submission whose filter values are the player's stored ones
/// (or a new player's) is one request, one script over the family's
/// boards, which share a slot (`ranking/family/one_step.rs`), with filters
/// or without, under `Increment` too (a sum past the range on a member
/// refused in that request); its ranks are the boards'. A player whose
/// values change may leave boards and takes the transaction. Control: the
/// counter sees every request: that transaction counts more than one (4
/// without filters before 2026-11-30, 5 with a look at the stored values
/// before 2026-11-29, eighth session).
#[test]
fn a_family_submission_is_one_round_trip() {
    use autoshard::__private::redis_hooks::round_trips;
    use autoshard::ranking::{Family, FamilyConfig, Period, Policy, Tie, Window};
    const AT: i64 = 1_795_516_200;
    let store = RedisCluster::fresh();
    let windows = [Window::AllTime, Window::Month, Window::Day];
    let trips = |f: &mut dyn FnMut()| {
        let before = round_trips();
        f();
        round_trips() - before
    };
    for (name, filtered, policy) in [
        ("plainfam", false, Policy::Replace),
        ("agefam", true, Policy::Best),
        ("sumfam", false, Policy::Increment),
    ] {
        let mut config = FamilyConfig::new(RankingConfig::new(0..1_000_000).policy(policy));
        if filtered {
            config = config.filter("age", ["young", "old"]);
        }
        for w in windows {
            config = config.window(w);
        }
        let family = Family::create(&*store, name, config).unwrap();
        let attempt = |player: &str, score: i64, age: &str| {
            let mut s = family.submission(player, score).at(AT);
            if filtered {
                s = s.filter("age", age);
            }
            s.submit()
        };
        let submit = |player: &str, score: i64, age: &str| attempt(player, score, age).unwrap();
        let submit_err = |player: &str, score: i64| attempt(player, score, "young").unwrap_err();
        for p in 0..20 {
            submit(&format!("p{p}"), p * 10, "young");
        }
        let mut counts = Vec::new();
        for round in 0..3 {
            let mut done = None;
            counts.push(trips(&mut || {
                done = Some(submit("p7", 100 + round, "young"))
            }));
            let done = done.unwrap();
            let board = family
                .board(Window::Day, Period::At(AT), None)
                .unwrap()
                .unwrap();
            let day = done.get(Window::Day, None).unwrap();
            assert_eq!(
                Some(day.new_rank),
                board.rank("p7", Tie::Standard).unwrap(),
                "{name}"
            );
            assert_eq!(
                done.members.len(),
                3 * (1 + usize::from(filtered)),
                "{name}"
            );
        }
        // A new player, in one step too.
        counts.push(trips(&mut || drop(submit("newcomer", 5, "young"))));
        assert!(counts.iter().all(|&n| n == 1), "{name}: {counts:?}");
        if policy == Policy::Increment {
            // Past the range on a member: refused in the same one request,
            // no member written.
            let mut refused = None;
            counts.push(trips(&mut || refused = Some(submit_err("p7", 999_999_000))));
            assert!(
                matches!(refused, Some(autoshard::Error::ScoreOutOfRange { .. })),
                "{refused:?}"
            );
            assert_eq!(counts.last(), Some(&1));
        }
        if filtered {
            // Values that change: the transaction, which leaves the boards
            // of the value the player had.
            let moved = trips(&mut || assert_eq!(submit("p7", 500, "old").left.len(), 3));
            assert!(moved > 1, "{name}: {moved}");
            let young = Some(("age", "young"));
            let board = family
                .board(Window::Day, Period::At(AT), young)
                .unwrap()
                .unwrap();
            assert_eq!(board.score("p7").unwrap(), None);
            board.check_integrity().unwrap();
        }
        let score = match policy {
            Policy::Increment => 70 + 100 + 101 + 102,
            _ if filtered => 500,
            _ => 102,
        };
        for w in windows {
            let board = family.board(w, Period::At(AT), None).unwrap().unwrap();
            assert_eq!(board.score("p7").unwrap(), Some(score), "{name} {w:?}");
            board.check_integrity().unwrap();
        }
    }
}

/// A family submission writes its boards in one commit and reads them
/// ahead: each read the first member makes is sent for every member of
/// its kind in the same round trip (`board_tx::Ahead`): 5 round trips
/// for the 9 members and the players board. Control: with `write_boards`
/// in place of `write_boards_alike` in `family/submit.rs` it counted 22.
#[test]
fn a_family_submission_reads_its_boards_together() {
    use autoshard::__private::redis_hooks::round_trips;
    use autoshard::ranking::{Family, FamilyConfig, Window};
    const AT: i64 = 1_795_516_200;
    let store = RedisCluster::fresh();
    let mut config = FamilyConfig::new(RankingConfig::new(0..1_000_000))
        .filter("age", ["u35", "35-44", "45-54"])
        .filter("weight", ["light", "heavy"]);
    for w in [Window::AllTime, Window::Month, Window::Day] {
        config = config.window(w);
    }
    let family = Family::create(&*store, "fam", config).unwrap();
    let submit = |player: &str, score: i64| {
        let entry = family.submission(player, score).at(AT);
        entry
            .filter("age", "35-44")
            .filter("weight", "light")
            .submit()
            .unwrap();
    };
    for p in 0..20 {
        submit(&format!("p{p}"), p);
    }
    let mut counts = Vec::new();
    for round in 0..3 {
        let before = round_trips();
        submit("p7", 100 + round);
        counts.push(round_trips() - before);
    }
    assert!(
        counts.iter().all(|&n| n <= 8),
        "round trips per submission: {counts:?}"
    );
    for w in [Window::AllTime, Window::Month, Window::Day] {
        let board = family
            .board(w, autoshard::ranking::Period::At(AT), None)
            .unwrap()
            .expect("a member");
        assert_eq!(board.score("p7").unwrap(), Some(102));
        assert_eq!(board.rank("p7", Tie::Standard).unwrap(), Some(1));
        board.check_integrity().unwrap();
    }
}

#[test]
fn entry_data_lives_in_the_boards_slot_and_a_reset_unlinks_it() {
    let store = RedisCluster::fresh();
    let config = RankingConfig::new(0..100).entry_data(16);
    let board = Ranking::create(&*store, "b", config.clone()).unwrap();
    let other = Ranking::create(&*store, "o", config).unwrap();
    for b in [&board, &other] {
        b.submit_update(Update::score("alice", 10).with_data(b"effort-1"))
            .unwrap();
        b.submit_update(Update::score("bob", 20).with_data(b""))
            .unwrap();
    }
    let top = board.top(2).unwrap();
    assert_eq!(top[0].data.as_deref(), Some(&b""[..]), "empty data is data");
    assert_eq!(top[1].data.as_deref(), Some(&b"effort-1"[..]));
    let boards = board_keys(store.prefix());
    assert!(
        boards.values().all(|places| places.len() == 1),
        "{boards:?}"
    );

    let suffixes = |prefix: &str| -> BTreeSet<String> {
        rc::scan(&format!("{prefix}:*:rk*"))
            .into_iter()
            .map(|(_, key)| key.rsplit(':').next().unwrap().to_owned())
            .collect()
    };
    let before = suffixes(store.prefix());
    assert!(before.contains("e"), "{before:?}");
    board.reset().unwrap();
    assert_eq!(board.len().unwrap(), 0);
    assert_eq!(board.top(5).unwrap(), []);
    board.check_integrity().unwrap();
    // One board's keys left: every kind but the version is the other's.
    let after: Vec<(usize, String)> = rc::scan(&format!("{}:*:rk*:e", store.prefix()));
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(other.top(2).unwrap().len(), 2);
    other.check_integrity().unwrap();
    // The reset board takes data again.
    board
        .submit_update(Update::score("carol", 5).with_data(b"x"))
        .unwrap();
    assert_eq!(board.top(1).unwrap()[0].data.as_deref(), Some(&b"x"[..]));
    board.check_integrity().unwrap();
}

/// Bad entries written into a queue stream by hand: a score outside the
/// board, an empty player, a score that is not an integer and an entry
/// without a player. The worker sets all four aside as dead letters, in
/// the transactions that drain their neighbours, and the rest drains.
///
/// Control: with `take_queued` not marking the unreadable score (the
/// parse failure dropped), the worker applies `bad-int` as a removal and
/// the test fails at `(stats.updates, stats.dead_letters)`.
#[test]
fn queue_entries_written_behind_the_stores_back_are_set_aside() {
    let store = RedisCluster::fresh();
    let board = Ranking::create(&*store, "b", RankingConfig::new(0..100)).unwrap();
    let good: Vec<String> = (0..20).map(|i| format!("good-{i}")).collect();
    for (i, player) in good.iter().enumerate() {
        board.enqueue(player, i as i64).unwrap();
    }
    board.enqueue("bad-int", 1).unwrap();
    let prefix = store.prefix().to_owned();
    let (master, heads) = rc::scan(&format!("{prefix}:*:rk*:h")).pop().unwrap();
    let stream = heads.replace(":h", ":q0");
    let mut conn = rc::masters().remove(master);
    let next: i64 = redis::cmd("HINCRBY")
        .arg(&heads)
        .arg("0")
        .arg(3)
        .query(&mut conn)
        .unwrap();
    let entries: [&[&str]; 3] = [
        &["p", "bad-score", "s", "1000"],
        &["p", "", "s", "6"],
        &["s", "7"],
    ];
    for (n, fields) in entries.iter().enumerate() {
        let id = format!("{}-1", next - 3 + n as i64);
        redis::cmd("XADD")
            .arg(&stream)
            .arg(id)
            .arg(*fields)
            .query::<String>(&mut conn)
            .unwrap();
    }
    for (i, player) in good.iter().enumerate() {
        board.enqueue(player, 50 + i as i64).unwrap();
    }
    // Streams are append-only: the unreadable score goes in as a later
    // entry of a player already queued.
    let next: i64 = redis::cmd("HINCRBY")
        .arg(&heads)
        .arg("0")
        .arg(1)
        .query(&mut conn)
        .unwrap();
    redis::cmd("XADD")
        .arg(&stream)
        .arg(format!("{}-1", next - 1))
        .arg(&["p", "bad-int", "s", "x"])
        .query::<String>(&mut conn)
        .unwrap();

    let worker = board.worker().batch_size(8).spawn().unwrap();
    board.flush_within(Duration::from_secs(30)).unwrap();
    let stats = worker.stop().unwrap();
    // 20 + 1 + 20 enqueued updates; four entries set aside.
    assert_eq!((stats.updates, stats.dead_letters), (41, 4), "{stats:?}");
    assert_eq!(board.queued().unwrap(), 0);
    for (i, player) in good.iter().enumerate() {
        assert_eq!(board.score(player).unwrap(), Some(50 + i as i64));
    }
    assert_eq!(board.score("bad-int").unwrap(), Some(1));
    assert_eq!(board.len().unwrap(), 21);
    board.check_integrity().unwrap();

    let letters = board.dead_letters().unwrap();
    assert_eq!(letters.len(), 4, "{letters:?}");
    let found = |player: &str, score: Option<i64>| {
        let letter = letters
            .iter()
            .find(|l| l.player == player && l.score == score);
        letter.unwrap_or_else(|| panic!("{player:?} {score:?} not in {letters:?}"))
    };
    let out_of_range = found("bad-score", Some(1000));
    assert!(out_of_range
        .reason
        .contains("outside the board's range 0..100"));
    assert!(found("", Some(6)).reason.contains("1 to 256 bytes"));
    assert!(found("", Some(7)).reason.contains("no player"));
    assert!(found("bad-int", None).reason.contains("not an integer"));
    let ids: BTreeSet<i64> = letters.iter().map(|l| l.id).collect();
    assert_eq!(ids.len(), 4);

    assert!(board.delete_dead_letter(out_of_range.id).unwrap());
    assert!(!board.delete_dead_letter(out_of_range.id).unwrap());
    assert_eq!(board.dead_letters().unwrap().len(), 3);
    assert_eq!(board.rank("good-19", Tie::Standard).unwrap(), Some(1));
}

/// Board write rates on the test cluster, printed (not asserted: the
/// machine is shared). Run with
/// `cargo test --release --features redis --test store_specific -- --ignored --nocapture measure`;
/// figures in docs/design/store-redis.md ("Ranking boards on Redis Cluster").
#[test]
#[ignore = "a measurement, not a test"]
fn measure_board_writes() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;
    let store = RedisCluster::fresh();
    let seconds = 3;
    let config = || RankingConfig::new(0..1_000_000).node_shards(4).queues(4);
    // `threads` writers of `set_score` on `boards` boards (thread t on board
    // t mod boards) for a few seconds: writes per second.
    let direct = |threads: usize, boards: usize, tag: &str| {
        let boards: Vec<Ranking> = (0..boards)
            .map(|b| Ranking::create(&*store, &format!("{tag}{b}"), config()).unwrap())
            .collect();
        let done = AtomicU64::new(0);
        let start = Instant::now();
        std::thread::scope(|s| {
            for t in 0..threads {
                let (board, done) = (&boards[t % boards.len()], &done);
                s.spawn(move || {
                    let mut n = 0u64;
                    while start.elapsed() < Duration::from_secs(seconds) {
                        let player = format!("p{t}-{}", n % 1000);
                        board
                            .set_score(&player, ((n * 7919) % 1_000_000) as i64)
                            .unwrap();
                        n += 1;
                    }
                    done.fetch_add(n, Ordering::Relaxed);
                });
            }
        });
        for board in &boards {
            board.check_integrity().unwrap();
        }
        done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
    };
    println!("set_score, 1 thread, 1 board: {:.0}/s", direct(1, 1, "a"));
    println!("set_score, 4 threads, 1 board: {:.0}/s", direct(4, 1, "b"));
    println!("set_score, 4 threads, 4 boards: {:.0}/s", direct(4, 4, "c"));

    let board = Ranking::create(&*store, "queue", config()).unwrap();
    let n = 20_000;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..4 {
            let board = &board;
            s.spawn(move || {
                for i in 0..n / 4 {
                    board.enqueue(&format!("q{t}-{i}"), i as i64).unwrap();
                }
            });
        }
    });
    let enqueued = n as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    let stats = board.worker().batch_size(1_000).drain().unwrap();
    let drained = stats.updates as f64 / start.elapsed().as_secs_f64();
    assert_eq!(stats.updates, n as u64);
    board.check_integrity().unwrap();
    println!("enqueue, 4 threads: {enqueued:.0}/s; one worker (batches of 1,000): {drained:.0} updates/s");
}

/// A native board's increments are summed in its script on the score's
/// 8-byte key, in two 32-bit halves (Lua's numbers are doubles, exact to
/// 2^53 only): sums that carry between the halves, pass 2^53 and reach
/// both ends of `i64` are exact, under either order, and a sum past the
/// range is refused. Control: without the carry between the halves, the
/// first step across score 0 is off by 2^32 (the policy oracle's small
/// ranges did not catch that).
#[test]
fn native_increments_are_exact_across_the_score_keys_halves() {
    use autoshard::ranking::{Policy, ScoreOrder};
    let store = RedisCluster::fresh();
    let steps: [i64; 14] = [
        5,
        -10,
        1 << 32,
        -(1 << 33),
        (1 << 53) + 1,
        -((1 << 53) + 3),
        4_294_967_295,
        1,
        -1,
        i64::MAX,
        i64::MAX - 1,
        i64::MIN,
        i64::MIN,
        -7,
    ];
    for (i, order) in [ScoreOrder::HigherIsBetter, ScoreOrder::LowerIsBetter]
        .into_iter()
        .enumerate()
    {
        let config = RankingConfig::new(i64::MIN..i64::MAX)
            .policy(Policy::Increment)
            .order(order);
        let board = Ranking::create(&*store, &format!("exact{i}"), config).unwrap();
        let mut want: Option<i64> = None;
        for (n, &step) in steps.iter().enumerate() {
            let sum = i128::from(want.unwrap_or(0)) + i128::from(step);
            let result = board.submit("p", step);
            match i64::try_from(sum).ok().filter(|&s| s < i64::MAX) {
                Some(sum) => {
                    let done = result.unwrap_or_else(|e| panic!("{order:?} step {n}: {e:?}"));
                    assert_eq!(
                        (done.old_score, done.new_score),
                        (want, sum),
                        "{order:?} step {n}"
                    );
                    want = Some(sum);
                }
                None => assert!(
                    matches!(result, Err(autoshard::Error::ScoreOutOfRange { .. })),
                    "{order:?} step {n}: {result:?}"
                ),
            }
            assert_eq!(board.score("p").unwrap(), want, "{order:?} step {n}");
        }
        board.check_integrity().unwrap();
    }
}

//! Split boards (`RankingConfig::trees`) on Redis Cluster: their trees are
//! sorted sets on slots of different masters, and a query merges them
//! (`ranking/trees/native.rs`). The shared oracle suite
//! (`stores_ranking_trees`) checks every query on boards of a few dozen
//! players; these check the reads the suite's sizes never reach: a
//! position found by narrowing each tree's window of ranks (past 2,048
//! players), dense ranks counted over several chunks of distinct scores
//! (past 10,000 of them), against a board of one tree given the same
//! writes, and each read against the others; and the reads beside
//! writers, which must not retry without end.
//!
//! Runs on `AUTOSHARD_REDIS_CLUSTER_URL`, else on a cluster the test run
//! starts by itself (`autoshard-test-servers`).
#![cfg(feature = "redis")]

use autoshard::ranking::{Entry, Ranking, RankingConfig, Tie};
use autoshard::RedisCluster;

use crate::stores::TestStore;

const PLAYERS: usize = 6_000;

fn name(i: usize) -> String {
    format!("p{i}")
}

/// Writes the same updates to every board, one call for all of them at
/// a time, so arrivals (and so ties) are ordered alike.
fn each(boards: &[&Ranking], f: impl Fn(&Ranking)) {
    boards.iter().for_each(|b| f(b));
}

/// The positions a check reads at: the ends, both sides of the window a
/// selection reads whole (2,048) and deep ones.
fn positions(len: u64) -> Vec<u64> {
    let mut at = vec![1, 2, 700, 2_047, 2_048, 2_049, 2_050, 3_001, 4_444];
    at.extend([len / 2, len - 5, len - 1, len, len + 1]);
    at.into_iter().filter(|&p| p >= 1).collect()
}

fn same<T: PartialEq + std::fmt::Debug>(what: &str, split: T, one: T) {
    assert_eq!(split, one, "{what}: split board (left) vs one tree (right)");
}

/// A split board reads as a board of one tree given the same writes, at
/// every depth: pages, `score_at_rank`, every rank of sampled players,
/// `around`, percentiles and score ranges; and a submission reports the
/// same ranks. 6,000 players on 40 scores: most of each page's players
/// are tied, so their order is the arrivals' (board-wide on the split
/// board, `trees/arrival.rs`).
///
/// Controls, reverted: with the selection's final skip not taking off
/// the players below the windows (`native.rs`, `select`: `target` instead
/// of `target - Σ lo`), this failed at `page at 2047` (before pages were
/// read from an anchor; `select` now only finds the anchor, and a wrong
/// one costs a second read, not a wrong page); with a page's skip not
/// taking off the players ahead of its anchor (`anchored`: `from - 1`
/// instead of `from - 1 - ahead`), at `page at 700`.
#[test]
fn a_split_board_reads_as_a_board_of_one_tree_at_any_depth() {
    reads_as_one_tree((0..PLAYERS).map(name).collect());
}

/// The same with every player in the first of the 3 trees: pivots taken
/// where equal trees would hold a position find no anchor near it, and
/// a tree's share of a page's run is far more than a third, so the look
/// and the read fall back (selection, longer reads) and still agree.
#[test]
fn a_split_board_of_unequal_trees_reads_as_a_board_of_one_tree() {
    use autoshard::__private::tree_hooks::tree_of;
    let names = (0..)
        .map(name)
        .filter(|p| tree_of(p, 3) == 0)
        .take(PLAYERS)
        .collect();
    reads_as_one_tree(names);
}

/// `names` (`PLAYERS` of them) written alike to a `trees(3)` board and a
/// board of one tree, then every read compared.
fn reads_as_one_tree(names: Vec<String>) {
    let store = RedisCluster::fresh();
    let one = Ranking::create(&*store, "one", RankingConfig::new(0..40)).unwrap();
    let split = Ranking::create(&*store, "split", RankingConfig::new(0..40).trees(3)).unwrap();
    let boards = [&split, &one];
    for chunk in names.chunks(500).enumerate() {
        let (c, chunk) = chunk;
        let scores: Vec<(&str, i64)> = chunk
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_str(), ((c * 500 + i) * 7_919 % 40) as i64))
            .collect();
        each(&boards, |b| b.set_scores(&scores).unwrap());
    }
    // Moves one at a time (a new arrival each), removals and submissions.
    for i in (0..PLAYERS).step_by(23) {
        each(&boards, |b| {
            b.set_score(&names[i], (i % 40) as i64).unwrap()
        });
    }
    for i in (5..PLAYERS).step_by(61) {
        each(&boards, |b| assert!(b.remove(&names[i]).unwrap()));
    }
    for i in (7..PLAYERS).step_by(97) {
        let got: Vec<_> = boards
            .iter()
            .map(|b| b.submit(&names[i], (i % 37) as i64).unwrap())
            .collect();
        same(&format!("submission of {}", names[i]), &got[0], &got[1]);
    }
    let len = one.len().unwrap();
    same("len", split.len().unwrap(), len);
    for at in positions(len) {
        same(
            &format!("page at {at}"),
            split.page(at, at + 9).unwrap(),
            one.page(at, at + 9).unwrap(),
        );
        same(
            &format!("score_at_rank {at}"),
            split.score_at_rank(at).unwrap(),
            one.score_at_rank(at).unwrap(),
        );
    }
    for i in (0..PLAYERS).step_by(211) {
        let p = &names[i];
        for tie in [Tie::Standard, Tie::Dense, Tie::Ordinal] {
            same(
                &format!("rank of {p} ({tie:?})"),
                split.rank(p, tie).unwrap(),
                one.rank(p, tie).unwrap(),
            );
        }
        same(
            &format!("around {p}"),
            split.around(p, 3).unwrap(),
            one.around(p, 3).unwrap(),
        );
        same(
            &format!("percentile of {p}"),
            split.percentile(p).unwrap(),
            one.percentile(p).unwrap(),
        );
    }
    for p in [0.0, 0.1, 12.5, 33.3, 50.0, 66.7, 99.9, 100.0] {
        same(
            &format!("score_at_percentile {p}"),
            split.score_at_percentile(p).unwrap(),
            one.score_at_percentile(p).unwrap(),
        );
    }
    same(
        "between",
        split.between(10..=12, 50).unwrap(),
        one.between(10..=12, 50).unwrap(),
    );
    split.check_integrity().unwrap();
}

/// Every page of a split board drained by its tree workers agrees with the
/// board's own counts: the player at position `p` of a page has ordinal
/// rank `p`, standard rank 1 + the players of better scores, and the
/// pages list each player once. The pages are found by selection
/// (`native.rs`), the ranks by counting in each tree: two ways to one
/// answer. The queue's arrivals are drawn by each tree's worker, so no
/// board of one tree orders these ties alike; 12,000 distinct scores make
/// a dense rank read its distinct scores in two chunks.
#[test]
fn pages_and_ranks_of_a_drained_split_board_agree() {
    let store = RedisCluster::fresh();
    let config = RankingConfig::new(0..1_000_000).trees(3);
    let split = Ranking::create(&*store, "queued", config).unwrap();
    let n = 15_000usize;
    for i in 0..n {
        // 12,000 distinct scores, a few shared.
        split
            .enqueue(&name(i), ((i * 7_919) % 12_000) as i64 * 3)
            .unwrap();
    }
    for t in 0..3 {
        split.tree_worker(t).unwrap().drain().unwrap();
    }
    assert_eq!(split.len().unwrap(), n as u64);
    let mut seen = std::collections::HashSet::new();
    let mut last: Option<Entry> = None;
    let mut distinct_seen = 0u64;
    for from in (1..=n as u64).step_by(1_000) {
        let page = split.page(from, from + 999).unwrap();
        for (i, e) in page.iter().enumerate() {
            assert_eq!(e.position, from + i as u64, "{e:?}");
            assert!(seen.insert(e.player.clone()), "listed twice: {e:?}");
            if last.as_ref().is_none_or(|l| l.score != e.score) {
                distinct_seen += 1;
            }
            assert_eq!(e.dense, distinct_seen, "{e:?}");
            if let Some(l) = &last {
                assert!(l.score >= e.score, "{l:?} then {e:?}");
            }
            last = Some(e.clone());
        }
    }
    assert_eq!(seen.len(), n);
    for position in (1..=n as u64).step_by(733) {
        let e = split.page(position, position).unwrap().pop().unwrap();
        assert_eq!(
            split.rank(&e.player, Tie::Ordinal).unwrap(),
            Some(position),
            "{e:?}"
        );
        assert_eq!(split.rank(&e.player, Tie::Standard).unwrap(), Some(e.rank));
        assert_eq!(split.rank(&e.player, Tie::Dense).unwrap(), Some(e.dense));
        assert_eq!(split.score_at_rank(position).unwrap(), Some(e.score));
    }
    split.check_integrity().unwrap();
}

/// A merged read of a split board asks its trees together: `rank` on 3
/// trees (on 3 masters) is 2 round trips, the player's row and the counts
/// above their score (the distinct scores above, for a dense rank), sent
/// to every tree in one pipeline (`RedisCluster::read_boards`,
/// `board_tx::Ahead`), under every tie rule. Control, reverted: with the trees read in one transaction but
/// each read sent to its own tree only (`read_boards` without `Ahead`), a
/// standard rank took 4 round trips.
#[test]
fn a_split_rank_reads_its_trees_in_one_round_per_read() {
    use autoshard::__private::redis_hooks::round_trips;
    let store = RedisCluster::fresh();
    let split = Ranking::create(&*store, "rt", RankingConfig::new(0..1_000).trees(3)).unwrap();
    let scores: Vec<(String, i64)> = (0..300).map(|i| (name(i), (i % 50) as i64)).collect();
    let batch: Vec<(&str, i64)> = scores.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    split.set_scores(&batch).unwrap();
    // Warm: the handle's board cache and the scripts on every node.
    split.rank("p1", Tie::Ordinal).unwrap();
    for tie in [Tie::Standard, Tie::Ordinal, Tie::Dense] {
        let mut counts = Vec::new();
        for p in ["p3", "p77", "p150"] {
            let before = round_trips();
            assert!(split.rank(p, tie).unwrap().is_some());
            counts.push(round_trips() - before);
        }
        assert_eq!(counts, [2, 2, 2], "round trips per {tie:?} rank");
    }
}

/// Reads of a split board beside writers that keep every tree moving:
/// each read is one snapshot that reads every tree once (`native.rs`), so
/// the writers never make it run again. A rank of a player nobody writes
/// (and their `entry`, all three ranks, and percentile) is 2 round trips
/// however busy the trees (the look-up of their place, then one pipelined
/// read per tree); a score range is 1 (one read of every tree,
/// pipelined); and a page completes in a bounded number of round trips
/// (the look, then one read per tree) and is in order: consecutive
/// positions, scores not rising, ranks as the scores say, no player
/// twice.
///
/// A page took 9 to 11 round trips in one run (the look: the trees'
/// lengths, a narrowing round and the windows, one tree at a time; then
/// the one pipelined read).
///
/// Control, reverted: with the look-up of the player's place a checked
/// read of the snapshot (`peek_place` through `native_read`, so the
/// player's tree is read twice), ranks beside the writers took 2 to 36
/// round trips: every time the tree moved between its two reads, the
/// snapshot ran again.
#[test]
fn reads_beside_writers_read_each_tree_once() {
    use autoshard::__private::redis_hooks::round_trips;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let store = RedisCluster::fresh();
    let config = RankingConfig::new(0..1_000_000).trees(3);
    let split = Ranking::create(&*store, "busy", config).unwrap();
    let busy: Vec<(String, i64)> = (0..3_000)
        .map(|i| (name(i), (i as i64 * 7_919) % 1_000_000))
        .collect();
    let quiet: Vec<(String, i64)> = (0..60)
        .map(|i| (format!("q{i}"), (i as i64 * 15_485) % 1_000_000))
        .collect();
    for set in [&busy, &quiet] {
        let batch: Vec<(&str, i64)> = set.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        split.set_scores(&batch).unwrap();
    }
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let (mut rank_trips, mut page_trips) = (Vec::new(), Vec::new());
    let (mut between_trips, mut at_trips) = (Vec::new(), Vec::new());
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let (split, stop, busy) = (&split, &stop, &busy);
            s.spawn(move || {
                // Bounded: stops when the reader is done or after 20 s.
                let mut n = w;
                while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(20) {
                    let (player, _) = &busy[(n * 7_907 % 3_000) as usize];
                    split
                        .set_score(player, (n * 104_729 % 1_000_000) as i64)
                        .unwrap();
                    n += 4;
                }
            });
        }
        std::thread::sleep(Duration::from_millis(200));
        for (player, _) in &quiet {
            for tie in [Tie::Standard, Tie::Ordinal, Tie::Dense] {
                let before = round_trips();
                assert!(split.rank(player, tie).unwrap().is_some());
                rank_trips.push(round_trips() - before);
            }
            let before = round_trips();
            let entry = split.entry(player).unwrap().expect("on the board");
            rank_trips.push(round_trips() - before);
            assert_eq!(&entry.player, player);
            let before = round_trips();
            assert!(split.percentile(player).unwrap().is_some());
            rank_trips.push(round_trips() - before);
            let before = round_trips();
            let page = split.page(1_000, 1_019).unwrap();
            page_trips.push(round_trips() - before);
            assert_eq!(page.len(), 20);
            let mut players = std::collections::HashSet::new();
            for (i, e) in page.iter().enumerate() {
                assert_eq!(e.position, 1_000 + i as u64, "{page:?}");
                assert!(players.insert(&e.player), "{} twice: {page:?}", e.player);
                if let Some(prev) = i.checked_sub(1).map(|p| &page[p]) {
                    assert!(prev.score >= e.score, "{page:?}");
                    match prev.score == e.score {
                        true => assert_eq!((prev.rank, prev.dense), (e.rank, e.dense)),
                        false => assert_eq!((e.rank, e.dense), (e.position, prev.dense + 1)),
                    }
                }
            }
            let before = round_trips();
            assert!(split.score_at_rank(1_500).unwrap().is_some());
            at_trips.push(round_trips() - before);
            let before = round_trips();
            assert!(split.score_at_percentile(30.0).unwrap().is_some());
            at_trips.push(round_trips() - before);
            let before = round_trips();
            let span = split.between(400_000..=600_000, 5).unwrap();
            between_trips.push(round_trips() - before);
            assert!(span.windows(2).all(|w| w[0].position + 1 == w[1].position));
            assert!(span.iter().all(|e| (400_000..=600_000).contains(&e.score)));
            let around = split.around(player, 2).unwrap();
            assert!(around.iter().any(|e| &e.player == player), "{around:?}");
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        rank_trips.iter().all(|&n| n == 2),
        "round trips per rank: {rank_trips:?}"
    );
    assert!(
        page_trips.iter().all(|&n| n == 3),
        "round trips per page: {page_trips:?}"
    );
    assert!(
        at_trips.chunks(2).all(|n| n == [3, 4]),
        "round trips per score_at_rank, score_at_percentile: {at_trips:?}"
    );
    assert!(
        between_trips.iter().all(|&n| n == 1),
        "round trips per score range: {between_trips:?}"
    );
    split.check_integrity().unwrap();
}

/// Where the ranking layer's boards land, made through the public API:
/// a `trees(3)` board's trees on the 3 masters of the test cluster, and a
/// family's boards on one slot (one transaction writes them), as the
/// ranking layer asks (`seam::Placement`; the store no longer reads it
/// from the boards' names). Control: 12 plain boards, placed anywhere,
/// land on more than one master (all on one: 1 in 3^11).
#[test]
fn split_trees_spread_over_the_masters_and_a_familys_boards_share_a_slot() {
    use crate::stores::redis_cluster::{nodes, scan};
    use autoshard::ranking::{Family, FamilyConfig, Window};
    use std::collections::BTreeSet;
    let open = |what: &str| {
        let prefix = format!("{what}_{}_{}", std::process::id(), rand_tag());
        let db = RedisCluster::builder(nodes()).prefix(prefix.clone()).open();
        (db.expect("the test cluster"), prefix)
    };
    // Which master, and which slot, each board's version key is on.
    let versions = |prefix: &str| -> Vec<(usize, String)> {
        scan(&format!("{prefix}:*:rk*:v"))
            .into_iter()
            .map(|(master, key)| (master, key.split(':').nth(1).unwrap().to_owned()))
            .collect()
    };

    let (db, split_prefix) = open("split_place");
    let split = Ranking::create(&db, "split", RankingConfig::new(0..1_000).trees(3)).unwrap();
    let players: Vec<(String, i64)> = (0..300).map(|i| (name(i), i as i64)).collect();
    let batch: Vec<(&str, i64)> = players.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    split.set_scores(&batch).unwrap();
    let trees = versions(&split_prefix);
    let masters: BTreeSet<usize> = trees.iter().map(|(m, _)| *m).collect();
    assert_eq!((trees.len(), masters.len()), (3, 3), "trees on {trees:?}");

    let (db, family_prefix) = open("family_place");
    let config = FamilyConfig::new(RankingConfig::new(0..1_000))
        .window(Window::AllTime)
        .window(Window::Day)
        .filter("league", ["gold", "silver"]);
    let family = Family::create(&db, "cup", config).unwrap();
    for (i, league) in ["gold", "silver", "gold"].into_iter().enumerate() {
        let player = name(i);
        let submission = family.submission(&player, 10 * i as i64);
        submission.filter("league", league).submit().unwrap();
    }
    let boards = versions(&family_prefix);
    let slots: BTreeSet<&str> = boards.iter().map(|(_, slot)| slot.as_str()).collect();
    assert!(
        boards.len() >= 6,
        "registry, players and members: {boards:?}"
    );
    assert_eq!(slots.len(), 1, "a family's boards on {boards:?}");

    let (db, plain_prefix) = open("plain_place");
    for b in 0..12 {
        let board = Ranking::create(&db, &format!("plain-{b}"), RankingConfig::new(0..10)).unwrap();
        board.set_score("p", 1).unwrap();
    }
    let plain: BTreeSet<usize> = versions(&plain_prefix).iter().map(|(m, _)| *m).collect();
    assert!(
        plain.len() > 1,
        "control: 12 plain boards all on master {plain:?}"
    );
}

fn rand_tag() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(0u8)
}

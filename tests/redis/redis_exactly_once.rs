//! Exactly-once saves on Redis Cluster when the connection breaks around a
//! script's reply. The store reaches every node through a loopback proxy
//! (`common/redis_proxy.rs`) that, on every other script call, cuts the
//! connection before the call reaches the node or right after the node
//! answered (the answer is never relayed). The store resends the piece
//! with the same operation id; the script answers `DUP` if the first send
//! ran.
//!
//! Each save writes three pieces, one per fold path: `HINCRBY` (a static
//! sum), an append (a dynamic sum) and a compare-and-set (a static pair,
//! folded in Rust). With operation ids every total is exact. The control
//! run turns them off: every swallowed reply is a piece applied twice, and
//! the totals come out high by exactly that many.
#![cfg(feature = "redis")]

use autoshard::{shard_fold, shard_method, Pending, RedisCluster, Shardable, Store};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::redis_proxy;
use crate::stores;
use redis_proxy::{Fault, Faults, Proxy};
use stores::redis_cluster as rc;

#[derive(Shardable, Debug)]
struct Counter {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 4)]
    votes: i64,
    #[shard(neutral = 0)]
    views: i64,
    #[shard(neutral = (0, 0), shards = 4)]
    pair: (i64, i64),
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Counter {
    #[shard_method]
    fn vote(&mut self) {
        self.votes += 1;
        self.views += 1;
        self.pair.0 += 1;
        self.pair.1 += 2;
    }
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_pair(a: (i64, i64), b: (i64, i64)) -> (i64, i64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

const SAVES: i64 = 150;

/// Every node of the cluster, as it names itself, behind a proxy.
fn proxied(faults: &Arc<Faults>) -> (Vec<Proxy>, Vec<(String, u16)>) {
    let first = &rc::nodes()[0];
    let mut conn = redis::Client::open(format!("redis://{first}"))
        .and_then(|c| c.get_connection())
        .expect("reach the cluster");
    let listing: String = redis::cmd("CLUSTER").arg("NODES").query(&mut conn).unwrap();
    let mut proxies = Vec::new();
    let mut names = Vec::new();
    for line in listing.lines() {
        let addr = line.split(' ').nth(1).unwrap().split('@').next().unwrap();
        let (host, port) = addr.rsplit_once(':').unwrap();
        let upstream: SocketAddr = addr.parse().unwrap();
        proxies.push(Proxy::start(upstream, faults.clone()));
        names.push((host.to_owned(), port.parse().unwrap()));
    }
    (proxies, names)
}

/// A store whose every node is behind a faulting proxy: about every other
/// script call fails, before it reaches the node or after the node
/// answered, in a fixed pseudo-random pattern (a strict alternation would
/// fall into step with the three pieces of a save).
struct Faulted {
    faults: Arc<Faults>,
    db: RedisCluster,
    prefix: String,
    _proxies: Vec<Proxy>,
    _cleanup: rc::DropPrefix,
}

fn faulted(exactly_once: bool) -> Faulted {
    let faults = Faults::new(|n| match n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 62 {
        1 => Fault::DropBefore,
        3 => Fault::DropAfter,
        _ => Fault::None,
    });
    let (proxies, names) = proxied(&faults);
    let prefix = rc::new_prefix();
    let cleanup = rc::DropPrefix(prefix.clone());
    let mut builder = RedisCluster::builder(proxies.iter().map(|p| p.addr.to_string()))
        .prefix(&prefix)
        .pool_size(1)
        .max_attempts(20)
        .in_doubt_timeout(Duration::from_secs(20))
        .exactly_once(exactly_once);
    for (proxy, (host, port)) in proxies.iter().zip(&names) {
        builder = builder.map_address((host, *port), ("127.0.0.1", proxy.addr.port()));
    }
    let db = builder.open().expect("open through the proxies");
    Faulted {
        faults,
        db,
        prefix,
        _proxies: proxies,
        _cleanup: cleanup,
    }
}

struct Run {
    counter: Counter,
    calls: u64,
    dropped_before: u64,
    dropped_after: u64,
}

fn run(exactly_once: bool) -> Run {
    let Faulted {
        faults,
        db,
        prefix: _,
        _proxies,
        _cleanup,
    } = faulted(exactly_once);
    // The insert's pieces are faulted too.
    db.insert(&Counter {
        id: 1,
        votes: 0,
        views: 0,
        pair: (0, 0),
        pending: Pending::default(),
    })
    .unwrap();
    let mut counter: Counter = db.load(&1).unwrap().unwrap();
    let before = (faults.dropped_before(), faults.dropped_after());
    for i in 0..SAVES {
        counter.vote();
        let saved = db
            .save(&mut counter)
            .unwrap_or_else(|e| panic!("save {i}: {e:?}"));
        assert_eq!(saved.shard_writes, 3);
    }
    let counter: Counter = db.load(&1).unwrap().unwrap();
    Run {
        counter,
        calls: faults.calls(),
        dropped_before: faults.dropped_before() - before.0,
        dropped_after: faults.dropped_after() - before.1,
    }
}

trait Counts {
    fn dropped_before(&self) -> u64;
    fn dropped_after(&self) -> u64;
}

impl Counts for Faults {
    fn dropped_before(&self) -> u64 {
        self.dropped_before
            .load(std::sync::atomic::Ordering::SeqCst)
    }
    fn dropped_after(&self) -> u64 {
        self.dropped_after.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[test]
fn cut_connections_around_script_replies_count_every_save_once() {
    let run = run(true);
    eprintln!(
        "exactly once: {} script calls, {} cut before the node, {} replies swallowed",
        run.calls, run.dropped_before, run.dropped_after
    );
    assert!(
        run.dropped_after >= 100,
        "too few faults: {}",
        run.dropped_after
    );
    assert!(
        run.dropped_before >= 100,
        "too few faults: {}",
        run.dropped_before
    );
    let c = &run.counter;
    assert_eq!(
        (c.votes, c.views, c.pair),
        (SAVES, SAVES, (SAVES, 2 * SAVES))
    );
}

/// Without operation ids each swallowed reply is a piece the store sends
/// again after the node ran it: counted twice.
#[test]
fn control_without_operation_ids_counts_swallowed_replies_twice() {
    let run = run(false);
    let c = &run.counter;
    eprintln!(
        "control: {} replies swallowed; votes {}, views {}, pair {:?} for {SAVES} saves",
        run.dropped_after, c.votes, c.views, c.pair
    );
    assert!(run.dropped_after >= 100);
    // A swallowed reply of a script that ran adds one extra vote, view or
    // pair increment (a swallowed `CONFLICT` of a resent compare-and-set
    // ran nothing, hence at most).
    let extra = (c.votes - SAVES) + (c.views - SAVES) + (c.pair.0 - SAVES);
    assert!(extra as u64 <= run.dropped_after && extra >= 100, "{extra}");
    // Every fold path double counts without them: HINCRBY, append, CAS.
    assert!(
        c.votes > SAVES && c.views > SAVES && c.pair.0 > SAVES,
        "{c:?}"
    );
    assert_eq!(
        c.pair.1,
        2 * c.pair.0,
        "a pair is applied whole or not at all"
    );
}

/// What a native board (one tree: Redis's own sorted sets) holds after
/// `writes` direct increments of `ann` and as many queued
/// increments of `bo` drained by a worker in batches of 7, through the faulting proxies:
/// `(ann, bo, replies swallowed)`. An `Increment` board, so a write
/// applied twice shows in the score; its writes are the write
/// transaction's one commit script, a piece with an operation id.
const BOARD_WRITES: i64 = 60;

/// The control's writes: without operation ids every swallowed reply makes
/// the transaction run again on a board that moved, so its run is about
/// seven times as long per write (40 s at 60 writes), and 20 are plenty
/// to count twice.
const CONTROL_WRITES: i64 = 20;

fn board_run(exactly_once: bool, writes: i64) -> (Option<i64>, Option<i64>, u64) {
    use autoshard::ranking::{Policy, Ranking, RankingConfig};
    let Faulted {
        faults,
        db,
        prefix,
        _proxies,
        _cleanup,
    } = faulted(exactly_once);
    let config = RankingConfig::new(0..1_000_000).policy(Policy::Increment);
    let board = Ranking::create(&db, "board", config).unwrap();
    let before = faults.dropped_after();
    for i in 0..writes {
        board
            .set_score("ann", 1)
            .unwrap_or_else(|e| panic!("increment {i}: {e:?}"));
        board.enqueue("bo", 1).unwrap();
    }
    board.worker().batch_size(7).drain().unwrap();
    let swallowed = faults.dropped_after() - before;
    // Read past the proxies' faults: a fresh handle on the cluster itself.
    let direct = RedisCluster::builder(rc::nodes())
        .prefix(&prefix)
        .open()
        .unwrap();
    let board = Ranking::open(&direct, "board").unwrap();
    board.check_integrity().unwrap();
    (
        board.score("ann").unwrap(),
        board.score("bo").unwrap(),
        swallowed,
    )
}

/// A native board's writes and worker batches under cut connections:
/// every increment counted once.
#[test]
fn a_native_boards_increments_count_once_through_cut_connections() {
    let (ann, bo, swallowed) = board_run(true, BOARD_WRITES);
    eprintln!("native board: {swallowed} replies swallowed; ann {ann:?}, bo {bo:?}");
    assert!(swallowed >= 20, "too few faults: {swallowed}");
    assert_eq!((ann, bo), (Some(BOARD_WRITES), Some(BOARD_WRITES)));
}

/// Control: without operation ids a commit whose reply was swallowed is
/// sent again, finds the version it moved itself, answers `CONFLICT`, and
/// the transaction runs again on the new state: the increment counts
/// twice. Measured with 150 writes: 1,397 replies swallowed, `ann` 1,259,
/// `bo` 300 (the operation-id run: 257 swallowed, 150 and 150).
#[test]
fn control_a_native_board_without_operation_ids_counts_twice() {
    let (ann, bo, swallowed) = board_run(false, CONTROL_WRITES);
    eprintln!("control: {swallowed} replies swallowed; ann {ann:?}, bo {bo:?}");
    assert!(swallowed >= 20, "too few faults: {swallowed}");
    assert!(ann > Some(CONTROL_WRITES), "{ann:?}");
}

/// Removes `REMOVES` players of a native `Replace` board, each right after
/// its `set_score`, through the faulting proxies, and removes each once
/// more: `(removals answered wrong, replies swallowed)`. A removal is one
/// script whose answer (was the player there) a resend must repeat,
/// though the first send already took the player off.
const REMOVES: usize = 60;

fn remove_run(exactly_once: bool) -> (usize, u64) {
    use autoshard::ranking::{Ranking, RankingConfig};
    let Faulted {
        faults,
        db,
        prefix,
        _proxies,
        _cleanup,
    } = faulted(exactly_once);
    let board = Ranking::create(&db, "removals", RankingConfig::new(0..1_000)).unwrap();
    let before = faults.dropped_after();
    let mut wrong = 0;
    for i in 0..REMOVES {
        let player = format!("p{i}");
        board.set_score(&player, i as i64).unwrap();
        wrong += usize::from(!board.remove(&player).unwrap());
        wrong += usize::from(board.remove(&player).unwrap());
    }
    let swallowed = faults.dropped_after() - before;
    let direct = RedisCluster::builder(rc::nodes())
        .prefix(&prefix)
        .open()
        .unwrap();
    let board = Ranking::open(&direct, "removals").unwrap();
    board.check_integrity().unwrap();
    assert_eq!(board.len().unwrap(), 0);
    (wrong, swallowed)
}

/// A native board's `remove` answers right through cut connections: a
/// resend of an applied removal repeats the first send's answer, which
/// its script kept in the writer's mark (`scripts.rs`, the prelude).
#[test]
fn a_native_remove_answers_right_through_cut_connections() {
    let (wrong, swallowed) = remove_run(true);
    eprintln!("native removals: {swallowed} replies swallowed, {wrong} answered wrong");
    assert!(swallowed >= 20, "too few faults: {swallowed}");
    assert_eq!(wrong, 0);
}

/// Control: without operation ids the resend of a removal whose reply was
/// swallowed finds the player gone and answers `false`.
#[test]
fn control_a_native_remove_without_operation_ids_answers_wrong() {
    let (wrong, swallowed) = remove_run(false);
    eprintln!("control: {swallowed} replies swallowed, {wrong} answered wrong");
    assert!(swallowed >= 20, "too few faults: {swallowed}");
    assert!(wrong > 0, "{wrong}");
}

/// Submits `SUBMITS` scores through the faulting proxies, each report
/// checked against a model of the board: to a native `Replace` board, or
/// with `family` to a family of two windows (one script over its boards,
/// `ranking/family/one_step.rs`), every member's report checked.
/// `(submissions reported wrong, replies swallowed)`. A submission is one
/// script whose report (old and new score and rank) a resend must repeat,
/// though the first send already moved the player.
const SUBMITS: usize = 80;

fn submit_run(exactly_once: bool, family: bool) -> (usize, u64) {
    use autoshard::ranking::{Family, FamilyConfig, Period, Ranking, RankingConfig, Window};
    use std::collections::HashMap;
    const AT: i64 = 1_795_516_200;
    let Faulted {
        faults,
        db,
        prefix,
        _proxies,
        _cleanup,
    } = faulted(exactly_once);
    let config = RankingConfig::new(0..1_000);
    let windows = [Window::AllTime, Window::Day];
    let (board, fam) = match family {
        false => (
            Some(Ranking::create(&db, "submissions", config).unwrap()),
            None,
        ),
        true => {
            let config = windows
                .iter()
                .fold(FamilyConfig::new(config), |c, &w| c.window(w));
            (None, Some(Family::create(&db, "fam", config).unwrap()))
        }
    };
    let before = faults.dropped_after();
    let mut model: HashMap<String, i64> = HashMap::new();
    let above = |model: &HashMap<String, i64>, score: i64| {
        1 + model.values().filter(|&&s| s > score).count() as u64
    };
    let mut wrong = 0;
    for i in 0..SUBMITS {
        let (player, score) = (format!("p{}", i % 12), (i as i64 * 389) % 1_000);
        let reports = match (&board, &fam) {
            (Some(board), _) => vec![board.submit(&player, score).unwrap()],
            (_, Some(fam)) => {
                let done = fam.submission(&player, score).at(AT).submit().unwrap();
                done.members.into_iter().map(|(_, s)| s).collect()
            }
            _ => unreachable!(),
        };
        let old = model.get(&player).copied();
        let old_rank = old.map(|s| above(&model, s));
        model.insert(player, score);
        let want = (old, score, old_rank, above(&model, score));
        let expected = if family { windows.len() } else { 1 };
        wrong += usize::from(
            reports.len() != expected
                || reports
                    .iter()
                    .any(|d| (d.old_score, d.new_score, d.old_rank, d.new_rank) != want),
        );
    }
    let swallowed = faults.dropped_after() - before;
    let direct = RedisCluster::builder(rc::nodes())
        .prefix(&prefix)
        .open()
        .unwrap();
    let boards = match family {
        false => vec![Ranking::open(&direct, "submissions").unwrap()],
        true => {
            let fam = Family::open(&direct, "fam").unwrap();
            let at = |w| fam.board(w, Period::At(AT), None).unwrap().unwrap();
            windows.iter().map(|&w| at(w)).collect()
        }
    };
    for board in boards {
        board.check_integrity().unwrap();
        for (player, score) in &model {
            assert_eq!(board.score(player).unwrap(), Some(*score), "{player}");
        }
    }
    (wrong, swallowed)
}

/// A native board's `submit` (one script with its ranks' counts) reports
/// right through cut connections: a resend of an applied submission
/// repeats the first send's report, kept in the writer's mark.
#[test]
fn a_native_submit_reports_right_through_cut_connections() {
    let (wrong, swallowed) = submit_run(true, false);
    eprintln!("native submissions: {swallowed} replies swallowed, {wrong} reported wrong");
    assert!(swallowed >= 20, "too few faults: {swallowed}");
    assert_eq!(wrong, 0);
}

/// Control: without operation ids the resend of a submission whose reply
/// was swallowed finds the player already moved and reports the move as
/// none.
#[test]
fn control_a_native_submit_without_operation_ids_reports_wrong() {
    let (wrong, swallowed) = submit_run(false, false);
    eprintln!("control: {swallowed} replies swallowed, {wrong} reported wrong");
    assert!(swallowed >= 20, "too few faults: {swallowed}");
    assert!(wrong > 0, "{wrong}");
}

/// A family submission in one script reports right through cut
/// connections, every member's ranks as the first send counted them.
#[test]
fn a_family_submission_in_one_step_reports_right_through_cut_connections() {
    let (wrong, swallowed) = submit_run(true, true);
    eprintln!("family submissions: {swallowed} replies swallowed, {wrong} reported wrong");
    assert!(swallowed >= 20, "too few faults: {swallowed}");
    assert_eq!(wrong, 0);
}

/// Control: without operation ids a resent family submission reports the
/// move its first send made as none.
#[test]
fn control_a_family_submission_without_operation_ids_reports_wrong() {
    let (wrong, swallowed) = submit_run(false, true);
    eprintln!("control: {swallowed} replies swallowed, {wrong} reported wrong");
    assert!(swallowed >= 20, "too few faults: {swallowed}");
    assert!(wrong > 0, "{wrong}");
}

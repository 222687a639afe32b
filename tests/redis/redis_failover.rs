//! kill -9 of a Redis Cluster master while writers save to one hot entity
//! whose 10 shards live on all masters, in each durability mode: the store
//! must recover by itself (no writer goes more than a few seconds without
//! a successful save), nothing may be counted twice, and with
//! `Durability::Replicated` no acknowledged save may be lost. With
//! `Durability::Async` the acknowledged-but-lost saves are counted and
//! reported: replication is asynchronous, so a failover may drop them.
//!
//! Each round: 4 writers save; one master (in turn) is killed with SIGKILL
//! (`autoshard_test_servers::kill_redis_node`); the cluster promotes its
//! replica; the killed node is restarted and rejoins as a replica
//! (`revive_redis_node`, which waits until the cluster is healthy); the
//! writers go on for a moment and stop; the total is compared with the
//! acknowledgements. 5 rounds per mode by default;
//! `AUTOSHARD_FAILOVER_ROUNDS=N` for a longer soak
//! (`cargo test --test store_specific -- --ignored soak` runs 20
//! with the SQLite soak; add `failover::` to run this one alone).
//!
//! Also here: a ranking board across a kill of its master, in each mode
//! (`a_board_survives_a_master_failover_*`, one kill each), and an entity
//! board across a kill of the board's master with replica
//! acknowledgements (`an_entity_board_survives_a_master_failover_replicated`).
//!
//! Each durability mode kills masters of a cluster of its own
//! (`private_redis_cluster`), started by the run whatever
//! `AUTOSHARD_REDIS_CLUSTER_URL` says, and the boards' tests a third
//! (each handle sets its own durability): the clusters' kills overlap,
//! and no other test of the run sees a failover, so they need not run
//! alone (issue 20 item 2: these waits were ~140 s of the default run in
//! series).
//!
//! Declared as `failover` in `tests/store_specific.rs`, not under
//! `redis::`: libtest starts a binary's tests in name order, and these
//! chains of kills, mostly waits, are its longest; started first, the
//! other tests run in their waits. `cargo test --test store_specific
//! failover::` runs them.
#![cfg(feature = "redis")]

use autoshard::{Durability, Error, RedisCluster, RedisClusterBuilder, Store};
use autoshard_test_servers::{kill_redis_node as kill, revive_redis_node as revive};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::entities;
use crate::stores;
use entities::Question;
use stores::redis_cluster as rc;

/// A durability mode's cluster: a private one, killed in by its mode's
/// tests only, which take turns (`turn`).
struct Cluster {
    name: &'static str,
    turn: Mutex<()>,
}

static ASYNC: Cluster = Cluster {
    name: "failover-async",
    turn: Mutex::new(()),
};
static REPLICATED: Cluster = Cluster {
    name: "failover-replicated",
    turn: Mutex::new(()),
};
/// The boards' kills, in both modes: a third cluster, so no chain of
/// kills taken in turns is longer than 5 (it was 8 on `REPLICATED`).
static BOARDS: Cluster = Cluster {
    name: "failover-boards",
    turn: Mutex::new(()),
};

impl Cluster {
    fn of(durability: Durability) -> &'static Cluster {
        match durability {
            Durability::Async => &ASYNC,
            _ => &REPLICATED,
        }
    }

    /// The cluster of the boards' tests, whatever their mode: the
    /// durability is each handle's, the clusters are alike.
    fn of_boards() -> &'static Cluster {
        &BOARDS
    }

    fn nodes(&self) -> Vec<String> {
        autoshard_test_servers::private_redis_cluster(self.name)
    }

    /// As `rc::builder` with default options, on this cluster.
    fn builder(&self, prefix: &str) -> RedisClusterBuilder {
        RedisCluster::builder(self.nodes()).prefix(prefix)
    }
}

/// The ports of the current masters that are up.
fn master_ports(cluster: &Cluster) -> Vec<u16> {
    let first = &cluster.nodes()[0];
    let mut conn = redis::Client::open(format!("redis://{first}"))
        .and_then(|c| c.get_connection())
        .unwrap();
    let listing: String = redis::cmd("CLUSTER").arg("NODES").query(&mut conn).unwrap();
    masters_in(&listing)
}

/// Returns once the cluster has failed `victim` over: `masters` live
/// masters (as many as before the kill), none of them `victim`. This used
/// to be a fixed 6 s wait (failover takes the 3 s cluster-node-timeout
/// plus an election); the writers see the same outage either way, and the
/// run is shorter by what the failover did not need of the 6 s, per kill
/// (issue 20 item 2). Bounded: no failover within a minute fails the test.
fn wait_for_promotion(cluster: &Cluster, victim: u16, masters: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let live = live_masters(cluster, victim);
        if live.len() == masters && !live.contains(&victim) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "master {victim} was not failed over within 60 s (live masters: {live:?})"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// The live masters as a node other than `victim` sees them; empty when no
/// node answers (asked again on the next poll).
fn live_masters(cluster: &Cluster, victim: u16) -> Vec<u16> {
    for node in cluster.nodes() {
        if node.ends_with(&format!(":{victim}")) {
            continue;
        }
        let listing: redis::RedisResult<String> = redis::Client::open(format!("redis://{node}"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .and_then(|mut conn| redis::cmd("CLUSTER").arg("NODES").query(&mut conn));
        if let Ok(listing) = listing {
            return masters_in(&listing);
        }
    }
    Vec::new()
}

/// The ports of the masters a `CLUSTER NODES` listing flags neither `fail`
/// nor `fail?`.
fn masters_in(listing: &str) -> Vec<u16> {
    listing
        .lines()
        .filter(|l| {
            let flags = l.split(' ').nth(2).unwrap();
            flags.contains("master") && !flags.contains("fail")
        })
        .map(|l| {
            let addr = l.split(' ').nth(1).unwrap().split('@').next().unwrap();
            addr.rsplit_once(':').unwrap().1.parse().unwrap()
        })
        .collect()
}

#[derive(Debug, Default)]
struct Round {
    acked: u64,
    in_doubt: u64,
    retried: u64,
    total: i64,
    recovered: Duration,
}

/// Writers save `vote(1)` on entity 1 while a master is killed and
/// revived; they count acknowledgements and in-doubt saves (after which a
/// writer reloads, as the error asks) and the longest time any of them
/// went without a successful save.
fn round(cluster: &Cluster, db: &RedisCluster, durability: Durability, victim: u16) -> Round {
    let start_total = db.load::<Question>(&1).unwrap().unwrap().votes;
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let in_doubt = Arc::new(AtomicU64::new(0));
    let retried = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let db = cluster
                .builder(db.prefix())
                .durability(durability)
                .in_doubt_timeout(Duration::from_secs(15))
                .open()
                .unwrap();
            let stop = stop.clone();
            let (acked, in_doubt, retried) = (acked.clone(), in_doubt.clone(), retried.clone());
            thread::spawn(move || {
                let mut q: Question = db.load(&1).unwrap().unwrap();
                // The longest time this writer went without a successful
                // save: the outage it saw.
                let (mut last_ok, mut longest) = (Instant::now(), Duration::ZERO);
                while !stop.load(Ordering::Acquire) {
                    q.vote(1);
                    loop {
                        match db.save(&mut q) {
                            Ok(_) => {
                                acked.fetch_add(1, Ordering::SeqCst);
                                longest = longest.max(last_ok.elapsed());
                                last_ok = Instant::now();
                                break;
                            }
                            Err(Error::InDoubt { .. }) => {
                                in_doubt.fetch_add(1, Ordering::SeqCst);
                                // The outcome is unknown: never resave it.
                                q = loop {
                                    match db.load(&1) {
                                        Ok(q) => break q.unwrap(),
                                        Err(_) => thread::sleep(Duration::from_millis(50)),
                                    }
                                };
                                break;
                            }
                            Err(e) if e.is_retryable() => {
                                retried.fetch_add(1, Ordering::SeqCst);
                                if stop.load(Ordering::Acquire) {
                                    // Nothing of it was written; drop it.
                                    return longest;
                                }
                            }
                            Err(e) => panic!("save failed: {e:?}"),
                        }
                    }
                }
                longest
            })
        })
        .collect();
    let masters = master_ports(cluster).len();
    thread::sleep(Duration::from_millis(500));
    kill(victim);
    // Failover (cluster-node-timeout 3 s, then an election), then the old
    // master comes back as a replica.
    wait_for_promotion(cluster, victim, masters);
    revive(victim);
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Release);
    let recovered = writers
        .into_iter()
        .map(|w| w.join().expect("writer panicked"))
        .max()
        .unwrap();
    let total = db.load::<Question>(&1).unwrap().unwrap().votes - start_total;
    Round {
        acked: acked.load(Ordering::SeqCst),
        in_doubt: in_doubt.load(Ordering::SeqCst),
        retried: retried.load(Ordering::SeqCst),
        total,
        recovered,
    }
}

fn failover(durability: Durability, rounds: usize) {
    let cluster = Cluster::of(durability);
    let _turn = cluster.turn.lock().unwrap_or_else(|p| p.into_inner());
    // A private cluster is dropped with the run: no prefix to clean up.
    let db = cluster.builder(&rc::new_prefix()).open().unwrap();
    db.insert(&Question::new(1, 0, 0)).unwrap();
    let (mut lost, mut doubled) = (0i64, 0i64);
    for n in 0..rounds {
        let masters = master_ports(cluster);
        let victim = masters[n % masters.len()];
        let r = round(cluster, &db, durability, victim);
        // Every acknowledged save is in `total` unless lost; an in-doubt
        // one may or may not be.
        let round_lost = (r.acked as i64 - r.total).max(0);
        let round_doubled = (r.total - r.acked as i64 - r.in_doubt as i64).max(0);
        eprintln!(
            "{durability:?} round {n}: killed master {victim}; {} acknowledged, {} in doubt, \
             {} retried, stored {}; lost {round_lost}, doubled {round_doubled}; \
             longest time without a successful save {:.1?}",
            r.acked, r.in_doubt, r.retried, r.total, r.recovered
        );
        assert!(
            r.recovered < Duration::from_secs(15),
            "recovery took {:?}",
            r.recovered
        );
        lost += round_lost;
        doubled += round_doubled;
    }
    eprintln!("{durability:?}: {rounds} kills, {lost} acknowledged saves lost, {doubled} doubled");
    assert_eq!(doubled, 0, "saves counted twice");
    if matches!(durability, Durability::Replicated { .. }) {
        assert_eq!(
            lost, 0,
            "acknowledged saves lost with replica acknowledgements"
        );
    }
}

fn rounds() -> usize {
    std::env::var("AUTOSHARD_FAILOVER_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
}

/// Back in the default run: one CI run (2026-11-24, load ~5) had stored
/// one save more than were acknowledged or in doubt (round 2: 22,983
/// acknowledged, 0 in doubt, 22,984 stored): a save reported failed had
/// been applied. The cause: the cluster client retried by itself after a
/// dropped connection and reported only the refusal of its resend, so the
/// store took a piece that may have been applied for one never sent, and
/// answered `Unavailable`; the writer saved again. The client now makes no
/// retries of its own (`RedisClusterBuilder::open`), so every lost send
/// reaches the store's loop, which resends it under its operation id.
/// Not reproduced on demand (it was rare), so the old setting is no
/// control here; after the change, 5 + 5 kills: 0 lost, 0 doubled.
#[test]
fn kill_a_master_async() {
    failover(Durability::Async, rounds());
}

/// The same defect once counted a save twice here (round 0: 4,633
/// acknowledged, 47 in doubt, 4,681 stored); see `kill_a_master_async`.
#[test]
fn kill_a_master_replicated() {
    failover(
        Durability::Replicated {
            replicas: 1,
            timeout: Duration::from_millis(500),
        },
        rounds(),
    );
}

#[test]
#[ignore = "soak: 20 kills per mode, several minutes"]
fn soak_kill_masters() {
    failover(Durability::Async, 20);
    failover(
        Durability::Replicated {
            replicas: 1,
            timeout: Duration::from_millis(500),
        },
        20,
    );
}

/// The port of the master that holds the keys matching `pattern`.
fn master_of(cluster: &Cluster, pattern: &str) -> u16 {
    for port in master_ports(cluster) {
        let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .and_then(|c| c.get_connection())
            .unwrap();
        let found: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut conn).unwrap();
        if !found.is_empty() {
            return port;
        }
    }
    panic!("no master holds {pattern}")
}

/// A ranking board across a kill -9 of its master (a board is one slot, so
/// one master): 2 direct writers (`set_score`, each score higher than the
/// player's last) and a producer enqueueing for a worker. Afterwards the
/// board must be consistent (`check_integrity`: a failover rolls it back
/// to some committed state, never half a transaction), every player's
/// stored score one that was written, and the writers back within
/// seconds. With `Durability::Replicated` no acknowledged write may be
/// lost; with `Async` the lost ones are counted and reported.
fn board_failover(durability: Durability, trees: u32) {
    use autoshard::ranking::{Ranking, RankingConfig, Tie};
    use std::collections::HashMap;
    let cluster = Cluster::of_boards();
    let _turn = cluster.turn.lock().unwrap_or_else(|p| p.into_inner());
    let prefix = rc::new_prefix();
    let open = || {
        cluster
            .builder(&prefix)
            .durability(durability)
            .in_doubt_timeout(Duration::from_secs(15))
            .open()
            .unwrap()
    };
    let db = open();
    let config = RankingConfig::new(0..1_000_000).queues(2).trees(trees);
    let board = Ranking::create(&db, "f", config).unwrap();
    board.set_score("seed", 1).unwrap();
    let victim = master_of(cluster, &format!("{prefix}:*:rk*:v"));
    let masters = master_ports(cluster).len();
    let stop = Arc::new(AtomicBool::new(false));
    // Per writer: player -> (last acknowledged score, highest attempted).
    type Acked = HashMap<String, (i64, i64)>;
    let write = |w: usize, queued: bool| {
        let (db, stop) = (open(), stop.clone());
        thread::spawn(move || -> (Acked, Duration, u64) {
            let board = Ranking::open(&db, "f").unwrap();
            let mut acked = Acked::new();
            let (mut last_ok, mut longest, mut in_doubt) = (Instant::now(), Duration::ZERO, 0);
            let mut n = 0i64;
            while !stop.load(Ordering::Acquire) {
                n += 1;
                let player = format!("w{w}-{}", n % 20);
                let entry = acked.entry(player.clone()).or_insert((0, 0));
                entry.1 = n;
                loop {
                    let outcome = if queued {
                        board.enqueue(&player, n)
                    } else {
                        board.set_score(&player, n)
                    };
                    match outcome {
                        Ok(()) => {
                            acked.get_mut(&player).unwrap().0 = n;
                            longest = longest.max(last_ok.elapsed());
                            last_ok = Instant::now();
                            break;
                        }
                        Err(Error::InDoubt { .. }) => {
                            in_doubt += 1;
                            break;
                        }
                        // A set_score or an enqueue of an absolute score
                        // may be repeated.
                        Err(e) if e.is_retryable() && !stop.load(Ordering::Acquire) => {
                            thread::sleep(Duration::from_millis(20));
                        }
                        Err(e) if e.is_retryable() => break,
                        Err(e) => panic!("write failed: {e:?}"),
                    }
                }
            }
            (acked, longest, in_doubt)
        })
    };
    let writers: Vec<_> = [(0, false), (1, false), (2, true)]
        .into_iter()
        .map(|(w, queued)| write(w, queued))
        .collect();
    let worker = board.worker().spawn().unwrap();
    thread::sleep(Duration::from_millis(500));
    kill(victim);
    wait_for_promotion(cluster, victim, masters);
    revive(victim);
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Release);
    let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    // The worker stops at an error that is not retryable (an in-doubt
    // batch); a new one drains the rest.
    if let Err(e) = worker.stop() {
        eprintln!("{durability:?}: the worker stopped with {e}");
    }
    board.worker().drain().unwrap();
    board.check_integrity().unwrap();
    // The merged order agrees with itself across the trees (one of which
    // failed over): each listed player's ordinal rank is their position.
    let all = board.page(1, board.len().unwrap()).unwrap();
    for e in all.iter().step_by(7) {
        assert_eq!(
            board.rank(&e.player, Tie::Ordinal).unwrap(),
            Some(e.position)
        );
    }
    let (mut acked, mut lost, mut doubt) = (0, 0, 0);
    for (w, (players, longest, in_doubt)) in results.iter().enumerate() {
        assert!(
            *longest < Duration::from_secs(15),
            "writer {w} stalled {longest:?}"
        );
        doubt += in_doubt;
        for (player, &(last_acked, attempted)) in players {
            let stored = board.score(player).unwrap().unwrap_or(0);
            assert!(stored <= attempted, "{player}: {stored} was never written");
            acked += 1;
            lost += u64::from(stored < last_acked);
        }
    }
    eprintln!(
        "{durability:?}, {trees} tree(s): killed master {victim}; {acked} players written, {lost} \
         lost their last acknowledged score, {doubt} writes in doubt; board consistent"
    );
    if matches!(durability, Durability::Replicated { .. }) {
        assert_eq!(
            lost, 0,
            "acknowledged board writes lost with replica acknowledgements"
        );
    }
}

#[test]
fn a_board_survives_a_master_failover_async() {
    board_failover(Durability::Async, 1);
}

#[test]
fn a_board_survives_a_master_failover_replicated() {
    board_failover(
        Durability::Replicated {
            replicas: 1,
            timeout: Duration::from_millis(500),
        },
        1,
    );
}

/// The same on a board split into 3 trees, one per master: the victim
/// holds one of them, and the merged reads span the failed-over master
/// and the two that stayed up.
#[test]
fn a_split_board_survives_a_master_failover_replicated() {
    board_failover(
        Durability::Replicated {
            replicas: 1,
            timeout: Duration::from_millis(500),
        },
        3,
    );
}

#[derive(autoshard::Shardable, Debug)]
#[shard(kind = "Ranked")]
struct Ranked {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 4, fold = autoshard::fold::checked_sum, ranked = "ranked")]
    votes: i64,
    #[shard(pending)]
    pending: autoshard::Pending<Self>,
}

/// An entity board across a kill -9 of the board's master, with replica
/// acknowledgements: 2 writers `save_delta` +1 to 4 entities whose board
/// writes follow their pieces (`stores/redis/ranked.rs`). A board write
/// whose reply the kill took is resent under its id to the promoted
/// replica, or left owed; after a compaction pass the board holds every
/// entity's total exactly, and each entity's total is at least its
/// acknowledged saves (at most one more per writer: a save in doubt).
#[test]
fn an_entity_board_survives_a_master_failover_replicated() {
    use autoshard::ranking::{Policy, Ranking, RankingConfig};
    let durability = Durability::Replicated {
        replicas: 1,
        timeout: Duration::from_millis(500),
    };
    let cluster = Cluster::of_boards();
    let _turn = cluster.turn.lock().unwrap_or_else(|p| p.into_inner());
    let prefix = rc::new_prefix();
    let open = || {
        cluster
            .builder(&prefix)
            .durability(durability)
            .in_doubt_timeout(Duration::from_secs(15))
            .open()
            .unwrap()
    };
    let db = open();
    let config = RankingConfig::new(0..1_000_000_000).policy(Policy::Increment);
    let board = Ranking::create(&db, "ranked", config).unwrap();
    for id in 0..4 {
        db.insert(&Ranked {
            id,
            votes: 0,
            pending: autoshard::Pending::new(),
        })
        .unwrap();
    }
    let victim = master_of(cluster, &format!("{prefix}:*:rk*:v"));
    let masters = master_ports(cluster).len();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (db, stop) = (open(), stop.clone());
            thread::spawn(move || -> (u64, u64) {
                let (mut acked, mut in_doubt, mut n) = (0, 0, 0u64);
                while !stop.load(Ordering::Acquire) {
                    n += 1;
                    match db.save_delta::<Ranked, _>(&((n + w) % 4), "votes", &1i64) {
                        Ok(_) => acked += 1,
                        // Not resent: it may have applied.
                        Err(Error::InDoubt { .. }) => in_doubt += 1,
                        Err(e) if e.is_retryable() => thread::sleep(Duration::from_millis(20)),
                        Err(e) => panic!("save failed: {e:?}"),
                    }
                }
                (acked, in_doubt)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    kill(victim);
    wait_for_promotion(cluster, victim, masters);
    revive(victim);
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Release);
    let (acked, in_doubt) = writers
        .into_iter()
        .map(|w| w.join().unwrap())
        .fold((0, 0), |(a, d), (x, y)| (a + x, d + y));
    db.compact::<Ranked>().unwrap();
    let mut total = 0;
    for id in 0..4u64 {
        let votes = db.load::<Ranked>(&id).unwrap().unwrap().votes;
        assert_eq!(
            board.score(&id.to_string()).unwrap(),
            Some(votes),
            "entity {id}"
        );
        total += votes as u64;
    }
    board.check_integrity().unwrap();
    eprintln!(
        "killed the board's master {victim}: {acked} saves acknowledged, {in_doubt} in doubt, \
         {total} counted; board = totals"
    );
    assert!(
        (acked..=acked + in_doubt).contains(&total),
        "{total} counted for {acked} acknowledged and {in_doubt} in doubt"
    );
}

//! Enqueuer children killed mid-commit: every acknowledged enqueue is
//! stored; the control acknowledges before the commit and is caught.

use super::oracle::RANGE;
use super::{
    common, queue_rows, seed, serial, spawn, sync_for, Mode, BOARD, ENQUEUE_THREADS, KILLS,
};
use crate::child::kills;
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::Sqlite;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

#[derive(Debug, Default)]
struct EnqueueKills {
    kills: u64,
    acked: u64,
    /// Updates stored without an acknowledgement: the kill landed after
    /// their commit (at most one per thread).
    committed_not_acked: u64,
}

/// Every acknowledged enqueue of a killed child is in the queue; per
/// thread, what is stored is the acknowledged updates plus at most the one
/// in flight.
fn kill_enqueuers(mode: Mode, kills: u64) -> std::result::Result<EnqueueKills, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("enqueue.db");
    let db = Sqlite::open(&path).unwrap();
    let config = RankingConfig::new(RANGE).queues(3);
    let board = Ranking::create(&db, BOARD, config).unwrap();
    board.queued().unwrap(); // creates the queue tables
    let raw = common::raw(&common::queue_file(&path));
    let mut rng = SmallRng::seed_from_u64(seed());
    let mut stats = EnqueueKills::default();
    for child in 0..kills {
        let delay = Duration::from_millis(rng.random_range(5..=80));
        let run = spawn(&path, mode, child, sync_for(child)).kill_after(delay);
        assert!(run.killed(), "child {child}: {:?}", run.status);
        stats.kills += 1;
        let mut acked: HashMap<u64, u64> = HashMap::new(); // thread -> acked count
        for line in &run.lines {
            if let Some(rest) = line.strip_prefix("ack ") {
                let (t, n) = rest.split_once(' ').unwrap();
                let (t, n): (u64, u64) = (t.parse().unwrap(), n.parse().unwrap());
                let count = acked.entry(t).or_default();
                assert_eq!(*count, n, "acks of a thread are in order");
                *count += 1;
            }
        }
        let mut stored: HashMap<u64, BTreeSet<u64>> = HashMap::new();
        for row in queue_rows(&raw) {
            let Some(rest) = row.player.strip_prefix(&format!("c{child}-t")) else {
                continue;
            };
            let (t, n) = rest.split_once('-').unwrap();
            let (t, n): (u64, u64) = (t.parse().unwrap(), n.parse().unwrap());
            assert_eq!(row.score, Some((n % RANGE.end as u64) as i64));
            assert!(stored.entry(t).or_default().insert(n), "stored twice");
        }
        for t in 0..ENQUEUE_THREADS {
            let acked = acked.get(&t).copied().unwrap_or(0);
            let stored = stored.remove(&t).unwrap_or_default();
            let lost = (0..acked).filter(|n| !stored.contains(n)).count();
            if lost > 0 {
                return Err(format!(
                    "child {child} killed {delay:?} in: {lost} acknowledged updates lost \
                     (thread {t})"
                ));
            }
            let extra: Vec<u64> = stored.range(acked..).copied().collect();
            if !(extra.is_empty() || extra == [acked]) {
                return Err(format!(
                    "child {child}: thread {t} has unacknowledged updates {extra:?} after \
                     {acked} acknowledged"
                ));
            }
            stats.acked += acked;
            stats.committed_not_acked += extra.len() as u64;
        }
    }
    if stats.acked == 0 {
        return Err("no child ever acknowledged an update: the kills tested nothing".into());
    }
    Ok(stats)
}

#[test]
fn acknowledged_enqueues_survive_kill_9_of_100_enqueuers() {
    let _serial = serial();
    let stats = kill_enqueuers(Mode::Enqueuer, kills(KILLS)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("enqueue kills: {stats:?}");
}

#[test]
fn control_acknowledging_before_the_commit_is_caught() {
    let _serial = serial();
    let err = kill_enqueuers(Mode::AckFirst, 20).expect_err("early acks went unnoticed");
    assert!(err.contains("acknowledged updates lost"), "{err}");
    eprintln!("ack-first caught: {err}");
}

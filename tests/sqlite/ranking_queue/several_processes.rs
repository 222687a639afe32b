//! Several workers, in this process and in child processes, drain one
//! queue: every update applied once, in order.

use super::oracle::{assert_board, Scores, RANGE};
use super::{serial, spawn, Mode, BOARD};
use crate::child::Child;
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::{Sqlite, Synchronous};
use std::thread;

/// Two workers in this process (separate handles) and two child processes
/// drain one queue at once. Each player's updates are increasing scores, so
/// a batch applied out of order or twice after a newer one would leave an
/// older score; the workers' counts add up to exactly the updates queued.
#[test]
fn workers_in_several_processes_apply_every_update_once_in_order() {
    let _serial = serial();
    const PLAYERS: usize = 400;
    const EACH: i64 = 25;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("multi.db");
    let db = Sqlite::builder(&path)
        .synchronous(Synchronous::Normal)
        .open()
        .unwrap();
    let config = RankingConfig::new(RANGE)
        .branching(8)
        .node_shards(2)
        .queues(3);
    let board = Ranking::create(&db, BOARD, config).unwrap();
    let mut expected = Scores::new();
    for n in 0..EACH {
        for p in 0..PLAYERS {
            let player = format!("p{p}");
            let score = n * 100 + p as i64 % 100;
            board.enqueue(&player, score).unwrap();
            expected.insert(player, score);
        }
    }
    let total = (PLAYERS as i64 * EACH) as u64;
    assert_eq!(board.queued().unwrap(), total);

    let children: Vec<Child> = (0..2)
        .map(|c| spawn(&path, Mode::Drain, c, "normal"))
        .collect();
    let updates: u64 = thread::scope(|s| {
        let local: Vec<_> = (0..2)
            .map(|_| {
                let path = &path;
                s.spawn(move || {
                    let db = Sqlite::open(path).unwrap();
                    let board = Ranking::open(&db, BOARD).unwrap();
                    board.worker().batch_size(16).drain().unwrap().updates
                })
            })
            .collect();
        local.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let mut drained = Vec::new();
    for child in children {
        let run = child.finish();
        assert!(run.status.success(), "drain child: {:?}", run.status);
        let line = run.lines.iter().find_map(|l| l.strip_prefix("drained "));
        drained.push(
            line.expect("the child reports its count")
                .parse::<u64>()
                .unwrap(),
        );
    }
    eprintln!("in-process workers: {updates}, children: {drained:?}");
    assert_eq!(
        updates + drained.iter().sum::<u64>(),
        total,
        "applied once each"
    );
    assert_eq!(board.queued().unwrap(), 0);
    let players = expected.keys().cloned().collect();
    assert_board(&board, &expected, &players);
}

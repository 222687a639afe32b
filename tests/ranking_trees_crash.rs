//! Crash tests of boards split into trees (issue 13, Reliability): the
//! worker of one of `k` trees (or the workers of all of them) SIGKILLed in
//! the middle of its batches, on real SQLite files (a file per tree), then
//! restarted. Children are this test binary run again with `--exact
//! child_process --ignored`.
//!
//! The board is an `Increment` board and every queued update adds 1, so
//! "applied exactly once" is visible in the scores: after every kill, every
//! tree's `check_integrity` is clean; after the restarted worker drained,
//! every player's score is the number of updates the parent enqueued (all
//! acknowledged) for them, and nothing is queued.
//!
//! Control (kept as a test, `a_reapplied_batch_is_caught`): a child that
//! dies between a batch's commit and its queue delete
//! (`queue_hooks::abort_before_delete`), restarted as a worker that takes
//! queued rows whatever the applied-through marks say
//! (`queue_hooks::ignore_applied_marks`: the bug the marks guard against),
//! applies that batch twice, and the same check fails.
#![cfg(unix)]

#[path = "common/child.rs"]
mod child;
use child::{kills, Child};

use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{Sqlite, Synchronous};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

const ENV_DB: &str = "AUTOSHARD_TC_DB";
const ENV_MODE: &str = "AUTOSHARD_TC_MODE";
const BOARD: &str = "trees";
const TREES: u32 = 4;
const PLAYERS: usize = 24;
/// Updates the parent enqueues before each child.
const PER_ROUND: usize = 60;
/// A child nobody kills ends by itself after this long.
const CHILD_LIFETIME: Duration = Duration::from_secs(30);

/// Crash tests run one at a time (2 CI cores).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("parent closed the pipe");
    out.flush().expect("parent closed the pipe");
}

fn open(path: &Path) -> Ranking {
    let db = Sqlite::builder(path)
        .synchronous(Synchronous::Normal)
        .open()
        .unwrap();
    Ranking::open(&db, BOARD).unwrap()
}

/// The child's entry point; without the parent's environment it returns.
/// Modes: `tree-<t>` runs tree t's worker only, `all` every tree's,
/// `abort-after-one` applies one batch of tree 0 and aborts before its
/// delete, `reapply` drains ignoring the applied-through marks.
#[test]
#[ignore = "the crash tests run it as a child process"]
fn child_process() {
    let (Ok(path), Ok(mode)) = (std::env::var(ENV_DB), std::env::var(ENV_MODE)) else {
        return;
    };
    say(""); // end the harness's `test child_process ... ` line
    let board = open(Path::new(&path));
    let fast = |w: autoshard::ranking::Worker| w.batch_size(7).linger(Duration::ZERO);
    match mode.as_str() {
        "all" => {
            let worker = fast(board.worker()).spawn().unwrap();
            say("ready");
            std::thread::sleep(CHILD_LIFETIME);
            worker.stop().unwrap();
        }
        "abort-after-one" => {
            autoshard::__private::queue_hooks::abort_before_delete(1);
            say("ready");
            fast(board.tree_worker(0).unwrap()).drain().unwrap();
        }
        "reapply" => {
            autoshard::__private::queue_hooks::ignore_applied_marks(true);
            say("ready");
            board.worker().drain().unwrap();
            say("drained");
        }
        tree => {
            let t: u32 = tree.strip_prefix("tree-").unwrap().parse().unwrap();
            let worker = fast(board.tree_worker(t).unwrap()).spawn().unwrap();
            say("ready");
            std::thread::sleep(CHILD_LIFETIME);
            worker.stop().unwrap();
        }
    }
}

fn spawn(db: &Path, mode: &str) -> Child {
    Child::spawn(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_process", "--ignored", "--nocapture"])
            .arg("--test-threads=1")
            .env(ENV_DB, db)
            .env(ENV_MODE, mode),
    )
}

/// A fresh split `Increment` board in a temporary directory.
fn setup() -> (tempfile::TempDir, PathBuf, Ranking) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trees.db");
    let db = Sqlite::builder(&path)
        .synchronous(Synchronous::Normal)
        .open()
        .unwrap();
    let config = RankingConfig::new(0..1_000_000)
        .policy(Policy::Increment)
        .trees(TREES);
    let board = Ranking::create(&db, BOARD, config).unwrap();
    (dir, path, board)
}

/// Enqueues `n` increments of 1 to random players, counting them.
fn enqueue(board: &Ranking, rng: &mut SmallRng, n: usize, sent: &mut HashMap<String, i64>) {
    for _ in 0..n {
        let player = format!("p{}", rng.random_range(0..PLAYERS));
        board.enqueue(&player, 1).unwrap();
        *sent.entry(player).or_default() += 1;
    }
}

/// Drains every tree in this process and compares each player's score with
/// the increments sent: a difference is an update lost or applied twice.
fn exactly_once(board: &Ranking, sent: &HashMap<String, i64>) -> Result<(), String> {
    board.worker().drain().map_err(|e| e.to_string())?;
    if board.queued().map_err(|e| e.to_string())? != 0 {
        return Err("updates still queued after the drain".into());
    }
    board.check_integrity().map_err(|e| e.to_string())?;
    for (player, &n) in sent {
        let score = board.score(player).map_err(|e| e.to_string())?;
        if score != Some(n) {
            return Err(format!("{player}: score {score:?}, {n} increments sent"));
        }
    }
    Ok(())
}

/// Kills a child running the worker of one tree (or of all), at a random
/// moment of its batches, 24 times; every tree's integrity after each kill,
/// every update applied exactly once after the restart.
#[test]
fn the_worker_of_one_of_k_trees_killed_mid_batch_applies_each_update_once() {
    let _serial = serial();
    let (_dir, path, board) = setup();
    let seed = rand::random::<u64>();
    eprintln!("seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut sent = HashMap::new();
    let rounds = kills(24);
    let (mut killed, mut interrupted) = (0, 0);
    for round in 0..rounds {
        enqueue(&board, &mut rng, PER_ROUND, &mut sent);
        let mode = match round % 5 {
            4 => "all".to_owned(),
            _ => format!("tree-{}", rng.random_range(0..TREES)),
        };
        let delay = Duration::from_micros(rng.random_range(0..20_000));
        let queued = board.queued().unwrap();
        let run = spawn(&path, &mode).kill_after(delay);
        killed += u64::from(run.killed());
        // Every tree intact whatever the kill interrupted (SQLite rolls an
        // interrupted transaction back on the next open).
        let after = open(&path);
        after.check_integrity().unwrap();
        // Killed after its worker applied some, with work left.
        let left = after.queued().unwrap();
        interrupted += u64::from(left > 0 && left < queued);
    }
    eprintln!("{killed} kills, {interrupted} with work left after some applied");
    assert!(
        killed >= rounds * 3 / 4,
        "only {killed} of {rounds} children were killed"
    );
    assert!(
        interrupted > 0,
        "no kill landed while a worker was draining"
    );
    // The restart: this process drains what the children left.
    exactly_once(&open(&path), &sent).unwrap();
}

/// The control: a batch applied but not deleted, re-taken by a worker that
/// ignores the applied-through marks, is applied twice, which the check
/// above reports.
#[test]
fn a_reapplied_batch_is_caught() {
    let _serial = serial();
    let (_dir, path, board) = setup();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut sent = HashMap::new();
    // Enough for tree 0 to have a batch.
    enqueue(&board, &mut rng, PER_ROUND, &mut sent);
    let aborted = spawn(&path, "abort-after-one").finish();
    assert!(
        !aborted.status.success(),
        "the child should abort before the delete"
    );
    let reapplied = spawn(&path, "reapply").finish();
    assert!(reapplied.said("drained"));
    let caught = exactly_once(&open(&path), &sent);
    assert!(caught.is_err(), "a batch applied twice went unnoticed");
}

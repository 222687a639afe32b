//! The job-aggregation queue on SQLite: `enqueue`, workers, `flush`. The
//! store-neutral behaviour (mixed writers vs the oracle, bad input, flush,
//! worker life cycle, several workers) and the PostgreSQL crash test are in
//! `stores_ranking_queue/`; what needs SQLite files by hand is here.
//!
//! Real SQLite files, real threads, and real processes killed with SIGKILL.
//! Child processes are this test binary run again with `--exact
//! child_process --ignored`; environment variables say what to do.
//!
//! What the crash tests check, and the buggy variants they catch (shown live
//! by the controls beside them):
//!
//! - a worker killed at a random moment leaves the queue as a *suffix* of
//!   what was enqueued, per queue shard, and the board equal to the board
//!   before plus exactly the drained prefix: a worker that applies a batch
//!   and deletes it in a separate transaction is caught with the batch
//!   applied but still queued ("applied but still queued");
//! - after a restarted worker drains, the board equals the oracle built from
//!   the board before and every enqueued update, and the queue is empty;
//! - every `enqueue` a killed child acknowledged is stored (queued or
//!   applied): a child that acknowledges before the commit is caught
//!   ("acknowledged updates lost").
//!
//! One module per concern (`life_cycle`, `several_processes`, and one per
//! crash test: `mid_drain`, `apply_delete`, `enqueue`); the child process,
//! the queue reader and the settings the crash tests share are here
//! (`child_process` here, found by `--exact` under its full path, see
//! `child::test_path`), and `mid_drain` lends its fill and mid-state check to
//! `apply_delete`.
#![cfg(unix)]

use crate::child;
use crate::child::say;
use crate::common;
use crate::queue_oracle as oracle;
use child::Child;
use oracle::RANGE;

mod apply_delete;
mod enqueue;
mod life_cycle;
mod mid_drain;
mod several_processes;

use autoshard::ranking::Ranking;
use autoshard::{Sqlite, Synchronous};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Crash tests run one at a time: overlapping children would starve each
/// other of the 2 CI cores and make kills land mostly in process start-up.
static SERIAL: Mutex<()> = Mutex::new(());

const ENV_DB: &str = "AUTOSHARD_RQ_DB";
const ENV_MODE: &str = "AUTOSHARD_RQ_MODE";
const ENV_CHILD: &str = "AUTOSHARD_RQ_CHILD";
const ENV_SYNC: &str = "AUTOSHARD_RQ_SYNC";
const ENV_SEED: &str = "AUTOSHARD_RQ_SEED";
const ENV_ABORT_AT: &str = "AUTOSHARD_RQ_ABORT_AT";
/// A child nobody kills ends by itself after this long.
const CHILD_LIFETIME: Duration = Duration::from_secs(30);

const BOARD: &str = "crash";

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn seed() -> u64 {
    std::env::var(ENV_SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let seed = rand::random::<u64>();
            eprintln!("{ENV_SEED}={seed}");
            seed
        })
}

/// Enqueuer kills in the default run (`AUTOSHARD_KILLS` overrides; the
/// worker, slower to restart and refill, is killed 40 times).
const KILLS: u64 = 100;

// ---------------------------------------------------------------------------
// Child processes.
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Runs a worker (small batches) until killed.
    Worker,
    /// Control: a worker that applies a batch and deletes it in two
    /// transactions.
    SplitWorker,
    /// Drains the queue with `exit_when_idle`, then reports its count.
    Drain,
    /// Threads enqueue unique updates and acknowledge each on stdout.
    Enqueuer,
    /// Control: acknowledges each update before enqueueing it.
    AckFirst,
    /// A worker that aborts the process between the `ENV_ABORT_AT`-th
    /// batch's commit and its queue delete.
    AbortBeforeDelete,
    /// Control: drains as `Drain` does, ignoring the applied-through marks.
    DrainIgnoringMarks,
    /// Runs a worker with the default bound in updates and a memory bound
    /// of [`BIG_BATCH_BYTES`], so each batch takes the backlog over several
    /// chunked reads of the queue, until killed.
    BigWorker,
}

impl Mode {
    const ALL: [Mode; 8] = [
        Mode::Worker,
        Mode::SplitWorker,
        Mode::Drain,
        Mode::Enqueuer,
        Mode::AckFirst,
        Mode::AbortBeforeDelete,
        Mode::DrainIgnoringMarks,
        Mode::BigWorker,
    ];

    fn name(self) -> &'static str {
        match self {
            Mode::Worker => "worker",
            Mode::SplitWorker => "split-worker",
            Mode::Drain => "drain",
            Mode::Enqueuer => "enqueuer",
            Mode::AckFirst => "ack-first",
            Mode::AbortBeforeDelete => "abort-before-delete",
            Mode::DrainIgnoringMarks => "drain-ignoring-marks",
            Mode::BigWorker => "big-worker",
        }
    }
}

const ENQUEUE_THREADS: u64 = 4;
const CRASH_BATCH: usize = 40;
/// `BigWorker`'s memory bound: about 5,000 queued rows as the worker counts
/// them, so a batch reads two chunks of 4,096 rows and stops.
const BIG_BATCH_BYTES: usize = 1_500_000;

/// The child's entry point; without the parent's environment it returns.
#[test]
#[ignore = "the crash tests run it as a child process"]
fn child_process() {
    let (Ok(path), Ok(mode), Ok(child), Ok(sync)) = (
        std::env::var(ENV_DB),
        std::env::var(ENV_MODE),
        std::env::var(ENV_CHILD),
        std::env::var(ENV_SYNC),
    ) else {
        return;
    };
    crate::child::abort_on_panic();
    say(""); // end the harness's `test child_process ... ` line
    let mode = *Mode::ALL
        .iter()
        .find(|m| m.name() == mode)
        .expect("known mode");
    let child: u64 = child.parse().unwrap();
    let synchronous = if sync == "full" {
        Synchronous::Full
    } else {
        Synchronous::Normal
    };
    let db = Sqlite::builder(PathBuf::from(path))
        .synchronous(synchronous)
        .open()
        .unwrap();
    let board = Ranking::open(&db, BOARD).unwrap();
    match mode {
        Mode::Worker => {
            let worker = board
                .worker()
                .batch_size(CRASH_BATCH)
                .linger(Duration::ZERO)
                .spawn()
                .unwrap();
            say("ready");
            thread::sleep(CHILD_LIFETIME);
            worker.stop().unwrap();
        }
        Mode::BigWorker => {
            let worker = board
                .worker()
                .batch_bytes(BIG_BATCH_BYTES)
                .linger(Duration::ZERO)
                .spawn()
                .unwrap();
            say("ready");
            thread::sleep(CHILD_LIFETIME);
            worker.stop().unwrap();
        }
        Mode::SplitWorker => {
            say("ready");
            split_worker(&board);
        }
        Mode::Drain | Mode::DrainIgnoringMarks => {
            let ignore = mode == Mode::DrainIgnoringMarks;
            autoshard::__private::queue_hooks::ignore_applied_marks(ignore);
            let stats = board.worker().batch_size(16).drain().unwrap();
            say(&format!("drained {}", stats.updates));
        }
        Mode::AbortBeforeDelete => {
            let at: u64 = std::env::var(ENV_ABORT_AT).unwrap().parse().unwrap();
            autoshard::__private::queue_hooks::abort_before_delete(at);
            let stats = board.worker().batch_size(CRASH_BATCH).drain().unwrap();
            say(&format!("drained {} without aborting", stats.updates));
        }
        Mode::Enqueuer | Mode::AckFirst => {
            let ready = Barrier::new(ENQUEUE_THREADS as usize);
            thread::scope(|s| {
                for t in 0..ENQUEUE_THREADS {
                    let (board, ready) = (&board, &ready);
                    s.spawn(move || {
                        if ready.wait().is_leader() {
                            say("ready");
                        }
                        let started = Instant::now();
                        for n in 0.. {
                            if started.elapsed() > CHILD_LIFETIME {
                                return;
                            }
                            let player = format!("c{child}-t{t}-{n}");
                            let score = n % RANGE.end;
                            if mode == Mode::AckFirst {
                                say(&format!("ack {t} {n}"));
                            }
                            board.enqueue(&player, score).unwrap();
                            if mode == Mode::Enqueuer {
                                say(&format!("ack {t} {n}"));
                            }
                        }
                    });
                }
            });
        }
    }
}

/// The control's buggy worker, written with public calls and raw SQL: it
/// applies the oldest rows with `set_scores`/`remove` (one transaction each)
/// and deletes them afterwards in another. The pause between stands for a
/// slow commit and makes a kill between the two likely.
fn split_worker(board: &Ranking) {
    let raw = common::raw(&common::queue_file(Path::new(
        &std::env::var(ENV_DB).unwrap(),
    )));
    let started = Instant::now();
    while started.elapsed() < CHILD_LIFETIME {
        let rows = queue_rows(&raw);
        let batch: Vec<&QueueRow> = rows.iter().take(CRASH_BATCH).collect();
        if batch.is_empty() {
            thread::sleep(Duration::from_millis(5));
            continue;
        }
        let scores: Vec<(&str, i64)> = batch
            .iter()
            .filter_map(|r| r.score.map(|s| (r.player.as_str(), s)))
            .collect();
        board.set_scores(&scores).unwrap();
        for r in batch.iter().filter(|r| r.score.is_none()) {
            board.remove(&r.player).unwrap();
        }
        thread::sleep(Duration::from_millis(3));
        for r in &batch {
            raw.execute(
                "DELETE FROM autoshard_rank_queue WHERE queue = ?1 AND seq = ?2",
                (r.queue, r.seq),
            )
            .unwrap();
        }
    }
}

fn spawn(db: &Path, mode: Mode, child: u64, sync: &str) -> Child {
    spawn_with(db, mode, child, sync, &[])
}

fn spawn_with(db: &Path, mode: Mode, child: u64, sync: &str, env: &[(&str, String)]) -> Child {
    Child::spawn(
        Command::new(std::env::current_exe().unwrap())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args([
                "--exact",
                crate::child::test_path(module_path!(), "child_process").as_str(),
                "--ignored",
                "--nocapture",
            ])
            .arg("--test-threads=1")
            .env(ENV_DB, db)
            .env(ENV_MODE, mode.name())
            .env(ENV_CHILD, child.to_string())
            .env(ENV_SYNC, sync),
    )
}

/// Every other child runs under `Full` (kills land mostly in the fsync,
/// after the commit frame is written), the others under `Normal` (kills land
/// densely inside transactions).
fn sync_for(child: u64) -> &'static str {
    if child.is_multiple_of(2) {
        "full"
    } else {
        "normal"
    }
}

// ---------------------------------------------------------------------------
// The queue as the crash tests read it.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
struct QueueRow {
    queue: i64,
    seq: i64,
    player: String,
    score: Option<i64>,
}

/// The queue in (shard, sequence) order, read behind the library's back.
fn queue_rows(raw: &rusqlite::Connection) -> Vec<QueueRow> {
    let mut stmt = raw
        .prepare("SELECT queue, seq, player, score FROM autoshard_rank_queue ORDER BY queue, seq")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok(QueueRow {
                queue: r.get(0)?,
                seq: r.get(1)?,
                player: r.get(2)?,
                score: r.get(3)?,
            })
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

//! The job-aggregation queue on SQLite: `enqueue`, workers, `flush`. The
//! store-neutral behaviour (mixed writers vs the oracle, bad input, flush,
//! worker life cycle, several workers) and the PostgreSQL crash test are in
//! `stores_ranking_queue.rs`; what needs SQLite files by hand is here.
//!
//! Real SQLite files, real threads, and real processes killed with SIGKILL.
//! Child processes are this test binary run again with `--exact
//! child_process --ignored`; environment variables say what to do.
//!
//! What the crash tests check, and the buggy variants they catch (shown live
//! by the controls at the end):
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
#![cfg(unix)]

mod common;
#[path = "common/queue_oracle.rs"]
mod oracle;
use oracle::{apply_as, assert_board, read_scores, write, Scores, RANGE};
#[path = "common/child.rs"]
mod child;
use child::{kills, Child};

use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{Error, Sqlite, Synchronous};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeSet, HashMap};
use std::io::Write;
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

// ---------------------------------------------------------------------------
// Input, flush, worker life cycle.
// ---------------------------------------------------------------------------

/// A queued update the board refuses (written behind the library's back)
/// is corruption: with dead letters turned off, it stops the worker with
/// `Error::Corrupt` naming the row (before issue 12's item 12 it was
/// `ScoreOutOfRange`, which this test showed, as if the caller had passed a
/// bad score); nothing of its batch is applied and the update stays queued.
/// With them on (the default, `stores_ranking_queue.rs`) it is set aside.
#[test]
fn without_dead_letters_a_worker_stops_at_an_update_it_cannot_apply() {
    let db = common::db();
    let board = Ranking::create(&db.store, "b", RankingConfig::new(0..100)).unwrap();
    board.enqueue("good", 5).unwrap();
    let raw = common::raw(&common::queue_file(&db.path));
    raw.execute(
        "INSERT INTO autoshard_rank_queue (board, queue, seq, player, score) \
         SELECT board, queue, seq + 1, 'bad', 1000 FROM autoshard_rank_queue",
        [],
    )
    .unwrap();
    let worker = board.worker().dead_letter(false).spawn().unwrap();
    let err = worker.join().unwrap_err();
    match &err {
        Error::Corrupt { field, reason, .. } => {
            assert_eq!(field, "queued update (queue 0, seq 1)", "{err}");
            assert!(reason.contains("score 1000 is outside"), "{err}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(board.queued().unwrap(), 2);
    assert_eq!(
        board.len().unwrap(),
        0,
        "part of a failed batch was applied"
    );
    assert!(board.dead_letters().unwrap().is_empty());
    // The default worker sets it aside and applies the rest.
    let stats = board.worker().drain().unwrap();
    assert_eq!((stats.updates, stats.dead_letters), (1, 1));
    assert_eq!(board.score("good").unwrap(), Some(5));
}

/// A queued row the store cannot read as an update (here a player that is
/// not UTF-8, as damage to the file could leave) is set aside too, with
/// what could be read of it. Before the fix the worker stopped with
/// `Error::Sqlite` (a UTF-8 conversion failure) and the shard stayed
/// blocked.
#[test]
fn an_unreadable_queued_row_is_set_aside() {
    let db = common::db();
    let board = Ranking::create(&db.store, "b", RankingConfig::new(0..100)).unwrap();
    board.enqueue("before", 1).unwrap();
    board.enqueue("bytes", 2).unwrap();
    board.enqueue("after", 3).unwrap();
    let raw = common::raw(&common::queue_file(&db.path));
    let edited = raw
        .execute(
            "UPDATE autoshard_rank_queue SET player = CAST(x'62ff79' AS TEXT) \
             WHERE player = 'bytes'",
            [],
        )
        .unwrap();
    assert_eq!(edited, 1);
    let stats = board.worker().drain().unwrap();
    assert_eq!((stats.updates, stats.dead_letters), (2, 1));
    assert_eq!(board.len().unwrap(), 2);
    let letters = board.dead_letters().unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!((letter.queue, letter.seq), (0, 1));
    assert_eq!(
        (letter.player.as_str(), letter.score),
        ("b\u{fffd}y", Some(2))
    );
    assert!(letter.reason.contains("not valid UTF-8"), "{letter:?}");
    board.check_integrity().unwrap();
}

/// A queue whose index is out of order (damage; here its declared order is
/// reversed behind SQLite's back, which reads it as "row not in PRIMARY KEY
/// order") hands the worker rows out of sequence order. Before the fix the
/// worker applied the same rows again forever (`drain` never returned: this
/// test timed out; that worker deleted what it took, and the delete missed
/// rows); now the worker checks the order and stops with `Error::Corrupt`
/// (the applied-through marks would also stop the loop, but skip rows).
#[test]
fn a_queue_out_of_order_stops_the_worker_instead_of_looping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    {
        let store = Sqlite::open(&path).unwrap();
        let board = Ranking::create(&store, "b", RankingConfig::new(0..100)).unwrap();
        for n in 0..10 {
            board.enqueue(&format!("p{n}"), n).unwrap();
        }
    }
    let raw = common::raw(&common::queue_file(&path));
    raw.execute_batch(
        "PRAGMA writable_schema = ON; \
         UPDATE sqlite_master SET sql = replace(sql, 'seq)', 'seq DESC)') \
         WHERE name = 'autoshard_rank_queue'; \
         PRAGMA writable_schema = OFF;",
    )
    .unwrap();
    drop(raw);
    let store = Sqlite::open(&path).unwrap();
    let board = Ranking::open(&store, "b").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let drainer = board.clone();
    thread::spawn(move || tx.send(drainer.worker().batch_size(4).drain()));
    let outcome = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the worker loops on rows it cannot delete");
    match outcome {
        Err(Error::Corrupt { reason, .. }) => assert!(reason.contains("out of order"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_in_memory_board_queues_too() {
    let db = Sqlite::memory().unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(-50..50).queues(2)).unwrap();
    board.set_score("direct", -50).unwrap();
    for n in 0..100 {
        board.enqueue(&format!("p{}", n % 10), n - 50).unwrap();
    }
    board.enqueue_remove("p0").unwrap();
    let stats = board.worker().batch_size(7).drain().unwrap();
    assert_eq!(stats.updates, 101);
    let mut expected: Scores = (1..10).map(|i| (format!("p{i}"), 40 + i)).collect();
    expected.insert("direct".into(), -50);
    let players = expected.keys().cloned().chain(["p0".into()]).collect();
    board.check_integrity().unwrap();
    assert_eq!(read_scores(&board, &players), expected);
}

/// `Duration::MAX` means "no limit" for every duration option: the worker
/// waits for a wake-up instead of a deadline, and `flush_within` waits
/// until the queue is applied. Before the fix the worker thread panicked
/// ("overflow when adding duration to instant") at its first idle wait, so
/// the flush timed out and `stop` re-raised the panic (issue 12, item 9).
#[test]
fn duration_max_options_mean_no_limit() {
    let db = Sqlite::memory().unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
    let worker = board
        .worker()
        .idle_timeout(Duration::MAX)
        .linger(Duration::MAX)
        .spawn()
        .unwrap();
    for round in 0..3 {
        for n in 0..10 {
            board.enqueue(&format!("p{n}"), round * 10 + n).unwrap();
        }
        board.flush_within(Duration::from_secs(20)).unwrap();
    }
    board.enqueue("last", 99).unwrap();
    board.flush_within(Duration::MAX).unwrap();
    assert_eq!(board.score("last").unwrap(), Some(99));
    let stats = worker.stop().unwrap();
    assert_eq!(stats.updates, 31);
}

// ---------------------------------------------------------------------------
// Several workers, in several processes.
// ---------------------------------------------------------------------------

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
    let config = RankingConfig::new(RANGE).branching(8).shards(2).queues(3);
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
}

impl Mode {
    const ALL: [Mode; 7] = [
        Mode::Worker,
        Mode::SplitWorker,
        Mode::Drain,
        Mode::Enqueuer,
        Mode::AckFirst,
        Mode::AbortBeforeDelete,
        Mode::DrainIgnoringMarks,
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
        }
    }
}

const ENQUEUE_THREADS: u64 = 4;
const CRASH_BATCH: usize = 40;

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
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
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

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("parent closed the pipe");
    out.flush().expect("parent closed the pipe");
}

fn spawn(db: &Path, mode: Mode, child: u64, sync: &str) -> Child {
    spawn_with(db, mode, child, sync, &[])
}

fn spawn_with(db: &Path, mode: Mode, child: u64, sync: &str, env: &[(&str, String)]) -> Child {
    Child::spawn(
        Command::new(std::env::current_exe().unwrap())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(["--exact", "child_process", "--ignored", "--nocapture"])
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
// A worker killed mid-drain.
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

#[derive(Debug, Default)]
struct WorkerKills {
    kills: u64,
    /// Kills after which part, not all, of the queue had been drained.
    mid_drain: u64,
    /// Kills before the first batch committed.
    before_first_batch: u64,
    /// Kills after the whole queue was drained.
    after_last_batch: u64,
    updates_applied_by_killed_children: u64,
}

const CRASH_PLAYERS: usize = 1_500;
const CRASH_UPDATES: usize = 2_000;

/// Enqueues `updates` random updates (one in 20 a removal) of `players`,
/// each value drawn by `value`, from 4 threads.
fn fill(
    board: &Ranking,
    players: &[&String],
    rng: &mut SmallRng,
    updates: usize,
    value: impl Fn(&mut SmallRng) -> i64,
) {
    let chunks: Vec<Vec<(String, Option<i64>)>> = (0..4)
        .map(|_| {
            (0..updates / 4)
                .map(|_| {
                    let p = players[rng.random_range(..players.len())].clone();
                    let score = (rng.random_range(..20u8) != 0).then(|| value(rng));
                    (p, score)
                })
                .collect()
        })
        .collect();
    thread::scope(|s| {
        for chunk in &chunks {
            s.spawn(move || {
                for (p, score) in chunk {
                    write(board, true, p, *score);
                }
            });
        }
    });
}

/// The applied-through marks, by queue shard, read behind the library's
/// back from the board's file.
fn applied_marks(raw_board: &rusqlite::Connection) -> HashMap<i64, i64> {
    let mut stmt = raw_board
        .prepare("SELECT queue, seq FROM autoshard_rank_applied")
        .unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

/// Checks a killed worker's leftovers against what was queued: per shard,
/// `left` is a suffix of `queued` holding every row above the shard's
/// mark. Returns `before` plus the rows through the marks (what the board
/// must hold), how many those are, and how many of them are still queued
/// (applied, not yet deleted).
fn check_mid_state(
    policy: Policy,
    before: &Scores,
    queued: &[QueueRow],
    left: &[QueueRow],
    marks: &HashMap<i64, i64>,
) -> std::result::Result<(Scores, usize, usize), String> {
    let mut prefix = before.clone();
    let (mut applied, mut stranded) = (0, 0);
    let shards: BTreeSet<i64> = queued.iter().map(|r| r.queue).collect();
    for shard in shards {
        let all: Vec<&QueueRow> = queued.iter().filter(|r| r.queue == shard).collect();
        let rest: Vec<&QueueRow> = left.iter().filter(|r| r.queue == shard).collect();
        if rest.len() > all.len() || all[all.len() - rest.len()..] != rest[..] {
            return Err(format!(
                "queue shard {shard} is not a suffix of what was enqueued"
            ));
        }
        let mark = marks.get(&shard).copied().unwrap_or(-1);
        if all.len() - rest.len() > all.iter().filter(|r| r.seq <= mark).count() {
            return Err(format!(
                "queue shard {shard}: rows above the applied mark {mark} were deleted"
            ));
        }
        for row in all.iter().filter(|r| r.seq <= mark) {
            apply_as(policy, &mut prefix, &row.player, row.score);
            applied += 1;
        }
        stranded += rest.iter().filter(|r| r.seq <= mark).count();
    }
    Ok((prefix, applied, stranded))
}

/// Fills the queue of a board with `policy`, kills a worker child at a
/// random moment, checks the mid-state, drains with a restarted worker and
/// checks the end state; repeats until `want` kills landed mid-drain.
fn kill_workers(mode: Mode, policy: Policy, want: u64) -> std::result::Result<WorkerKills, String> {
    // Increments are small and positive: sums stay in range for hundreds
    // of rounds, and one applied twice shows in the sum.
    let value = |rng: &mut SmallRng| match policy {
        Policy::Increment => rng.random_range(1..10),
        _ => rng.random_range(RANGE),
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.db");
    let db = Sqlite::builder(&path)
        .synchronous(Synchronous::Normal)
        .open()
        .unwrap();
    let config = RankingConfig::new(RANGE)
        .branching(16)
        .shards(4)
        .queues(4)
        .policy(policy);
    let board = Ranking::create(&db, BOARD, config).unwrap();
    board.queued().unwrap(); // creates the queue's file and tables
    let raw_board = common::raw(&path);
    let raw = common::raw(&common::queue_file(&path));
    let players: BTreeSet<String> = (0..CRASH_PLAYERS).map(|p| format!("p{p}")).collect();
    let mut rng = SmallRng::seed_from_u64(seed());
    // The board starts with players set directly, so the oracle is built
    // from the player-score table and the queue together.
    let mut initial = Vec::new();
    for p in &players {
        if rng.random::<bool>() {
            initial.push((p.clone(), value(&mut rng)));
        }
    }
    let pairs: Vec<(&str, i64)> = initial.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    board.set_scores(&pairs).unwrap();
    let mut stats = WorkerKills::default();
    let players_vec: Vec<&String> = players.iter().collect();
    // The board as stored: read once, then known from each round's check.
    let mut before = read_scores(&board, &players);
    while stats.mid_drain < want {
        if stats.kills >= 5 * want {
            return Err(format!("too few kills landed mid-drain: {stats:?}"));
        }
        // Fill: the oracle is the board as stored plus every enqueued update.
        let mut expected = before.clone();
        fill(&board, &players_vec, &mut rng, CRASH_UPDATES, value);
        let queued = queue_rows(&raw);
        assert_eq!(queued.len(), CRASH_UPDATES);
        for row in &queued {
            // Per shard in sequence order is a player's enqueue order.
            apply_as(policy, &mut expected, &row.player, row.score);
        }

        let child = stats.kills;
        let delay = Duration::from_millis(rng.random_range(5..=80));
        let run = spawn(&path, mode, child, sync_for(child)).kill_after(delay);
        assert!(
            run.killed(),
            "child {child} ended by itself: {:?}",
            run.status
        );
        stats.kills += 1;

        // Mid-state: the remaining queue is a suffix of each shard that
        // holds every row above the shard's applied-through mark, and the
        // board is `before` plus exactly the rows through the marks.
        let left = queue_rows(&raw);
        let marks = applied_marks(&raw_board);
        let (prefix, drained, _) = check_mid_state(policy, &before, &queued, &left, &marks)
            .map_err(|e| format!("child {child}: {e}"))?;
        let now = read_scores(&board, &players);
        if now != prefix {
            let differ = players
                .iter()
                .filter(|p| now.get(*p) != prefix.get(*p))
                .count();
            return Err(format!(
                "child {child} killed {delay:?} in: {differ} players differ from the board \
                 plus the rows through the applied marks ({drained} updates): a batch was \
                 applied but still queued and unmarked, or marked but not applied"
            ));
        }
        board
            .check_integrity()
            .map_err(|e| format!("child {child}: integrity after the kill: {e}"))?;
        stats.updates_applied_by_killed_children += drained as u64;
        match drained {
            0 => stats.before_first_batch += 1,
            CRASH_UPDATES => stats.after_last_batch += 1,
            _ => stats.mid_drain += 1,
        }

        // Restart a worker; after a flush the board is the oracle.
        let worker = board.worker().spawn().unwrap();
        board.flush().unwrap();
        worker.stop().unwrap();
        assert_eq!(board.queued().unwrap(), 0);
        assert_eq!(
            read_scores(&board, &players),
            expected,
            "after child {child}"
        );
        board.check_integrity().unwrap();
        before = expected;
    }
    assert_board(&board, &read_scores(&board, &players), &players);
    Ok(stats)
}

/// Kills per write path in the default run (`AUTOSHARD_KILLS` overrides).
const KILLS: u64 = 100;

#[test]
fn worker_killed_100_times_mid_drain_applies_every_update_exactly_once() {
    let _serial = serial();
    let stats =
        kill_workers(Mode::Worker, Policy::Replace, kills(KILLS)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("worker kills: {stats:?}");
}

/// Issue 10's points board: a queue of increments (an update applied twice,
/// or lost, changes a sum, where a replaced score could hide it), its
/// worker killed mid-drain 20 times; each kill leaves the board at the
/// board before plus exactly the drained prefix, and the restarted worker
/// adds exactly the rest.
#[test]
fn increment_worker_killed_20_times_mid_drain_adds_every_update_exactly_once() {
    let _serial = serial();
    let stats =
        kill_workers(Mode::Worker, Policy::Increment, kills(20)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("increment worker kills: {stats:?}");
}

// ---------------------------------------------------------------------------
// A worker killed between its apply and the queue's delete.
// ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct WindowKills {
    kills: u64,
    /// Applied rows the killed worker left queued, in all rounds.
    stranded: u64,
    /// Rounds where a direct write overtook a stranded update.
    overtaken: u64,
}

/// Fills the queue, runs a worker child that aborts between the commit of
/// its 1st to 3rd batch and that batch's queue delete (the hook makes the
/// window certain, where a random kill hits it rarely), checks the
/// mid-state, then overtakes a stranded update with a newer direct write
/// and drains the rest in a second child (`restart`: `Drain`, or the
/// control's `DrainIgnoringMarks`). Every acknowledged update must be
/// applied exactly once: the restarted worker applies exactly the rows
/// above the marks, and the board equals the oracle with the direct write
/// on top.
fn kill_between_apply_and_delete(
    restart: Mode,
    want: u64,
) -> std::result::Result<WindowKills, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("window.db");
    let db = Sqlite::builder(&path)
        .synchronous(Synchronous::Normal)
        .open()
        .unwrap();
    let config = RankingConfig::new(RANGE).branching(16).shards(4).queues(4);
    let board = Ranking::create(&db, BOARD, config).unwrap();
    board.queued().unwrap();
    let raw_board = common::raw(&path);
    let raw = common::raw(&common::queue_file(&path));
    let players: Vec<String> = (0..CRASH_PLAYERS).map(|p| format!("p{p}")).collect();
    let all: BTreeSet<String> = players.iter().cloned().collect();
    let mut rng = SmallRng::seed_from_u64(seed());
    let mut stats = WindowKills::default();
    let mut before = Scores::new();
    const UPDATES: usize = 400;
    while stats.kills < want {
        let players_ref: Vec<&String> = players.iter().collect();
        fill(&board, &players_ref, &mut rng, UPDATES, |rng| {
            rng.random_range(RANGE)
        });
        let queued = queue_rows(&raw);
        assert_eq!(queued.len(), UPDATES);
        let mut expected = before.clone();
        for row in &queued {
            apply_as(Policy::Replace, &mut expected, &row.player, row.score);
        }

        let child = stats.kills;
        let at = rng.random_range(1..=3u64).to_string();
        let run = spawn_with(
            &path,
            Mode::AbortBeforeDelete,
            child,
            sync_for(child),
            &[(ENV_ABORT_AT, at.clone())],
        )
        .finish();
        use std::os::unix::process::ExitStatusExt;
        if run.status.signal() != Some(6) {
            return Err(format!(
                "child {child} did not abort at batch {at}: {:?}",
                run.status
            ));
        }
        stats.kills += 1;
        let left = queue_rows(&raw);
        let marks = applied_marks(&raw_board);
        let (prefix, applied, stranded) =
            check_mid_state(Policy::Replace, &before, &queued, &left, &marks)
                .map_err(|e| format!("child {child}: {e}"))?;
        if stranded == 0 {
            return Err(format!(
                "child {child}: the abort left no applied row queued"
            ));
        }
        stats.stranded += stranded as u64;
        if read_scores(&board, &all) != prefix {
            return Err(format!(
                "child {child}: the board is not the board before plus the {applied} rows \
                 through the applied marks"
            ));
        }
        board
            .check_integrity()
            .map_err(|e| format!("child {child}: integrity after the abort: {e}"))?;

        // A stranded update whose player has nothing queued above the
        // marks: a newer direct write must survive the restarted worker.
        let above = |r: &&QueueRow| r.seq > marks.get(&r.queue).copied().unwrap_or(-1);
        let pending: BTreeSet<&str> = left
            .iter()
            .filter(above)
            .map(|r| r.player.as_str())
            .collect();
        let overtaken = left
            .iter()
            .filter(|r| !above(r))
            .map(|r| r.player.clone())
            .find(|p| !pending.contains(p.as_str()));
        if let Some(player) = &overtaken {
            board.set_score(player, RANGE.end - 1).unwrap();
            expected.insert(player.clone(), RANGE.end - 1);
            stats.overtaken += 1;
        }

        let run = spawn(&path, restart, child, "normal").finish();
        assert!(
            run.status.success(),
            "restart child {child}: {:?}",
            run.status
        );
        let drained: usize = run
            .lines
            .iter()
            .find_map(|l| l.strip_prefix("drained "))
            .expect("the child reports its count")
            .parse()
            .unwrap();
        let unapplied = left.iter().filter(above).count();
        if drained != unapplied {
            return Err(format!(
                "child {child}: the restarted worker applied {drained} updates, but {unapplied} \
                 were left unapplied: stranded updates were applied twice"
            ));
        }
        let now = read_scores(&board, &all);
        if now != expected {
            return Err(format!(
                "child {child}: after the restart the board is not the oracle (overtaken: \
                 {overtaken:?}): an update was applied twice"
            ));
        }
        if board.queued().unwrap() != 0 || !queue_rows(&raw).is_empty() {
            return Err(format!(
                "child {child}: the queue is not empty after the restart"
            ));
        }
        board.check_integrity().unwrap();
        before = expected;
    }
    assert_board(&board, &before, &all);
    Ok(stats)
}

/// Issue 13: a worker process dies between a batch's commit (apply and
/// applied-through mark) and the queue's delete of its rows, 20 times, at
/// batch 1 to 3. After each: the board is the board before plus exactly
/// the rows through the marks, the rows above them are all still queued,
/// and a restarted worker applies exactly those (none of the stranded
/// ones, which a newer direct write overtook), empties the queue and
/// leaves a tree that passes `check_integrity` and equals the oracle.
#[test]
fn worker_aborted_20_times_between_apply_and_delete_applies_every_update_once() {
    let _serial = serial();
    let stats =
        kill_between_apply_and_delete(Mode::Drain, kills(20)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("apply/delete window kills: {stats:?}");
    assert!(
        stats.overtaken > 0,
        "no round overtook a stranded update: {stats:?}"
    );
}

/// Control: without the applied-through marks (a restarted worker that
/// takes every queued row) the stranded updates are applied a second time,
/// and caught.
#[test]
fn control_a_worker_ignoring_the_applied_marks_applies_twice_and_is_caught() {
    let _serial = serial();
    let err = kill_between_apply_and_delete(Mode::DrainIgnoringMarks, 5)
        .expect_err("updates applied twice went unnoticed");
    assert!(err.contains("applied twice"), "{err}");
    eprintln!("ignoring the marks caught: {err}");
}

// ---------------------------------------------------------------------------
// An enqueuer killed mid-commit.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Controls: the crash checks above can fail.
// ---------------------------------------------------------------------------

#[test]
fn control_a_worker_that_deletes_in_a_second_transaction_is_caught() {
    let _serial = serial();
    let err = kill_workers(Mode::SplitWorker, Policy::Replace, 20)
        .expect_err("the split worker went unnoticed");
    // Killed between its apply and its delete, or after deleting rows it
    // never marked applied.
    let caught = err.contains("applied but still queued") || err.contains("were deleted");
    assert!(caught, "{err}");
    eprintln!("split worker caught: {err}");
}

#[test]
fn control_acknowledging_before_the_commit_is_caught() {
    let _serial = serial();
    let err = kill_enqueuers(Mode::AckFirst, 20).expect_err("early acks went unnoticed");
    assert!(err.contains("acknowledged updates lost"), "{err}");
    eprintln!("ack-first caught: {err}");
}

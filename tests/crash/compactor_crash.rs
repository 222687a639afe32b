//! Several compactors on one store, one of them a child process killed with
//! SIGKILL mid-batch again and again, while other compactors (a thread in
//! this process and a second child process) keep compacting and writers
//! keep saving: no row is ever folded twice or lost, on SQLite and on
//! PostgreSQL (children alternating between its locking and optimistic
//! modes).
//!
//! The writers are threads of this process. Every save adds its unique op
//! id to the union field `Ledger::ops` and 1 to `fixed` (static) or `grown`
//! (dynamic), and the op counts as acknowledged once `save` returned `Ok`.
//! After every kill, while everything else keeps running:
//!
//! - every loaded ledger has `fixed + grown == ops.len()`: a row folded
//!   twice would count its ops again in the counter (the set absorbs them),
//!   a row lost would drop them;
//! - every op acknowledged before the loads is stored, and the stored ops
//!   not yet acknowledged after them are at most one per writer (the saves
//!   in flight).
//!
//! At the end, with the writers stopped: the stored ops are exactly the
//! acknowledged ones, and one more compaction leaves one dynamic row per
//! field.
//!
//! The victim child runs `db.compactor::<Ledger>()` with batches of a few
//! entities, no interval and no cap, so it is inside a batch transaction
//! or waiting for one nearly all the time. The parent kills it the moment
//! it sees it inside a write transaction from outside: on SQLite when
//! `/proc/locks` shows the victim's pid holding the WAL write lock (byte
//! 120 of the `-shm` file), on PostgreSQL when `pg_stat_activity` shows its
//! session with a transaction open; it keeps killing victims until 20
//! kills landed that way. The victims also report their stats every few
//! milliseconds, and the parent prints how many had committed batches.
//!
//! The control: a compactor that deletes the folded rows in one
//! transaction and adds their sum to the kept row in a second one (raw SQL
//! in the child), killed between the two (it says when it is there, so the
//! control does not depend on timing), is caught by the first check.
//!
//! The tests take a lock so they run one after another.
#![cfg(unix)]

use crate::child::say;
use autoshard::{Sqlite, Store, Synchronous};
use rand::RngExt;
use std::any::Any;
use std::collections::BTreeSet;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::child;
use crate::ledger;
use crate::stores;
use child::{Child, Run};
use ledger::{op_id, Ledger};

static SERIAL: Mutex<()> = Mutex::new(());

const ENV_STORE: &str = "AUTOSHARD_CC_STORE";
const ENV_LOCATION: &str = "AUTOSHARD_CC_LOCATION";
const ENV_MODE: &str = "AUTOSHARD_CC_MODE";
const ENV_CHILD: &str = "AUTOSHARD_CC_CHILD";

/// The child number this process's own handles use: odd, so SQLite
/// `NORMAL` and PostgreSQL's locking mode.
const PARENT: u64 = 999;
const ENTITIES: u64 = 24;
const WRITERS: u64 = 2;
const KILLS: u64 = 20;
/// A child that is never killed stops by itself after this long.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);

/// A store the test runs on, with what a child needs to reach the same
/// database and what the control's raw SQL needs.
trait CrashStore: Store + Clone + Send + Sync + 'static {
    const NAME: &'static str;
    /// How long after it is ready a victim may be killed, in ms: long
    /// enough for it to have committed batches first.
    const DELAY_MS: std::ops::RangeInclusive<u64>;

    /// A new empty database: a handle, where it is (for children), and
    /// what removes it when dropped.
    fn create() -> (Self, String, Box<dyn Any>);

    /// A handle on the database at `location`, as child `child` opens it
    /// (children vary their options by number).
    fn connect(location: &str, child: u64) -> Self;

    /// The control's buggy compactor: folds `grown` in two transactions.
    /// It says "ready" once it committed its first deletion, and waits
    /// there, between its two transactions, for the parent's SIGKILL.
    fn split_compactor(location: &str, child: u64) -> !;

    /// Whether child `child` (process `pid`) is inside a write transaction
    /// on the database right now, as seen from outside it; `None` if this
    /// platform cannot tell.
    fn in_transaction(location: &str, child: u64, pid: u32) -> Option<bool>;

    /// Returns once no killed child can still commit anything.
    fn settle(_location: &str) {}
}

impl CrashStore for Sqlite {
    const NAME: &'static str = "sqlite";
    const DELAY_MS: std::ops::RangeInclusive<u64> = 5..=60;

    fn create() -> (Self, String, Box<dyn Any>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("compactors.db");
        let location = path.to_str().unwrap().to_owned();
        (Self::connect(&location, PARENT), location, Box::new(dir))
    }

    /// Every other child uses `FULL` (kills land in the commit's fsync, after
    /// its frame is in the WAL), the others `NORMAL` (kills land inside the
    /// transaction's work).
    fn connect(location: &str, child: u64) -> Self {
        let synchronous = if child.is_multiple_of(2) {
            Synchronous::Full
        } else {
            Synchronous::Normal
        };
        Sqlite::builder(location)
            .synchronous(synchronous)
            .open()
            .expect("open the SQLite store")
    }

    /// SQLite's write lock, in WAL mode, is a POSIX lock on byte 120 of
    /// the `-shm` file (`WALINDEX_LOCK_OFFSET + WAL_WRITE_LOCK`), held from
    /// `BEGIN IMMEDIATE` to the end of the transaction, and Linux lists it
    /// with its owner's pid in `/proc/locks`.
    fn in_transaction(location: &str, _child: u64, pid: u32) -> Option<bool> {
        use std::os::unix::fs::MetadataExt;
        let locks = std::fs::read_to_string("/proc/locks").ok()?;
        let Ok(shm) = std::fs::metadata(format!("{location}-shm")) else {
            return Some(false);
        };
        let (pid, inode) = (pid.to_string(), shm.ino().to_string());
        Some(locks.lines().any(|line| {
            // `1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 120 120`
            let f: Vec<&str> = line.split_whitespace().collect();
            f.len() == 8
                && f[1] == "POSIX"
                && f[3] == "WRITE"
                && f[4] == pid
                && f[5].rsplit(':').next() == Some(inode.as_str())
                && f[6].parse::<u64>().is_ok_and(|start| start <= 120)
                && (f[7] == "EOF" || f[7].parse::<u64>().is_ok_and(|end| end >= 120))
        }))
    }

    fn split_compactor(location: &str, _child: u64) -> ! {
        let mut conn = rusqlite::Connection::open(location).unwrap();
        conn.busy_timeout(Duration::from_secs(30)).unwrap();
        loop {
            for entity in 0..ENTITIES as i64 {
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .unwrap();
                let rows: Vec<(i64, i64)> = tx
                    .prepare(
                        "SELECT shard, value FROM as_shard_ledger \
                         WHERE entity = ?1 AND field = 'grown' ORDER BY shard",
                    )
                    .unwrap()
                    .query_map([entity], |r| Ok((r.get(0)?, r.get(1)?)))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                let [(kept, _), removed @ ..] = &rows[..] else {
                    continue;
                };
                if removed.is_empty() {
                    continue;
                }
                let sum: i64 = removed.iter().map(|(_, v)| v).sum();
                let last = removed.last().unwrap().0;
                tx.execute(
                    "DELETE FROM as_shard_ledger \
                     WHERE entity = ?1 AND field = 'grown' AND shard > ?2 AND shard <= ?3",
                    (entity, kept, last),
                )
                .unwrap();
                tx.commit().unwrap();
                pause_between_transactions();
                // The bug: the folded value is written in a second transaction.
                conn.execute(
                    "UPDATE as_shard_ledger SET value = value + ?3 \
                     WHERE entity = ?1 AND field = 'grown' AND shard = ?2",
                    (entity, kept, sum),
                )
                .unwrap();
            }
        }
    }
}

#[cfg(feature = "postgres")]
mod pg;

// ---------------------------------------------------------------------------
// The child.
// ---------------------------------------------------------------------------

/// The child's entry point; without the parent's environment it returns.
#[test]
#[ignore = "the compactor crash tests run it as a child process"]
fn compactor_child() {
    let (Ok(store), Ok(location), Ok(mode), Ok(child)) = (
        std::env::var(ENV_STORE),
        std::env::var(ENV_LOCATION),
        std::env::var(ENV_MODE),
        std::env::var(ENV_CHILD),
    ) else {
        return;
    };
    crate::child::abort_on_panic();
    say(""); // end the harness's `test compactor_child ... ` line
    let child: u64 = child.parse().unwrap();
    match store.as_str() {
        "sqlite" => run_child::<Sqlite>(&location, &mode, child),
        #[cfg(feature = "postgres")]
        "postgres" => run_child::<autoshard::Postgres>(&location, &mode, child),
        other => panic!("unknown store {other}"),
    }
}

fn run_child<S: CrashStore>(location: &str, mode: &str, child: u64) {
    if mode == "split" {
        S::split_compactor(location, child);
    }
    assert_eq!(mode, "compactor");
    let db = S::connect(location, child);
    // Batches of a few entities, back to back: the victim is inside a
    // transaction, or waiting for the lock, nearly all the time.
    let compactor = db
        .compactor::<Ledger>()
        .interval(Duration::ZERO)
        .batch_rows(32)
        .max_writer_share(1.0)
        .spawn()
        .unwrap();
    say("ready");
    let started = Instant::now();
    while started.elapsed() < CHILD_LIFETIME && !compactor.is_finished() {
        let s = compactor.stats();
        say(&format!(
            "stats {} {} {} {}",
            s.batches,
            s.rows_merged,
            s.writer_time.as_nanos(),
            s.elapsed.as_nanos()
        ));
        thread::sleep(Duration::from_millis(2));
    }
    compactor.stop().expect("child: compactor");
    say("done");
}

/// The control's window: the split compactor's first transaction
/// committed, its second not begun. Says so and waits for the parent's
/// SIGKILL (a child that is never killed ends by itself).
fn pause_between_transactions() {
    say("ready");
    thread::sleep(CHILD_LIFETIME);
    std::process::exit(0);
}

// ---------------------------------------------------------------------------
// The parent.
// ---------------------------------------------------------------------------

fn spawn_child<S: CrashStore>(location: &str, mode: &str, child: u64) -> Child {
    Child::spawn(
        Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                crate::child::test_path(module_path!(), "compactor_child").as_str(),
                "--ignored",
                "--nocapture",
            ])
            .arg("--test-threads=1")
            .env(ENV_STORE, S::NAME)
            .env(ENV_LOCATION, location)
            .env(ENV_MODE, mode)
            .env(ENV_CHILD, child.to_string()),
    )
}

/// A victim's last reported stats: (batches, rows merged, writer share).
fn last_stats(run: &Run) -> Option<(u64, u64, f64)> {
    let line = run.lines.iter().rev().find(|l| l.starts_with("stats "))?;
    let n: Vec<u128> = line[6..]
        .split(' ')
        .map(|x| x.parse().expect("stats line"))
        .collect();
    let share = if n[3] == 0 {
        0.0
    } else {
        n[2] as f64 / n[3] as f64
    };
    Some((n[0] as u64, n[1] as u64, share))
}

#[derive(Debug, Default)]
struct Report {
    kills: u64,
    /// Kills sent right after the victim was seen inside a write
    /// transaction (holding SQLite's write lock; a PostgreSQL session with
    /// a transaction open).
    kills_in_a_transaction: u64,
    /// Kills of a victim that had committed at least one batch.
    kills_after_a_batch: u64,
    /// Rows the victims reported merged before they died (a lower bound:
    /// batches after the last report are not counted).
    rows_merged_by_victims: u64,
    /// The victims' mean share of life spent holding the writer.
    victims_writer_share: f64,
    acked: u64,
    rows_merged_by_thread: u64,
    rows_merged_by_steady_child: u64,
}

/// The checks after a kill, on ledgers loaded while writers and
/// compactors keep going.
fn check<S: Store>(db: &S, acked: &Mutex<BTreeSet<u64>>) -> Result<(), String> {
    let before = acked.lock().unwrap().clone();
    let mut stored = BTreeSet::new();
    for id in 0..ENTITIES {
        let ledger: Ledger = db.load(&id).map_err(|e| e.to_string())?.unwrap();
        if ledger.fixed + ledger.grown != ledger.ops.len() as i64 {
            return Err(format!(
                "ledger {id}: fixed {} + grown {} != {} distinct ops: \
                 a row was folded twice or lost",
                ledger.fixed,
                ledger.grown,
                ledger.ops.len()
            ));
        }
        stored.extend(ledger.ops);
    }
    let after = acked.lock().unwrap().clone();
    if let Some(lost) = before.difference(&stored).next() {
        return Err(format!("acknowledged op {lost} is not stored"));
    }
    let unacked: Vec<_> = stored.difference(&after).collect();
    if unacked.len() as u64 > WRITERS {
        return Err(format!(
            "{} stored ops were never acknowledged: {unacked:?}",
            unacked.len()
        ));
    }
    Ok(())
}

/// Runs the harness: writers and two steady compactors (a thread here, a
/// child process) running throughout, and children of `mode` killed one
/// after another, each as soon as it is seen inside a write transaction,
/// until `kills` kills landed there (or three times as many were sent).
/// Returns the first failed check, if any.
fn kill_compactors<S: CrashStore>(mode: &str, kills: u64) -> Result<Report, String> {
    let (db, location, _cleanup) = S::create();
    for id in 0..ENTITIES {
        db.insert(&Ledger::new(id)).unwrap();
    }
    let acked = Mutex::new(BTreeSet::new());
    let writing = AtomicBool::new(true);
    let mut report = Report::default();
    let steady_thread = S::connect(&location, PARENT)
        .compactor::<Ledger>()
        .interval(Duration::from_millis(1))
        .batch_rows(16)
        .max_writer_share(0.5)
        .spawn()
        .unwrap();
    // Child number 0 is the steady child; victims count from 1.
    let steady_child = spawn_child::<S>(&location, "compactor", 0);
    let mut shares = Vec::new();
    let result = thread::scope(|s| {
        for thread in 0..WRITERS {
            let (acked, writing, location) = (&acked, &writing, &location);
            s.spawn(move || {
                let db = S::connect(location, PARENT);
                let mut ledgers: Vec<Ledger> = (0..ENTITIES)
                    .map(|id| db.load(&id).unwrap().unwrap())
                    .collect();
                let mut rng = rand::rng();
                for seq in 0.. {
                    if !writing.load(Ordering::Relaxed) {
                        return;
                    }
                    let ledger = &mut ledgers[rng.random_range(0..ENTITIES) as usize];
                    let op = op_id(0, thread, seq);
                    if seq % 4 == 0 {
                        ledger.count_static(op);
                    } else {
                        ledger.count_dynamic(op);
                    }
                    db.save(ledger).expect("writer: save");
                    acked.lock().unwrap().insert(op);
                }
            });
        }
        let result = (|| {
            let mut child = 0;
            // Kill on (bounded) until enough victims died mid-work: how many
            // had merged a batch first depends on the machine's load.
            while (report.kills_in_a_transaction < kills || report.kills_after_a_batch < kills / 4)
                && report.kills < 3 * kills
            {
                child += 1;
                let delay = Duration::from_millis(rand::random_range(S::DELAY_MS));
                let mut unknown = false;
                let (run, inside) = spawn_child::<S>(&location, mode, child).kill_when(
                    delay,
                    Duration::from_secs(2),
                    |pid| {
                        S::in_transaction(&location, child, pid).unwrap_or_else(|| {
                            unknown = true;
                            true
                        })
                    },
                );
                if !run.killed() {
                    return Err(format!("child {child} ended by itself: {:?}", run.status));
                }
                report.kills += 1;
                // Where the platform cannot tell, every kill counts.
                report.kills_in_a_transaction += u64::from(inside);
                if unknown && report.kills == 1 {
                    eprintln!("cannot see the children's transactions: killing at random");
                }
                if let Some((batches, merged, share)) = last_stats(&run) {
                    report.kills_after_a_batch += u64::from(batches > 0);
                    report.rows_merged_by_victims += merged;
                    shares.push(share);
                }
                check(&db, &acked).map_err(|e| format!("after killing child {child}: {e}"))?;
            }
            Ok(())
        })();
        writing.store(false, Ordering::Relaxed);
        result
    });
    let steady = steady_child.kill_after(Duration::ZERO);
    assert!(
        !steady.said("done"),
        "the steady child compactor stopped early"
    );
    report.rows_merged_by_steady_child = last_stats(&steady).map_or(0, |(_, merged, _)| merged);
    let thread_stats = steady_thread.stop().expect("the steady compactor failed");
    report.rows_merged_by_thread = thread_stats.rows_merged;
    result?;
    S::settle(&location);

    // Everything stopped: the stored ops are exactly the acknowledged ones.
    db.compact::<Ledger>().unwrap();
    check(&db, &acked)?;
    let acked = acked.into_inner().unwrap();
    let mut stored = BTreeSet::new();
    for id in 0..ENTITIES {
        let ledger: Ledger = db.load(&id).unwrap().unwrap();
        stored.extend(ledger.ops);
        assert_eq!(db.shard_count::<Ledger>(&id, "grown").unwrap(), 1);
        assert_eq!(db.shard_count::<Ledger>(&id, "ops").unwrap(), 1);
        assert_eq!(db.shard_count::<Ledger>(&id, "fixed").unwrap(), 8);
    }
    assert_eq!(
        stored, acked,
        "the stored ops are not the acknowledged ones"
    );
    report.acked = acked.len() as u64;
    report.victims_writer_share = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    Ok(report)
}

fn kill_20_victims<S: CrashStore>() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let report = kill_compactors::<S>("compactor", KILLS).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}: {report:?}", S::NAME);
    assert!(
        report.kills_in_a_transaction >= KILLS,
        "fewer than {KILLS} kills landed inside a transaction: {report:?}"
    );
    assert!(report.acked > 0, "no writer saved");
    assert!(
        report.kills_after_a_batch >= KILLS / 4 && report.rows_merged_by_victims > 0,
        "the victims rarely compacted before they were killed: {report:?}"
    );
}

/// The control, independent of timing: a split compactor killed between
/// its two transactions (it says when it is there) leaves a ledger whose
/// counter lost the rows it deleted, and the check after a kill catches
/// it. A correct compactor has no such window (one transaction per batch),
/// which the kills above exercise.
fn control<S: CrashStore>() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (db, location, _cleanup) = S::create();
    let acked = Mutex::new(BTreeSet::new());
    for id in 0..ENTITIES {
        db.insert(&Ledger::new(id)).unwrap();
    }
    // Dynamic rows to fold: the inserted row and three appends per ledger.
    for id in 0..ENTITIES {
        let mut ledger: Ledger = db.load(&id).unwrap().unwrap();
        for seq in 0..3 {
            let op = op_id(0, id, seq);
            ledger.count_dynamic(op);
            db.save(&mut ledger).unwrap();
            acked.lock().unwrap().insert(op);
        }
    }
    check(&db, &acked).expect("before the split compactor ran");
    let run = spawn_child::<S>(&location, "split", 1).kill_after(Duration::ZERO);
    assert!(
        run.killed(),
        "the split compactor ended by itself: {:?}",
        run.status
    );
    S::settle(&location);
    let err = check(&db, &acked).expect_err("a fold split over two transactions went unnoticed");
    assert!(
        err.contains("folded twice or lost"),
        "unexpected report: {err}"
    );
    eprintln!("{}: split compactor caught: {err}", S::NAME);
}

#[test]
fn sqlite_compactor_killed_20_times_among_others_folds_nothing_twice() {
    kill_20_victims::<Sqlite>();
}

#[test]
fn sqlite_control_a_compactor_writing_back_in_a_second_transaction_is_caught() {
    control::<Sqlite>();
}

#[cfg(feature = "postgres")]
#[test]
fn pg_compactor_killed_20_times_among_others_folds_nothing_twice() {
    kill_20_victims::<autoshard::Postgres>();
}

#[cfg(feature = "postgres")]
#[test]
fn pg_control_a_compactor_writing_back_in_a_second_transaction_is_caught() {
    control::<autoshard::Postgres>();
}

//! Crash consistency: a child process saving (or compacting) is killed with
//! SIGKILL at random moments, and after every kill the database must hold
//! every save the child acknowledged, exactly once, and nothing half done.
//!
//! The child is this test binary run again with `--exact child_saver
//! --ignored`; environment variables say which database and what to do. It
//! prints `ack <op>` on stdout only after `save` returned `Ok`, so the parent
//! knows exactly which saves were promised.
//!
//! The entity makes the check exact: every save adds its unique op id to the
//! union field `ops` and counts it in `fixed` (static) or `grown` (dynamic).
//! After a crash:
//!
//! - (a) every acknowledged op is in `ops`: nothing promised was lost;
//! - (b) `fixed + grown == ops.len()`: no delta was counted twice (a set
//!   absorbs a duplicate, a counter does not) and no save was applied in part;
//! - (c) per writer, at most the one op that was in flight at the kill is
//!   stored without an acknowledgement, and it is the writer's next op.
//!
//! How these tests fail on a buggy variant (and two controls below show it
//! live, by making the child itself buggy):
//!
//! - acknowledging before `save` commits: a kill between the two leaves an
//!   acknowledged op missing, reported as "acknowledged ops lost";
//! - a save that writes its shard rows in separate transactions (or
//!   autocommits each statement): a kill between them leaves the counter
//!   and `ops` out of step, reported as "a save was counted twice or applied
//!   in part";
//! - a compaction that deletes the merged rows and writes the folded row in
//!   two transactions: a kill between them changes the loaded totals,
//!   reported as "totals changed"; writing the folded row first double
//!   counts, reported the same way;
//! - resetting pending before the commit cannot show up here (the process
//!   dies with its pending deltas); tests/sqlite/concurrency.rs catches it through
//!   a failed save that must be retried.
//!
//! A SIGKILL is a process crash, not a power loss, so both `Synchronous::Full`
//! (the default users get) and `Normal` must survive it: in WAL mode a
//! committed frame is in the OS page cache once `write` returned. Children
//! alternate between the two (see `sync_for`), because each puts the kills
//! in a different place.
//!
//! Tests take a lock so they run one after another even under the parallel
//! harness: overlapping them would starve the children of the 2 CI cores and
//! make kills land mostly during process start-up.
#![cfg(unix)]

use crate::child::say;
use autoshard::{Sqlite, Store, Synchronous};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::child;
use crate::ledger;
use child::{kills, Child, Run};
use ledger::{op_id, seq_of, stream_of, Ledger};

static SERIAL: Mutex<()> = Mutex::new(());

const ENV_DB: &str = "AUTOSHARD_CRASH_DB";
const ENV_MODE: &str = "AUTOSHARD_CRASH_MODE";
const ENV_CHILD: &str = "AUTOSHARD_CRASH_CHILD";
const ENV_SEED: &str = "AUTOSHARD_CRASH_SEED";
const ENV_SYNC: &str = "AUTOSHARD_CRASH_SYNC";

/// The entity the savers hammer.
const HOT: u64 = 1;
/// A child that is never killed stops by itself after this long, so a
/// parent that died early cannot leave it running.
const CHILD_LIFETIME: Duration = Duration::from_secs(20);
/// Writer threads of the mixed child.
const MIXED_WRITERS: u64 = 3;
/// The compactions' batch size, small so a kill lands between batches.
const COMPACTION_BATCH_ROWS: usize = 40;

// ---------------------------------------------------------------------------
// The child.
// ---------------------------------------------------------------------------

/// What the child does, chosen by the parent through `AUTOSHARD_CRASH_MODE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// One writer: `count_static` + save.
    Static,
    /// One writer: `count_dynamic` + save.
    Dynamic,
    /// Several writers alternating both, and a compaction loop.
    Mixed,
    /// One compaction run with small batches, then `done`.
    Compact,
    /// Control: acknowledges the op before saving it.
    AckFirst,
    /// Control: saves the counter and the op id in two transactions.
    Split,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Static => "static",
            Mode::Dynamic => "dynamic",
            Mode::Mixed => "mixed",
            Mode::Compact => "compact",
            Mode::AckFirst => "ack-first",
            Mode::Split => "split",
        }
    }

    fn parse(name: &str) -> Mode {
        [
            Mode::Static,
            Mode::Dynamic,
            Mode::Mixed,
            Mode::Compact,
            Mode::AckFirst,
            Mode::Split,
        ]
        .into_iter()
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("unknown {ENV_MODE} {name:?}"))
    }

    fn writers(self) -> u64 {
        match self {
            Mode::Mixed => MIXED_WRITERS,
            Mode::Compact => 0,
            _ => 1,
        }
    }
}

/// The child's entry point. Not a test of its own: without the environment
/// variables the parent sets, it returns at once.
#[test]
#[ignore = "the crash tests run it as a child process"]
fn child_saver() {
    let (Ok(db), Ok(mode), Ok(child)) = (
        std::env::var(ENV_DB),
        std::env::var(ENV_MODE),
        std::env::var(ENV_CHILD),
    ) else {
        return;
    };
    // A panic in any thread ends the child at once: a writer that died
    // would otherwise leave the others waiting for it forever.
    crate::child::abort_on_panic();
    // The harness has printed `test child_saver ... ` without a newline;
    // end that line so every protocol line stands alone.
    say("");
    let db = PathBuf::from(db);
    let child: u64 = child.parse().expect("child number");
    match Mode::parse(&mode) {
        Mode::Compact => child_compact(&db),
        Mode::Mixed => child_mixed(&db, child),
        mode => {
            let ready = Barrier::new(1);
            child_writer(&db, mode, child, 0, &ready, &say_ready);
        }
    }
}

/// The child's options: `synchronous` as the parent chose.
fn child_open(path: &Path) -> autoshard::SqliteBuilder {
    let synchronous = match std::env::var(ENV_SYNC).as_deref() {
        Ok("normal") => Synchronous::Normal,
        Ok("full") => Synchronous::Full,
        other => panic!("bad {ENV_SYNC}: {other:?}"),
    };
    Sqlite::builder(path).synchronous(synchronous)
}

fn say_ready() {
    say("ready");
}

/// Loads the hot entity once, waits for the other writers, then saves in a
/// loop and acknowledges each op after its `save` returned `Ok`.
fn child_writer(
    path: &Path,
    mode: Mode,
    child: u64,
    thread: u64,
    ready: &Barrier,
    on_ready: &dyn Fn(),
) {
    let db = child_open(path).open().expect("child: open");
    let mut ledger: Ledger = db.load(&HOT).expect("child: load").expect("hot entity");
    if ready.wait().is_leader() {
        on_ready();
    }
    let started = Instant::now();
    for seq in 0.. {
        if started.elapsed() > CHILD_LIFETIME {
            return;
        }
        let op = op_id(child, thread, seq);
        match mode {
            Mode::Static => ledger.count_static(op),
            Mode::Dynamic => ledger.count_dynamic(op),
            Mode::Mixed if seq.is_multiple_of(2) => ledger.count_static(op),
            Mode::Mixed => ledger.count_dynamic(op),
            Mode::AckFirst => {
                ledger.count_dynamic(op);
                say(&format!("ack {op}"));
                db.save(&mut ledger).expect("child: save");
                continue;
            }
            Mode::Split => {
                ledger.count_only();
                db.save(&mut ledger).expect("child: save");
                ledger.record_only(op);
            }
            Mode::Compact => unreachable!("compaction children do not write"),
        }
        db.save(&mut ledger).expect("child: save");
        say(&format!("ack {op}"));
    }
}

fn child_mixed(path: &Path, child: u64) {
    let ready = Barrier::new(MIXED_WRITERS as usize);
    thread::scope(|s| {
        for thread in 0..MIXED_WRITERS {
            let ready = &ready;
            s.spawn(move || child_writer(path, Mode::Mixed, child, thread, ready, &say_ready));
        }
        s.spawn(|| {
            let db = child_open(path)
                .compaction_batch_rows(16)
                .open()
                .expect("child: open");
            let started = Instant::now();
            while started.elapsed() < CHILD_LIFETIME {
                // Reported per batch: a kill usually lands inside a run, and
                // the parent wants evidence that merging raced the writers.
                db.compact_with::<Ledger>(&mut |stats| {
                    say(&format!("compacted {}", stats.rows_merged));
                })
                .expect("child: compact");
            }
        });
    });
}

fn child_compact(path: &Path) {
    // Batches of about one entity each, so a run is many short transactions
    // and a kill can land between or inside any of them.
    let db = child_open(path)
        .compaction_batch_rows(COMPACTION_BATCH_ROWS)
        .open()
        .expect("child: open");
    say("ready");
    db.compact_with::<Ledger>(&mut |stats| {
        say(&format!("batch {} {}", stats.batches, stats.rows_merged));
    })
    .expect("child: compact");
    say("done");
}

// ---------------------------------------------------------------------------
// The parent's side: spawning, killing, and the checks.
// ---------------------------------------------------------------------------

/// Every other child uses the default, `Full`: its commit returns only
/// after an fsync, so most kills land in that fsync, after the commit frame
/// is already in the WAL; they exercise "committed, not acknowledged". The
/// others use `Normal`, whose saves are all CPU, so kills land densely
/// inside the transaction itself. The controls use `Normal` only, to be
/// caught in few kills.
fn sync_for(mode: Mode, child: u64) -> &'static str {
    match mode {
        Mode::AckFirst | Mode::Split => "normal",
        _ if child.is_multiple_of(2) => "full",
        _ => "normal",
    }
}

fn spawn(db: &Path, mode: Mode, child: u64) -> Child {
    Child::spawn(
        Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                crate::child::test_path(module_path!(), "child_saver").as_str(),
                "--ignored",
                "--nocapture",
            ])
            .arg("--test-threads=1")
            .env(ENV_DB, db)
            .env(ENV_MODE, mode.name())
            .env(ENV_CHILD, child.to_string())
            .env(ENV_SYNC, sync_for(mode, child)),
    )
}

/// Everything the parent was promised so far.
#[derive(Default, Debug)]
struct Book {
    /// Per stream, how many ops were acknowledged: always seqs `0..n`.
    acked: BTreeMap<u64, u64>,
}

impl Book {
    fn open_streams(&mut self, child: u64, writers: u64) {
        for thread in 0..writers {
            self.acked.insert(stream_of(op_id(child, thread, 0)), 0);
        }
    }

    /// Records a run's acknowledgements, insisting each stream's arrive in
    /// order: anything else means the protocol itself is broken.
    fn record(&mut self, run: &Run) -> u64 {
        let mut count = 0;
        for op in run.acks() {
            let next = self
                .acked
                .get_mut(&stream_of(op))
                .unwrap_or_else(|| panic!("ack {op} from a stream never started"));
            assert_eq!(
                seq_of(op),
                *next,
                "acks of stream {} out of order",
                stream_of(op)
            );
            *next += 1;
            count += 1;
        }
        count
    }
}

/// Checks (a), (b) and (c) on one loaded ledger. Returns how many stored
/// ops were never acknowledged (the in-flight ones).
fn check(ledger: &Ledger, book: &Book) -> Result<u64, String> {
    if ledger.fixed + ledger.grown != ledger.ops.len() as i64 {
        return Err(format!(
            "fixed {} + grown {} != {} distinct ops stored: \
             a save was counted twice or applied in part",
            ledger.fixed,
            ledger.grown,
            ledger.ops.len()
        ));
    }
    let mut lost = Vec::new();
    for (&stream, &n) in &book.acked {
        let first = stream << 24;
        lost.extend((first..first + n).filter(|op| !ledger.ops.contains(op)));
    }
    if !lost.is_empty() {
        return Err(format!(
            "{} acknowledged ops lost, first {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        ));
    }
    let mut in_flight = 0;
    for &op in &ledger.ops {
        let acked = book.acked.get(&stream_of(op)).copied();
        match acked {
            Some(n) if seq_of(op) < n => {}
            // The op whose save committed but whose ack the kill prevented.
            Some(n) if seq_of(op) == n => in_flight += 1,
            _ => {
                return Err(format!(
                    "op {op} (stream {}, seq {}) is stored but was neither \
                     acknowledged nor in flight at a kill (acked: {acked:?})",
                    stream_of(op),
                    seq_of(op)
                ))
            }
        }
    }
    Ok(in_flight)
}

/// A handle for the parent's checks, opened afresh after each kill so it
/// runs SQLite's recovery like any new process would.
fn reopen(path: &Path) -> Sqlite {
    Sqlite::builder(path)
        .synchronous(Synchronous::Normal)
        .open()
        .expect("reopen after the kill")
}

fn load(db: &Sqlite, id: u64) -> Ledger {
    db.load(&id).expect("load").expect("entity exists")
}

fn seed() -> u64 {
    let seed = std::env::var(ENV_SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("crash test seed {seed} (set {ENV_SEED} to repeat the delays)");
    seed
}

/// Inserts the hot entity and, for the mixed mode, cold entities with
/// dynamic rows for the concurrent compaction to fold. Returns the cold
/// entities' ids: no kill may change what they load as.
fn prepare_savers(path: &Path, mode: Mode) -> Vec<u64> {
    let db = reopen(path);
    db.insert(&Ledger::new(HOT)).unwrap();
    if mode != Mode::Mixed {
        return Vec::new();
    }
    let cold: Vec<u64> = (100..130).collect();
    fill(&db, &cold, 10, 1);
    cold
}

/// Appends `dynamic` dynamic and `fixed` static saves to each entity in
/// `ids`, inserting it first if needed. Op ids here live in streams no child
/// uses (the entity's id as the child number, thread 255).
fn fill(db: &Sqlite, ids: &[u64], dynamic: u64, fixed: u64) {
    for &id in ids {
        let mut ledger = match db.load::<Ledger>(&id).unwrap() {
            Some(ledger) => ledger,
            None => {
                db.insert(&Ledger::new(id)).unwrap();
                load(db, id)
            }
        };
        let base = ledger.ops.len() as u64;
        for n in base..base + dynamic + fixed {
            let op = op_id(id, 255, n);
            if n < base + dynamic {
                ledger.count_dynamic(op);
            } else {
                ledger.count_static(op);
            }
            db.save(&mut ledger).unwrap();
        }
    }
}

/// Each entity's loaded (fixed, grown, ops).
type State = BTreeMap<u64, (i64, i64, BTreeSet<u64>)>;

fn snapshot(db: &Sqlite, ids: &[u64]) -> State {
    ids.iter()
        .map(|&id| {
            let l = load(db, id);
            (id, (l.fixed, l.grown, l.ops))
        })
        .collect()
}

/// Kills per write path in the default run (`AUTOSHARD_KILLS` overrides).
const KILLS: u64 = 100;

mod compaction;
mod controls;
mod savers;
use compaction::kill_compactions;
use savers::kill_savers;

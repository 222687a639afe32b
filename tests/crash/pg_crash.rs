//! Crash consistency on PostgreSQL, in the pattern of `crash.rs`: a child
//! process saving through `Postgres` (and, in the mixed mode, compacting
//! alongside) is killed with SIGKILL at random moments; after every kill the
//! database must hold every save the child acknowledged, exactly once, and
//! nothing half done. The server sees the child's connections drop at any
//! point of a transaction, including between `COMMIT` and its answer.
//!
//! The child is this test binary run again with `--exact child --ignored`;
//! it prints `ack <op>` only after `save` returned `Ok`. Every save adds its
//! op id to the union field `ops` and 1 to `fixed` (static) or `grown`
//! (dynamic), so after a kill:
//!
//! - (a) every acknowledged op is in `ops`: nothing promised was lost;
//! - (b) `fixed + grown == ops.len()`: nothing was counted twice or applied
//!   in part;
//! - (c) per writer, at most the one op in flight at the kill is stored
//!   without an acknowledgement.
//!
//! Children alternate between the locking and the optimistic mode.
//!
//! The parent checks only once the killed child's server sessions are gone:
//! a backend runs on until it notices its client died, and commits a
//! `COMMIT` it had already received. Checking earlier raced it: now and
//! then the compaction at the end (correctly) found one more op than the
//! load just before it, the last child's in-flight save committing late.
#![cfg(all(unix, feature = "postgres"))]

use crate::child::say;
use autoshard::{Concurrency, Pending, Postgres, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::child;
use crate::ledger;
use crate::stores;
use child::{kills, Child};
use ledger::{op_id, seq_of, stream_of, Ledger};
use stores::pg;

static SERIAL: Mutex<()> = Mutex::new(());

const ENV_SCHEMA: &str = "AUTOSHARD_PG_CRASH_SCHEMA";
const ENV_MODE: &str = "AUTOSHARD_PG_CRASH_MODE";
const ENV_CHILD: &str = "AUTOSHARD_PG_CRASH_CHILD";
const HOT: u64 = 1;
const CHILD_LIFETIME: Duration = Duration::from_secs(20);
const MIXED_WRITERS: u64 = 3;
/// Kills per mode in the default run (`AUTOSHARD_KILLS` overrides).
const KILLS: u64 = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Static,
    Dynamic,
    Mixed,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Static => "static",
            Mode::Dynamic => "dynamic",
            Mode::Mixed => "mixed",
        }
    }

    fn writers(self) -> u64 {
        match self {
            Mode::Mixed => MIXED_WRITERS,
            _ => 1,
        }
    }
}

fn concurrency_for(child: u64) -> Concurrency {
    if child.is_multiple_of(2) {
        Concurrency::Optimistic
    } else {
        Concurrency::Locking
    }
}

fn open(url: &str, schema: &str, child: u64) -> Postgres {
    Postgres::builder(url)
        .schema(schema)
        .concurrency(concurrency_for(child))
        .max_attempts(1_000)
        .compaction_batch_rows(16)
        .open()
        .expect("open the store")
}

// --- the child --------------------------------------------------------------

#[test]
#[ignore = "the crash tests run it as a child process"]
fn child() {
    let (Ok(schema), Ok(mode), Ok(child)) = (
        std::env::var(ENV_SCHEMA),
        std::env::var(ENV_MODE),
        std::env::var(ENV_CHILD),
    ) else {
        return;
    };
    crate::child::abort_on_panic();
    say("");
    let child: u64 = child.parse().unwrap();
    let mode = [Mode::Static, Mode::Dynamic, Mode::Mixed]
        .into_iter()
        .find(|m| m.name() == mode)
        .expect("mode");
    let ready = Barrier::new(mode.writers() as usize);
    thread::scope(|s| {
        for thread in 0..mode.writers() {
            let (ready, schema) = (&ready, &schema);
            s.spawn(move || writer(schema, mode, child, thread, ready));
        }
        if mode == Mode::Mixed {
            s.spawn(|| {
                let db = open(&child_url(&schema), &schema, child);
                let started = Instant::now();
                while started.elapsed() < CHILD_LIFETIME {
                    db.compact_with::<Ledger>(&mut |stats| {
                        say(&format!("compacted {}", stats.rows_merged));
                    })
                    .expect("child: compact");
                }
            });
        }
    });
}

fn writer(schema: &str, mode: Mode, child: u64, thread: u64, ready: &Barrier) {
    let db = open(&child_url(schema), schema, child);
    let mut ledger: Ledger = db.load(&HOT).expect("child: load").expect("hot entity");
    if ready.wait().is_leader() {
        say("ready");
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
        }
        db.save(&mut ledger).expect("child: save");
        say(&format!("ack {op}"));
    }
}

// --- the parent ---------------------------------------------------------------

/// The connection string of a child's sessions: tagged, so the parent can
/// tell when a killed child's server processes are gone.
fn child_url(schema: &str) -> String {
    pg::tagged_url(&child_tag(schema))
}

fn child_tag(schema: &str) -> String {
    format!("crash_{schema}")
}

/// Spawns a child, kills it `delay` after it is ready, returns its lines.
fn run_child(schema: &str, mode: Mode, child: u64, delay: Duration) -> Vec<String> {
    let run = Child::spawn(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                crate::child::test_path(module_path!(), "child").as_str(),
                "--ignored",
                "--nocapture",
            ])
            .env(ENV_SCHEMA, schema)
            .env(ENV_MODE, mode.name())
            .env(ENV_CHILD, child.to_string()),
    )
    .kill_after(delay);
    assert!(
        run.killed(),
        "child {child} ended by itself: {:?}",
        run.lines
    );
    run.lines
}

/// Acknowledged ops so far, per stream: always seqs `0..n`.
#[derive(Default)]
struct Book {
    acked: BTreeMap<u64, u64>,
}

impl Book {
    fn record(&mut self, child: u64, writers: u64, lines: &[String]) -> u64 {
        for thread in 0..writers {
            self.acked.insert(stream_of(op_id(child, thread, 0)), 0);
        }
        let mut count = 0;
        for op in lines.iter().filter_map(|l| l.strip_prefix("ack ")) {
            let op: u64 = op.parse().unwrap();
            let next = self.acked.get_mut(&stream_of(op)).unwrap();
            assert_eq!(seq_of(op), *next, "acks out of order");
            *next += 1;
            count += 1;
        }
        count
    }
}

/// (a), (b), (c); returns how many stored ops were in flight at a kill.
fn check(ledger: &Ledger, book: &Book) -> Result<u64, String> {
    if ledger.fixed + ledger.grown != ledger.ops.len() as i64 {
        return Err(format!(
            "fixed {} + grown {} != {} distinct ops: a save was counted twice or applied in part",
            ledger.fixed,
            ledger.grown,
            ledger.ops.len()
        ));
    }
    for (&stream, &n) in &book.acked {
        let first = stream << 24;
        if let Some(lost) = (first..first + n).find(|op| !ledger.ops.contains(op)) {
            return Err(format!("acknowledged op {lost} lost"));
        }
    }
    let mut in_flight = 0;
    for &op in &ledger.ops {
        match book.acked.get(&stream_of(op)) {
            Some(&n) if seq_of(op) < n => {}
            Some(&n) if seq_of(op) == n => in_flight += 1,
            acked => {
                return Err(format!(
                    "op {op} stored but neither acknowledged nor in flight (acked {acked:?})"
                ))
            }
        }
    }
    Ok(in_flight)
}

fn kill_children(mode: Mode) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let db = open(&pg::url(), &schema, 1);
    db.insert(&Ledger {
        id: HOT,
        fixed: 0,
        grown: 0,
        ops: BTreeSet::new(),
        pending: Pending::default(),
    })
    .unwrap();
    let mut book = Book::default();
    let (mut acked, mut merging) = (0, 0);
    let mut in_flight = 0;
    let kills = kills(KILLS);
    for child in 1..=kills {
        let delay = Duration::from_millis(rand::random_range(5..=80));
        let lines = run_child(&schema, mode, child, delay);
        pg::wait_for_sessions(&child_tag(&schema));
        acked += book.record(child, mode.writers(), &lines);
        merging += lines
            .iter()
            .filter(|l| l.strip_prefix("compacted ").is_some_and(|n| n != "0"))
            .count();
        let ledger: Ledger = db.load(&HOT).unwrap().unwrap();
        in_flight = check(&ledger, &book)
            .unwrap_or_else(|e| panic!("after killing child {child} ({delay:?}): {e}"));
        if mode == Mode::Static {
            assert_eq!(db.shard_count::<Ledger>(&HOT, "fixed").unwrap(), 8);
        }
    }
    assert!(acked > 0, "no child ever saved: the kills tested nothing");
    if mode == Mode::Mixed {
        assert!(merging > 0, "compaction never raced the writers");
    }
    // Whatever the kills left, compaction folds it without changing totals.
    let before: Ledger = db.load(&HOT).unwrap().unwrap();
    db.compact::<Ledger>().unwrap();
    let after: Ledger = db.load(&HOT).unwrap().unwrap();
    assert_eq!(
        (after.fixed, after.grown, &after.ops),
        (before.fixed, before.grown, &before.ops)
    );
    assert_eq!(db.shard_count::<Ledger>(&HOT, "ops").unwrap(), 1);
    eprintln!(
        "{}: {kills} kills, {acked} acknowledged saves, {in_flight} in flight at the last kill, \
         {merging} merging compaction batches",
        mode.name()
    );
}

#[test]
fn static_saver_killed_100_times_loses_and_doubles_nothing() {
    kill_children(Mode::Static);
}

#[test]
fn dynamic_saver_killed_100_times_loses_and_doubles_nothing() {
    kill_children(Mode::Dynamic);
}

#[test]
fn writers_and_compaction_killed_together_100_times() {
    kill_children(Mode::Mixed);
}

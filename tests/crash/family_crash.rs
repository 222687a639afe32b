//! kill -9 during family submissions (issue 10, Bar): a child process
//! submitting to a family of 9 member boards (all-time, week, day × overall
//! and two filter dimensions) plus the family's players board, every
//! submission ONE transaction on all of them, is SIGKILLed at a random
//! moment, 20 times per store (`AUTOSHARD_KILLS` overrides), on a SQLite
//! file, on PostgreSQL and on Redis Cluster. After each kill:
//!
//! - every member board agrees on each player: the score `s` on the
//!   all-time overall board (Replace, every submission's score is its
//!   sequence number) is on every window's overall board, on the board of
//!   each filter value submission `s` carried, and on no other value's
//!   board (the player left it in the same transaction): every member saw
//!   the submission or none did;
//! - no acknowledged submission is lost (`s` >= the player's last ack);
//! - every member board passes `check_integrity`.
//!
//! Each child continues where the last committed submission left off, so
//! players keep changing filter values (leaving boards) across kills.
//!
//! Control (`control_member_by_member_writes_are_caught`): a child writing
//! the same members one transaction each is caught half-done after some
//! kill of 20 (the check is not vacuous).
//!
//! Queued submissions (`sqlite_family_enqueues_killed_20_times_are_all_or_nothing`):
//! a child enqueueing to a 3-member family (no worker) is killed 20 times;
//! the family's queue (one row per submission) must hold at least the
//! acknowledged submissions and at most one more. The worker that applies
//! them is killed in `tests/crash/family_queue_crash.rs`.
#![cfg(unix)]

use crate::child::say;
use autoshard::ranking::{Family, FamilyConfig, Period, RankingConfig, Window};
use autoshard::Sqlite;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::child;
use crate::stores;
use child::{kills, Child};

const ENV_URL: &str = "AUTOSHARD_FAMILY_CRASH_URL";
const ENV_MODE: &str = "AUTOSHARD_FAMILY_CRASH_MODE";
const KILLS: u64 = 20;
const CHILD_LIFETIME: Duration = Duration::from_secs(20);
const PLAYERS: [&str; 3] = ["ann", "bo", "cy"];
const WINDOWS: [Window; 3] = [Window::AllTime, Window::Week, Window::Day];
const AGES: [&str; 3] = ["u35", "35-44", "45+"];
const WEIGHTS: [&str; 2] = ["light", "heavy"];
/// Every submission's time: 2026-11-24 10:30 UTC.
const AT: i64 = 1_795_516_200;

fn config() -> FamilyConfig {
    let mut c = FamilyConfig::new(RankingConfig::new(0..1 << 40).node_shards(4))
        .filter("age", AGES)
        .filter("weight", WEIGHTS);
    for w in WINDOWS {
        c = c.window(w);
    }
    c
}

/// What submission `seq` carries: its player and filter values. A player's
/// consecutive submissions (3 apart) change age group every time and
/// weight class every third time.
fn submission(seq: i64) -> (&'static str, &'static str, &'static str) {
    let s = seq as usize;
    (PLAYERS[s % 3], AGES[(s / 3) % 3], WEIGHTS[(s / 9) % 2])
}

/// The child's entry point; without the parent's environment it returns.
#[test]
#[ignore = "the crash tests run it as a child process"]
fn family_child() {
    let (Ok(url), Ok(mode)) = (std::env::var(ENV_URL), std::env::var(ENV_MODE)) else {
        return;
    };
    crate::child::abort_on_panic();
    say("");
    let db = autoshard::open(&url).expect("child: open");
    let family = Family::open(&db, "crash").expect("child: family");
    let queued = (mode == "queue").then(|| Family::open(&db, "crashq").expect("child: family"));
    let all = family.board(Window::AllTime, Period::At(AT), None).unwrap();
    // Go on after the highest committed submission.
    let mut seq = all.map_or(0, |b| b.top(1).unwrap().first().map_or(0, |e| e.score + 1));
    say("ready");
    let started = Instant::now();
    while started.elapsed() < CHILD_LIFETIME {
        let (player, age, weight) = submission(seq);
        if mode == "queue" {
            let entry = queued
                .as_ref()
                .expect("queued family")
                .submission(player, 1)
                .at(AT);
            entry.enqueue().expect("child: enqueue");
        } else if mode == "atomic" {
            let entry = family.submission(player, seq).at(AT).filter("age", age);
            entry
                .filter("weight", weight)
                .submit()
                .expect("child: submit");
        } else {
            member_by_member(&family, seq);
        }
        say(&format!("ack {seq}"));
        seq += 1;
    }
}

/// The control's writes: each member board in a transaction of its own.
fn member_by_member(family: &Family, seq: i64) {
    let (player, age, weight) = submission(seq);
    for w in WINDOWS {
        let board = |f| {
            family
                .board(w, Period::At(AT), f)
                .unwrap()
                .expect("created by the parent")
        };
        board(None).set_score(player, seq).unwrap();
        for (dim, values, value) in [("age", &AGES[..], age), ("weight", &WEIGHTS[..], weight)] {
            for &v in values {
                let b = board(Some((dim, v)));
                match v == value {
                    true => b.set_score(player, seq).map(drop).unwrap(),
                    false => b.remove(player).map(drop).unwrap(),
                }
            }
        }
    }
}

/// Creates the family and one submission per player and value, so every
/// member board exists (the control's child needs them).
fn prepare(db: &autoshard::AnyStore) -> i64 {
    let family = Family::create(db, "crash", config()).unwrap();
    let mut seq = 0;
    while seq < 18 {
        let (player, age, weight) = submission(seq);
        let entry = family.submission(player, seq).at(AT).filter("age", age);
        entry.filter("weight", weight).submit().unwrap();
        seq += 1;
    }
    seq
}

/// The invariants of the module docs; `acked` is the highest acknowledged
/// sequence number per player.
fn check(db: &autoshard::AnyStore, acked: &[i64; 3]) -> Result<(), String> {
    let family = Family::open(db, "crash").map_err(|e| e.to_string())?;
    let board = |w, f| family.board(w, Period::At(AT), f).unwrap().expect("member");
    for w in WINDOWS {
        for f in [None]
            .into_iter()
            .chain(AGES.iter().map(|&v| Some(("age", v))))
            .chain(WEIGHTS.iter().map(|&v| Some(("weight", v))))
        {
            board(w, f).check_integrity().map_err(|e| e.to_string())?;
        }
    }
    for (i, player) in PLAYERS.iter().enumerate() {
        let s = board(Window::AllTime, None)
            .score(player)
            .unwrap()
            .expect("prepared");
        if s < acked[i] {
            return Err(format!("{player}: acknowledged {} but holds {s}", acked[i]));
        }
        let (_, age, weight) = submission(s);
        for w in WINDOWS {
            let mut want = vec![(None, Some(s))];
            want.extend(AGES.map(|v| (Some(("age", v)), (v == age).then_some(s))));
            want.extend(WEIGHTS.map(|v| (Some(("weight", v)), (v == weight).then_some(s))));
            for (f, score) in want {
                let found = board(w, f).score(player).unwrap();
                if found != score {
                    return Err(format!(
                        "{player} on {w:?} {f:?}: {found:?}, but all-time says {score:?}"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Runs `kills` rounds of a child in `mode` killed at a random moment;
/// the first check failure, if any.
/// Kills land `max_ms / 40` to `max_ms` after the child is ready.
fn kill_rounds(
    (url, child_url): (&str, &str),
    mode: &str,
    kills: u64,
    max_ms: u64,
    wait: &dyn Fn(),
) -> Result<u64, String> {
    let db = autoshard::open(url).unwrap();
    let first = prepare(&db);
    let mut acked = [0i64; 3];
    for s in first - 3..first {
        acked[s as usize % 3] = s;
    }
    let mut total = 0;
    for round in 0..kills {
        let child = Child::spawn(
            Command::new(std::env::current_exe().expect("test binary"))
                .args([
                    "--exact",
                    crate::child::test_path(module_path!(), "family_child").as_str(),
                    "--ignored",
                    "--nocapture",
                ])
                .arg("--test-threads=1")
                .env(ENV_URL, child_url)
                .env(ENV_MODE, mode),
        );
        // Kills land anywhere in a transaction.
        let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let nanos = clock.unwrap().subsec_nanos() as u64 ^ (round * 7_919);
        let micros = max_ms * 25 + nanos % (max_ms * 975);
        let run = child.kill_after(Duration::from_micros(micros));
        assert!(run.killed(), "the child ended by itself: {:?}", run.status);
        for op in run.acks() {
            acked[op as usize % 3] = op as i64;
            total += 1;
        }
        wait();
        check(&db, &acked).map_err(|e| format!("after kill {round}: {e}"))?;
    }
    Ok(total)
}

/// The family's queue holds between the acknowledged count and one more
/// (the one in flight at the kill): one row per submission, which the
/// family worker expands into every member's update
/// (`tests/crash/family_queue_crash.rs` kills that worker).
fn check_queued(db: &autoshard::AnyStore, acked: u64) -> Result<(), String> {
    let n = family_queued(db);
    if n < acked || n > acked + 1 {
        return Err(format!("queued {n}, acknowledged {acked}"));
    }
    Ok(())
}

#[test]
fn sqlite_family_enqueues_killed_20_times_are_all_or_nothing() {
    let (_dir, url) = sqlite_url();
    let db = autoshard::open(&url).unwrap();
    prepare(&db);
    let mut config = FamilyConfig::new(RankingConfig::new(0..1 << 40).queues(2));
    for w in WINDOWS {
        config = config.window(w);
    }
    let queued = Family::create(&db, "crashq", config).unwrap();
    queued.submission("ann", 1).at(AT).enqueue().unwrap();
    let mut acked = 1;
    for round in 0..kills(KILLS) {
        let child = Child::spawn(
            Command::new(std::env::current_exe().expect("test binary"))
                .args([
                    "--exact",
                    crate::child::test_path(module_path!(), "family_child").as_str(),
                    "--ignored",
                    "--nocapture",
                ])
                .arg("--test-threads=1")
                .env(ENV_URL, &url)
                .env(ENV_MODE, "queue"),
        );
        let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let micros = 1_000 + clock.unwrap().subsec_nanos() as u64 % 39_000;
        let run = child.kill_after(Duration::from_micros(micros));
        assert!(run.killed(), "the child ended by itself: {:?}", run.status);
        acked += run.acks().count() as u64;
        // What the killed child committed without an ack counts from now.
        check_queued(&db, acked).unwrap_or_else(|e| panic!("after kill {round}: {e}"));
        acked = family_queued(&db);
    }
    assert!(acked > 1, "the children queued nothing");
}

fn family_queued(db: &autoshard::AnyStore) -> u64 {
    Family::open(db, "crashq").unwrap().queued().unwrap()
}

fn sqlite_url() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("family.db");
    Sqlite::open(&path).unwrap();
    let url = format!("sqlite://{}", path.display());
    (dir, url)
}

#[test]
fn sqlite_family_submissions_killed_20_times_are_all_or_nothing() {
    let (_dir, url) = sqlite_url();
    let acked = kill_rounds((&url, &url), "atomic", kills(KILLS), 40, &|| {}).unwrap();
    eprintln!("{acked} submissions acknowledged across the kills");
    assert!(acked > 0, "the children submitted nothing");
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_family_submissions_killed_20_times_are_all_or_nothing() {
    let db = stores::pg::CrashSchema::new("family_crash");
    let (url, child_url) = (&db.url, &db.child_url);
    // The killed child's server session may still be committing.
    let wait = || db.settle();
    let acked = kill_rounds((url, child_url), "atomic", kills(KILLS), 200, &wait);
    let acked = acked.unwrap();
    eprintln!("{acked} submissions acknowledged across the kills");
    assert!(acked > 0, "the children submitted nothing");
}

/// On Redis Cluster a family's boards share one slot and a submission
/// commits with one script: a kill lands before it was sent or after the
/// server ran it whole.
#[cfg(feature = "redis")]
#[test]
fn redis_family_submissions_killed_20_times_are_all_or_nothing() {
    let prefix = stores::redis_cluster::new_prefix();
    let _cleanup = stores::redis_cluster::DropPrefix(prefix.clone());
    let url = stores::redis_cluster::url(&prefix);
    let acked = kill_rounds((&url, &url), "atomic", kills(KILLS), 200, &|| {});
    let acked = acked.unwrap();
    eprintln!("{acked} submissions acknowledged across the kills");
    assert!(acked > 0, "the children submitted nothing");
}

#[test]
fn control_member_by_member_writes_are_caught() {
    let (_dir, url) = sqlite_url();
    let caught = kill_rounds((&url, &url), "split", kills(KILLS), 40, &|| {});
    assert!(caught.is_err(), "the control must fail: {caught:?}");
}

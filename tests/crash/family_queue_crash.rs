//! kill -9 of a family worker mid-batch (issue 10, item 6): the parent
//! queues submissions to a family (all-time and daily boards, overall and
//! per age group, increments of 1, timestamps 2 hours apart so the days
//! turn, the age group changing every second submission of a player, so
//! players leave boards), and a child drains them with a
//! [`FamilyWorker`](autoshard::ranking::FamilyWorker) in batches of 3
//! until it is SIGKILLed at a random moment; 20 kills each on a SQLite
//! file, on PostgreSQL and on Redis Cluster (`AUTOSHARD_KILLS` overrides). After each kill:
//!
//! - each player's all-time count `n` is at most what was queued for them,
//!   and every member board holds exactly what the first `n` of the
//!   player's submissions put there (the oracle below): a submission was
//!   applied to all its members or to none, and none twice;
//! - the members written lately pass `check_integrity`.
//!
//! At the end the parent drains the rest: every queued submission applied
//! exactly once on every member (`n` equals the queued count), every
//! member passes `check_integrity`, and the queue is empty.
//!
//! Control (`control_member_by_member_drain_is_caught`): the same increments
//! queued on each overall member's own queue and drained member by member
//! (`Family::drain_queued`'s path for single-member rows, what family
//! queueing was before) is caught half-applied after some kill of 20.
#![cfg(unix)]

use crate::child::say;
use autoshard::ranking::{Family, FamilyConfig, Period, Policy, RankingConfig, Window};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::child;
use crate::stores;
use child::{kills, Child};

const ENV_URL: &str = "AUTOSHARD_FAMQ_CRASH_URL";
const ENV_MODE: &str = "AUTOSHARD_FAMQ_CRASH_MODE";
const KILLS: u64 = 20;
const CHILD_LIFETIME: Duration = Duration::from_secs(20);
const PLAYERS: [&str; 3] = ["ann", "bo", "cy"];
const WINDOWS: [Window; 2] = [Window::AllTime, Window::Day];
const AGES: [&str; 3] = ["u35", "35-44", "45+"];
/// Queued per player per round.
const PER_ROUND: u64 = 8;
/// The first submission's time: 2026-11-24 10:30 UTC.
const AT: i64 = 1_795_516_200;

fn config(filtered: bool) -> FamilyConfig {
    let board = RankingConfig::new(0..1 << 40).policy(Policy::Increment);
    let mut c = FamilyConfig::new(board).auto_drop(false);
    if filtered {
        c = c.filter("age", AGES);
    }
    for w in WINDOWS {
        c = c.window(w);
    }
    c
}

/// Submission `j` of a player: its time and age group.
fn submission(j: u64) -> (i64, &'static str) {
    (AT + j as i64 * 7_200, AGES[(j / 2 % 3) as usize])
}

/// The child's entry point; without the parent's environment it returns.
#[test]
#[ignore = "the crash tests run it as a child process"]
fn famq_child() {
    let (Ok(url), Ok(mode)) = (std::env::var(ENV_URL), std::env::var(ENV_MODE)) else {
        return;
    };
    crate::child::abort_on_panic();
    say("");
    let db = autoshard::open(&url).expect("child: open");
    let family = Family::open(&db, "crash").expect("child: family");
    say("ready");
    let started = Instant::now();
    while started.elapsed() < CHILD_LIFETIME {
        if mode == "worker" {
            family.worker().batch_size(3).drain().expect("child: drain");
        } else {
            // The control's broken design: each member's queue drained on
            // its own, with a pause between members, so that kills land
            // between members however fast this machine drains.
            for w in WINDOWS {
                for span in family.periods(w).expect("child: periods") {
                    let at = Period::At(span.start.max(-1_000_000_000));
                    if let Some(board) = family.board(w, at, None).expect("child: board") {
                        board.worker().drain().expect("child: drain");
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
    }
}

/// What the first `n` submissions of `player` put on each member board:
/// `(window, time in its period, age) -> score` (`None`: not on it).
type Expected = BTreeMap<(&'static str, i64, Option<&'static str>), (i64, Option<i64>)>;

fn oracle(f: &Family, filtered: bool, n: u64) -> Expected {
    let mut out = Expected::new();
    let mut old: Option<&str> = None;
    for j in 0..n {
        let (ts, age) = submission(j);
        for w in WINDOWS {
            let key = f.span(w, Period::At(ts)).unwrap().key;
            let overall = out.entry((w.as_str(), key, None)).or_insert((ts, None));
            overall.1 = Some(overall.1.unwrap_or(0) + 1);
            if !filtered {
                continue;
            }
            let mine = out
                .entry((w.as_str(), key, Some(age)))
                .or_insert((ts, None));
            mine.1 = Some(mine.1.unwrap_or(0) + 1);
            if let Some(was) = old.filter(|&was| was != age) {
                out.insert((w.as_str(), key, Some(was)), (ts, None));
            }
        }
        old = Some(age);
    }
    out
}

fn window(name: &str) -> Window {
    WINDOWS.into_iter().find(|w| w.as_str() == name).unwrap()
}

/// The invariants of the module docs; `queued` per player. Checks the
/// integrity of the members of the latest `recent` seconds.
fn check(db: &autoshard::AnyStore, filtered: bool, queued: &[u64; 3]) -> Result<[u64; 3], String> {
    let f = Family::open(db, "crash").map_err(|e| e.to_string())?;
    let mut counts = [0; 3];
    let mut latest = AT;
    for (i, player) in PLAYERS.iter().enumerate() {
        let all = f.board(Window::AllTime, Period::At(AT), None).unwrap();
        let n = all
            .map_or(Some(0), |b| b.score(player).unwrap())
            .unwrap_or(0) as u64;
        if n > queued[i] {
            return Err(format!("{player}: {n} applied, {} queued", queued[i]));
        }
        counts[i] = n;
        for ((w, _, age), (ts, want)) in oracle(&f, filtered, n) {
            latest = latest.max(ts);
            let board = f.board(window(w), Period::At(ts), age.map(|a| ("age", a)));
            let found = board.unwrap().and_then(|b| b.score(player).unwrap());
            // A control's board holds 0 for a player it made it for.
            let found = if age.is_none() {
                found.filter(|&s| s != 0)
            } else {
                found
            };
            if found != want {
                return Err(format!(
                    "{player} on {w} at {ts} {age:?}: {found:?}, but after {n} \
                     submissions it should be {want:?}"
                ));
            }
        }
    }
    for w in WINDOWS {
        let mut filters = vec![None];
        if filtered {
            filters.extend(AGES.map(|a| Some(("age", a))));
        }
        for filter in filters {
            if let Some(b) = f.board(w, Period::At(latest), filter).unwrap() {
                b.check_integrity()
                    .map_err(|e| format!("{w:?} {filter:?}: {e}"))?;
            }
        }
    }
    Ok(counts)
}

/// Queues the next `PER_ROUND` submissions of every player.
fn queue_more(db: &autoshard::AnyStore, filtered: bool, queued: &mut [u64; 3]) {
    let f = Family::open(db, "crash").unwrap();
    for _ in 0..PER_ROUND {
        for (i, player) in PLAYERS.iter().enumerate() {
            let (ts, age) = submission(queued[i]);
            if filtered {
                f.submission(player, 1)
                    .at(ts)
                    .filter("age", age)
                    .enqueue()
                    .unwrap();
            } else {
                // The control: each overall member's own queue.
                for w in WINDOWS {
                    let board = match f.board(w, Period::At(ts), None).unwrap() {
                        Some(b) => b,
                        None => {
                            f.submission(player, 0).at(ts).submit().unwrap();
                            f.board(w, Period::At(ts), None).unwrap().unwrap()
                        }
                    };
                    board.enqueue(player, 1).unwrap();
                }
            }
            queued[i] += 1;
        }
    }
}

/// `kills` rounds: queue more, run a child, kill it `max_ms / 10` to
/// `max_ms` after it is ready, check; then drain the rest and check that
/// every submission was applied once. The first check failure, if any.
fn kill_rounds(
    (url, child_url): (&str, &str),
    filtered: bool,
    kills: u64,
    max_ms: u64,
    wait: &dyn Fn(),
) -> Result<u64, String> {
    let db = autoshard::open(url).unwrap();
    Family::create(&db, "crash", config(filtered)).unwrap();
    let mut queued = [0u64; 3];
    let mut mid_batch = 0;
    for round in 0..kills {
        queue_more(&db, filtered, &mut queued);
        let before = check(&db, filtered, &queued)?;
        let child = Child::spawn(
            Command::new(std::env::current_exe().expect("test binary"))
                .args([
                    "--exact",
                    crate::child::test_path(module_path!(), "famq_child").as_str(),
                    "--ignored",
                    "--nocapture",
                ])
                .arg("--test-threads=1")
                .env(ENV_URL, child_url)
                .env(ENV_MODE, if filtered { "worker" } else { "split" }),
        );
        let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        let nanos = clock.unwrap().subsec_nanos() as u64 ^ (round * 7_919);
        let micros = max_ms * 100 + nanos % (max_ms * 900);
        let run = child.kill_after(Duration::from_micros(micros));
        assert!(run.killed(), "the child ended by itself: {:?}", run.status);
        wait();
        let after =
            check(&db, filtered, &queued).map_err(|e| format!("after kill {round}: {e}"))?;
        mid_batch += u64::from(after != before && after != queued);
    }
    eprintln!("{mid_batch} of {kills} kills landed with the queue partly applied");
    let f = Family::open(&db, "crash").unwrap();
    f.drain_queued().unwrap();
    let done = check(&db, filtered, &queued)?;
    if done != queued {
        return Err(format!("applied {done:?} of {queued:?}"));
    }
    assert_eq!(f.queued().unwrap(), 0);
    let windows: Vec<Window> = f.config().windows().collect();
    for w in windows {
        for span in f.periods(w).unwrap() {
            let at = Period::At(span.start.max(-1_000_000_000));
            for age in [None].into_iter().chain(AGES.map(|a| Some(("age", a)))) {
                if let Some(b) = f.board(w, at, age.filter(|_| filtered)).unwrap() {
                    b.check_integrity().map_err(|e| e.to_string())?;
                }
            }
        }
    }
    Ok(mid_batch)
}

fn sqlite_url() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("famq.db");
    autoshard::Sqlite::open(&path).unwrap();
    let url = format!("sqlite://{}", path.display());
    (dir, url)
}

#[test]
fn sqlite_family_worker_killed_20_times_applies_each_submission_once() {
    let (_dir, url) = sqlite_url();
    kill_rounds((&url, &url), true, kills(KILLS), 60, &|| {}).unwrap();
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_family_worker_killed_20_times_applies_each_submission_once() {
    let db = stores::pg::CrashSchema::new("famq_crash");
    let (url, child_url) = (&db.url, &db.child_url);
    // The killed child's server session may still be committing.
    let wait = || db.settle();
    kill_rounds((url, child_url), true, kills(KILLS), 150, &wait).unwrap();
}

#[cfg(feature = "redis")]
#[test]
fn redis_family_worker_killed_20_times_applies_each_submission_once() {
    let prefix = stores::redis_cluster::new_prefix();
    let _cleanup = stores::redis_cluster::DropPrefix(prefix.clone());
    let url = stores::redis_cluster::url(&prefix);
    kill_rounds((&url, &url), true, kills(KILLS), 200, &|| {}).unwrap();
}

#[test]
fn control_member_by_member_drain_is_caught() {
    let (_dir, url) = sqlite_url();
    let caught = kill_rounds((&url, &url), false, kills(KILLS), 60, &|| {});
    eprintln!("control caught: {caught:?}");
    assert!(caught.is_err(), "the control must fail: {caught:?}");
}

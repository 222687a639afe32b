//! Kill -9 of an approximate board's refresh (issue 13, "Reliability"): a
//! child process alternates between replacing every player's score (one
//! transaction, a new "round" of scores) and refreshing, with its refresh
//! stretched (one bucket per transaction, 300 µs apart, 3 ms on PostgreSQL) so most kills land
//! in the middle of one. After every kill the parent checks, on a real
//! SQLite file, on the PostgreSQL server and on Redis Cluster:
//!
//! - the board still answers `approx_rank`, from a snapshot that is
//!   complete and equals the buckets of one round of scores exactly
//!   (every bucket's counts are that round's counts): nothing half
//!   published, nothing mixed;
//! - the next refresh succeeds and publishes the current scores; on SQLite,
//!   no rows of abandoned snapshots are left after it.
//!
//! The control (`control_refresh_in_place_is_caught`) makes the child
//! write its buckets over the published snapshot's rows, the bug the
//! snapshot protocol exists for, and shows the same check catching it.
//!
//! The child is this binary run again with `--exact child_refresher
//! --ignored`. `AUTOSHARD_KILLS` overrides the kill count (default 20 per
//! store).
#![cfg(unix)]

use autoshard::ranking::{ApproxSnapshot, Ranking, RankingConfig};
use rand::RngExt;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::child;
#[cfg(feature = "redis")]
use crate::stores;
use child::{kills, Child};

static SERIAL: Mutex<()> = Mutex::new(());

const ENV_URL: &str = "AUTOSHARD_APPROX_URL";
const ENV_BOARD: &str = "AUTOSHARD_APPROX_BOARD";
const ENV_ROUND: &str = "AUTOSHARD_APPROX_ROUND";
const ENV_IN_PLACE: &str = "AUTOSHARD_APPROX_IN_PLACE";
/// Microseconds between two bucket transactions of the child's refresh:
/// longer on PostgreSQL, whose `set_scores` takes longer too.
const ENV_PAUSE: &str = "AUTOSHARD_APPROX_PAUSE_US";

const PLAYERS: u64 = 60;
const BUCKETS: u32 = 12;
const WIDTH: i64 = 500;
const CHILD_LIFETIME: Duration = Duration::from_secs(20);

/// Player `i`'s score in round `r`: every round moves every player.
fn score(round: u64, i: u64) -> i64 {
    ((round * 7_919 + i * i * 31 + round * i * 13) % WIDTH as u64) as i64
}

fn round_scores(round: u64) -> Vec<(String, i64)> {
    (0..PLAYERS)
        .map(|i| (format!("p{i}"), score(round, i)))
        .collect()
}

fn config() -> RankingConfig {
    RankingConfig::new(0..WIDTH).approximate(BUCKETS)
}

fn set_round(board: &Ranking, round: u64) {
    let scores = round_scores(round);
    let scores: Vec<(&str, i64)> = scores.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    board.set_scores(&scores).unwrap();
}

/// Whether `snapshot` is exactly a summary of round `round`'s scores.
fn summarizes(snapshot: &ApproxSnapshot, round: u64) -> bool {
    let scores: Vec<i64> = (0..PLAYERS).map(|i| score(round, i)).collect();
    let count = |f: &dyn Fn(i64) -> bool| scores.iter().filter(|&&s| f(s)).count() as u64;
    let buckets = snapshot.buckets();
    snapshot.players() == PLAYERS
        && buckets.iter().map(|b| b.players).sum::<u64>() == PLAYERS
        && buckets.windows(2).all(|w| w[1].best < w[0].worst)
        && buckets.iter().all(|b| {
            b.players == count(&|s| b.worst <= s && s <= b.best)
                && b.at_best == count(&|s| s == b.best)
                && b.at_worst == count(&|s| s == b.worst)
        })
}

/// The child's entry point; without the parent's environment it returns.
#[test]
#[ignore = "the crash tests run it as a child process"]
fn child_refresher() {
    let (Ok(url), Ok(name), Ok(round)) = (
        std::env::var(ENV_URL),
        std::env::var(ENV_BOARD),
        std::env::var(ENV_ROUND),
    ) else {
        return;
    };
    println!();
    let hooks = &autoshard::__private::approx_hooks::refresh_chunks;
    let pause = std::env::var(ENV_PAUSE).map_or(300, |p| p.parse().unwrap());
    hooks(1, Duration::from_micros(pause));
    autoshard::__private::approx_hooks::refresh_in_place(std::env::var(ENV_IN_PLACE).is_ok());
    let db = autoshard::open(&url).unwrap();
    let board = Ranking::open(&db, &name).unwrap();
    let started = Instant::now();
    let mut round: u64 = round.parse().unwrap();
    let mut ready = false;
    while started.elapsed() < CHILD_LIFETIME {
        set_round(&board, round);
        println!("set {round}");
        // Ready once connected and warm: the parent's delay then starts
        // at the beginning of a refresh.
        if !ready {
            println!("ready");
            ready = true;
        }
        board.refresh().unwrap();
        println!("ack {round}");
        round += 1;
    }
}

/// Kills `kills` children mid-refresh on the board `name` at `url`; returns
/// how many kills left a snapshot that summarizes no round (0 unless the
/// child is buggy). `rows_left` counts rows of unpublished snapshots.
fn kill_refreshes(
    url: &str,
    name: &str,
    kills: u64,
    in_place: bool,
    rows_left: &dyn Fn() -> u64,
) -> u64 {
    let db = autoshard::open(url).unwrap();
    let _ = Ranking::delete(&db, name);
    let board = Ranking::create(&db, name, config()).unwrap();
    set_round(&board, 0);
    board.refresh().unwrap();
    // The round of the scores on the board, and of the published snapshot.
    let (mut data, mut published) = (0u64, 0u64);
    let (mut caught, mut midway) = (0, 0);
    for kill in 0..kills {
        let mut command = Command::new(std::env::current_exe().expect("test binary"));
        command
            .args([
                "--exact",
                crate::child::test_path(module_path!(), "child_refresher").as_str(),
                "--ignored",
                "--nocapture",
            ])
            .arg("--test-threads=1")
            .env(ENV_URL, url)
            .env(ENV_BOARD, name)
            .env(ENV_ROUND, (data + 1).to_string())
            .env(
                ENV_PAUSE,
                if url.starts_with("sqlite") {
                    "300"
                } else {
                    "3000"
                },
            );
        if in_place {
            command.env(ENV_IN_PLACE, "1");
        }
        let delay = Duration::from_micros(rand::rng().random_range(0..40_000));
        let run = Child::spawn(&mut command).kill_after(delay);
        assert!(run.killed(), "kill {kill}: the child ended by itself");
        // Killed after its scores were set and before the refresh
        // returned: in the middle of a refresh, mostly.
        midway += u64::from(
            run.lines
                .iter()
                .rev()
                .find(|l| !l.is_empty() && *l != "ready")
                .is_some_and(|l| l.starts_with("set ")),
        );
        let last_set = run
            .lines
            .iter()
            .filter_map(|l| l.strip_prefix("set ")?.parse::<u64>().ok())
            .max()
            .unwrap_or(data);
        // A fresh handle: nothing cached from before the kill.
        let reader = Ranking::open(&autoshard::open(url).unwrap(), name).unwrap();
        let snapshot = reader.approx_snapshot().unwrap();
        assert_eq!(
            reader.approx_rank(250).unwrap(),
            snapshot.rank(250).unwrap(),
            "kill {kill}"
        );
        let rounds = published..=last_set + 1;
        if !rounds.clone().any(|r| summarizes(&snapshot, r)) {
            assert!(
                in_place,
                "kill {kill}: the snapshot summarizes no round of {rounds:?}"
            );
            caught += 1;
            break;
        }
        // The scores are one round's, whole (`set_scores` is one transaction).
        let top: Vec<(String, i64)> = reader
            .top(PLAYERS)
            .unwrap()
            .into_iter()
            .map(|e| (e.player, e.score))
            .collect();
        data = (last_set..=last_set + 1)
            .find(|&r| {
                let by_name = |mut v: Vec<(String, i64)>| {
                    v.sort();
                    v
                };
                by_name(round_scores(r)) == by_name(top.clone())
            })
            .unwrap_or_else(|| panic!("kill {kill}: scores of no round near {last_set}"));
        let refreshed = reader.refresh().unwrap();
        assert!(refreshed.published, "kill {kill}");
        let after = reader.approx_snapshot().unwrap();
        assert!(
            summarizes(&after, data),
            "kill {kill}: refresh after the kill"
        );
        assert!(after.id() > snapshot.id(), "kill {kill}");
        assert_eq!(rows_left(), 0, "kill {kill}: abandoned rows left");
        published = data;
    }
    Ranking::delete(&db, name).unwrap();
    assert!(
        in_place || midway * 4 >= kills,
        "only {midway} of {kills} kills landed in a refresh"
    );
    caught
}

fn sqlite_rows_left(path: &std::path::Path) -> u64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(
        "SELECT count(*) FROM autoshard_rank_approx_buckets b JOIN autoshard_rank_approx p \
         ON b.board = p.board WHERE b.snapshot != p.current",
        [],
        |r| r.get::<_, i64>(0),
    )
    .unwrap() as u64
}

#[test]
fn sqlite_refresh_killed_midway_leaves_the_last_complete_snapshot() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("approx.db");
    let url = format!("sqlite://{}", path.display());
    let caught = kill_refreshes(&url, "board", kills(20), false, &|| sqlite_rows_left(&path));
    assert_eq!(caught, 0);
}

fn pg_url() -> String {
    autoshard_test_servers::postgres_url()
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_refresh_killed_midway_leaves_the_last_complete_snapshot() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let name = format!(
        "approx_crash_{}_{}",
        std::process::id(),
        rand::random::<u32>()
    );
    let caught = kill_refreshes(&pg_url(), &name, kills(20), false, &|| 0);
    assert_eq!(caught, 0);
}

/// Bucket rows under `prefix` of snapshots other than the published one
/// (the snapshot hash's fields `<snapshot>:<i>`, `stores/redis/approx.rs`).
#[cfg(feature = "redis")]
fn redis_rows_left(prefix: &str) -> u64 {
    use std::collections::HashMap;
    let mut left = 0;
    let mut masters = stores::redis_cluster::masters();
    for (master, key) in stores::redis_cluster::scan(&format!("{prefix}:*:rk*:x")) {
        let fields: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(&key)
            .query(&mut masters[master])
            .unwrap();
        let current = fields.get("current").cloned().unwrap_or_default();
        left += fields
            .keys()
            .filter_map(|f| f.split_once(':'))
            .filter(|(snapshot, _)| *snapshot != current)
            .count() as u64;
    }
    left
}

#[cfg(feature = "redis")]
#[test]
fn redis_refresh_killed_midway_leaves_the_last_complete_snapshot() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let prefix = stores::redis_cluster::new_prefix();
    let _cleanup = stores::redis_cluster::DropPrefix(prefix.clone());
    let url = stores::redis_cluster::url(&prefix);
    let caught = kill_refreshes(&url, "board", kills(20), false, &|| {
        redis_rows_left(&prefix)
    });
    assert_eq!(caught, 0);
}

/// The control: refreshes that write over the published snapshot's rows
/// leave, when killed, a published snapshot that summarizes no round, and
/// the check above says so within a few kills.
#[test]
fn control_refresh_in_place_is_caught() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("approx.db");
    let url = format!("sqlite://{}", path.display());
    let caught = kill_refreshes(&url, "board", kills(20), true, &|| 0);
    assert_eq!(caught, 1, "no kill caught the in-place refresh");
}

//! Crash tests of boards split into trees (issue 13, Reliability): the
//! worker of one of `k` trees (or the workers of all of them) SIGKILLed in
//! the middle of its batches, then restarted: on real SQLite files (a file
//! per tree), on PostgreSQL (the trees are boards in one schema, a fresh
//! schema per test) and on Redis Cluster (boards under a fresh prefix),
//! 24 kills each (`AUTOSHARD_KILLS` overrides). Children are this test
//! binary run again with `--exact child_process --ignored`.
//!
//! The board is an `Increment` board and every queued update adds 1, so
//! "applied exactly once" is visible in the scores: after every kill, every
//! tree's `check_integrity` is clean; after the restarted worker drained,
//! every player's score is the number of updates the parent enqueued (all
//! acknowledged) for them, and nothing is queued.
//!
//! A child that dies between a batch's commit and its queue delete
//! (`queue_hooks::abort_before_delete`, deterministic) leaves that batch
//! queued; the restarted worker skips it (`*_a_batch_left_in_the_queue_is_applied_once`).
//! Control (`*_a_reapplied_batch_is_caught`, on each store): restarted as
//! a worker that takes queued rows whatever the applied-through marks say
//! (`queue_hooks::ignore_applied_marks`: the bug the marks guard against),
//! it applies that batch twice, and the same check fails.
//!
//! On PostgreSQL the parent checks only once the killed child's server
//! sessions are gone: a backend may still commit what its client sent
//! before it died.
#![cfg(unix)]

use crate::child;
use crate::stores;
use child::{kills, Child};

use autoshard::ranking::{Policy, Ranking, RankingConfig, RankingStore};
use autoshard::{Sqlite, Synchronous};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::HashMap;
use std::io::Write;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

const ENV_DB: &str = "AUTOSHARD_TC_DB";
const ENV_MODE: &str = "AUTOSHARD_TC_MODE";
const BOARD: &str = "trees";
const TREES: u32 = 4;
const KILLS: u64 = 24;
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

/// Where a test's board lives, removed when the test ends.
enum Db {
    /// A SQLite file (and its trees' and queue's files) in its own directory.
    Sqlite {
        path: String,
        _dir: tempfile::TempDir,
    },
    /// A fresh PostgreSQL schema; children connect with a tagged URL.
    #[cfg(feature = "postgres")]
    Postgres(stores::pg::CrashSchema),
    /// A fresh key prefix on the cluster `.ci/run` starts.
    #[cfg(feature = "redis")]
    Redis {
        url: String,
        _cleanup: stores::redis_cluster::DropPrefix,
    },
}

impl Db {
    fn sqlite() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trees.db");
        let path = path.to_str().unwrap().to_owned();
        Db::Sqlite { path, _dir: dir }
    }

    #[cfg(feature = "postgres")]
    fn postgres() -> Db {
        Db::Postgres(stores::pg::CrashSchema::new("trees_crash"))
    }

    #[cfg(feature = "redis")]
    fn redis() -> Db {
        let prefix = stores::redis_cluster::new_prefix();
        Db::Redis {
            url: stores::redis_cluster::url(&prefix),
            _cleanup: stores::redis_cluster::DropPrefix(prefix),
        }
    }

    /// What `board_at` opens in this process.
    fn location(&self) -> &str {
        match self {
            Db::Sqlite { path, .. } => path,
            #[cfg(feature = "postgres")]
            Db::Postgres(schema) => &schema.url,
            #[cfg(feature = "redis")]
            Db::Redis { url, .. } => url,
        }
    }

    fn spawn(&self, mode: &str) -> Child {
        match self {
            Db::Sqlite { path, .. } => spawn(path, mode),
            #[cfg(feature = "postgres")]
            Db::Postgres(schema) => spawn(&schema.child_url, mode),
            #[cfg(feature = "redis")]
            Db::Redis { url, .. } => spawn(url, mode),
        }
    }

    /// Returns once a killed child can commit nothing more: at once on
    /// SQLite (its locks die with it) and on Redis Cluster (a script that
    /// reached a master runs whole before the parent's next command there),
    /// on PostgreSQL once its server sessions are gone.
    fn settle(&self) {
        #[cfg(feature = "postgres")]
        if let Db::Postgres(schema) = self {
            schema.settle();
        }
    }

    fn open(&self) -> Ranking {
        board_at(self.location(), None)
    }

    /// A fresh split `Increment` board.
    fn create(&self) -> Ranking {
        self.create_with(TREES)
    }

    /// A fresh `Increment` board of `trees` trees (one: on Redis Cluster a
    /// board stored natively, in sorted sets).
    fn create_with(&self, trees: u32) -> Ranking {
        let config = RankingConfig::new(0..1_000_000)
            .policy(Policy::Increment)
            .trees(trees);
        board_at(self.location(), Some(config))
    }
}

/// The board at `location`, created with `config` if given: a PostgreSQL
/// or Redis Cluster URL, or the path of a SQLite file opened with
/// `synchronous = NORMAL` (the kills are of processes, not of the machine:
/// no fsync needed, and enqueues stay fast).
fn board_at(location: &str, create: Option<RankingConfig>) -> Ranking {
    fn board(db: &impl RankingStore, create: Option<RankingConfig>) -> Ranking {
        match create {
            Some(config) => Ranking::create(db, BOARD, config).unwrap(),
            None => Ranking::open(db, BOARD).unwrap(),
        }
    }
    if location.starts_with("postgres") || location.starts_with("redis-cluster") {
        return board(&autoshard::open(location).unwrap(), create);
    }
    let db = Sqlite::builder(location)
        .synchronous(Synchronous::Normal)
        .open()
        .unwrap();
    board(&db, create)
}

/// The child's entry point; without the parent's environment it returns.
/// Modes: `tree-<t>` runs tree t's worker only, `all` every tree's,
/// `abort-after-one` applies one batch of tree 0 and aborts before its
/// delete, `restart` drains, `reapply` drains ignoring the applied-through
/// marks.
#[test]
#[ignore = "the crash tests run it as a child process"]
fn child_process() {
    let (Ok(location), Ok(mode)) = (std::env::var(ENV_DB), std::env::var(ENV_MODE)) else {
        return;
    };
    say(""); // end the harness's `test child_process ... ` line
    let board = board_at(&location, None);
    let fast = |w: autoshard::ranking::BoardWorker| w.batch_size(7).linger(Duration::ZERO);
    match mode.as_str() {
        "all" => {
            let worker = fast(board.worker()).spawn().unwrap();
            say("ready");
            std::thread::sleep(CHILD_LIFETIME);
            worker.stop().unwrap();
        }
        "writer" => {
            say("ready");
            for i in 0.. {
                board.set_score("ann", 1).unwrap();
                say(&format!("ack {i}"));
            }
        }
        "abort-after-one" => {
            autoshard::__private::queue_hooks::abort_before_delete(1);
            say("ready");
            fast(board.tree_worker(0).unwrap()).drain().unwrap();
        }
        "reapply" | "restart" => {
            autoshard::__private::queue_hooks::ignore_applied_marks(mode == "reapply");
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

fn spawn(location: &str, mode: &str) -> Child {
    Child::spawn(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                crate::child::test_path(module_path!(), "child_process").as_str(),
                "--ignored",
                "--nocapture",
            ])
            .arg("--test-threads=1")
            .env(ENV_DB, location)
            .env(ENV_MODE, mode),
    )
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
/// moment of its batches, `rounds` times; every tree's integrity after each
/// kill, every update applied exactly once after the restart. Kills land
/// up to `max_delay` after the child is ready.
fn kill_rounds(db: &Db, rounds: u64, max_delay: Duration) {
    kill_rounds_of(db, TREES, rounds, max_delay);
}

/// [`kill_rounds`] on a board of `trees` trees.
fn kill_rounds_of(db: &Db, trees: u32, rounds: u64, max_delay: Duration) {
    let _serial = serial();
    let board = db.create_with(trees);
    let seed = rand::random::<u64>();
    eprintln!("seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut sent = HashMap::new();
    let (mut killed, mut interrupted) = (0, 0);
    for round in 0..rounds {
        enqueue(&board, &mut rng, PER_ROUND, &mut sent);
        let mode = match round % 5 {
            4 => "all".to_owned(),
            _ => format!("tree-{}", rng.random_range(0..trees)),
        };
        let delay = rng.random_range(Duration::ZERO..max_delay);
        let queued = board.queued().unwrap();
        let run = db.spawn(&mode).kill_after(delay);
        killed += u64::from(run.killed());
        db.settle();
        // Every tree intact whatever the kill interrupted (SQLite rolls an
        // interrupted transaction back on the next open).
        let after = db.open();
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
    exactly_once(&db.open(), &sent).unwrap();
}

/// A child adding 1 to one player of an `Increment` board with direct
/// writes (each a write transaction whose commit is one script) is killed
/// `rounds` times at a random moment: each round the score grows by the
/// writes the child acknowledged, or by one more (the write in flight when
/// it died, committed without its reply), never by less or by two more;
/// the board's integrity holds after every kill.
fn kill_writers(db: &Db, trees: u32, rounds: u64, max_delay: Duration) {
    let _serial = serial();
    let board = db.create_with(trees);
    let seed = rand::random::<u64>();
    eprintln!("seed {seed}");
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut killed, mut in_flight) = (0, 0);
    for _ in 0..rounds {
        let before = board.score("ann").unwrap().unwrap_or(0);
        let delay = rng.random_range(Duration::from_millis(20)..max_delay);
        let run = db.spawn("writer").kill_after(delay);
        killed += u64::from(run.killed());
        db.settle();
        let acked = run.acks().count() as i64;
        let after = db.open();
        after.check_integrity().unwrap();
        let grown = after.score("ann").unwrap().unwrap_or(0) - before;
        assert!(
            grown == acked || grown == acked + 1,
            "{acked} writes acknowledged, the score grew by {grown}"
        );
        in_flight += u64::from(grown == acked + 1);
    }
    eprintln!("{killed} kills, {in_flight} with the write in flight applied");
    assert!(
        killed >= rounds * 3 / 4,
        "only {killed} of {rounds} children were killed"
    );
}

/// A writer of a board Redis Cluster stores natively killed mid-write.
#[cfg(feature = "redis")]
#[test]
fn redis_a_writer_of_a_native_board_killed_mid_write_counts_each_write_once() {
    kill_writers(&Db::redis(), 1, kills(KILLS), Duration::from_millis(400));
}

/// The same on a board split into 3 trees, each a native board on its own
/// master, whose writes pass board-wide arrival floors.
#[cfg(feature = "redis")]
#[test]
fn redis_a_writer_of_a_split_board_killed_mid_write_counts_each_write_once() {
    kill_writers(&Db::redis(), 3, kills(KILLS), Duration::from_millis(400));
}

/// A child applies one batch of tree 0 and dies before the queue's delete;
/// a second child drains the queue, minding the applied-through marks or,
/// with `ignore_marks` (the control's bug), not: then it applies that batch
/// again. The check of `kill_rounds` on the result.
fn batch_left_in_the_queue(db: &Db, ignore_marks: bool) -> Result<(), String> {
    let _serial = serial();
    let board = db.create();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut sent = HashMap::new();
    // Enough for tree 0 to have a batch.
    enqueue(&board, &mut rng, PER_ROUND, &mut sent);
    let aborted = db.spawn("abort-after-one").finish();
    assert!(
        !aborted.status.success(),
        "the child should abort before the delete"
    );
    db.settle();
    let restarted = db.spawn(if ignore_marks { "reapply" } else { "restart" });
    assert!(restarted.finish().said("drained"));
    exactly_once(&db.open(), &sent)
}

/// The control: the batch re-applied must be caught, as a score above the
/// increments sent.
fn a_reapplied_batch_is_caught(db: &Db) {
    let caught = batch_left_in_the_queue(db, true);
    eprintln!("caught: {caught:?}");
    let caught = caught.expect_err("a batch applied twice went unnoticed");
    assert!(caught.contains("increments sent"), "{caught}");
}

#[test]
fn sqlite_the_worker_of_one_of_k_trees_killed_mid_batch_applies_each_update_once() {
    kill_rounds(&Db::sqlite(), kills(KILLS), Duration::from_millis(20));
}

/// A tree's first batch on PostgreSQL commits some 60 ms after the child
/// is ready (debug build, deeper arrival trees: docs/design/sharded-trees.md, "Arrival
/// numbers across trees"), so kills land over a longer span than on SQLite.
#[cfg(feature = "postgres")]
#[test]
fn postgres_the_worker_of_one_of_k_trees_killed_mid_batch_applies_each_update_once() {
    kill_rounds(&Db::postgres(), kills(KILLS), Duration::from_millis(150));
}

/// On Redis Cluster each tree is a board in a slot of its own, so the
/// kills land between and inside the commit scripts of four boards on
/// different masters. A tree's applied-through mark is its stream's trim,
/// in the batch's own commit script: there is no window between apply and
/// delete to abort in, so the batch-left-in-the-queue case and its control
/// (above, on SQLite and PostgreSQL, where the same `exactly_once` check
/// catches a batch applied twice) have nothing to test here.
#[cfg(feature = "redis")]
#[test]
fn redis_the_worker_of_one_of_k_trees_killed_mid_batch_applies_each_update_once() {
    kill_rounds(&Db::redis(), kills(KILLS), Duration::from_millis(150));
}

/// The same on a board of one tree, which Redis Cluster stores natively
/// (sorted sets, no count tree): a worker batch is one transaction whose
/// commit script applies the moves, trims the queue entries it took and
/// moves the version, so a kill anywhere leaves the batch applied with its
/// entries gone, or neither.
#[cfg(feature = "redis")]
#[test]
fn redis_the_worker_of_a_native_board_killed_mid_batch_applies_each_update_once() {
    // A native drain of a round's 60 updates takes ~20 ms (one script per
    // batch of 7): with kills spread over 150 ms, 2 to 4 of 24 landed
    // mid-drain, and a loaded run once saw none.
    kill_rounds_of(&Db::redis(), 1, kills(KILLS), Duration::from_millis(30));
}

#[test]
fn sqlite_a_batch_left_in_the_queue_is_applied_once() {
    batch_left_in_the_queue(&Db::sqlite(), false).unwrap();
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_a_batch_left_in_the_queue_is_applied_once() {
    batch_left_in_the_queue(&Db::postgres(), false).unwrap();
}

#[test]
fn sqlite_a_reapplied_batch_is_caught() {
    a_reapplied_batch_is_caught(&Db::sqlite());
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_a_reapplied_batch_is_caught() {
    a_reapplied_batch_is_caught(&Db::postgres());
}

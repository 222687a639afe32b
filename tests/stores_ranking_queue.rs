//! The job-aggregation queue (`enqueue`, workers, `flush`), written once and
//! run against every store (see `common/stores.rs`): SQLite, PostgreSQL in
//! locking mode and in optimistic mode (queue transactions pick their own
//! isolation, so the mode must change nothing). Each test has its own SQLite
//! file or PostgreSQL schema, so they run in parallel.
//!
//! Also here: a PostgreSQL worker killed with SIGKILL mid-batch, 20 times
//! (`AUTOSHARD_KILLS` for another count; a round fills and drains a queue
//! through a new process and costs about a second, so it stays below the
//! 100 kills of the cheaper crash tests) (the child is this test binary run again with `--exact pg_worker_child
//! --ignored`). Tests that need SQLite files by hand stay in
//! `ranking_queue.rs`.
#![cfg(unix)]

use autoshard::ranking::{Policy, Ranking, RankingConfig, RankingStore};
use autoshard::{Error, Sqlite};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeSet;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

#[path = "common/stores.rs"]
mod stores;
use stores::TestStore;

#[cfg(feature = "postgres")]
#[path = "common/child.rs"]
mod child;
#[path = "common/queue_oracle.rs"]
mod oracle;
use oracle::{apply, assert_board, write, Scores, RANGE};

store_tests!(
    direct_and_queued_writers_at_once_match_the_oracle,
    bad_input_is_refused_before_anything_is_queued,
    flush_without_a_worker_times_out_and_keeps_the_updates,
    flush_does_not_wait_for_later_updates,
    worker_handles_stop_on_drop_and_report_what_they_did,
    workers_on_four_handles_apply_every_update_once_in_order,
    sequence_numbers_survive_an_empty_queue,
    a_queued_row_the_board_refuses_is_set_aside_and_the_rest_drains,
);

// On Redis Cluster the queue shards are streams in the board's slot and a
// worker batch is one optimistic transaction (docs/design.md, "Ranking
// boards on Redis Cluster"); the guarantees are the same. The dead-letter
// test edits rows with SQL: its Redis variant, which writes the bad entries
// into the streams by hand, is in `redis_ranking.rs`.
redis_cluster_tests!(
    direct_and_queued_writers_at_once_match_the_oracle,
    bad_input_is_refused_before_anything_is_queued,
    flush_without_a_worker_times_out_and_keeps_the_updates,
    flush_does_not_wait_for_later_updates,
    worker_handles_stop_on_drop_and_report_what_they_did,
    workers_on_four_handles_apply_every_update_once_in_order,
    sequence_numbers_survive_an_empty_queue,
);

/// A store under test that can hold boards.
trait Boards: TestStore {
    type Db: RankingStore;
    fn db(&self) -> &Self::Db;
    /// Players each writer thread owns in the mixed-writers test: a
    /// PostgreSQL write is several round trips, and 8 writer threads with
    /// their 8 server processes share 2 cores in CI.
    const OWN: usize;
}

impl Boards for Sqlite {
    type Db = Sqlite;
    fn db(&self) -> &Sqlite {
        self
    }
    const OWN: usize = 120;
}

#[cfg(feature = "postgres")]
impl Boards for autoshard::Postgres {
    type Db = autoshard::Postgres;
    fn db(&self) -> &autoshard::Postgres {
        self
    }
    const OWN: usize = 30;
}

#[cfg(feature = "redis")]
impl Boards for autoshard::RedisCluster {
    type Db = autoshard::RedisCluster;
    fn db(&self) -> &autoshard::RedisCluster {
        self
    }
    const OWN: usize = 30;
}

#[cfg(feature = "postgres")]
impl Boards for stores::pg::Optimistic {
    type Db = autoshard::Postgres;
    fn db(&self) -> &autoshard::Postgres {
        &self.0
    }
    const OWN: usize = 30;
}

fn seed() -> u64 {
    std::env::var("AUTOSHARD_RQ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let seed = rand::random::<u64>();
            eprintln!("AUTOSHARD_RQ_SEED={seed}");
            seed
        })
}

// ---------------------------------------------------------------------------
// Direct writers and queued writers at once.
// ---------------------------------------------------------------------------

/// 4 threads call `set_score`/`remove` while 4 threads `enqueue` and a
/// worker drains in small batches. Each thread owns its players, so its own
/// last write is the expected outcome; a shared set is written by both
/// paths during the run, then given final scores through the queue after
/// the direct writers stopped, so the queue's last write is the outcome.
fn direct_and_queued_writers_at_once_match_the_oracle<S: Boards>() {
    const THREADS: usize = 4;
    let own = S::OWN;
    const SHARED: usize = 80;
    const ROUNDS: usize = 4;
    let store = S::fresh();
    let config = RankingConfig::new(RANGE).branching(10).shards(4).queues(4);
    let board = Ranking::create(store.db(), "mixed", config).unwrap();
    let worker = board.worker().batch_size(64).spawn().unwrap();
    let shared: Vec<String> = (0..SHARED).map(|i| format!("shared-{i}")).collect();
    let start = Barrier::new(2 * THREADS);
    let seed = seed();

    let outcomes: Vec<Scores> = thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..2 * THREADS {
            let (board, shared, start) = (&board, &shared, &start);
            handles.push(s.spawn(move || {
                let queued = t >= THREADS;
                let mut rng = SmallRng::seed_from_u64(seed ^ t as u64);
                let prefix = if queued { "queued" } else { "direct" };
                let mine: Vec<String> = (0..own).map(|i| format!("{prefix}-{t}-{i}")).collect();
                let mut last = Scores::new();
                start.wait();
                for round in 0..ROUNDS {
                    for player in &mine {
                        // Some players end removed, some are removed and
                        // come back: both paths must handle either.
                        let score = if rng.random_range(..10u8) == 0 && round > 0 {
                            None
                        } else {
                            Some(rng.random_range(RANGE))
                        };
                        write(board, queued, player, score);
                        apply(&mut last, player, score);
                        let other = &shared[rng.random_range(..SHARED)];
                        write(board, queued, other, Some(rng.random_range(RANGE)));
                    }
                }
                last
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    // The direct writers are done; the queue has the last word on the
    // shared players.
    let mut expected: Scores = outcomes.into_iter().flatten().collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    for (i, player) in shared.iter().enumerate() {
        let score = (i % 7 != 0).then(|| rng.random_range(RANGE));
        write(&board, true, player, score);
        apply(&mut expected, player, score);
    }
    board.flush().unwrap();
    assert_eq!(board.queued().unwrap(), 0);
    let stats = worker.stop().unwrap();
    let queued_writes = (THREADS * ROUNDS * own * 2 + SHARED) as u64;
    assert_eq!(
        stats.updates, queued_writes,
        "every queued write applied once"
    );
    assert!(stats.batches > 1, "{stats:?}");

    let mut players: BTreeSet<String> = shared.into_iter().collect();
    for t in 0..2 * THREADS {
        let prefix = if t >= THREADS { "queued" } else { "direct" };
        players.extend((0..own).map(|i| format!("{prefix}-{t}-{i}")));
    }
    assert_board(&board, &expected, &players);
}

fn bad_input_is_refused_before_anything_is_queued<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100)).unwrap();
    let long = "x".repeat(257);
    for (player, score) in [("", 5), ("nul\0", 5), (long.as_str(), 5)] {
        let err = board.enqueue(player, score).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
        assert!(!err.is_retryable());
    }
    assert!(matches!(
        board.enqueue_remove("").unwrap_err(),
        Error::InvalidName { .. }
    ));
    for score in [-1, 100, i64::MIN, i64::MAX] {
        let err = board.enqueue("ok", score).unwrap_err();
        assert!(
            matches!(err, Error::ScoreOutOfRange { score: s, min: 0, max: 100 } if s == score),
            "{err:?}"
        );
    }
    assert_eq!(board.queued().unwrap(), 0);
    // The boundaries are accepted.
    board.enqueue("low", 0).unwrap();
    board.enqueue("high", 99).unwrap();
    assert_eq!(board.queued().unwrap(), 2);
}

/// Without a worker nothing drains, so `flush` gives up after its time
/// limit with a typed error that says how much is still queued, and loses
/// nothing; with a worker the same flush returns.
fn flush_without_a_worker_times_out_and_keeps_the_updates<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100)).unwrap();
    board.flush_within(Duration::ZERO).unwrap(); // nothing queued: nothing to wait for
    for (i, player) in ["a", "b", "c"].into_iter().enumerate() {
        board.enqueue(player, i as i64).unwrap();
    }
    let started = Instant::now();
    let err = board.flush_within(Duration::from_millis(200)).unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(200));
    match &err {
        Error::FlushTimeout { remaining, waited } => {
            assert_eq!(*remaining, 3);
            assert!(*waited >= Duration::from_millis(200));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("is a worker running?"), "{err}");
    assert_eq!(board.queued().unwrap(), 3);
    assert_eq!(board.len().unwrap(), 0);

    let worker = board.worker().spawn().unwrap();
    board.flush().unwrap();
    assert_eq!(board.score("c").unwrap(), Some(2));
    assert_eq!(board.len().unwrap(), 3);
    worker.stop().unwrap();
}

/// A flush waits only for what was enqueued before it: updates arriving
/// during the flush do not keep it waiting.
fn flush_does_not_wait_for_later_updates<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..1_000)).unwrap();
    board.enqueue("first", 1).unwrap();
    let worker = board.worker().batch_size(10).spawn().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                board
                    .enqueue(&format!("later-{}", n % 50), n % 1_000)
                    .unwrap();
                n += 1;
            }
        });
        board.flush_within(Duration::from_secs(30)).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!(board.score("first").unwrap(), Some(1));
    worker.stop().unwrap();
}

fn worker_handles_stop_on_drop_and_report_what_they_did<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100).queues(3)).unwrap();
    drop(board.worker().spawn().unwrap()); // returns: the drop stopped it
    for n in 0..10 {
        board.enqueue(&format!("p{n}"), n).unwrap();
    }
    let worker = board.worker().exit_when_idle(true).spawn().unwrap();
    let stats = worker.join().unwrap();
    assert_eq!((stats.updates, stats.busy), (10, 0));
    assert_eq!(board.len().unwrap(), 10);
    // An idle worker is woken by an enqueue, not only by its timeout.
    let worker = board
        .worker()
        .idle_timeout(Duration::from_secs(3_600))
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(50));
    board.enqueue("woken", 7).unwrap();
    // No flush here: a flush wakes the worker too.
    let deadline = Instant::now() + Duration::from_secs(20);
    while board.score("woken").unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the enqueue did not wake the worker"
        );
        thread::sleep(Duration::from_millis(5));
    }
    assert!(!worker.is_finished());
    assert_eq!(worker.stop().unwrap().updates, 1);
}

// ---------------------------------------------------------------------------
// Several workers.
// ---------------------------------------------------------------------------

/// Four workers, each on its own store handle (its own connections, as in
/// another process), drain one queue at once. Each player's updates are
/// increasing scores, so a batch applied out of order or twice after a
/// newer one would leave an older score; the workers' counts add up to
/// exactly the updates queued.
fn workers_on_four_handles_apply_every_update_once_in_order<S: Boards>() {
    const PLAYERS: usize = 200;
    const EACH: i64 = 10;
    let store = S::fresh();
    let config = RankingConfig::new(RANGE).branching(8).shards(2).queues(3);
    let board = Ranking::create(store.db(), "multi", config).unwrap();
    let mut expected = Scores::new();
    thread::scope(|s| {
        for t in 0..4 {
            let board = &board;
            s.spawn(move || {
                for n in 0..EACH {
                    for p in (t..PLAYERS).step_by(4) {
                        board
                            .enqueue(&format!("p{p}"), n * 100 + p as i64 % 100)
                            .unwrap();
                    }
                }
            });
        }
    });
    for p in 0..PLAYERS {
        expected.insert(format!("p{p}"), (EACH - 1) * 100 + p as i64 % 100);
    }
    let total = PLAYERS as u64 * EACH as u64;
    assert_eq!(board.queued().unwrap(), total);
    let counts: Vec<u64> = thread::scope(|s| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let store = &store;
                s.spawn(move || {
                    let db = store.open_another();
                    let board = Ranking::open(db.db(), "multi").unwrap();
                    board.worker().batch_size(16).drain().unwrap().updates
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    eprintln!("{}: updates per worker {counts:?}", S::NAME);
    assert_eq!(counts.iter().sum::<u64>(), total, "applied once each");
    assert_eq!(board.queued().unwrap(), 0);
    let players = expected.keys().cloned().collect();
    assert_board(&board, &expected, &players);
}

/// A flush compares the queue with sequence marks taken when it starts, so
/// a shard drained empty must not number its next update from the start
/// again (the flush would then wait for nothing, or forever).
fn sequence_numbers_survive_an_empty_queue<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100).queues(2)).unwrap();
    for n in 0..10 {
        board.enqueue(&format!("p{n}"), n).unwrap();
    }
    assert_eq!(board.worker().drain().unwrap().updates, 10);
    assert_eq!(board.queued().unwrap(), 0);
    board.enqueue("p1", 50).unwrap();
    board.enqueue("late", 60).unwrap();
    // Queued after the drain: a flush without a worker times out with
    // exactly these two behind its marks.
    match board.flush_within(Duration::from_millis(50)) {
        Err(Error::FlushTimeout { remaining: 2, .. }) => {}
        other => panic!("{other:?}"),
    }
    let worker = board.worker().spawn().unwrap();
    board.flush().unwrap();
    assert_eq!(board.score("p1").unwrap(), Some(50));
    assert_eq!(board.score("late").unwrap(), Some(60));
    assert_eq!(worker.stop().unwrap().updates, 2);
    board.check_integrity().unwrap();
}

/// Item 12 of issue 12: queued rows the board refuses (a score outside its
/// range, an empty player name), written behind the store's back as a hand
/// edit or damage would, used to stop every worker for good at the first
/// of them with `ScoreOutOfRange` or `InvalidName`, and that queue shard
/// stayed blocked. Before the fix this failed at the flush on every store:
/// `FlushTimeout { remaining: 26, .. }` (the worker had stopped with
/// `ScoreOutOfRange { score: 1000 }`). Now the worker moves them to the dead
/// letters, in the transaction that drains the rows around them, and the
/// rest drains, rows behind them in the same shard included.
fn a_queued_row_the_board_refuses_is_set_aside_and_the_rest_drains<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100).queues(2)).unwrap();
    let good: Vec<String> = (0..20).map(|i| format!("good-{i}")).collect();
    for (i, player) in good.iter().enumerate() {
        board.enqueue(player, i as i64).unwrap();
    }
    board.enqueue("bad-score", 5).unwrap();
    board.enqueue("bad-name", 6).unwrap();
    for (i, player) in good.iter().enumerate() {
        board.enqueue(player, 50 + i as i64).unwrap();
    }
    let edits = [
        "UPDATE autoshard_rank_queue SET score = 1000 WHERE player = 'bad-score'",
        "UPDATE autoshard_rank_queue SET player = '' WHERE player = 'bad-name'",
    ];
    for sql in edits {
        assert_eq!(store.execute_queue(sql), 1, "{sql}");
    }
    let worker = board.worker().batch_size(8).spawn().unwrap();
    board.flush_within(Duration::from_secs(30)).unwrap();
    let stats = worker.stop().unwrap();
    assert_eq!((stats.updates, stats.dead_letters), (40, 2), "{stats:?}");
    assert_eq!(board.queued().unwrap(), 0);
    for (i, player) in good.iter().enumerate() {
        assert_eq!(board.score(player).unwrap(), Some(50 + i as i64));
    }
    assert_eq!(board.len().unwrap(), 20);
    board.check_integrity().unwrap();

    let letters = board.dead_letters().unwrap();
    let found = |player: &str| {
        let letter = letters.iter().find(|l| l.player == player);
        letter.unwrap_or_else(|| panic!("{player:?} not in {letters:?}"))
    };
    let (score, name) = (found("bad-score"), found(""));
    assert_eq!(letters.len(), 2, "{letters:?}");
    assert_eq!(score.score, Some(1000));
    assert!(
        score.reason.contains("outside the board's range 0..100"),
        "{score:?}"
    );
    assert_eq!(name.score, Some(6));
    assert!(name.reason.contains("1 to 256 bytes"), "{name:?}");
    assert!(score.queue < 2 && name.queue < 2 && score.id != name.id);

    // Set right by hand: the corrected update queued, the letter deleted.
    board.enqueue("bad-score", 99).unwrap();
    assert!(board.delete_dead_letter(score.id).unwrap());
    assert!(!board.delete_dead_letter(score.id).unwrap());
    assert_eq!(board.worker().drain().unwrap().updates, 1);
    assert_eq!(board.score("bad-score").unwrap(), Some(99));
    assert_eq!(board.dead_letters().unwrap(), std::slice::from_ref(name));
    board.check_integrity().unwrap();
}

// ---------------------------------------------------------------------------
// A PostgreSQL worker killed with SIGKILL mid-batch.
// ---------------------------------------------------------------------------

#[cfg(feature = "postgres")]
mod pg_crash {
    use super::child::Child;
    use super::oracle::apply_as;
    use super::*;
    use std::collections::BTreeMap;
    use std::io::Write;
    use std::process::Command;

    const ENV_SCHEMA: &str = "AUTOSHARD_RQPG_SCHEMA";
    const ENV_SPLIT: &str = "AUTOSHARD_RQPG_SPLIT";
    const BOARD: &str = "crash";
    const KILLS: u32 = 20;
    const PLAYERS: usize = 300;
    const UPDATES: usize = 240;
    const BATCH: usize = 12;

    /// `(queue shard, seq) -> (player, score)`.
    type Rows = BTreeMap<(i32, i64), (String, Option<i64>)>;

    fn say(line: &str) {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").expect("parent closed the pipe");
        out.flush().expect("parent closed the pipe");
    }

    /// The child's entry point: drains the board's queue with small batches
    /// until it is killed (or the queue is empty); with `ENV_SPLIT`, as the
    /// buggy worker of the control does. Without the parent's environment
    /// it returns.
    #[test]
    #[ignore = "the PostgreSQL crash test runs it as a child process"]
    fn pg_worker_child() {
        let Ok(schema) = std::env::var(ENV_SCHEMA) else {
            return;
        };
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            report(info);
            std::process::abort();
        }));
        say(""); // end the harness's `test ... ` line
        let db = autoshard::Postgres::builder(&stores::pg::tagged_url(&child_tag(&schema)))
            .schema(&schema)
            .open()
            .unwrap();
        let board = Ranking::open(&db, BOARD).unwrap();
        board.queued().unwrap(); // connected, tables known
        say("ready");
        let started = Instant::now();
        let updates = if std::env::var_os(ENV_SPLIT).is_some() {
            split_worker(&board, &schema)
        } else {
            board.worker().batch_size(BATCH).drain().unwrap().updates
        };
        say(&format!(
            "drained {updates} in {}",
            started.elapsed().as_micros()
        ));
    }

    /// The bug the crash test must catch: a worker that applies a batch and
    /// deletes it from the queue in a second transaction.
    fn split_worker(board: &Ranking, schema: &str) -> u64 {
        let mut client = ::postgres::Client::connect(
            &stores::pg::tagged_url(&child_tag(schema)),
            ::postgres::NoTls,
        )
        .unwrap();
        let queue = format!("\"{schema}\".autoshard_rank_queue");
        let mut applied = 0;
        loop {
            let rows = client
                .query(
                    &format!(
                        "SELECT queue, seq, player, score FROM {queue} \
                         ORDER BY queue, seq LIMIT $1"
                    ),
                    &[&(BATCH as i64)],
                )
                .unwrap();
            if rows.is_empty() {
                return applied;
            }
            for row in &rows {
                write(board, false, row.get(2), row.get(3));
            }
            for row in &rows {
                let (q, seq): (i32, i64) = (row.get(0), row.get(1));
                client
                    .execute(
                        &format!("DELETE FROM {queue} WHERE queue = $1 AND seq = $2"),
                        &[&q, &seq],
                    )
                    .unwrap();
            }
            applied += rows.len() as u64;
        }
    }

    /// The queue, every player's score and the applied-through marks, read
    /// in one snapshot: a killed worker's transaction ends when its server
    /// process notices, and may still commit if its `COMMIT` was sent.
    fn snapshot(
        client: &mut ::postgres::Client,
        schema: &str,
    ) -> (Rows, Scores, BTreeMap<i32, i64>) {
        let mut tx = client
            .build_transaction()
            .isolation_level(::postgres::IsolationLevel::RepeatableRead)
            .start()
            .unwrap();
        let rows = tx
            .query(
                &format!(
                    "SELECT q.queue, q.seq, q.player, q.score \
                     FROM \"{schema}\".autoshard_rank_queue q \
                     JOIN \"{schema}\".autoshard_rank_boards b ON b.id = q.board \
                     WHERE b.name = $1"
                ),
                &[&BOARD],
            )
            .unwrap();
        let queue = rows
            .iter()
            .map(|r| ((r.get(0), r.get(1)), (r.get(2), r.get(3))))
            .collect();
        let rows = tx
            .query(
                &format!(
                    "SELECT p.player, p.score FROM \"{schema}\".autoshard_rank_players p \
                     JOIN \"{schema}\".autoshard_rank_boards b ON b.id = p.board \
                     WHERE b.name = $1"
                ),
                &[&BOARD],
            )
            .unwrap();
        let scores = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let rows = tx
            .query(
                &format!(
                    "SELECT a.queue, a.seq FROM \"{schema}\".autoshard_rank_applied a \
                     JOIN \"{schema}\".autoshard_rank_boards b ON b.id = a.board \
                     WHERE b.name = $1"
                ),
                &[&BOARD],
            )
            .unwrap();
        let marks = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        tx.commit().unwrap();
        (queue, scores, marks)
    }

    /// The tag of the child's sessions.
    fn child_tag(schema: &str) -> String {
        format!("rqpg_{schema}")
    }

    fn spawn(schema: &str, split: bool) -> Child {
        let mut command = Command::new(std::env::current_exe().unwrap());
        if split {
            command.env(ENV_SPLIT, "1");
        }
        Child::spawn(
            command
                .args(["--exact", "pg_crash::pg_worker_child", "--ignored"])
                .args(["--nocapture", "--test-threads=1"])
                .env(ENV_SCHEMA, schema),
        )
    }

    /// Kills the child `delay` after it is ready (`None`: lets it finish);
    /// its output and whether the kill is what ended it.
    fn run(child: Child, delay: Option<Duration>) -> (Vec<String>, bool) {
        let run = match delay {
            Some(delay) => child.kill_after(delay),
            None => {
                child.wait_ready();
                let run = child.finish();
                assert!(run.status.success(), "{:?}", run.status);
                run
            }
        };
        let killed = run.killed();
        (run.lines, killed)
    }

    fn kill_workers(split: bool, policy: Policy, want: u32) -> Result<(u32, u32), String> {
        // Small positive increments: sums stay in range, and an update
        // applied twice or lost shows in them.
        let value = |rng: &mut SmallRng| match policy {
            Policy::Increment => rng.random_range(1..10),
            _ => rng.random_range(RANGE),
        };
        let store = <autoshard::Postgres as TestStore>::fresh();
        let schema = store.schema().to_owned();
        let config = RankingConfig::new(RANGE)
            .branching(10)
            .shards(4)
            .queues(3)
            .policy(policy);
        let board = Ranking::create(&*store, BOARD, config).unwrap();
        let seed = seed();
        let mut rng = SmallRng::seed_from_u64(seed);
        let players: Vec<String> = (0..PLAYERS).map(|i| format!("p{i}")).collect();
        let initial: Vec<(&str, i64)> = players
            .iter()
            .step_by(2)
            .map(|p| (p.as_str(), value(&mut rng)))
            .collect();
        board.set_scores(&initial).unwrap();
        let mut expected: Scores = initial.iter().map(|&(p, s)| (p.into(), s)).collect();
        let mut client = stores::pg::client();
        // Round 0 is not killed: it measures how long a drain takes, so
        // the kills can be spread over it.
        let mut drain_time: Option<Duration> = None;
        let (mut kills, mut partial) = (0, 0);
        while kills < want {
            let updates: Vec<Vec<(String, Option<i64>)>> = (0..4)
                .map(|_| {
                    (0..UPDATES / 4)
                        .map(|_| {
                            let p = players[rng.random_range(..PLAYERS)].clone();
                            (p, (rng.random_range(..10u8) != 0).then(|| value(&mut rng)))
                        })
                        .collect()
                })
                .collect();
            thread::scope(|s| {
                for chunk in &updates {
                    let board = &board;
                    s.spawn(move || {
                        for (p, score) in chunk {
                            write(board, true, p, *score);
                        }
                    });
                }
            });
            let (queued, scores, _) = snapshot(&mut client, &schema);
            assert_eq!(queued.len(), UPDATES);
            assert_eq!(scores, expected);

            let delay = drain_time.map(|t| t.mul_f64(rng.random::<f64>()));
            let (lines, killed) = run(spawn(&schema, split), delay);
            stores::pg::wait_for_sessions(&child_tag(&schema));
            let (left, scores, marks) = snapshot(&mut client, &schema);
            // Each shard: what is left is a suffix holding every row above
            // the shard's applied-through mark; the board is the board
            // before plus the rows through the marks (a worker killed
            // between its commit and its delete leaves some of those
            // queued).
            let mut after = expected.clone();
            let mut unapplied = 0;
            for shard in 0..3 {
                let all: Vec<_> = queued.iter().filter(|((q, _), _)| *q == shard).collect();
                let rest: Vec<_> = left.iter().filter(|((q, _), _)| *q == shard).collect();
                let done = all.len() - rest.len();
                if all[done..] != rest[..] {
                    return Err(format!("shard {shard} is not a suffix of what was queued"));
                }
                let mark = marks.get(&shard).copied().unwrap_or(-1);
                let applied: Vec<_> = all.iter().filter(|((_, seq), _)| *seq <= mark).collect();
                if done > applied.len() {
                    return Err(format!(
                        "shard {shard}: rows above the applied mark were deleted: the drained \
                         prefix was not applied"
                    ));
                }
                for (_, (player, score)) in applied {
                    apply_as(policy, &mut after, player, *score);
                }
                unapplied += rest.iter().filter(|((_, seq), _)| *seq > mark).count();
            }
            if scores != after {
                return Err("the board is not the board before plus the drained prefix".into());
            }
            board.check_integrity().unwrap();
            if drain_time.is_none() {
                let line = lines.iter().find_map(|l| l.strip_prefix("drained "));
                let (n, micros) = line.expect("the child reports").split_once(" in ").unwrap();
                assert_eq!(n.parse::<usize>().unwrap(), UPDATES);
                drain_time = Some(Duration::from_micros(micros.parse().unwrap()));
                eprintln!("a drain of {UPDATES} updates takes {drain_time:?}");
            } else if killed {
                kills += 1;
                if unapplied > 0 && unapplied < UPDATES {
                    partial += 1;
                }
            }

            let stats = board.worker().drain().unwrap();
            board.flush().unwrap();
            assert_eq!(stats.updates, unapplied as u64, "the rest, once each");
            assert_eq!(board.queued().unwrap(), 0);
            for (player, score) in queued.values() {
                apply_as(policy, &mut expected, player, *score);
            }
            board.check_integrity().unwrap();
            let (left, scores, _) = snapshot(&mut client, &schema);
            assert_eq!(scores, expected, "after the restarted worker drained");
            assert!(
                left.is_empty(),
                "the restarted worker's sweep deleted every row"
            );
        }
        eprintln!("{kills} kills, {partial} mid-drain");
        let all: BTreeSet<String> = players.into_iter().collect();
        assert_board(&board, &expected, &all);
        Ok((kills, partial))
    }

    /// A worker process on a PostgreSQL board with a full queue is killed
    /// with SIGKILL at a random moment of its drain, 20 times. After each
    /// kill, in one snapshot: every queue shard holds a suffix of what was
    /// queued (the worker takes oldest first) and the board is the board
    /// before plus exactly the drained prefix (a batch applied but not
    /// deleted, or deleted but not applied, fails this). Then a restarted
    /// worker drains the rest: exactly the remaining rows, the queue is
    /// empty, the tree passes `check_integrity` and equals the oracle.
    #[test]
    fn pg_worker_killed_20_times_mid_batch_applies_every_update_exactly_once() {
        let want = super::child::kills(KILLS.into()) as u32;
        let (kills, partial) = kill_workers(false, Policy::Replace, want).unwrap();
        assert!(
            partial >= kills / 2,
            "only {partial} of {kills} kills landed mid-drain"
        );
    }

    /// Issue 10's points board on PostgreSQL: the same kills on a queue of
    /// increments, where an update applied twice or lost changes a sum (a
    /// replaced score can hide it). 10 kills by default: each round is a
    /// process start and a drain over the network.
    #[test]
    fn pg_increment_worker_killed_10_times_mid_batch_adds_every_update_exactly_once() {
        let want = super::child::kills(10) as u32;
        let (kills, partial) = kill_workers(false, Policy::Increment, want).unwrap();
        assert!(
            partial >= kills / 2,
            "only {partial} of {kills} kills landed mid-drain"
        );
    }

    /// Issue 13, item 1, on PostgreSQL: a transaction holding every board
    /// table (as no apply does, but any apply needs some of them) does not
    /// hold up an enqueue, which writes only the queue's tables. The
    /// control: a direct write waits for it meanwhile.
    #[test]
    fn pg_an_enqueue_does_not_wait_for_a_board_transaction() {
        let store = <autoshard::Postgres as TestStore>::fresh();
        let board = Ranking::create(&*store, "w", RankingConfig::new(0..100)).unwrap();
        board.queued().unwrap(); // creates the queue's tables
        let mut client = stores::pg::client();
        let mut tx = client.transaction().unwrap();
        let schema = store.schema();
        tx.batch_execute(&format!(
            "LOCK TABLE \"{schema}\".autoshard_rank_nodes, \"{schema}\".autoshard_rank_players, \
             \"{schema}\".autoshard_rank_arrivals, \"{schema}\".autoshard_rank_applied \
             IN ACCESS EXCLUSIVE MODE"
        ))
        .unwrap();
        thread::scope(|s| {
            let direct = s.spawn(|| board.set_score("direct", 1));
            let started = Instant::now();
            for n in 0..20 {
                board.enqueue(&format!("p{n}"), n).unwrap();
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{:?}",
                started.elapsed()
            );
            thread::sleep(Duration::from_millis(200));
            assert!(
                !direct.is_finished(),
                "control: the direct write did not wait"
            );
            tx.commit().unwrap();
            direct.join().unwrap().unwrap();
        });
        assert_eq!(board.worker().drain().unwrap().updates, 20);
        assert_eq!(board.queued().unwrap(), 0);
    }

    /// Group commit on PostgreSQL: 8 threads enqueueing at once need fewer
    /// transactions than enqueues. A row's `xmin` is the transaction that
    /// inserted it; one transaction per call (the bug this guards against)
    /// gives every row its own.
    #[test]
    fn pg_concurrent_enqueues_share_transactions() {
        let store = <autoshard::Postgres as TestStore>::fresh();
        let board = Ranking::create(&*store, "g", RankingConfig::new(0..1_000).queues(3)).unwrap();
        let (threads, each) = (8, 50);
        let start = Barrier::new(threads);
        thread::scope(|s| {
            for t in 0..threads {
                let (board, start) = (&board, &start);
                s.spawn(move || {
                    start.wait();
                    for n in 0..each {
                        board.enqueue(&format!("p{t}-{n}"), n as i64).unwrap();
                    }
                });
            }
        });
        let enqueues = (threads * each) as i64;
        assert_eq!(board.queued().unwrap(), enqueues as u64);
        let transactions: i64 = stores::pg::client()
            .query_one(
                &format!(
                    "SELECT count(DISTINCT xmin::text) FROM \"{}\".autoshard_rank_queue",
                    store.schema()
                ),
                &[],
            )
            .unwrap()
            .get(0);
        eprintln!("{enqueues} enqueues in {transactions} transactions");
        assert!(
            transactions < enqueues * 3 / 4,
            "{transactions} transactions for {enqueues} enqueues"
        );
        assert_eq!(board.worker().drain().unwrap().updates, enqueues as u64);
    }

    /// With dead letters off, a queued update the board refuses (written
    /// behind the library's back) stops the worker with `Error::Corrupt`
    /// (before issue 12's item 12: `ScoreOutOfRange`); nothing of its batch
    /// is applied and both rows stay queued. The default worker sets it
    /// aside (`a_queued_row_the_board_refuses_is_set_aside_and_the_rest_drains`).
    #[test]
    fn pg_without_dead_letters_a_worker_stops_at_an_update_it_cannot_apply() {
        let store = <autoshard::Postgres as TestStore>::fresh();
        let board = Ranking::create(&*store, "b", RankingConfig::new(0..100)).unwrap();
        board.enqueue("good", 5).unwrap();
        stores::pg::client()
            .execute(
                &format!(
                    "INSERT INTO \"{0}\".autoshard_rank_queue (board, queue, seq, player, score) \
                     SELECT board, queue, seq + 1, 'bad', 1000 FROM \"{0}\".autoshard_rank_queue",
                    store.schema()
                ),
                &[],
            )
            .unwrap();
        let worker = board.worker().dead_letter(false).spawn().unwrap();
        let err = worker.join().unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { reason, .. } if reason.contains("score 1000")),
            "{err:?}"
        );
        assert_eq!(board.queued().unwrap(), 2);
        assert_eq!(
            board.len().unwrap(),
            0,
            "part of a failed batch was applied"
        );
    }

    /// Control: the same kills on a worker that deletes in a second
    /// transaction are caught (a batch applied but still queued).
    #[test]
    fn pg_control_a_worker_that_deletes_in_a_second_transaction_is_caught() {
        let err = kill_workers(true, Policy::Replace, KILLS)
            .expect_err("the split worker went unnoticed");
        assert!(err.contains("drained prefix"), "{err}");
    }
}

//! The board queue worker as a tokio task (feature `tokio`, issue 19 item
//! 3) on every store: `AsyncRanking::spawn_worker` applies what concurrent
//! producers queued, `flush` waits for it, `stop` ends it from its idle
//! wait at once and reports what it applied; and while the task drains a
//! backlog on a current-thread runtime (whose one worker a blocking batch
//! would freeze) the probe of `async_stores.rs` stays quiet. Its control:
//! the same drain run in place, as a thread runs it, is caught.
#![cfg(feature = "tokio")]

use crate::probe;

use autoshard::ranking::{Ranking, RankingConfig, Tie};
use autoshard::AsyncRanking;
use probe::{Probe, BLOCKED};
use std::time::{Duration, Instant};

mod urls {
    use std::sync::atomic::{AtomicU32, Ordering};

    static N: AtomicU32 = AtomicU32::new(0);

    fn unique(prefix: &str) -> String {
        let n = N.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}_{}_{n}", std::process::id())
    }

    pub fn sqlite() -> (Option<tempfile::TempDir>, String) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("workers.db").display());
        (Some(dir), url)
    }

    pub fn postgres() -> (Option<tempfile::TempDir>, String) {
        let url = autoshard_test_servers::postgres_url();
        let glue = if url.contains('?') { '&' } else { '?' };
        (None, format!("{url}{glue}schema={}", unique("aworkers")))
    }

    pub fn redis() -> (Option<tempfile::TempDir>, String) {
        let nodes = autoshard_test_servers::redis_cluster_nodes().join(",");
        (
            None,
            format!("redis-cluster://{nodes}?prefix={}", unique("aworkers")),
        )
    }
}

/// Players per test board.
const PLAYERS: usize = 400;

/// Queues `players` scores (player `p{i}` gets `i % 1000`) from 8 threads,
/// through the sync board: producers elsewhere, as in a service.
fn produce(board: &Ranking, players: usize) {
    std::thread::scope(|s| {
        for t in 0..8 {
            s.spawn(move || {
                for i in (t..players).step_by(8) {
                    board.enqueue(&format!("p{i}"), (i % 1000) as i64).unwrap();
                }
            });
        }
    });
}

/// The worker task applies every queued update, `flush` waits for it, and
/// `stop` wakes it from a wait that nothing else would end (idle timeout
/// and linger unbounded) and reports the count.
async fn applies_flushes_and_stops(url: fn() -> (Option<tempfile::TempDir>, String)) {
    let (_dir, url) = url();
    let db = autoshard::open_async(&url).await.unwrap();
    let board = AsyncRanking::create(&db, "w", RankingConfig::new(0..1_000))
        .await
        .unwrap();
    let worker = board
        .worker()
        .idle_timeout(Duration::MAX)
        .linger(Duration::MAX);
    let worker = board.spawn_worker(worker).await.unwrap();
    let sync = board.sync_board().clone();
    tokio::task::spawn_blocking(move || produce(&sync, PLAYERS))
        .await
        .unwrap();
    // Only the flush's wake-up ends the worker's linger: no timer would.
    board.flush().await.unwrap();
    assert_eq!(board.len().await.unwrap(), PLAYERS as u64);
    assert_eq!(board.queued().await.unwrap(), 0);
    let top = format!("p{}", PLAYERS - 1);
    assert_eq!(board.rank(&top, Tie::Standard).await.unwrap(), Some(1));
    assert!(!worker.is_finished(), "the task waits for more");
    let stats = worker.stop().await.unwrap();
    assert_eq!(stats.updates, PLAYERS as u64, "{stats:?}");
    assert!(stats.batches >= 1, "{stats:?}");
}

/// Players in the backlog the probe test drains. With 400 (or 16 rounds
/// of 400 updates to the same players) a batch run in place on the
/// runtime's thread went unseen on SQLite; with 8,000 the test fails on
/// every store when the task's batches run in place, which is what it
/// must catch.
const BACKLOG: usize = 8_000;

/// A backlog drained by the task while the probe runs on the same
/// current-thread runtime: no wake-up of the probe is held back.
async fn drains_without_blocking(url: fn() -> (Option<tempfile::TempDir>, String)) {
    let (_dir, url) = url();
    let db = autoshard::open_async(&url).await.unwrap();
    let board = AsyncRanking::create(&db, "b", RankingConfig::new(0..1_000))
        .await
        .unwrap();
    let sync = board.sync_board().clone();
    tokio::task::spawn_blocking(move || produce(&sync, BACKLOG))
        .await
        .unwrap();
    let probe = Probe::start();
    let worker = board.spawn_worker(board.worker()).await.unwrap();
    board.flush().await.unwrap();
    let stats = worker.stop().await.unwrap();
    let worst = probe.finish().await;
    assert_eq!(stats.updates, BACKLOG as u64, "{stats:?}");
    assert_eq!(board.len().await.unwrap(), BACKLOG as u64);
    assert!(
        !worst.blocked(),
        "the worker task blocked the runtime: {worst:?}"
    );
}

/// More flushes at once than the store has threads, while the worker
/// task's batches need those threads: every flush ends with the queue
/// applied, since a flush waits on a thread of its own. Run with the
/// flushes as jobs on the store's threads (as before), this failed with
/// `FlushTimeout { remaining: 400, waited: 5.000213148s }`: the one thread,
/// held by a waiting flush, never ran the worker's batch.
async fn flushes_leave_the_threads_to_the_worker(url: fn() -> (Option<tempfile::TempDir>, String)) {
    let (_dir, url) = url();
    let db = autoshard::AsyncStore::new(autoshard::open(&url).unwrap(), 1).unwrap();
    let board = AsyncRanking::create(&db, "f", RankingConfig::new(0..1_000))
        .await
        .unwrap();
    let sync = board.sync_board().clone();
    tokio::task::spawn_blocking(move || produce(&sync, PLAYERS))
        .await
        .unwrap();
    // The flushes wait first, so the worker's batches come after them.
    let flushes: Vec<_> = (0..4)
        .map(|_| {
            let board = board.clone();
            tokio::spawn(async move { board.flush_within(Duration::from_secs(5)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let worker = board.spawn_worker(board.worker()).await.unwrap();
    for flush in flushes {
        flush.await.unwrap().unwrap();
    }
    assert_eq!(board.len().await.unwrap(), PLAYERS as u64);
    worker.stop().await.unwrap();
}

macro_rules! stores {
    ($($store:ident),*) => {$(
        mod $store {
            #[tokio::test(flavor = "current_thread")]
            async fn worker_task_applies_flushes_and_stops() {
                super::applies_flushes_and_stops(super::urls::$store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn worker_task_applies_flushes_and_stops_multi_thread() {
                super::applies_flushes_and_stops(super::urls::$store).await;
            }

            #[tokio::test(flavor = "current_thread")]
            async fn worker_task_drains_a_backlog_without_blocking() {
                super::drains_without_blocking(super::urls::$store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn more_flushes_than_threads_leave_them_to_the_worker() {
                super::flushes_leave_the_threads_to_the_worker(super::urls::$store).await;
            }
        }
    )*};
}

stores!(sqlite, postgres, redis);

/// The probe's control: the same backlog drained by the worker's loop run
/// in place (`Worker::drain`, as on a thread) on the runtime's only thread
/// holds the probe back, which the check above would refuse.
#[tokio::test(flavor = "current_thread")]
async fn probe_control_a_drain_on_the_runtime_thread_is_caught() {
    let (_dir, url) = urls::sqlite();
    let db = autoshard::open_async(&url).await.unwrap();
    let board = AsyncRanking::create(&db, "c", RankingConfig::new(0..1_000))
        .await
        .unwrap();
    let sync = board.sync_board().clone();
    // Bounded: backlogs of BACKLOG, 2 × BACKLOG, ... distinct players
    // (queued off the runtime's thread; updates to the same players would
    // be coalesced into a short batch, which once let the control pass
    // with a 53 ms drain), each drained in place, until one drain took
    // 10 × BLOCKED.
    let probe = Probe::start();
    let mut drained = Duration::ZERO;
    for round in 0..6 {
        let backlog = sync.clone();
        tokio::task::spawn_blocking(move || produce(&backlog, BACKLOG * (round + 1)))
            .await
            .unwrap();
        tokio::task::yield_now().await; // the probe is asleep now
        let started = Instant::now();
        sync.worker().drain().unwrap();
        drained = started.elapsed();
        if drained > 10 * BLOCKED {
            break;
        }
    }
    let worst = probe.finish().await;
    assert!(
        worst.blocked(),
        "the probe missed {drained:?} of drains in place: {worst:?}"
    );
}

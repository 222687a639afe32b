//! The board queue worker as a tokio task (feature `tokio`, issue 19 item
//! 3) on every store: `AsyncRanking::spawn_worker` applies what concurrent
//! producers queued, `flush` waits for it, `stop` ends it from its idle
//! wait at once and reports what it applied; and while the task drains a
//! backlog on a current-thread runtime (whose one worker a blocking batch
//! would freeze) the probe of `async_stores.rs` stays quiet. Its control:
//! the same drain run in place, as a thread runs it, is caught.
//!
//! The family queue worker likewise (`AsyncFamily::spawn_worker`, on
//! every store): a task on the runtime, no thread of its
//! own (its control: the sync `spawn` starts one), quiet under the probe
//! while it drains a backlog (its control: the family's drain in place).
#![cfg(feature = "tokio")]

use crate::probe;

use autoshard::ranking::{Family, FamilyConfig, Period, Ranking, RankingConfig, Tie, Window};
use autoshard::{AsyncFamily, AsyncRanking};
use probe::{Lateness, Probe, BLOCKED};
use std::time::{Duration, Instant};

mod urls {
    use crate::scratch::{self, Scratch};

    pub fn sqlite() -> (Scratch, String) {
        scratch::sqlite()
    }

    pub fn postgres() -> (Scratch, String) {
        scratch::postgres("aworkers")
    }

    pub fn redis() -> (Scratch, String) {
        scratch::redis("aworkers")
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
async fn applies_flushes_and_stops(url: fn() -> (crate::scratch::Scratch, String)) {
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
async fn drains_without_blocking(url: fn() -> (crate::scratch::Scratch, String)) {
    probe::assert_unblocked("the worker task", || drain_probed(url)).await;
}

async fn drain_probed(url: fn() -> (crate::scratch::Scratch, String)) -> Lateness {
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
    worst
}

/// More flushes at once than the store has threads, while the worker
/// task's batches need those threads: every flush ends with the queue
/// applied, since a flush waits off the store's threads. Run with the
/// flushes as jobs on the store's threads (as before), this failed with
/// `FlushTimeout { remaining: 400, waited: 5.000213148s }`: the one thread,
/// held by a waiting flush, never ran the worker's batch.
async fn flushes_leave_the_threads_to_the_worker(url: fn() -> (crate::scratch::Scratch, String)) {
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

/// The process's threads now.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// 256 flushes waiting at once, with no worker yet, hold no thread each
/// (a flush used to wait on a thread of its own: 256 more threads, which
/// this check refuses); once a worker task runs, every one of them ends
/// with the queue applied. Other tests of the binary start and end
/// threads meanwhile: the fewest threads seen over five looks, against a
/// margin of 64.
async fn waiting_flushes_hold_no_thread(url: fn() -> (crate::scratch::Scratch, String)) {
    let (_dir, url) = url();
    let db = autoshard::open_async(&url).await.unwrap();
    let board = AsyncRanking::create(&db, "w", RankingConfig::new(0..1_000))
        .await
        .unwrap();
    let sync = board.sync_board().clone();
    tokio::task::spawn_blocking(move || produce(&sync, 400))
        .await
        .unwrap();
    let before = threads();
    let flushes: Vec<_> = (0..256)
        .map(|_| {
            let board = board.clone();
            tokio::spawn(async move { board.flush_within(Duration::from_secs(30)).await })
        })
        .collect();
    let mut fewest = usize::MAX;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        fewest = fewest.min(threads());
    }
    assert!(
        fewest < before + 64,
        "256 waiting flushes took {} threads",
        fewest.saturating_sub(before)
    );
    assert!(
        flushes.iter().all(|f| !f.is_finished()),
        "nothing applied yet"
    );
    let worker = board.spawn_worker(board.worker()).await.unwrap();
    for flush in flushes {
        flush.await.unwrap().unwrap();
    }
    assert_eq!(board.len().await.unwrap(), 400);
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

            #[tokio::test(flavor = "current_thread")]
            async fn waiting_flushes_hold_no_thread() {
                super::waiting_flushes_hold_no_thread(super::urls::$store).await;
            }
        }
    )*};
}

stores!(sqlite, postgres, redis);

/// A family of one all-time board, as the family tests use it.
async fn family(db: &autoshard::AsyncStore, name: &str) -> AsyncFamily {
    let config = FamilyConfig::new(RankingConfig::new(0..1_000)).window(Window::AllTime);
    AsyncFamily::create(db, name, config).await.unwrap()
}

/// Queues `players` submissions (player `p{i}` scores `i % 1000`) from 8
/// threads through the sync family.
fn produce_family(family: &Family, players: usize) {
    std::thread::scope(|s| {
        for t in 0..8 {
            s.spawn(move || {
                for i in (t..players).step_by(8) {
                    let player = format!("p{i}");
                    let entry = family.submission(&player, (i % 1000) as i64);
                    entry.at(0).enqueue().unwrap();
                }
            });
        }
    });
}

/// Threads of this process named as the sync family worker names its
/// (`autoshard-family-worker-…`, cut to 15 bytes by Linux).
fn family_worker_threads() -> usize {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == "autoshard-famil")
        .count()
}

/// Held by each family test: the control starts a family worker thread,
/// which the others must not count.
/// (tokio's: the guard is held across awaits; each test has a runtime of
/// its own, which tokio's mutex does not mind.)
static FAMILY_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Until the family's queue is empty (bounded: 60 s of 10 ms polls).
async fn family_drained(family: &AsyncFamily) {
    for _ in 0..6_000 {
        if family.queued().await.unwrap() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the family's queue never drained");
}

/// The family worker task applies a backlog while the probe runs on the
/// same current-thread runtime, costs no thread of its own, and `stop`
/// wakes it from an idle wait nothing else would end.
async fn family_task_drains_without_blocking(url: fn() -> (crate::scratch::Scratch, String)) {
    let _alone = FAMILY_TESTS.lock().await;
    probe::assert_unblocked("the family task", || family_drain_probed(url)).await;
}

async fn family_drain_probed(url: fn() -> (crate::scratch::Scratch, String)) -> Lateness {
    let (_dir, url) = url();
    let db = autoshard::open_async(&url).await.unwrap();
    let family = family(&db, "fam").await;
    let sync = family.sync_family().clone();
    tokio::task::spawn_blocking(move || produce_family(&sync, FAMILY_BACKLOG))
        .await
        .unwrap();
    let probe = Probe::start();
    let worker = family.worker().idle_timeout(Duration::MAX);
    let worker = family.spawn_worker(worker).await.unwrap();
    assert_eq!(
        family_worker_threads(),
        0,
        "the task runs on no thread of its own"
    );
    family_drained(&family).await;
    let worst = probe.finish().await;
    assert!(!worker.is_finished(), "the task waits for more");
    let stats = worker.stop().await.unwrap();
    assert_eq!(stats.submissions, FAMILY_BACKLOG as u64, "{stats:?}");
    let board = family.board(Window::AllTime, Period::At(0), None).await;
    let board = board.unwrap().expect("submitted");
    assert_eq!(board.len().await.unwrap(), FAMILY_BACKLOG as u64);
    worst
}

/// Submissions in the family probe test's backlog: one family batch
/// writes the players board and the member, so fewer than the board's.
const FAMILY_BACKLOG: usize = 2_000;

mod family_stores {
    #[tokio::test(flavor = "current_thread")]
    async fn sqlite_family_worker_task_drains_without_blocking() {
        super::family_task_drains_without_blocking(super::urls::sqlite).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn postgres_family_worker_task_drains_without_blocking() {
        super::family_task_drains_without_blocking(super::urls::postgres).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn redis_family_worker_task_drains_without_blocking() {
        super::family_task_drains_without_blocking(super::urls::redis).await;
    }
}

/// The controls of the family test: the sync `spawn` does start a thread
/// the check above would count, and the family's drain run in place on
/// the runtime's only thread holds the probe back.
#[tokio::test(flavor = "current_thread")]
async fn family_controls_a_thread_and_a_drain_in_place_are_caught() {
    let _alone = FAMILY_TESTS.lock().await;
    let (_dir, url) = urls::sqlite();
    let db = autoshard::open_async(&url).await.unwrap();
    let family = family(&db, "fc").await;
    let sync = family.sync_family().clone();
    let thread = sync.worker().spawn().unwrap();
    // The thread names itself once it runs: a bounded wait for that.
    let mut seen = 0;
    for _ in 0..1_000 {
        seen = family_worker_threads();
        if seen == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(seen, 1, "the sync worker's thread is seen");
    thread.stop().unwrap();
    tokio::task::spawn_blocking(move || produce_family(&sync, FAMILY_BACKLOG))
        .await
        .unwrap();
    let probe = Probe::start();
    tokio::task::yield_now().await; // the probe is asleep now
    let started = Instant::now();
    let stats = family.sync_family().worker().drain().unwrap();
    let drained = started.elapsed();
    let worst = probe.finish().await;
    assert_eq!(stats.submissions, FAMILY_BACKLOG as u64);
    assert!(
        worst.blocked(),
        "the probe missed {drained:?} of a family drain in place: {worst:?}"
    );
}

/// The probe's control: the same backlog drained by the worker's loop run
/// in place (`BoardWorker::drain`, as on a thread) on the runtime's only thread
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

//! The sync API never panics inside a tokio runtime (issue 19 item 2), on
//! every store and both flavors: SQLite and Redis Cluster work there
//! (blocking the thread, as documented); PostgreSQL works on a
//! multi-thread runtime and in `spawn_blocking`, and on a current-thread
//! runtime's own thread returns `Error::InsideRuntime`, which names the
//! async API. Before the fix each PostgreSQL case here panicked
//! ("Cannot start a runtime from within a runtime", from `postgres`),
//! also when the last handle was dropped.
#![cfg(feature = "tokio")]

use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::{Error, Pending, Shardable, Store};

use crate::scratch::{self, Scratch};

#[derive(Shardable)]
struct Counter {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 4, fold = autoshard::fold::checked_sum)]
    hits: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Counter {
    #[autoshard::shard_method]
    fn hit(&mut self) {
        self.hits += 1;
    }
}

/// A fresh schema, dropped when the returned guard is.
fn pg() -> (Scratch, String) {
    scratch::postgres("sync_rt")
}

fn redis_url() -> (Scratch, String) {
    scratch::redis("sync_rt")
}

/// Sync calls on whatever thread this runs on: open, write, read, a board,
/// and the drop of the last handle.
fn sync_calls(url: &str) -> autoshard::Result<()> {
    let db = autoshard::open(url)?;
    db.insert(&Counter {
        id: 1,
        hits: 0,
        pending: Pending::default(),
    })?;
    let mut c: Counter = db.load(&1)?.expect("inserted");
    c.hit();
    db.save(&mut c)?;
    assert_eq!(db.load::<Counter>(&1)?.unwrap().hits, 1);
    let board = Ranking::create(&db, "sync-in-runtime", RankingConfig::new(0..100))?;
    board.submit("ann", 5)?;
    assert_eq!(board.len()?, 1);
    drop(board);
    drop(db);
    Ok(())
}

#[tokio::test(flavor = "current_thread")]
async fn sqlite_current_thread_works() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("rt.db").display());
    sync_calls(&url).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_multi_thread_works() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("rt.db").display());
    sync_calls(&url).unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn redis_current_thread_works() {
    sync_calls(&redis_url().1).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_multi_thread_works() {
    sync_calls(&redis_url().1).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_multi_thread_works() {
    let (_a, a) = pg();
    sync_calls(&a).unwrap();
    // In a spawned task too, and in spawn_blocking.
    let (_b, b) = pg();
    tokio::spawn(async move { sync_calls(&b) })
        .await
        .unwrap()
        .unwrap();
    let (_c, c) = pg();
    tokio::task::spawn_blocking(move || sync_calls(&c))
        .await
        .unwrap()
        .unwrap();
    // In a LocalSet tasks cannot move off the thread: refused, typed.
    let local = tokio::task::LocalSet::new();
    let (_d, d) = pg();
    let refused = local.run_until(async { autoshard::open(&d) }).await;
    assert!(matches!(refused, Err(Error::InsideRuntime { .. })));
}

#[tokio::test(flavor = "current_thread")]
async fn postgres_current_thread_is_a_typed_error_and_spawn_blocking_works() {
    let (_a, url) = pg();
    match autoshard::open(&url) {
        Err(e @ Error::InsideRuntime { store: "postgres" }) => {
            assert!(e.to_string().contains("open_async"), "{e}");
            assert!(!e.is_retryable());
        }
        other => panic!("expected InsideRuntime, got {other:?}"),
    }
    // The way the error names works.
    tokio::task::spawn_blocking(move || sync_calls(&url))
        .await
        .unwrap()
        .unwrap();
    // A store opened off the runtime's thread: its calls on that thread are
    // refused the same way, and dropping it there does not panic.
    let (_b, url) = pg();
    let db = tokio::task::spawn_blocking(move || autoshard::open(&url))
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        db.load::<Counter>(&1),
        Err(Error::InsideRuntime { .. })
    ));
    drop(db);
    // And the async API works on this flavor.
    let (_c, url) = pg();
    let db = autoshard::open_async(&url).await.unwrap();
    assert!(db.load::<Counter>(&1).await.unwrap().is_none());
}

/// Which refusal [`refusal_child`] makes, when the parent runs it.
const REFUSAL_CHILD: &str = "AUTOSHARD_REFUSAL_CHILD";

/// A refused sync call prints nothing: tokio's `block_in_place` panics
/// where it cannot run and the store turns that panic into
/// `Error::InsideRuntime`, so without the store's quiet hook every refusal
/// also printed "thread … panicked at … can call blocking only when running
/// on the multi-threaded runtime". Checked in a child process that does not
/// capture output, where the default hook writes to stderr; the control is
/// the same `block_in_place` caught without the store, which must print.
#[test]
fn a_refused_sync_call_prints_no_panic() {
    let (_schema, url) = pg();
    let stderr_of = |mode: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "async_sync_api::refusal_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(REFUSAL_CHILD, mode)
            .env("AUTOSHARD_PG_URL", &url)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "child {mode} failed: {stderr}");
        stderr
    };
    let control = stderr_of("bare");
    assert!(
        control.contains("panicked"),
        "the control must print tokio's panic, or this test checks nothing: {control:?}"
    );
    let refused = stderr_of("store");
    assert!(!refused.contains("panicked"), "{refused}");
}

/// The child of [`a_refused_sync_call_prints_no_panic`]; it does nothing
/// when run on its own.
#[test]
#[ignore = "run by a_refused_sync_call_prints_no_panic"]
fn refusal_child() {
    let Ok(mode) = std::env::var(REFUSAL_CHILD) else {
        return;
    };
    let url = std::env::var("AUTOSHARD_PG_URL").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async move {
        if mode == "bare" {
            let caught = std::panic::catch_unwind(|| tokio::task::block_in_place(|| ()));
            assert!(caught.is_err());
        } else {
            assert!(matches!(
                autoshard::open(&url),
                Err(Error::InsideRuntime { .. })
            ));
            // Twice: the hook is installed once and stays quiet each time.
            assert!(matches!(
                autoshard::open(&url),
                Err(Error::InsideRuntime { .. })
            ));
        }
    });
}

//! `async-calls` (issue 19 item 1): the same calls through the async API
//! (`autoshard::open_async`, the sync core on the store's threads) and
//! through the sync API, in one run, on SQLite (a file) and PostgreSQL
//! (`AUTOSHARD_PG_URL`, default `postgres://postgres@127.0.0.1:5432/test`).
//!
//! Per store and call: sequential latency (one caller, a current-thread
//! runtime for the async side), then 8 concurrent callers (8 threads for
//! sync, 8 tasks on a 2-worker runtime for async), with the ratio async /
//! sync. Also the cost the PostgreSQL store's runtime check
//! (`Handle::try_current`, issue 19 item 2) adds to every sync transaction
//! outside a runtime, next to one sync save.

use crate::stats::us;
use autoshard::{AsyncStore, Pending, Shardable, Store};
use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Shardable)]
struct Counter {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 16, fold = autoshard::fold::checked_sum)]
    hits: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

const CONCURRENT: usize = 8;

pub fn run(dir: &Path, quick: bool) -> Result<(), Box<dyn Error>> {
    let n = if quick { 300 } else { 2_000 };
    println!("## async-calls: async API vs sync API, in-process\n");
    println!(
        "{n} calls per row (concurrent: {CONCURRENT} callers x {}); mean latency per call; \
         save_delta adds 1 to one of 16 shards, load folds the 16.\n",
        n / CONCURRENT
    );
    println!("| store | call | sync | async | async / sync |");
    println!("|---|---|---|---|---|");
    let sqlite = format!("sqlite://{}", dir.join("async-calls.db").display());
    let pg_url = crate::contention::url();
    let glue = if pg_url.contains('?') { '&' } else { '?' };
    let schema = format!("bench_async_{}", std::process::id());
    let pg = format!("{pg_url}{glue}schema={schema}");
    for (name, url) in [("SQLite", sqlite.as_str()), ("PostgreSQL", pg.as_str())] {
        eprintln!("async-calls: {name}");
        let sync = autoshard::open(url)?;
        sync.insert(&Counter {
            id: 1,
            hits: 0,
            pending: Pending::default(),
        })?;
        let rt1 = tokio::runtime::Builder::new_current_thread().build()?;
        let db = rt1.block_on(autoshard::open_async(url))?;
        row(
            name,
            "save_delta",
            time_sync(n, 1, &|| {
                sync.save_delta::<Counter, _>(&1, "hits", &1).map(drop)
            }),
            {
                let db = db.clone();
                time_async(
                    &rt1,
                    n,
                    1,
                    move |db: AsyncStore| async move {
                        db.save_delta::<Counter, _>(&1, "hits", &1).await.map(drop)
                    },
                    db,
                )
            },
        );
        row(
            name,
            "load",
            time_sync(n, 1, &|| sync.load::<Counter>(&1).map(drop)),
            {
                time_async(
                    &rt1,
                    n,
                    1,
                    |db: AsyncStore| async move { db.load::<Counter>(&1).await.map(drop) },
                    db.clone(),
                )
            },
        );
        let rt2 = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()?;
        row(
            name,
            "save_delta x8",
            time_sync(n, CONCURRENT, &|| {
                sync.save_delta::<Counter, _>(&1, "hits", &1).map(drop)
            }),
            {
                time_async(
                    &rt2,
                    n,
                    CONCURRENT,
                    |db: AsyncStore| async move {
                        db.save_delta::<Counter, _>(&1, "hits", &1).await.map(drop)
                    },
                    db.clone(),
                )
            },
        );
        let total = sync.load::<Counter>(&1)?.map(|c| c.hits).unwrap_or(-1);
        let expected = 2 * n as i64 + (n / CONCURRENT * CONCURRENT) as i64 * 2;
        assert_eq!(total, expected, "every delta counted once");
        drop(db);
        drop(rt2);
        drop(rt1);
        if name == "PostgreSQL" {
            let check = runtime_check_ns();
            let save = time_sync(n, 1, &|| {
                sync.save_delta::<Counter, _>(&1, "hits", &1).map(drop)
            });
            println!(
                "\nThe PostgreSQL store's runtime check outside a runtime: {:.1} ns per \
                 transaction, {:.5}% of one sync `save_delta` ({}).",
                check,
                check / save.as_nanos() as f64 * 100.0,
                us(save.as_nanos() as f64)
            );
            let mut client = postgres::Client::connect(&pg_url, postgres::NoTls)?;
            client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))?;
        }
    }
    println!();
    Ok(())
}

fn row(store: &str, call: &str, sync: Duration, asynch: Duration) {
    println!(
        "| {store} | {call} | {} | {} | {:.2} |",
        us(sync.as_nanos() as f64),
        us(asynch.as_nanos() as f64),
        asynch.as_secs_f64() / sync.as_secs_f64()
    );
}

/// Mean wall time per call: `n` calls split over `callers` threads.
fn time_sync(
    n: usize,
    callers: usize,
    call: &(dyn Fn() -> autoshard::Result<()> + Sync),
) -> Duration {
    let per = n / callers;
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..callers {
            s.spawn(|| {
                for _ in 0..per {
                    call().expect("sync call");
                }
            });
        }
    });
    started.elapsed() / (per * callers) as u32
}

/// Mean wall time per call: `n` calls split over `callers` tasks.
fn time_async<F, Fut>(
    rt: &tokio::runtime::Runtime,
    n: usize,
    callers: usize,
    call: F,
    db: AsyncStore,
) -> Duration
where
    F: Fn(AsyncStore) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = autoshard::Result<()>> + Send,
{
    let per = n / callers;
    rt.block_on(async move {
        let started = Instant::now();
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let (call, db) = (call.clone(), db.clone());
                tokio::spawn(async move {
                    for _ in 0..per {
                        call(db.clone()).await.expect("async call");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("no panic");
        }
        started.elapsed() / (per * callers) as u32
    })
}

/// What `Handle::try_current()` costs outside any runtime, in ns.
fn runtime_check_ns() -> f64 {
    let n = 1_000_000u32;
    let started = Instant::now();
    let mut inside = 0u32;
    for _ in 0..n {
        inside += u32::from(std::hint::black_box(
            tokio::runtime::Handle::try_current().is_ok(),
        ));
    }
    assert_eq!(inside, 0);
    started.elapsed().as_nanos() as f64 / f64::from(n)
}

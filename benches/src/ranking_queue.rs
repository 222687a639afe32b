//! Durable queued updates under load (issue 13): sustained updates/s with
//! 8 and 64 producers, `enqueue` acknowledgement latency, and freshness
//! (acknowledged → visible to reads), on SQLite or PostgreSQL.
//!
//! Only public API, so the same file builds against an older autoshard:
//! BENCHMARKS.md §5 ("Decoupled queue") runs this file built on the code
//! before and after a change, alternating, to compare them on one loaded
//! machine. Settings come from the environment, so both binaries take them
//! alike:
//!
//! - `AUTOSHARD_BENCH_PLAYERS`: board size (default 1,000,000 on SQLite,
//!   100,000 on PostgreSQL; `--quick`: 50,000).
//! - `AUTOSHARD_BENCH_TEMPLATE`: a loaded SQLite board file to copy for each
//!   cell (made there if missing), so runs of several binaries skip the load.
//! - `AUTOSHARD_BENCH_PRODUCERS` (default `8,64`), `AUTOSHARD_BENCH_BATCHES`
//!   (worker batch sizes, `default` for the library's; default `default`),
//!   `AUTOSHARD_BENCH_SLICE` (producer seconds per cell, default 10).
//! - `AUTOSHARD_BENCH_PG`: a PostgreSQL URL: the board goes to a fresh
//!   schema there instead.
//! - `AUTOSHARD_BENCH_RATE`: updates/s all producers together offer
//!   (paced; default: as fast as acknowledgements come back). Below what the
//!   worker applies, the queue stays short and freshness is the apply's
//!   latency, not the backlog's.
//! - `AUTOSHARD_BENCH_LABEL`: what the report calls this build.
//! - `AUTOSHARD_BENCH_CACHE=off`: workers without their cache (feature
//!   `worker-cache`, for a version that has `BoardWorker::cache`).

use crate::machine::load_average;
use crate::stats::{thousands, us, Rng, Samples};
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::Sqlite;
use std::error::Error;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const SCORES: std::ops::Range<i64> = 0..1_000_000;
const BOARD: &str = "bench";
const LOAD_BATCH: usize = 20_000;
/// Players only the freshness probe writes, at the end of the range.
const PROBES: usize = 1_000;

pub(crate) fn player(n: usize) -> String {
    format!("player-{n:07}")
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn list(name: &str, default: &str) -> Vec<String> {
    env(name)
        .unwrap_or_else(|| default.into())
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect()
}

/// Where the board lives.
enum Target {
    Sqlite { template: std::path::PathBuf },
    Postgres { db: autoshard::Postgres },
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let pg = env("AUTOSHARD_BENCH_PG");
    let players: usize = match env("AUTOSHARD_BENCH_PLAYERS") {
        Some(n) => n.parse()?,
        None if quick => 50_000,
        None if pg.is_some() => 100_000,
        None => 1_000_000,
    };
    let slice = Duration::from_secs(env("AUTOSHARD_BENCH_SLICE").map_or(Ok(10), |s| s.parse())?);
    let label = env("AUTOSHARD_BENCH_LABEL").unwrap_or_else(|| "this build".into());
    let rate: Option<f64> = env("AUTOSHARD_BENCH_RATE").map(|r| r.parse()).transpose()?;
    let config = RankingConfig::new(SCORES).branching(100).node_shards(8);
    let started = Instant::now();
    let target = match &pg {
        Some(url) => {
            let schema = format!("bench_rq_{}", std::process::id());
            let db = autoshard::Postgres::builder(url).schema(&schema).open()?;
            let board = Ranking::create(&db, BOARD, config)?;
            load(&board, players)?;
            Target::Postgres { db }
        }
        None => {
            let template =
                env("AUTOSHARD_BENCH_TEMPLATE").map_or_else(|| dir.join("template.db"), Into::into);
            if !template.exists() {
                let db = Sqlite::open(&template)?;
                let board = Ranking::create(&db, BOARD, config)?;
                load(&board, players)?;
                drop((board, db));
                let raw = rusqlite::Connection::open(&template)?;
                raw.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            }
            Target::Sqlite { template }
        }
    };
    let loaded = started.elapsed();
    println!("## Queued updates under load ({label})");
    println!();
    println!(
        "{} players on {} (`RankingConfig::new(0..1_000_000).branching(100).node_shards(8)`, one \
         queue shard; set up in {:.0} s). Per cell: P producer threads `enqueue` random \
         players with random scores for {} s while one worker (`worker().batch_size(n)`, \
         other options default) applies; then `flush`. Sustained = updates ÷ time until \
         `flush` returned. A probe thread enqueues one update at a time to players no \
         producer writes and polls `score` every 0.5 ms: freshness is its acknowledgement to \
         first visibility. Load average (1, 5, 15 min) before each cell.",
        thousands(players as u64),
        if pg.is_some() {
            "PostgreSQL"
        } else {
            "SQLite (`synchronous = FULL`)"
        },
        loaded.as_secs_f64(),
        slice.as_secs(),
    );
    println!();
    println!(
        "| build | producers | batch | updates | sustained/s | ack p50 | ack p99 | fresh p50 | \
         fresh p99 | worker tx | per tx | load avg |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for producers in list("AUTOSHARD_BENCH_PRODUCERS", "8,64") {
        for batch in list("AUTOSHARD_BENCH_BATCHES", "default") {
            let p: usize = producers.parse()?;
            let b: Option<usize> = (batch != "default").then(|| batch.parse()).transpose()?;
            let load = load_average();
            eprintln!("ranking-queue: {label}, {p} producers, batch {batch}");
            let cell = match &target {
                Target::Sqlite { template } => {
                    let path = dir.join("cell.db");
                    for suffix in ["", "-wal", "-shm", "-queue", "-queue-wal", "-queue-shm"] {
                        let mut name = path.clone().into_os_string();
                        name.push(suffix);
                        let _ = std::fs::remove_file(name);
                    }
                    std::fs::copy(template, &path)?;
                    let db = Sqlite::open(&path)?;
                    cell(&Ranking::open(&db, BOARD)?, players, (p, rate), b, slice)?
                }
                Target::Postgres { db } => {
                    cell(&Ranking::open(db, BOARD)?, players, (p, rate), b, slice)?
                }
            };
            let offered = rate.map_or_else(String::new, |r| format!(" at {r:.0}/s offered"));
            println!(
                "| {label} | {p}{offered} | {batch} | {} | **{}** | {} | {} | {} | {} | {} | {:.0} | {load} |",
                thousands(cell.updates),
                thousands(cell.rate as u64),
                us(cell.acks.percentile(50.0)),
                us(cell.acks.percentile(99.0)),
                us(cell.fresh.percentile(50.0)),
                us(cell.fresh.percentile(99.0)),
                thousands(cell.batches),
                cell.updates as f64 / cell.batches.max(1) as f64,
            );
        }
    }
    println!();
    println!("Load average at the end: {}.", load_average());
    println!();
    if let Target::Postgres { db } = target {
        // The benchmarks crate has no SQL client of its own to drop it with.
        eprintln!("ranking-queue: drop schema {} when done", db.schema());
    }
    Ok(())
}

pub(crate) fn load(board: &Ranking, players: usize) -> Result<()> {
    let mut rng = Rng::new(0x5EED_1234_ABCD_0001);
    let mut names = Vec::with_capacity(LOAD_BATCH);
    for first in (0..players).step_by(LOAD_BATCH) {
        names.clear();
        names.extend((first..players.min(first + LOAD_BATCH)).map(player));
        let batch: Vec<(&str, i64)> = names
            .iter()
            .map(|name| (name.as_str(), i64::from(rng.below(SCORES.end as u32))))
            .collect();
        board.set_scores(&batch)?;
        eprintln!("ranking-queue: loaded {} of {players}", first + batch.len());
    }
    Ok(())
}

pub(crate) struct Cell {
    pub(crate) updates: u64,
    pub(crate) rate: f64,
    pub(crate) acks: Samples,
    pub(crate) fresh: Samples,
    pub(crate) batches: u64,
}

/// One cell: producers and the probe for `slice` with a worker applying,
/// then `flush` and the checks (the worker applied exactly what was
/// acknowledged; every probe's update became visible).
pub(crate) fn cell(
    board: &Ranking,
    players: usize,
    (producers, rate): (usize, Option<f64>),
    batch: Option<usize>,
    slice: Duration,
) -> Result<Cell> {
    // Each producer's time between updates, if paced.
    let pace = rate.map(|r| Duration::from_secs_f64(producers as f64 / r));
    let queued_before = board.queued()?;
    let mut worker = board.worker();
    if let Some(b) = batch {
        worker = worker.batch_size(b);
    }
    // `worker-cache`: built on a version with `BoardWorker::cache` (issue 13).
    #[cfg(feature = "worker-cache")]
    if env("AUTOSHARD_BENCH_CACHE").as_deref() == Some("off") {
        worker = worker.cache(false);
    }
    let worker = worker.spawn()?;
    let stop = AtomicBool::new(false);
    let probes = AtomicU64::new(0);
    let writable = players - PROBES;
    let start = Instant::now();
    let (acks, fresh) = std::thread::scope(|s| -> Result<(Samples, Samples)> {
        let threads: Vec<_> = (0..producers)
            .map(|t| {
                let stop = &stop;
                s.spawn(move || -> Result<Samples> {
                    let mut rng = Rng::new(0xABCD_0000 + t as u64);
                    let mut acks = Samples::default();
                    let mut due = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(pace) = pace {
                            due += pace;
                            std::thread::sleep(due.saturating_duration_since(Instant::now()));
                        }
                        let who = player(rng.below(writable as u32) as usize);
                        let score = i64::from(rng.below(SCORES.end as u32));
                        let t0 = Instant::now();
                        board.enqueue(&who, score)?;
                        acks.push(t0.elapsed());
                    }
                    Ok(acks)
                })
            })
            .collect();
        let probe = s.spawn(|| -> Result<Samples> {
            let mut fresh = Samples::default();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let who = player(writable + (n as usize % PROBES));
                // A score the player cannot hold yet: distinct per probe.
                let score = (n as i64 * 7_919 + 13) % SCORES.end;
                n += 1;
                board.enqueue(&who, score)?;
                let acked = Instant::now();
                probes.fetch_add(1, Ordering::Relaxed);
                while board.score(&who)? != Some(score) {
                    if acked.elapsed() > Duration::from_secs(600) {
                        return Err(format!("probe {who} never became visible").into());
                    }
                    std::thread::sleep(Duration::from_micros(500));
                }
                fresh.push(acked.elapsed());
            }
            Ok(fresh)
        });
        std::thread::sleep(slice);
        stop.store(true, Ordering::Relaxed);
        let mut acks = Samples::default();
        for t in threads {
            acks.append(&mut t.join().map_err(|_| "producer panicked")??);
        }
        let fresh = probe.join().map_err(|_| "probe panicked")??;
        Ok((acks, fresh))
    })?;
    board.flush_within(Duration::from_secs(3_600))?;
    let elapsed = start.elapsed();
    let stats = worker.stop()?;
    #[cfg(feature = "worker-cache")]
    println!(
        "<!-- worker cache: {} hits, {} misses -->",
        stats.cache_hits, stats.cache_misses
    );
    let updates = acks.len() as u64 + probes.load(Ordering::Relaxed);
    if stats.updates != updates + queued_before {
        return Err(format!(
            "the worker applied {} updates, {updates} were acknowledged",
            stats.updates
        )
        .into());
    }
    Ok(Cell {
        updates,
        rate: updates as f64 / elapsed.as_secs_f64(),
        acks,
        fresh,
        batches: stats.batches,
    })
}

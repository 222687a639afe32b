//! SQLite keeps up with the producers (issue 18 item 6): a 1,000,000-player
//! board (`synchronous = FULL`, one tree, one queue shard) fed by 64
//! producers, step by step, side by side in one run with Redis `ZADD` from 50
//! clients on the standalone server (127.0.0.1:6379, no persistence) and on
//! a durable anchor this bench starts itself (`appendonly yes`,
//! `appendfsync always`, a temporary data directory, port 7320 by default).
//!
//! `cargo run --release -p autoshard-benches -- sqlite-keepup`, settings
//! from the environment: `AUTOSHARD_BENCH_PLAYERS` (default 1,000,000;
//! `--quick` 50,000), `AUTOSHARD_BENCH_SLICE` (producer seconds per cell,
//! default 12), `AUTOSHARD_BENCH_TEMPLATE` (a loaded board file to copy per
//! cell, made there if missing), `AUTOSHARD_BENCH_STEPS` (which rows of the
//! step table, default all: `before,batches,cache,checkpoint`), `AUTOSHARD_BENCH_RATE`
//! (the paced cell's offered updates/s, default 50,000; `0` skips it),
//! `AUTOSHARD_BENCH_REDIS_PORT` (the durable anchor's port),
//! `AUTOSHARD_BENCH_BACKLOG` (the worker-alone table's queued updates,
//! default 200,000; `0` skips it).
//!
//! Per cell: 64 producer threads `enqueue` random players with random
//! scores for the slice while a worker applies; a probe thread enqueues one
//! update at a time to players nobody else writes and polls `score` until
//! it shows (freshness: acknowledged → visible). The measured interval is
//! the slice's last two thirds: the backlog (`queued`) is read at its start
//! and end, and the worker applied what was acknowledged in it minus the
//! backlog's growth, and the worker thread's CPU time per applied update
//! (from `/proc`: what an update costs, whatever else shares the cores).
//! "Held" means the backlog at the end is no more than at
//! the start plus a quarter second of applying: the rate is sustained.

use crate::machine::load_average;
use crate::ranking_queue::{load, player};
use crate::stats::{thousands, us, Rng, Samples};
use autoshard::ranking::{BoardWorker, Ranking, RankingConfig};
use autoshard::Sqlite;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const BOARD: &str = "bench";
const SCORES: i64 = 1_000_000;
const PRODUCERS: usize = 64;
const REDIS_CLIENTS: usize = 50;
/// Players only the probe writes, at the end of the range.
const PROBES: usize = 1_000;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// One row of the step table: what the worker and the handle do.
struct Step {
    key: &'static str,
    what: &'static str,
    /// The worker as the step configures it.
    worker: fn(BoardWorker) -> BoardWorker,
    /// `SqliteBuilder::writer_cache_size`, if the step sets it.
    writer_cache: Option<u64>,
    /// `SqliteBuilder::background_checkpoint`.
    background_checkpoint: bool,
}

/// SQLite's default page cache, which every connection had before.
const OLD_CACHE: u64 = 2_048_000;

const STEPS: &[Step] = &[
    Step {
        key: "before",
        what: "before: batches of at most 10,000, 2 MB page cache",
        worker: |w| w.batch_size(10_000).batch_bytes(usize::MAX),
        writer_cache: Some(OLD_CACHE),
        background_checkpoint: false,
    },
    Step {
        key: "batches",
        what: "1. batches take the backlog (≤ 64 MiB), 2 MB page cache",
        worker: |w| w,
        writer_cache: Some(OLD_CACHE),
        background_checkpoint: false,
    },
    Step {
        key: "cache",
        what: "3. + the writer's page cache (256 MiB bound), checkpoint in the commit",
        worker: |w| w,
        writer_cache: None,
        background_checkpoint: false,
    },
    Step {
        key: "checkpoint",
        what: "5. + the WAL checkpoint on its own thread (`background_checkpoint(true)`, opt-in)",
        worker: |w| w,
        writer_cache: None,
        background_checkpoint: true,
    },
];

/// CPU time the worker and checkpoint threads of this process have used (user + system,
/// from `/proc/self/task/*/stat`, in clock ticks of 10 ms): what an applied
/// update costs, independent of how many other processes share the cores.
fn worker_cpu() -> Duration {
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        // The checkpoint thread's work is the worker's, moved off its commit.
        if !comm.starts_with("autoshard-worke") && !comm.starts_with("autoshard-check") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the `(comm)`: state is field 3; utime, stime 14, 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        for i in [11, 12] {
            ticks += fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_millis(ticks * 10)
}

struct Cell {
    /// Acknowledged in the measured interval, per second.
    offered: f64,
    /// Applied in the measured interval, per second.
    applied: f64,
    backlog: (u64, u64),
    /// The worker's CPU time per applied update over the interval.
    cpu_per_update: Duration,
    fresh: Samples,
    acks: Samples,
    batches: u64,
    updates: u64,
}

impl Cell {
    fn held(&self) -> bool {
        self.backlog.1 as f64 <= self.backlog.0 as f64 + self.applied / 4.0
    }
}

/// A loaded board file, made once.
fn template(dir: &Path, players: usize) -> Result<PathBuf> {
    let path = env("AUTOSHARD_BENCH_TEMPLATE").map_or_else(|| dir.join("template.db"), Into::into);
    if !path.exists() {
        let db = Sqlite::open(&path)?;
        let config = RankingConfig::new(0..SCORES).branching(100).node_shards(8);
        let board = Ranking::create(&db, BOARD, config)?;
        load(&board, players)?;
        drop((board, db));
        let raw = rusqlite::Connection::open(&path)?;
        raw.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    }
    Ok(path)
}

/// A fresh copy of the template at `dir/cell.db`, opened as the step says.
fn open_cell(dir: &Path, template: &Path, step: &Step) -> Result<Sqlite> {
    let path = dir.join("cell.db");
    for suffix in ["", "-wal", "-shm", "-queue", "-queue-wal", "-queue-shm"] {
        let mut name = path.clone().into_os_string();
        name.push(suffix);
        let _ = std::fs::remove_file(name);
    }
    std::fs::copy(template, &path)?;
    let mut builder = Sqlite::builder(&path).background_checkpoint(step.background_checkpoint);
    if let Some(bytes) = step.writer_cache {
        builder = builder.writer_cache_size(bytes);
    }
    Ok(builder.open()?)
}

/// One cell: producers (paced at `rate` in all, or as fast as acks come
/// back) and the probe for `slice` while the step's worker applies; then
/// `flush` and the check that the worker applied exactly what was acked.
fn cell(
    board: &Ranking,
    players: usize,
    step: &Step,
    rate: Option<f64>,
    slice: Duration,
) -> Result<Cell> {
    let pace = rate.map(|r| Duration::from_secs_f64(PRODUCERS as f64 / r));
    let worker = (step.worker)(board.worker()).spawn()?;
    let stop = AtomicBool::new(false);
    let acked = AtomicU64::new(0);
    let writable = players - PROBES;
    let fresh = Mutex::new(Vec::<(Instant, Duration)>::new());
    let start = Instant::now();
    let (acks, window) = std::thread::scope(|s| -> Result<(Samples, _)> {
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|t| {
                let (stop, acked) = (&stop, &acked);
                s.spawn(move || -> Result<Samples> {
                    let mut rng = Rng::new(0xC0FF_EE00 + t as u64);
                    let mut acks = Samples::default();
                    let mut due = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(pace) = pace {
                            due += pace;
                            std::thread::sleep(due.saturating_duration_since(Instant::now()));
                        }
                        let who = player(rng.below(writable as u32) as usize);
                        let score = i64::from(rng.below(SCORES as u32));
                        let t0 = Instant::now();
                        board.enqueue(&who, score)?;
                        acks.push(t0.elapsed());
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(acks)
                })
            })
            .collect();
        let probe = s.spawn(|| -> Result<()> {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let who = player(writable + (n as usize % PROBES));
                let score = (n as i64 * 7_919 + 13) % SCORES;
                n += 1;
                board.enqueue(&who, score)?;
                let at = Instant::now();
                acked.fetch_add(1, Ordering::Relaxed);
                while board.score(&who)? != Some(score) {
                    if at.elapsed() > Duration::from_secs(600) {
                        return Err(format!("probe {who} never became visible").into());
                    }
                    std::thread::sleep(Duration::from_micros(500));
                }
                fresh.lock().unwrap().push((at, at.elapsed()));
            }
            Ok(())
        });
        std::thread::sleep(slice / 3);
        let first = (
            Instant::now(),
            acked.load(Ordering::Relaxed),
            board.queued()?,
            worker_cpu(),
        );
        std::thread::sleep(slice - slice / 3);
        let last = (
            Instant::now(),
            acked.load(Ordering::Relaxed),
            board.queued()?,
            worker_cpu(),
        );
        stop.store(true, Ordering::Relaxed);
        let mut acks = Samples::default();
        for t in producers {
            acks.append(&mut t.join().map_err(|_| "producer panicked")??);
        }
        probe.join().map_err(|_| "probe panicked")??;
        Ok((acks, (first, last)))
    })?;
    board.flush_within(Duration::from_secs(3_600))?;
    let stats = worker.stop()?;
    let updates = acked.load(Ordering::Relaxed);
    if stats.updates != updates {
        return Err(format!(
            "the worker applied {} updates, {updates} were acked",
            stats.updates
        )
        .into());
    }
    let ((t1, a1, q1, c1), (t2, a2, q2, c2)) = window;
    let secs = (t2 - t1).as_secs_f64();
    let applied = (a2 - a1) as f64 - (q2 as f64 - q1 as f64);
    let mut in_window = Samples::default();
    for &(at, took) in fresh.lock().unwrap().iter() {
        if at >= t1 && at <= t2 {
            in_window.push(took);
        }
    }
    let _ = start;
    Ok(Cell {
        offered: (a2 - a1) as f64 / secs,
        applied: applied / secs,
        backlog: (q1, q2),
        cpu_per_update: (c2 - c1).div_f64(applied.max(1.0)),
        fresh: in_window,
        acks,
        batches: stats.batches,
        updates,
    })
}

/// CPU time this process has used (user + system, `/proc/self/stat`):
/// while a worker drains alone, its thread is the only one working.
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_millis(ticks * 10)
}

/// A worker alone: `updates` random updates queued first (by the 64
/// producers, no worker running), then drained by the step's worker:
/// updates/s, the worker's CPU time per update, and its batches.
fn drain_cell(
    board: &Ranking,
    players: usize,
    step: &Step,
    updates: u64,
) -> Result<(f64, Duration, u64)> {
    let writable = (players - PROBES) as u32;
    let sent = AtomicU64::new(0);
    std::thread::scope(|s| -> Result<()> {
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|t| {
                let sent = &sent;
                s.spawn(move || -> Result<()> {
                    let mut rng = Rng::new(0xD4A1_0000 + t as u64);
                    while sent.fetch_add(1, Ordering::Relaxed) < updates {
                        let who = player(rng.below(writable) as usize);
                        board.enqueue(&who, i64::from(rng.below(SCORES as u32)))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for t in producers {
            t.join().map_err(|_| "producer panicked")??;
        }
        Ok(())
    })?;
    let cpu = process_cpu();
    let start = Instant::now();
    let stats = (step.worker)(board.worker())
        .exit_when_idle(true)
        .spawn()?
        .join()?;
    let took = start.elapsed();
    if stats.updates != updates {
        return Err(format!("drained {} of {updates}", stats.updates).into());
    }
    let per = (process_cpu() - cpu).div_f64(updates as f64);
    Ok((updates as f64 / took.as_secs_f64(), per, stats.batches))
}

/// Redis `ZADD` from 50 clients for `slice` at `url`: updates/s, ack p99.
fn zadd(url: &str, players: usize, slice: Duration) -> Option<(f64, Samples)> {
    crate::ranking_trees::zadd_at(url, "autoshard-bench-keepup", players, slice)
}

/// A `redis-server` of our own with every write fsynced before its reply,
/// its data in `dir`; stopped (by its pid) when dropped.
struct DurableRedis {
    child: Child,
    url: String,
}

impl DurableRedis {
    fn start(dir: &Path, port: u16) -> Result<Self> {
        let data = dir.join("redis-durable");
        std::fs::create_dir_all(&data)?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .args(["--save", "", "--dir"])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let server = DurableRedis {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
        };
        let client = redis::Client::open(server.url.as_str())?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut conn) = client.get_connection() {
                let fsync: Vec<String> = redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("appendfsync")
                    .query(&mut conn)?;
                if fsync.get(1).map(String::as_str) != Some("always") {
                    return Err(format!("port {port}: appendfsync is {fsync:?}").into());
                }
                return Ok(server);
            }
            if Instant::now() > deadline {
                return Err(format!("redis-server on port {port} did not come up").into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for DurableRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn redis_row(what: &str, result: Option<(f64, Samples)>, load: &str) -> Option<f64> {
    let (rate, acks) = result?;
    println!(
        "| {what} | – | {} | **{}** | – | – | – | – | – | {} | – | – | {load} |",
        thousands(acks.len() as u64),
        thousands(rate as u64),
        us(acks.percentile(99.0)),
    );
    Some(rate)
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let players: usize = match env("AUTOSHARD_BENCH_PLAYERS") {
        Some(n) => n.parse()?,
        None if quick => 50_000,
        None => 1_000_000,
    };
    let slice = Duration::from_secs(env("AUTOSHARD_BENCH_SLICE").map_or(Ok(12), |s| s.parse())?);
    let wanted =
        env("AUTOSHARD_BENCH_STEPS").unwrap_or_else(|| "before,batches,cache,checkpoint".into());
    let steps: Vec<&Step> = wanted
        .split(',')
        .map(|key| {
            STEPS
                .iter()
                .find(|s| s.key == key.trim())
                .ok_or(format!("no step `{key}`"))
        })
        .collect::<std::result::Result<_, _>>()?;
    let rate: f64 = env("AUTOSHARD_BENCH_RATE").map_or(Ok(50_000.0), |r| r.parse())?;
    let port: u16 = env("AUTOSHARD_BENCH_REDIS_PORT").map_or(Ok(7320), |p| p.parse())?;
    let template = template(dir, players)?;

    println!("## SQLite queue keeps up (issue 18 item 6)");
    println!();
    println!(
        "{} players on SQLite (`synchronous = FULL`, `RankingConfig::new(0..1_000_000)\
         .branching(100).node_shards(8)`, one queue shard), {PRODUCERS} producers `enqueue` random \
         players with random scores for {} s per cell while one worker applies; a probe \
         measures freshness (ack → visible in `score`). Measured over the slice's last two \
         thirds: offered = acknowledged/s; applied = (acknowledged − backlog growth)/s; \
         backlog = `queued()` at the interval's start → end; held = it grew by less than a \
         quarter second of applying. Redis `ZADD` from {REDIS_CLIENTS} clients in the same \
         run: the standalone server on 6379 (no persistence) and a `redis-server` this bench \
         starts on port {port} with `appendonly yes`, `appendfsync always`. Load average (1, \
         5, 15 min) per row.",
        thousands(players as u64),
        slice.as_secs(),
    );
    println!();
    println!(
        "| writer | producers | updates | offered/s | applied/s | backlog start → end | held | \
         fresh p50 | fresh p99 | ack p99 | worker batches (mean size) | worker + checkpoint CPU per update | load avg |"
    );
    println!("|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|");
    let plain = redis_row(
        &format!("Redis `ZADD`, {REDIS_CLIENTS} clients, no persistence"),
        zadd("redis://127.0.0.1:6379/", players, slice),
        &load_average(),
    );
    let durable = {
        let server = DurableRedis::start(dir, port)?;
        let result = zadd(&server.url, players, slice);
        redis_row(
            &format!("Redis `ZADD`, {REDIS_CLIENTS} clients, `appendfsync always`"),
            result,
            &load_average(),
        )
    };
    let mut last = None;
    let mut cells: Vec<(&Step, Option<f64>)> = steps.iter().map(|&s| (s, None)).collect();
    if rate > 0.0 {
        if let Some(&final_step) = steps.last() {
            cells.push((final_step, Some(rate)));
        }
    }
    for (step, paced) in cells {
        let load = load_average();
        eprintln!("sqlite-keepup: {} {paced:?}", step.key);
        let db = open_cell(dir, &template, step)?;
        let board = Ranking::open(&db, BOARD)?;
        let c = cell(&board, players, step, paced, slice)?;
        let producers = match paced {
            Some(r) => format!("{PRODUCERS} at {}/s", thousands(r as u64)),
            None => PRODUCERS.to_string(),
        };
        println!(
            "| {} | {producers} | {} | {} | **{}** | {} → {} | {} | {} | {} | {} | {} ({:.0}) | {:.1} µs | {load} |",
            step.what,
            thousands(c.updates),
            thousands(c.offered as u64),
            thousands(c.applied.max(0.0) as u64),
            thousands(c.backlog.0),
            thousands(c.backlog.1),
            if c.held() { "held" } else { "grew" },
            us(c.fresh.percentile(50.0)),
            us(c.fresh.percentile(99.0)),
            us(c.acks.percentile(99.0)),
            thousands(c.batches),
            c.updates as f64 / c.batches.max(1) as f64,
            c.cpu_per_update.as_secs_f64() * 1e6,
        );
        if paced.is_none() {
            last = Some(c.applied);
        }
    }
    println!();
    let backlog: u64 = env("AUTOSHARD_BENCH_BACKLOG").map_or(Ok(200_000), |n| n.parse())?;
    if backlog > 0 {
        println!(
            "A worker alone per step: {} random updates queued first (no worker running), \
             then drained (`exit_when_idle`); the worker thread's CPU time per update is \
             what the step saves, whatever else shares the cores.",
            thousands(backlog)
        );
        println!();
        println!("| step | updates/s | worker + checkpoint CPU per update | batches | load avg |");
        println!("|---|---:|---:|---:|---|");
        for step in &steps {
            let load = load_average();
            eprintln!("sqlite-keepup: drain {}", step.key);
            let db = open_cell(dir, &template, step)?;
            let board = Ranking::open(&db, BOARD)?;
            let (rate, cpu, batches) = drain_cell(&board, players, step, backlog)?;
            println!(
                "| {} | **{}** | {:.1} µs | {batches} | {load} |",
                step.what,
                thousands(rate as u64),
                cpu.as_secs_f64() * 1e6
            );
        }
        println!();
    }
    if let (Some(sqlite), Some(durable), Some(plain)) = (last, durable, plain) {
        println!(
            "Ratios, last unpaced SQLite row: {:.2}× the durable Redis anchor, {:.2}× Redis \
             without persistence.",
            sqlite / durable,
            sqlite / plain
        );
        println!();
    }
    println!("Load average at the end: {}.", load_average());
    println!();
    Ok(())
}

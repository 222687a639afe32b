//! Boards split into trees (issue 13, item 2 and 5): queued updates under
//! load for k = 1, 2, 4 trees × 8 / 64 producers, with rank query latency,
//! side by side with Redis `ZADD` from 50 connections in the same run; on
//! SQLite (`synchronous = FULL`, a file per tree) or PostgreSQL.
//!
//! `cargo run --release -p autoshard-benches -- ranking-trees`, settings
//! from the environment as `ranking-queue` (`ranking_queue.rs`):
//! `AUTOSHARD_BENCH_PLAYERS` (default 1,000,000; 100,000 on PostgreSQL;
//! `--quick` 20,000), `AUTOSHARD_BENCH_PRODUCERS` (default `8,64`),
//! `AUTOSHARD_BENCH_TREES` (default `1,2,4`), `AUTOSHARD_BENCH_SLICE`
//! (producer seconds per cell, default 10), `AUTOSHARD_BENCH_PG` (a
//! PostgreSQL URL: boards in a fresh schema there).

use crate::machine::load_average;
use crate::ranking_queue::{cell, load, player};
use crate::stats::{thousands, us, Rng, Samples};
use autoshard::ranking::{Ranking, RankingConfig, Tie};
use autoshard::Sqlite;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const BOARD: &str = "bench";
const SCORES: i64 = 1_000_000;
const REDIS_URL: &str = "redis://127.0.0.1:6379/";
const REDIS_CONNECTIONS: usize = 50;
/// Rank queries timed per cell (dense ones are costlier across trees).
const QUERIES: usize = 2_000;
const DENSE_QUERIES: usize = 100;
/// `count(*)` ranks timed on PostgreSQL's native table.
const NATIVE_QUERIES: usize = 200;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn list(name: &str, default: &str) -> Result<Vec<usize>> {
    let raw = env(name).unwrap_or_else(|| default.into());
    Ok(raw
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<std::result::Result<_, _>>()?)
}

fn config(k: usize) -> RankingConfig {
    RankingConfig::new(0..SCORES)
        .branching(100)
        .node_shards(8)
        .trees(k as u32)
}

/// Every file of the SQLite database at `path`: its WAL, queue and trees.
fn files(path: &Path) -> Result<Vec<PathBuf>> {
    let dir = path.parent().ok_or("no directory")?;
    let name = path.file_name().ok_or("no file name")?.to_string_lossy();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?.path();
        let file = entry.file_name().unwrap_or_default().to_string_lossy();
        if file.starts_with(&*name) {
            found.push(entry);
        }
    }
    Ok(found)
}

/// A loaded board of `k` trees, copied per cell: made once, checkpointed.
fn template(dir: &Path, k: usize, players: usize) -> Result<PathBuf> {
    let path = dir.join(format!("template-k{k}.db"));
    if !path.exists() {
        let db = Sqlite::open(&path)?;
        let board = Ranking::create(&db, BOARD, config(k))?;
        load(&board, players)?;
        drop((board, db));
        for file in files(&path)? {
            let name = file.to_string_lossy();
            if !name.ends_with("-wal") && !name.ends_with("-shm") {
                let raw = rusqlite::Connection::open(&file)?;
                raw.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            }
        }
    }
    Ok(path)
}

fn copy_template(template: &Path, to: &Path) -> Result<()> {
    for old in files(to)? {
        std::fs::remove_file(old)?;
    }
    let (from, into) = (template.to_string_lossy(), to.to_string_lossy());
    for file in files(template)? {
        let name = file.to_string_lossy().replacen(&*from, &into, 1);
        std::fs::copy(&file, name)?;
    }
    Ok(())
}

/// Rank query latencies on random players: standard, ordinal, dense.
fn rank_queries(board: &Ranking, players: usize) -> Result<[Samples; 3]> {
    let mut rng = Rng::new(0x7AAE_0001);
    let mut out = [Samples::default(), Samples::default(), Samples::default()];
    for (i, tie) in [Tie::Standard, Tie::Ordinal, Tie::Dense]
        .into_iter()
        .enumerate()
    {
        let n = if tie == Tie::Dense {
            DENSE_QUERIES
        } else {
            QUERIES
        };
        for _ in 0..n {
            let who = player(rng.below(players as u32) as usize);
            let t0 = Instant::now();
            board.rank(&who, tie)?;
            out[i].push(t0.elapsed());
        }
    }
    Ok(out)
}

/// PostgreSQL reads at random players and ranks on the loaded board `name`:
/// `rank` (standard) on a second handle whose connections plan every
/// statement on every call (the store before its rank statement kept a
/// generic plan), then `rank`,
/// `score_at_rank` and `page` (ten entries) on `db`. Interleaved per
/// query, so load moves both `rank` variants together.
pub(crate) fn pg_reads(
    url: &str,
    db: &autoshard::Postgres,
    name: &str,
    players: usize,
) -> Result<[Samples; 4]> {
    autoshard::__private::pg_hooks::custom_plans(true);
    let custom = autoshard::Postgres::builder(url).schema(db.schema()).open();
    let custom = custom.and_then(|c| {
        let board = Ranking::open(&c, name)?;
        // The first call connects while the hook is on.
        board.rank(&player(0), Tie::Standard)?;
        Ok((c, board))
    });
    autoshard::__private::pg_hooks::custom_plans(false);
    let (_custom_db, custom) = custom?;
    let board = Ranking::open(db, name)?;
    let mut rng = Rng::new(0x7AAE_0002);
    let mut out: [Samples; 4] = Default::default();
    for _ in 0..QUERIES {
        let who = player(rng.below(players as u32) as usize);
        let t0 = Instant::now();
        custom.rank(&who, Tie::Standard)?;
        out[0].push(t0.elapsed());
        let t0 = Instant::now();
        board.rank(&who, Tie::Standard)?;
        out[1].push(t0.elapsed());
    }
    for _ in 0..DENSE_QUERIES {
        let at = u64::from(rng.below(players as u32)) + 1;
        let t0 = Instant::now();
        board.score_at_rank(at)?;
        out[2].push(t0.elapsed());
        let t0 = Instant::now();
        board.page(at, at + 9)?;
        out[3].push(t0.elapsed());
    }
    Ok(out)
}

/// Redis `ZADD` from 50 connections for `slice`: updates/s, p50, p99.
fn zadd(players: usize, slice: Duration) -> Option<(f64, Samples)> {
    zadd_at(REDIS_URL, "autoshard-bench-trees", players, slice)
}

/// Redis `ZADD` of random players' scores to `key` at `url` from 50
/// connections for `slice` (the anchor the queue benchmarks compare with):
/// updates/s and each reply's latency.
pub(crate) fn zadd_at(
    url: &str,
    key: &str,
    players: usize,
    slice: Duration,
) -> Option<(f64, Samples)> {
    let client = redis::Client::open(url).ok()?;
    client.get_connection().ok()?;
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let samples = std::thread::scope(|s| {
        let threads: Vec<_> = (0..REDIS_CONNECTIONS)
            .map(|t| {
                let (stop, client) = (&stop, &client);
                s.spawn(move || {
                    let mut samples = Samples::default();
                    let Ok(mut conn) = client.get_connection() else {
                        return samples;
                    };
                    let mut rng = Rng::new(0x7777_0000 + t as u64);
                    while !stop.load(Ordering::Relaxed) {
                        let who = player(rng.below(players as u32) as usize);
                        let score = i64::from(rng.below(SCORES as u32));
                        let t0 = Instant::now();
                        let done = redis::cmd("ZADD")
                            .arg(key)
                            .arg(score)
                            .arg(who)
                            .query::<()>(&mut conn);
                        if done.is_err() {
                            break;
                        }
                        samples.push(t0.elapsed());
                    }
                    samples
                })
            })
            .collect();
        std::thread::sleep(slice);
        stop.store(true, Ordering::Relaxed);
        let mut all = Samples::default();
        for t in threads {
            all.append(&mut t.join().unwrap_or_default());
        }
        all
    });
    let rate = samples.len() as f64 / start.elapsed().as_secs_f64();
    Some((rate, samples))
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let pg = env("AUTOSHARD_BENCH_PG");
    let players: usize = match env("AUTOSHARD_BENCH_PLAYERS") {
        Some(n) => n.parse()?,
        None if quick => 20_000,
        None if pg.is_some() => 100_000,
        None => 1_000_000,
    };
    let local = env("AUTOSHARD_BENCH_LOCAL_ARRIVALS").is_some();
    autoshard::__private::tree_hooks::local_arrivals(local);
    let slice = Duration::from_secs(env("AUTOSHARD_BENCH_SLICE").map_or(Ok(10), |s| s.parse())?);
    let store = if pg.is_some() {
        "PostgreSQL"
    } else {
        "SQLite (`synchronous = FULL`, a file per tree)"
    };
    println!("## Boards split into trees: queued updates and rank queries");
    if local {
        println!();
        println!("Diagnostic run: tree-local arrival numbers (`AUTOSHARD_BENCH_LOCAL_ARRIVALS`).");
    }
    if let Some(sync) = env("AUTOSHARD_BENCH_SYNC") {
        println!();
        println!("Diagnostic run: `AUTOSHARD_BENCH_SYNC={sync}` (cells opened with it).");
    }
    println!();
    println!(
        "{} players on {store}, `RankingConfig::new(0..1_000_000).branching(100).node_shards(8)\
         .trees(k)`, one queue shard per tree, `worker().spawn()` (one worker thread per \
         tree, default options). Per cell: P producer threads `enqueue` random players with \
         random scores for {} s, a probe measures freshness (ack → visible in `score`), then \
         `flush`; sustained = updates ÷ time until `flush` returned. Then {QUERIES} `rank` \
         queries (standard, ordinal) and {DENSE_QUERIES} dense ones on random players, one \
         thread. Load average (1, 5, 15 min) before each cell.",
        thousands(players as u64),
        slice.as_secs()
    );
    println!();
    let redis = zadd(players, slice);
    println!("| writer | trees | producers | updates | sustained/s | ack p50 | ack p99 | fresh p50 | fresh p99 | rank p50 | rank p99 | ordinal p50 | dense p50 | load avg |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    if let Some((rate, acks)) = &redis {
        println!(
            "| Redis `ZADD`, {REDIS_CONNECTIONS} connections | – | – | {} | **{}** | {} | {} | – | – | – | – | – | – | {} |",
            thousands(acks.len() as u64),
            thousands(*rate as u64),
            us(acks.percentile(50.0)),
            us(acks.percentile(99.0)),
            load_average()
        );
    }
    let pg_db = match &pg {
        Some(url) => {
            let schema = format!("bench_trees_{}", std::process::id());
            Some(autoshard::Postgres::builder(url).schema(&schema).open()?)
        }
        None => None,
    };
    // The worker's mean batch in the last cell: the native upserts' size.
    let mut batch = 1_000;
    let mut reads = None;
    for k in list("AUTOSHARD_BENCH_TREES", "1,2,4")? {
        let sqlite_template = match &pg_db {
            Some(db) => {
                let board = Ranking::create(db, &format!("{BOARD}-{k}"), config(k))?;
                load(&board, players)?;
                None
            }
            None => Some(template(dir, k, players)?),
        };
        for p in list("AUTOSHARD_BENCH_PRODUCERS", "8,64")? {
            let load = load_average();
            eprintln!("ranking-trees: k = {k}, {p} producers");
            let (cell, queries) = match (&pg_db, &sqlite_template) {
                (Some(db), _) => {
                    let name = format!("{BOARD}-{k}");
                    let board = Ranking::open(db, &name)?;
                    let cell = cell(&board, players, (p, None), None, slice)?;
                    let url = pg.as_deref().unwrap_or_default();
                    reads = Some((k, p, pg_reads(url, db, &name, players)?, load_average()));
                    (cell, rank_queries(&board, players)?)
                }
                (None, Some(template)) => {
                    let path = dir.join("cell.db");
                    copy_template(template, &path)?;
                    // `AUTOSHARD_BENCH_SYNC=normal`: a diagnostic of what the
                    // fsyncs of `FULL` cost (the trees' files share one disk).
                    let sync = match env("AUTOSHARD_BENCH_SYNC").as_deref() {
                        Some("normal") => autoshard::Synchronous::Normal,
                        _ => autoshard::Synchronous::Full,
                    };
                    let db = Sqlite::builder(&path).synchronous(sync).open()?;
                    let board = Ranking::open(&db, BOARD)?;
                    let cell = cell(&board, players, (p, None), None, slice)?;
                    (cell, rank_queries(&board, players)?)
                }
                (None, None) => unreachable!("one store or the other"),
            };
            batch = (cell.updates / cell.batches.max(1)).max(1) as usize;
            println!(
                "| autoshard queue | {k} | {p} | {} | **{}** | {} | {} | {} | {} | {} | {} | {} | {} | {load} |",
                thousands(cell.updates),
                thousands(cell.rate as u64),
                us(cell.acks.percentile(50.0)),
                us(cell.acks.percentile(99.0)),
                us(cell.fresh.percentile(50.0)),
                us(cell.fresh.percentile(99.0)),
                us(queries[0].percentile(50.0)),
                us(queries[0].percentile(99.0)),
                us(queries[1].percentile(50.0)),
                us(queries[2].percentile(50.0)),
            );
        }
    }
    let mut native = None;
    if let (Some(url), Some(db)) = (&pg, &pg_db) {
        // `count(*)` walks the index: a few hundred suffice.
        let measured =
            crate::pg_native::run(url, db.schema(), (players, batch), slice, NATIVE_QUERIES)?;
        let native = native.insert(measured);
        println!(
            "| PostgreSQL natively: `INSERT … ON CONFLICT` of batches of {} into `(player, score)` \
             with an index, 1 connection; rank `SELECT count(*) … WHERE score > $1` | – | – | – | \
             **{}** | – | – | – | – | {} | {} | – | – | {} |",
            thousands(native.batch as u64),
            thousands(native.rate as u64),
            us(native.ranks.percentile(50.0)),
            us(native.ranks.percentile(99.0)),
            load_average()
        );
    }
    if let Some((rate, acks)) = zadd(players, slice) {
        println!(
            "| Redis `ZADD`, {REDIS_CONNECTIONS} connections (again) | – | – | {} | **{}** | {} | {} | – | – | – | – | – | – | {} |",
            thousands(acks.len() as u64),
            thousands(rate as u64),
            us(acks.percentile(50.0)),
            us(acks.percentile(99.0)),
            load_average()
        );
    }
    println!();
    if let (Some((k, p, reads, load)), Some(native)) = (&reads, &native) {
        print_pg_reads((*k, *p), reads, native, load);
    }
    println!("Load average at the end: {}.", load_average());
    if let Some(db) = pg_db {
        eprintln!("ranking-trees: drop schema {} when done", db.schema());
    }
    Ok(())
}

/// The PostgreSQL reads' table: the last cell's board against the same
/// question asked of the native table.
fn print_pg_reads(
    (k, p): (usize, usize),
    reads: &[Samples; 4],
    native: &crate::pg_native::Native,
    load: &str,
) {
    println!(
        "PostgreSQL reads on the board after the last cell (k = {k}, {p} producers), one \
         thread; `rank` {QUERIES} times on each handle interleaved, the others \
         {DENSE_QUERIES} times at random ranks. Natively: the plain table's \
         `count(*)` rank ({NATIVE_QUERIES} queries) and `ORDER BY score DESC OFFSET r - 1 \
         LIMIT 1` / `LIMIT 10` ({NATIVE_QUERIES} each). Load before: {load}."
    );
    println!();
    println!("| query | autoshard p50 | autoshard p99 | natively p50 | natively p99 |");
    println!("|---|---:|---:|---:|---:|");
    let rows = [
        ("`rank`, planned on every call (before)", &reads[0], None),
        ("`rank`, generic plan kept", &reads[1], Some(&native.ranks)),
        ("`score_at_rank`", &reads[2], Some(&native.score_at_rank)),
        ("`page` of 10", &reads[3], Some(&native.page)),
    ];
    for (what, ours, theirs) in rows {
        let (n50, n99) = theirs.map_or(("–".into(), "–".into()), |t| {
            (us(t.percentile(50.0)), us(t.percentile(99.0)))
        });
        println!(
            "| {what} | {} | {} | {n50} | {n99} |",
            us(ours.percentile(50.0)),
            us(ours.percentile(99.0))
        );
    }
    println!();
}

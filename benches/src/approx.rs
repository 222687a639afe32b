//! Approximate boards (issue 13 item 4): the Code Jam article's accuracy
//! study of bucket ranks, refresh times, durable update throughput and
//! `approx_rank` latency, on SQLite files with `synchronous = FULL`.
//!
//! ```text
//! cargo run --release -p autoshard-benches -- approx [--quick]
//! AUTOSHARD_BENCH_APPROX_10M=1 cargo run --release -p autoshard-benches -- approx
//! ```
//!
//! The study boards of a million players are filled once through
//! `set_scores` (the 1,000-bucket board) and copied row for row into the
//! boards of other bucket counts with one `INSERT ... SELECT` on the
//! players table: the rows are exactly what `set_scores` writes on an
//! approximate board (player rows only), at a fraction of the load time.

use crate::machine;
use crate::stats::{per_sec, thousands, us, Rng, Samples};
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::{Sqlite, Synchronous};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const BUCKETS: [u32; 4] = [5, 10, 100, 1_000];
const TOP: u64 = 1_000;

#[derive(Clone, Copy)]
enum Dist {
    Uniform,
    Normal,
}

impl Dist {
    fn name(self) -> &'static str {
        match self {
            Dist::Uniform => "uniform",
            Dist::Normal => "normal (mean of 4 uniforms)",
        }
    }

    /// A score in `0..width`: uniform, or the seed's "average of 4 random
    /// numbers", which roughly approximates a normal distribution.
    fn score(self, rng: &mut Rng, width: u32) -> i64 {
        match self {
            Dist::Uniform => i64::from(rng.below(width)),
            Dist::Normal => (0..4).map(|_| i64::from(rng.below(width))).sum::<i64>() / 4,
        }
    }
}

fn open(path: &Path) -> Result<Sqlite> {
    Ok(Sqlite::builder(path)
        .synchronous(Synchronous::Full)
        .open()?)
}

fn uptime() -> String {
    format!("load {}", machine::load_average())
}

/// Sets `scores` (player `i` gets `scores[i]`) in batches of 50,000.
fn load(board: &Ranking, scores: &[i64]) -> Result<Duration> {
    let started = Instant::now();
    for (c, chunk) in scores.chunks(50_000).enumerate() {
        let names: Vec<String> = (0..chunk.len())
            .map(|i| format!("p{}", c * 50_000 + i))
            .collect();
        let batch: Vec<(&str, i64)> = names
            .iter()
            .map(String::as_str)
            .zip(chunk.iter().copied())
            .collect();
        board.set_scores(&batch)?;
    }
    Ok(started.elapsed())
}

/// Copies `from`'s players into the (empty) board `to`, behind the
/// library's back (see the module docs).
fn copy_players(path: &Path, from: &str, to: &str) -> Result<()> {
    let conn = rusqlite::Connection::open(path)?;
    conn.execute(
        "INSERT INTO autoshard_rank_players (board, player, score, arrival) \
         SELECT (SELECT id FROM autoshard_rank_boards WHERE name = ?2), player, score, arrival \
         FROM autoshard_rank_players \
         WHERE board = (SELECT id FROM autoshard_rank_boards WHERE name = ?1)",
        [from, to],
    )?;
    Ok(())
}

struct Errors {
    mean: f64,
    p99: f64,
    max: f64,
    top_mean: f64,
    top_max: f64,
}

/// Relative errors `|approx - exact| / exact` of every player's score
/// (on a big board, of a sample plus every player of the top 1,000).
fn errors(board: &Ranking, sorted_desc: &[i64], sample: &[i64]) -> Result<Errors> {
    let snapshot = board.approx_snapshot()?;
    let exact = |s: i64| 1 + sorted_desc.partition_point(|&x| x > s) as u64;
    let mut all = Vec::with_capacity(sample.len());
    for &s in sample {
        let e = exact(s);
        all.push(snapshot.rank(s)?.abs_diff(e) as f64 / e as f64);
    }
    let mut top = Vec::new();
    for &s in sorted_desc.iter().take(TOP as usize) {
        let e = exact(s);
        top.push(snapshot.rank(s)?.abs_diff(e) as f64 / e as f64);
    }
    all.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let p99 = all[((all.len() as f64 * 0.99).ceil() as usize).clamp(1, all.len()) - 1];
    Ok(Errors {
        mean: mean(&all),
        p99,
        max: all.last().copied().unwrap_or(0.0),
        top_mean: mean(&top),
        top_max: top.iter().copied().fold(0.0, f64::max),
    })
}

fn pct(x: f64) -> String {
    format!("{:.3}%", x * 100.0)
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let sizes: &[u32] = if quick {
        &[10_000, 100_000]
    } else {
        &[10_000, 1_000_000]
    };
    println!("## Approximate boards (issue 13 item 4)");
    println!();
    println!("### Accuracy of `approx_rank` (the seed's study)");
    println!();
    println!(
        "Relative error `|approx - exact| / exact` of the standard rank, over every player \
         (1M: a sample of 100,000 players), and over the players of the top {TOP} ranks. \
         Scores uniform in `0..players`, or the mean of 4 such (the seed's near-normal). \
         Equal-count buckets from one refresh."
    );
    println!();
    println!("| players | distribution | buckets | mean | p99 | max | top-{TOP} mean | top-{TOP} max | refresh | bound ⌈n/b⌉−2 | load |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut refresh_1m = None;
    for &n in sizes {
        let path = dir.join(format!("approx-{n}.db"));
        let db = open(&path)?;
        for dist in [Dist::Uniform, Dist::Normal] {
            let mut rng = Rng::new(0x5EED_0A00 + u64::from(n));
            let scores: Vec<i64> = (0..n).map(|_| dist.score(&mut rng, n)).collect();
            let mut sorted = scores.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let sample: Vec<i64> = if n <= 100_000 {
                scores.clone()
            } else {
                (0..100_000)
                    .map(|_| scores[rng.below(n) as usize])
                    .collect()
            };
            let tag = match dist {
                Dist::Uniform => "u",
                Dist::Normal => "n",
            };
            let mut source: Option<String> = None;
            // Then two with the top ranked exactly (`exact_top`).
            let runs = BUCKETS
                .iter()
                .rev()
                .map(|&b| (b, 0))
                .chain([(100, TOP), (1_000, TOP)]);
            for (b, top) in runs {
                let name = format!("{tag}{n}-{b}-{top}");
                let config = RankingConfig::new(0..i64::from(n))
                    .approximate(b)
                    .exact_top(top as u32);
                let board = Ranking::create(&db, &name, config)?;
                match &source {
                    None => {
                        let took = load(&board, &scores)?;
                        eprintln!("approx: loaded {n} {} players in {took:?}", dist.name());
                        source = Some(name.clone());
                    }
                    Some(from) => copy_players(&path, from, &name)?,
                }
                let started = Instant::now();
                let refresh = board.refresh()?;
                let took = started.elapsed();
                assert_eq!(refresh.players, u64::from(n));
                if n == 1_000_000 && b == 1_000 && top == 0 && refresh_1m.is_none() {
                    refresh_1m = Some(took);
                }
                let e = errors(&board, &sorted, &sample)?;
                println!(
                    "| {} | {} | {b}{} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    thousands(u64::from(n)),
                    dist.name(),
                    match top {
                        0 => String::new(),
                        t => format!(" + top {} exact", thousands(t)),
                    },
                    pct(e.mean),
                    pct(e.p99),
                    pct(e.max),
                    pct(e.top_mean),
                    pct(e.top_max),
                    us(took.as_nanos() as f64),
                    thousands(
                        (u64::from(n) - top)
                            .div_ceil(u64::from(b))
                            .saturating_sub(2)
                    ),
                    uptime()
                );
            }
        }
    }
    println!();
    let big = *sizes.last().expect("sizes");
    throughput(dir, big, quick)?;
    if let Some(took) = refresh_1m {
        println!(
            "Refresh of 1,000,000 players, 1,000 buckets: {} ({}).",
            us(took.as_nanos() as f64),
            uptime()
        );
        println!();
    }
    if std::env::var("AUTOSHARD_BENCH_APPROX_10M").is_ok() {
        ten_million(dir)?;
    }
    Ok(())
}

/// fsync latency of a 4 KiB append in the benchmark's directory.
fn fsync_latency(dir: &Path) -> Result<Samples> {
    let mut file = std::fs::File::create(dir.join("fsync-probe"))?;
    let mut samples = Samples::default();
    let page = [7u8; 4096];
    for _ in 0..200 {
        let started = Instant::now();
        file.write_all(&page)?;
        file.sync_data()?;
        samples.push(started.elapsed());
    }
    Ok(samples)
}

/// Durable updates on a file holding one board of `n` players, with
/// SQLite's default page cache (2,000 KiB a connection) and with 256 MiB,
/// side by side: a big batch dirties more pages than the default holds.
fn throughput(dir: &Path, n: u32, quick: bool) -> Result<()> {
    let path = dir.join("approx-throughput.db");
    let board = Ranking::create(
        &open(&path)?,
        "tp",
        RankingConfig::new(0..i64::from(n)).approximate(1_000),
    )?;
    let mut rng = Rng::new(0x7B);
    let scores: Vec<i64> = (0..n).map(|_| Dist::Uniform.score(&mut rng, n)).collect();
    load(&board, &scores)?;
    for cache in [None, Some(256u64 << 20)] {
        let mut builder = Sqlite::builder(&path).synchronous(Synchronous::Full);
        if let Some(bytes) = cache {
            builder = builder.cache_size(bytes);
        }
        let db = builder.open()?;
        let board = Ranking::open(&db, "tp")?;
        let label = match cache {
            None => "default page cache".to_string(),
            Some(b) => format!("page cache {} MiB", b >> 20),
        };
        updates(&board, n, quick, &label)?;
    }
    fsync_bound(dir)?;
    let db = open(&path)?;
    rank_latency(&Ranking::open(&db, "tp")?, n, quick)
}

fn updates(board: &Ranking, n: u32, quick: bool, label: &str) -> Result<()> {
    println!(
        "### Durable updates on {} players (`synchronous = FULL`, {label})",
        thousands(u64::from(n))
    );
    println!();
    let mut rng = Rng::new(0xF00D);
    let mut random_batch = |size: usize| -> Vec<(String, i64)> {
        (0..size)
            .map(|_| (format!("p{}", rng.below(n)), i64::from(rng.below(n))))
            .collect()
    };
    println!("| path | updates | elapsed | updates/s | load |");
    println!("|---|---:|---:|---:|---|");
    for batch in [10_000usize, 50_000] {
        let batches = if quick { 2 } else { (500_000 / batch).max(3) };
        let prepared: Vec<Vec<(String, i64)>> = (0..batches).map(|_| random_batch(batch)).collect();
        let started = Instant::now();
        for b in &prepared {
            let b: Vec<(&str, i64)> = b.iter().map(|(p, s)| (p.as_str(), *s)).collect();
            board.set_scores(&b)?;
        }
        let took = started.elapsed();
        let count = (batches * batch) as f64;
        println!(
            "| `set_scores`, {} per call | {} | {} | **{}** | {} |",
            thousands(batch as u64),
            thousands(count as u64),
            us(took.as_nanos() as f64),
            per_sec(count, took),
            uptime()
        );
    }
    for producers in [8usize, 64] {
        let per = if quick { 100 } else { 2_000 };
        let worker = board.worker().spawn()?;
        let started = Instant::now();
        std::thread::scope(|s| -> Result<()> {
            let handles: Vec<_> = (0..producers)
                .map(|t| {
                    let board = board.clone();
                    s.spawn(move || -> autoshard::Result<()> {
                        let mut rng = Rng::new(0xBEEF + t as u64);
                        for _ in 0..per {
                            board
                                .enqueue(&format!("p{}", rng.below(n)), i64::from(rng.below(n)))?;
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().expect("producer")?;
            }
            Ok(())
        })?;
        board.flush()?;
        let took = started.elapsed();
        worker.stop()?;
        let count = (producers * per) as f64;
        println!(
            "| `enqueue` from {producers} producer threads, worker drained, `flush` returned | {} | {} | **{}** | {} |",
            thousands(count as u64),
            us(took.as_nanos() as f64),
            per_sec(count, took),
            uptime()
        );
    }
    let direct = if quick { 200 } else { 2_000 };
    let started = Instant::now();
    for _ in 0..direct {
        board.set_score(&format!("p{}", rng.below(n)), i64::from(rng.below(n)))?;
    }
    let took = started.elapsed();
    println!(
        "| `set_score`, one per transaction, 1 thread | {} | {} | {} | {} |",
        thousands(direct),
        us(took.as_nanos() as f64),
        per_sec(direct as f64, took),
        uptime()
    );
    println!();
    Ok(())
}

fn fsync_bound(dir: &Path) -> Result<()> {
    let fsync = fsync_latency(dir)?;
    let p50 = fsync.percentile(50.0);
    println!();
    println!(
        "fsync (4 KiB append + `fdatasync`, same file system): p50 {}, p99 {}; the group-commit \
         bound of 8 producers each waiting for its own fsync, 8 ÷ p50 fsync = **{}/s** ({}).",
        us(p50),
        us(fsync.percentile(99.0)),
        thousands((8.0 * 1e9 / p50) as u64),
        uptime()
    );
    println!();
    Ok(())
}

fn rank_latency(board: &Ranking, n: u32, quick: bool) -> Result<()> {
    let mut rng = Rng::new(0xCAFE);
    board.refresh()?;
    let calls = if quick { 10_000 } else { 200_000 };
    let mut cached = Samples::with_capacity(calls);
    let mut held = Samples::with_capacity(calls);
    let snapshot = board.approx_snapshot()?;
    for _ in 0..calls {
        let s = i64::from(rng.below(n));
        let started = Instant::now();
        std::hint::black_box(board.approx_rank(s)?);
        cached.push(started.elapsed());
        let started = Instant::now();
        std::hint::black_box(snapshot.rank(s)?);
        held.push(started.elapsed());
    }
    println!("| query | p50 | p99 | load |");
    println!("|---|---:|---:|---|");
    println!(
        "| `approx_rank` (reads the snapshot pointer, buckets cached) | **{}** | {} | {} |",
        us(cached.percentile(50.0)),
        us(cached.percentile(99.0)),
        uptime()
    );
    println!(
        "| `ApproxSnapshot::rank` (held snapshot, no read) | **{}** | {} | {} |",
        us(held.percentile(50.0)),
        us(held.percentile(99.0)),
        uptime()
    );
    println!();
    Ok(())
}

fn ten_million(dir: &Path) -> Result<()> {
    let n = 10_000_000u32;
    let path = dir.join("approx-10m.db");
    let db = open(&path)?;
    let board = Ranking::create(
        &db,
        "ten",
        RankingConfig::new(0..i64::from(n)).approximate(1_000),
    )?;
    let mut rng = Rng::new(0x10_000_000);
    let scores: Vec<i64> = (0..n).map(|_| i64::from(rng.below(n))).collect();
    let took = load(&board, &scores)?;
    println!(
        "Loaded 10,000,000 players through `set_scores` (50,000 per call) in {} ({}/s, {}).",
        us(took.as_nanos() as f64),
        per_sec(f64::from(n), took),
        uptime()
    );
    let started = Instant::now();
    let refresh = board.refresh()?;
    let took = started.elapsed();
    println!(
        "Refresh of {} players, {} buckets: **{}** ({}); the seed: 8 min 34 s on App Engine.",
        thousands(refresh.players),
        refresh.buckets,
        us(took.as_nanos() as f64),
        uptime()
    );
    println!();
    Ok(())
}

//! Score ranges (issue 21, item 2): `between` and `count_between` against
//! `rank_of_score` on one board of a million players, on SQLite,
//! PostgreSQL and Redis Cluster, side by side in one run. A
//! `count_between` is two rank descents, a `between(.., 10)` one descent
//! and a page of ten, so each should cost about one or two `rank_of_score`.
//!
//! `cargo run --release -p autoshard-benches -- ranking-ranges [--quick]`:
//! `AUTOSHARD_BENCH_PLAYERS` (default 1,000,000; `--quick` 20,000);
//! PostgreSQL at `AUTOSHARD_BENCH_PG` (default
//! `postgres://postgres@127.0.0.1:5432/test`, a fresh schema, dropped at
//! the end); Redis Cluster at `AUTOSHARD_REDIS_CLUSTER_URL`, else a cluster
//! the run starts (`autoshard-test-servers`, stopped by pid when it ends).
//! Queries interleave variant by variant in rounds, so load changes hit
//! all of them alike.

use crate::machine::load_average;
use crate::stats::{median, thousands, us, Rng, Samples};
use autoshard::ranking::{Ranking, RankingConfig, RankingStore};
use std::path::Path;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const SCORES: i64 = 1_000_000;
/// Width of a queried range: about this many players at a million.
const WIDTH: i64 = 1_000;
const LOAD_BATCH: usize = 20_000;
const ROUNDS: usize = 5;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// One store's p50s: rank_of_score, count_between, between(.., 10).
struct Figures {
    load: f64,
    p50: [f64; 3],
    /// Per-round ratios to rank_of_score, their median.
    ratios: [f64; 2],
}

fn measure(db: &impl RankingStore, players: usize, queries: usize) -> Result<Figures> {
    let config = RankingConfig::new(0..SCORES).branching(100).node_shards(8);
    let _ = Ranking::delete(db, "ranges");
    let board = Ranking::create(db, "ranges", config)?;
    let mut rng = Rng::new(0x5EED_2121_0000_0001);
    let started = Instant::now();
    let names: Vec<String> = (0..players).map(|i| format!("player-{i:07}")).collect();
    for chunk in names.chunks(LOAD_BATCH) {
        let batch: Vec<(&str, i64)> = chunk
            .iter()
            .map(|p| (p.as_str(), i64::from(rng.below(SCORES as u32))))
            .collect();
        board.set_scores(&batch)?;
    }
    let load = started.elapsed().as_secs_f64();
    let mut all = [Samples::default(), Samples::default(), Samples::default()];
    let mut ratios = [Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        let mut round = [Samples::default(), Samples::default(), Samples::default()];
        for _ in 0..queries / ROUNDS {
            let lo = i64::from(rng.below((SCORES - WIDTH) as u32));
            let t = Instant::now();
            board.rank_of_score(lo)?;
            round[0].push(t.elapsed());
            let t = Instant::now();
            board.count_between(lo..=lo + WIDTH)?;
            round[1].push(t.elapsed());
            let t = Instant::now();
            board.between(lo..=lo + WIDTH, 10)?;
            round[2].push(t.elapsed());
        }
        let base = round[0].percentile(50.0);
        ratios[0].push(round[1].percentile(50.0) / base);
        ratios[1].push(round[2].percentile(50.0) / base);
        for (sum, mut r) in all.iter_mut().zip(round) {
            sum.append(&mut r);
        }
    }
    Ranking::delete(db, "ranges")?;
    Ok(Figures {
        load,
        p50: [0, 1, 2].map(|i| all[i].percentile(50.0)),
        ratios: [median(&ratios[0]), median(&ratios[1])],
    })
}

fn row(store: &str, players: usize, f: &Figures) {
    println!(
        "| {store} | {} | {:.0} s | {} | {} | {} | {:.2}× | {:.2}× | {} |",
        thousands(players as u64),
        f.load,
        us(f.p50[0]),
        us(f.p50[1]),
        us(f.p50[2]),
        f.ratios[0],
        f.ratios[1],
        load_average()
    );
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let players: usize = match env("AUTOSHARD_BENCH_PLAYERS") {
        Some(n) => n.parse()?,
        None if quick => 20_000,
        None => 1_000_000,
    };
    let queries = if quick { 500 } else { 2_000 };
    println!("## Score ranges against rank_of_score");
    println!();
    println!(
        "{queries} queries per variant, {ROUNDS} interleaved rounds, ranges {WIDTH} wide \
         (about {} players each), `between` limit 10; ratio = median over rounds of p50 / \
         `rank_of_score` p50.",
        thousands((WIDTH as usize * players / SCORES as usize) as u64)
    );
    println!();
    println!("| store | players | load | `rank_of_score` p50 | `count_between` p50 | `between` p50 | count / rank | between / rank | load average |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    let sqlite = autoshard::Sqlite::open(dir.join("ranges.db"))?;
    row("SQLite", players, &measure(&sqlite, players, queries)?);
    drop(sqlite);
    let pg_url = env("AUTOSHARD_BENCH_PG")
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("bench_ranges_{}", std::process::id());
    let pg = autoshard::Postgres::builder(&pg_url)
        .schema(&schema)
        .open()?;
    let figures = measure(&pg, players, queries);
    drop(pg);
    let mut client = postgres::Client::connect(&pg_url, postgres::NoTls)?;
    client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))?;
    row("PostgreSQL", players, &figures?);
    let nodes = autoshard_test_servers::redis_cluster_nodes();
    let redis = autoshard::RedisCluster::builder(&nodes)
        .prefix(format!("bench_ranges_{}", std::process::id()))
        .open()?;
    row(
        "Redis Cluster",
        players,
        &measure(&redis, players, queries)?,
    );
    println!();
    Ok(())
}

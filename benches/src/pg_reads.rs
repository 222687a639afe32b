//! Reads of a PostgreSQL board against the floor of one round trip
//! (issue 18, goal `rank` p50 ≤ 150 µs): `rank`, `score_at_rank` and
//! `page` on a board a `ranking-trees` run left behind (it prints the schema
//! to drop), interleaved with `SELECT 1` on a connection of the same
//! `postgres` crate, on a quiet server with nothing else running.
//!
//! `AUTOSHARD_BENCH_PG=<url> AUTOSHARD_BENCH_PG_SCHEMA=<schema>
//! cargo run --release -p autoshard-benches -- pg-reads`; the board is
//! `bench-1` (`AUTOSHARD_BENCH_BOARD` for another), its players
//! `AUTOSHARD_BENCH_PLAYERS` (default 1,000,000). The statement sent by
//! hand takes `ranking-trees`' geometry (0..10^6, branching 100, depth 3).

use crate::ranking_queue::player;
use crate::stats::{us, Rng, Samples};
use autoshard::ranking::{Ranking, Tie};
use std::error::Error;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// `SELECT 1`s and `rank`s timed, interleaved.
const QUERIES: usize = 2_000;

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

pub fn run() -> Result<()> {
    let url = var("AUTOSHARD_BENCH_PG").ok_or("set AUTOSHARD_BENCH_PG")?;
    let schema = var("AUTOSHARD_BENCH_PG_SCHEMA")
        .ok_or("set AUTOSHARD_BENCH_PG_SCHEMA to the schema a ranking-trees run left")?;
    let name = var("AUTOSHARD_BENCH_BOARD").unwrap_or_else(|| "bench-1".into());
    let players: usize = var("AUTOSHARD_BENCH_PLAYERS").map_or(Ok(1_000_000), |n| n.parse())?;
    let db = autoshard::Postgres::builder(&url).schema(&schema).open()?;
    let board = Ranking::open(&db, &name)?;
    let mut client = postgres::Client::connect(&url, postgres::NoTls)?;
    let one = client.prepare("SELECT 1")?;
    // Warm both: connections, prepared statements, generic plans.
    for i in 0..20 {
        client.query_one(&one, &[])?;
        board.rank(&player(i), Tie::Standard)?;
    }
    let mut rng = Rng::new(0x7AAE_0003);
    let (mut floor, mut ranks) = (Samples::default(), Samples::default());
    for _ in 0..QUERIES {
        let t0 = Instant::now();
        client.query_one(&one, &[])?;
        floor.push(t0.elapsed());
        let who = player(rng.below(players as u32) as usize);
        let t0 = Instant::now();
        board.rank(&who, Tie::Standard)?;
        ranks.push(t0.elapsed());
    }
    // The board's own statement (`planned` in
    // `stores/postgres/boards/sql.rs`), sent by hand: what the store adds
    // around it.
    let [planned, _] = autoshard::__private::pg_hooks::planned_read_sql(&db);
    let raw = client.prepare(&planned)?;
    let id: i64 = client
        .query_one(
            &*format!("SELECT id FROM {schema}.autoshard_rank_boards WHERE name = $1"),
            &[&name],
        )?
        .get(0);
    // The same statement with the node rows folded into one on the
    // server (their total length): the most summing in SQL could save,
    // were summing free.
    let folded = client.prepare(&planned.replace(
        "SELECT 2::int2, n.height, n.idx, n.part, n.shard, n.v, NULL, NULL, NULL",
        "SELECT 2::int2, NULL, NULL, NULL, NULL, NULL, NULL, sum(length(n.v))::int8, NULL",
    ))?;
    let (mut by_hand, mut on_server) = (Samples::default(), Samples::default());
    for i in 0..QUERIES + 20 {
        for (statement, samples) in [(&raw, &mut by_hand), (&folded, &mut on_server)] {
            let who = player(rng.below(players as u32) as usize);
            let t0 = Instant::now();
            let rows = client.query(
                statement,
                &[
                    &id,
                    &who,
                    &None::<i64>,
                    &0i64,
                    &100i64,
                    &3i32,
                    &false,
                    &false,
                ],
            )?;
            if i >= 20 {
                samples.push(t0.elapsed());
            }
            assert!(rows.len() >= 3, "{} rows for {who}", rows.len());
        }
    }
    let reads = crate::ranking_trees::pg_reads(&url, &db, &name, players)?;
    println!("## PostgreSQL reads against one round trip");
    println!();
    println!(
        "Board `{name}` in schema `{schema}` ({players} players), one thread, \
         {QUERIES} `SELECT 1` and `rank` interleaved, then the reads of `ranking-trees`."
    );
    println!();
    println!("| query | p50 | p99 | p50 ÷ `SELECT 1` p50 |");
    println!("|---|---:|---:|---:|");
    let base = floor.percentile(50.0);
    let rows = [
        ("`SELECT 1`, prepared (the floor)", &floor),
        ("`rank` (standard)", &ranks),
        ("`rank`'s statement sent by hand, rows not read", &by_hand),
        (
            "the same, node rows folded into one on the server",
            &on_server,
        ),
        ("`rank`, again after the rest", &reads[1]),
        ("`score_at_rank`", &reads[2]),
        ("`page` of 10", &reads[3]),
    ];
    for (what, s) in rows {
        println!(
            "| {what} | {} | {} | {:.1}× |",
            us(s.percentile(50.0)),
            us(s.percentile(99.0)),
            s.percentile(50.0) / base
        );
    }
    println!();
    Ok(())
}

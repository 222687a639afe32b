//! Queries over a sharded field: "votes >= 50, most voted first, limit 10"
//! over N questions with 10 vote shards and one views row each, as one
//! `db.query` (summed in SQL), as the same query folded in Rust (the plan
//! for a fold SQL does not know), and as what an application does without
//! queries: load every question by id and filter in Rust.
//!
//! N is 10,000 (`--quick`: 2,000; `AUTOSHARD_BENCH_QUERY_ENTITIES`
//! overrides; `AUTOSHARD_BENCH_QUERY_STORES=sqlite` skips PostgreSQL, whose
//! 100,000 inserts take minutes). SQLite runs on a file in the benchmark's directory;
//! PostgreSQL at `AUTOSHARD_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), in schema
//! `autoshard_bench_query`, kept for the next run (the crate has no SQL
//! client to drop it): a run that finds N questions there reuses them.

use crate::model::Question;
use crate::stats::{median, thousands, Rng};
use autoshard::{Postgres, Sqlite, Store, Synchronous};
use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const SCHEMA: &str = "autoshard_bench_query";

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let entities: u64 = match std::env::var("AUTOSHARD_BENCH_QUERY_ENTITIES") {
        Ok(n) => n.parse()?,
        Err(_) if quick => 2_000,
        Err(_) => 10_000,
    };
    let repeats = if quick { 3 } else { 10 };
    println!("## Queries over a sharded field\n");
    println!(
        "`votes >= 50 ORDER BY votes DESC LIMIT 10` over {} questions, 10 static vote \
         shards and 1 dynamic views row each ({} shard rows). Median of {repeats} runs \
         (3 folded in Rust, 3 loading every question).\n",
        thousands(entities),
        thousands(entities * 11)
    );
    println!(
        "| store | db.query (SQL sum) | db.query folded in Rust | load all + filter | speed-up |"
    );
    println!("|---|---:|---:|---:|---:|");
    let sqlite = Sqlite::builder(dir.join("query.db"))
        .synchronous(Synchronous::Off)
        .open()?;
    row("SQLite", &sqlite, entities, repeats)?;
    let stores = std::env::var("AUTOSHARD_BENCH_QUERY_STORES").unwrap_or_default();
    if !stores.is_empty() && !stores.contains("postgres") {
        println!();
        return Ok(());
    }
    let url = std::env::var("AUTOSHARD_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let postgres = Postgres::builder(&url).schema(SCHEMA).open()?;
    row("PostgreSQL", &postgres, entities, repeats)?;
    println!();
    Ok(())
}

fn row<S: Store>(name: &str, db: &S, entities: u64, repeats: usize) -> Result<()> {
    eprintln!("query: {name}: {entities} questions");
    build(db, entities)?;
    let top = || -> Result<Vec<u64>> {
        let found = db
            .query::<Question>()
            .filter(|q| q.votes.ge(50))
            .order_by(|q| q.votes.desc())
            .limit(10)
            .run()?;
        Ok(found.iter().map(|q| q.id).collect())
    };
    let in_rust = || -> Result<Vec<u64>> {
        let found = db
            .query::<Question>()
            .filter(|q| q.votes.ge(50))
            .order_by(|q| q.votes.desc())
            .limit(10)
            .__in_rust()
            .run()?;
        Ok(found.iter().map(|q| q.id).collect())
    };
    let (sql, expected) = time(repeats, top)?;
    let (rust, folded) = time(repeats.min(3), in_rust)?;
    let (all, loaded) = time(repeats.min(3), || load_all(db, entities))?;
    if expected != folded || expected != loaded {
        return Err(
            format!("{name}: the plans disagree: {expected:?} {folded:?} {loaded:?}").into(),
        );
    }
    println!(
        "| {name} | {} | {} | {} | {:.0}× |",
        ms(sql),
        ms(rust),
        ms(all),
        all.as_secs_f64() / sql.as_secs_f64()
    );
    Ok(())
}

/// The median time of `repeats` runs, and the last answer.
fn time<R>(repeats: usize, mut f: impl FnMut() -> Result<R>) -> Result<(Duration, R)> {
    let mut times = Vec::with_capacity(repeats);
    let mut last = None;
    for _ in 0..repeats {
        let start = Instant::now();
        last = Some(f()?);
        times.push(start.elapsed().as_secs_f64());
    }
    let answer = last.ok_or("no runs")?;
    Ok((Duration::from_secs_f64(median(&times)), answer))
}

fn load_all<S: Store>(db: &S, entities: u64) -> Result<Vec<u64>> {
    let mut all = Vec::new();
    for id in 0..entities {
        if let Some(q) = db.load::<Question>(&id)? {
            if q.votes >= 50 {
                all.push((std::cmp::Reverse(q.votes), q.id));
            }
        }
    }
    all.sort();
    Ok(all.into_iter().take(10).map(|(_, id)| id).collect())
}

/// `entities` questions with 0..100 votes spread over their 10 shards (a
/// save per 10 votes lands in a random shard); kept if already there.
fn build<S: Store>(db: &S, entities: u64) -> Result<()> {
    let stats = db.stats::<Question>()?;
    let votes = stats.field("votes").map_or(0, |f| f.rows);
    if stats.entities == entities && votes == entities * 10 {
        eprintln!("query: reusing {entities} stored questions");
        return Ok(());
    }
    for q in db.query::<Question>().run()? {
        db.delete::<Question>(&q.id)?;
    }
    let mut rng = Rng::new(7);
    let start = Instant::now();
    for id in 0..entities {
        let mut q = Question::new(id);
        q.votes = i64::from(rng.below(60));
        db.insert(&q)?;
        for _ in 0..rng.below(5) {
            for _ in 0..10 {
                q.vote_up();
            }
            db.save(&mut q)?;
        }
    }
    eprintln!("query: built in {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

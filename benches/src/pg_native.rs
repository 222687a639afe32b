//! What PostgreSQL does natively for a leaderboard's job, beside the
//! queued board in `ranking-trees` (issue 18, item 5): a plain
//! `(player, score)` table with an index on `score`, the same kind of
//! batches upserted with one `INSERT … ON CONFLICT` each, and a rank as
//! `SELECT count(*) … WHERE score > $1`.

use crate::ranking_queue::player;
use crate::stats::{Rng, Samples};
use std::error::Error;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// Scores are drawn from `0..SCORES`, as the board's.
const SCORES: u32 = 1_000_000;

/// The native figures of one run.
pub(crate) struct Native {
    /// Upserted rows per second, one writer sending batches of `batch`.
    pub rate: f64,
    pub batch: usize,
    /// `count(*)` rank latencies on random players' scores.
    pub ranks: Samples,
    /// `ORDER BY score DESC OFFSET r - 1 LIMIT 1` at random ranks `r`.
    pub score_at_rank: Samples,
    /// The same with `LIMIT 10`: a page of ten at a random rank.
    pub page: Samples,
}

/// Loads `players` rows into a fresh table in `schema`, then upserts random
/// batches of `batch` for `slice` and times `queries` ranks; drops the
/// table.
pub(crate) fn run(
    url: &str,
    schema: &str,
    (players, batch): (usize, usize),
    slice: Duration,
    queries: usize,
) -> Result<Native> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    let table = format!("\"{schema}\".native_board");
    client.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
         DROP TABLE IF EXISTS {table};
         CREATE TABLE {table} (player text COLLATE \"C\" PRIMARY KEY, score bigint NOT NULL);
         CREATE INDEX ON {table} (score);"
    ))?;
    let mut rng = Rng::new(0x5EED_1234_ABCD_0001);
    for first in (0..players).step_by(50_000) {
        let names: Vec<String> = (first..players.min(first + 50_000)).map(player).collect();
        let scores: Vec<i64> = names.iter().map(|_| i64::from(rng.below(SCORES))).collect();
        client.execute(
            &format!("INSERT INTO {table} SELECT * FROM unnest($1::text[], $2::int8[])"),
            &[&names, &scores],
        )?;
    }
    client.batch_execute(&format!("VACUUM ANALYZE {table}"))?;
    let upsert = client.prepare(&format!(
        "INSERT INTO {table} SELECT * FROM unnest($1::text[], $2::int8[]) AS u(p, s) \
         ON CONFLICT (player) DO UPDATE SET score = EXCLUDED.score"
    ))?;
    let (start, mut rows) = (Instant::now(), 0usize);
    while start.elapsed() < slice {
        // One row per player per statement, as a worker's batch nets it.
        let mut picked: Vec<usize> = (0..batch)
            .map(|_| rng.below(players as u32) as usize)
            .collect();
        picked.sort_unstable();
        picked.dedup();
        let names: Vec<String> = picked.into_iter().map(player).collect();
        let scores: Vec<i64> = names.iter().map(|_| i64::from(rng.below(SCORES))).collect();
        client.execute(&upsert, &[&names, &scores])?;
        rows += names.len();
    }
    let rate = rows as f64 / start.elapsed().as_secs_f64();
    let rank = client.prepare(&format!(
        "SELECT count(*) + 1 FROM {table} \
         WHERE score > (SELECT score FROM {table} WHERE player = $1)"
    ))?;
    let mut ranks = Samples::default();
    for _ in 0..queries {
        let who = player(rng.below(players as u32) as usize);
        let t0 = Instant::now();
        client.query(&rank, &[&who])?;
        ranks.push(t0.elapsed());
    }
    let at = |limit: i64| {
        format!("SELECT player, score FROM {table} ORDER BY score DESC OFFSET $1 LIMIT {limit}")
    };
    let (one, ten) = (client.prepare(&at(1))?, client.prepare(&at(10))?);
    let (mut score_at_rank, mut page) = (Samples::default(), Samples::default());
    for (statement, samples) in [(&one, &mut score_at_rank), (&ten, &mut page)] {
        for _ in 0..queries {
            let offset = i64::from(rng.below(players as u32));
            let t0 = Instant::now();
            client.query(statement, &[&offset])?;
            samples.push(t0.elapsed());
        }
    }
    client.batch_execute(&format!("DROP TABLE {table}"))?;
    Ok(Native {
        rate,
        batch,
        ranks,
        score_at_rank,
        page,
    })
}

//! Ranking: rank queries against an indexed `COUNT(*)` and Redis, and
//! durable queued updates against Redis `ZADD`, on one million players.
//!
//! This file sets the board up and runs the sections in order; each
//! section is a file: `queries.rs` (rank queries against `COUNT(*)`),
//! `redis_ranks.rs` (against `ZREVRANK`), `updates.rs` (the durable queue
//! against `ZADD`) and `batch_sweep.rs` (the worker's batch size).

use crate::stats::{thousands, Rng};
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::Sqlite;
use rusqlite::Connection;
use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

mod batch_sweep;
mod queries;
pub(crate) mod ranges;
mod redis_ranks;
mod updates;

use batch_sweep::batch_sweep;
use queries::rank_queries;
use redis_ranks::redis_ranks;
use updates::queued_updates;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const SCORES: std::ops::Range<i64> = 0..1_000_000;
const BOARD: &str = "bench";
const LOAD_BATCH: usize = 20_000;
const PRODUCERS: usize = 8;
const REDIS_URL: &str = "redis://127.0.0.1:6379/";
const REDIS_CONNECTIONS: usize = 50;

struct Sizes {
    players: usize,
    /// Rounds of the interleaved comparisons.
    rounds: usize,
    /// Tree queries per variant per round.
    queries: usize,
    /// `COUNT(*)` queries per round.
    counts: usize,
    /// Producer time per queue cell per round.
    slice: Duration,
}

impl Sizes {
    fn new(quick: bool) -> Self {
        if quick {
            Sizes {
                players: 50_000,
                rounds: 2,
                queries: 500,
                counts: 5,
                slice: Duration::from_secs(1),
            }
        } else {
            Sizes {
                players: 1_000_000,
                rounds: 5,
                queries: 4_000,
                counts: 20,
                slice: Duration::from_secs(5),
            }
        }
    }
}

fn player(n: usize) -> String {
    format!("player-{n:07}")
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let sizes = Sizes::new(quick);
    let n = sizes.players;
    println!("## Ranking");
    println!();
    let mut rng = Rng::new(0x5EED_1234_ABCD_0001);
    let scores: Vec<i64> = (0..n)
        .map(|_| SCORES.start + i64::from(rng.below(SCORES.end as u32)))
        .collect();
    let mut sorted = scores.clone();
    sorted.sort_unstable();
    let median_score = sorted[n / 2];

    let path = dir.join("ranking.db");
    let config = RankingConfig::new(SCORES).branching(100).node_shards(8);
    let (board_load, plain_load) = {
        let db = Sqlite::open(&path)?;
        let board = Ranking::create(&db, BOARD, config.clone())?;
        (
            load_board(&board, &scores)?,
            load_plain(&dir.join("plain.db"), &scores)?,
        )
    };
    println!(
        "{} players, scores uniform in `{}..{}` (median {}), on a board made with \
         `RankingConfig::new({}..{}).branching(100).node_shards(8)` (one queue shard). Loaded with \
         `set_scores` in batches of {} in {:.1} s; the plain table (`players (player TEXT \
         PRIMARY KEY, score INTEGER)` plus an index on `score`, its own file) in {:.1} s. \
         Default `Sqlite` handles (WAL, 4 pooled connections).",
        thousands(n as u64),
        SCORES.start,
        SCORES.end,
        median_score,
        SCORES.start,
        SCORES.end,
        thousands(LOAD_BATCH as u64),
        board_load.as_secs_f64(),
        plain_load.as_secs_f64(),
    );
    println!();

    let db = Sqlite::open(&path)?;
    let board = Ranking::open(&db, BOARD)?;
    let plain = Connection::open(dir.join("plain.db"))?;
    rank_queries(&board, &plain, median_score, &sizes)?;
    drop(plain);

    let redis = match redis::Client::open(REDIS_URL).and_then(|c| {
        c.get_connection_with_timeout(Duration::from_secs(2))
            .map(|k| (c, k))
    }) {
        Ok((client, mut conn)) => match redis::cmd("PING").query::<String>(&mut conn) {
            Ok(_) => Some(client),
            Err(e) => {
                redis_skipped(&e);
                None
            }
        },
        Err(e) => {
            redis_skipped(&e);
            None
        }
    };
    let key = format!("autoshard-bench:ranking:{}", std::process::id());
    if let Some(client) = &redis {
        redis_ranks(client, &key, &board, &scores, &sizes)?;
    }
    let result = queued_updates(dir, &path, redis.as_ref(), &key, n, &sizes)
        .and_then(|()| batch_sweep(&path, n, &sizes));
    if let Some(client) = &redis {
        let mut conn = client.get_connection()?;
        redis::cmd("DEL").arg(&key).query::<()>(&mut conn)?;
    }
    result
}

fn redis_skipped(error: &redis::RedisError) {
    eprintln!("ranking: Redis unreachable at {REDIS_URL}: {error}");
    println!(
        "**Redis unreachable at `{REDIS_URL}` ({error}): the Redis comparisons are skipped.**"
    );
    println!();
}

fn load_board(board: &Ranking, scores: &[i64]) -> Result<Duration> {
    let start = Instant::now();
    let mut names = Vec::with_capacity(LOAD_BATCH);
    for first in (0..scores.len()).step_by(LOAD_BATCH) {
        names.clear();
        names.extend((first..scores.len().min(first + LOAD_BATCH)).map(player));
        let batch: Vec<(&str, i64)> = names
            .iter()
            .zip(&scores[first..])
            .map(|(name, &s)| (name.as_str(), s))
            .collect();
        board.set_scores(&batch)?;
        if (first / LOAD_BATCH).is_multiple_of(10) {
            eprintln!(
                "ranking: loaded {} of {} players",
                first + batch.len(),
                scores.len()
            );
        }
    }
    Ok(start.elapsed())
}

fn load_plain(path: &Path, scores: &[i64]) -> Result<Duration> {
    let start = Instant::now();
    let mut conn = Connection::open(path)?;
    let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    conn.execute_batch(
        "CREATE TABLE players (player TEXT PRIMARY KEY, score INTEGER NOT NULL) WITHOUT ROWID;",
    )?;
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare("INSERT INTO players (player, score) VALUES (?1, ?2)")?;
        for (n, &s) in scores.iter().enumerate() {
            insert.execute((player(n), s))?;
        }
    }
    tx.commit()?;
    conn.execute_batch("CREATE INDEX players_score ON players (score); ANALYZE;")?;
    Ok(start.elapsed())
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "missed"
    }
}

//! Ranking: rank queries against an indexed `COUNT(*)` and Redis, and
//! durable queued updates against Redis `ZADD`, on one million players.

use crate::stats::{median, thousands, us, Rng, Samples};
use autoshard::ranking::{Ranking, RankingConfig, Tie};
use autoshard::{Sqlite, Synchronous};
use rusqlite::Connection;
use std::collections::HashMap;
use std::error::Error;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    let config = RankingConfig::new(SCORES).branching(100).shards(8);
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
         `RankingConfig::new({}..{}).branching(100).shards(8)` (one queue shard). Loaded with \
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

// ---------------------------------------------------------------------------
// Rank queries.
// ---------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Query {
    RankOfMedian,
    Player(Tie),
    Count,
}

impl Query {
    const ALL: [Query; 5] = [
        Query::RankOfMedian,
        Query::Player(Tie::Standard),
        Query::Player(Tie::Dense),
        Query::Player(Tie::Ordinal),
        Query::Count,
    ];

    fn label(self) -> &'static str {
        match self {
            Query::RankOfMedian => "`board.rank_of_score(median)`",
            Query::Player(Tie::Standard) => "`board.rank(player, Tie::Standard)`, random players",
            Query::Player(Tie::Dense) => "`board.rank(player, Tie::Dense)`, random players",
            Query::Player(Tie::Ordinal) => "`board.rank(player, Tie::Ordinal)`, random players",
            Query::Count => "`SELECT count(*) FROM players WHERE score > median` (indexed)",
        }
    }
}

fn rank_queries(
    board: &Ranking,
    plain: &Connection,
    median_score: i64,
    sizes: &Sizes,
) -> Result<()> {
    let n = sizes.players;
    let mut count = plain.prepare("SELECT count(*) FROM players WHERE score > ?1")?;
    let above: u64 = count.query_row([median_score], |r| r.get::<_, i64>(0))? as u64;
    let tree = board.rank_of_score(median_score)?;
    if tree != above + 1 {
        return Err(format!(
            "rank_of_score({median_score}) = {tree}, COUNT(*) says {}",
            above + 1
        )
        .into());
    }
    let mut rng = Rng::new(0xC0FF_EE00_1234_5678);
    let mut run = |query: Query, ops: usize, samples: &mut Samples| -> Result<f64> {
        let start = Instant::now();
        for _ in 0..ops {
            let who = player(rng.below(n as u32) as usize);
            let t = Instant::now();
            match query {
                Query::RankOfMedian => {
                    std::hint::black_box(board.rank_of_score(median_score)?);
                }
                Query::Player(tie) => {
                    board.rank(&who, tie)?.ok_or("a loaded player is missing")?;
                }
                Query::Count => {
                    std::hint::black_box(count.query_row([median_score], |r| r.get::<_, i64>(0))?);
                }
            }
            samples.push(t.elapsed());
        }
        Ok(start.elapsed().as_nanos() as f64 / ops as f64)
    };
    let ops = |q: Query| match q {
        Query::Count => sizes.counts,
        _ => sizes.queries,
    };
    for q in Query::ALL {
        run(q, ops(q) / 4 + 1, &mut Samples::default())?;
    }
    let k = Query::ALL.len();
    let mut samples: Vec<Samples> = (0..k).map(|_| Samples::default()).collect();
    let mut means = vec![Vec::new(); k];
    for round in 0..sizes.rounds {
        eprintln!("ranking: rank queries, round {round}");
        for i in 0..k {
            let v = (i + round) % k;
            means[v].push(run(Query::ALL[v], ops(Query::ALL[v]), &mut samples[v])?);
        }
    }
    println!("### Rank queries");
    println!();
    println!(
        "One query = one call on a warm handle (a fresh read transaction each). Variants run \
         interleaved, {} rounds, order rotated; `rank_of_score(median)` was checked against \
         `1 + COUNT(*)` first ({}).",
        sizes.rounds,
        thousands(tree)
    );
    println!();
    println!("| query | ops | p50 | p99 | mean |");
    println!("|---|---:|---:|---:|---:|");
    for (i, q) in Query::ALL.iter().enumerate() {
        println!(
            "| {} | {} | {} | {} | {} |",
            q.label(),
            samples[i].len(),
            us(samples[i].percentile(50.0)),
            us(samples[i].percentile(99.0)),
            us(samples[i].mean()),
        );
    }
    let count_i = k - 1;
    let ratios: Vec<f64> = means[count_i]
        .iter()
        .zip(&means[0])
        .map(|(c, t)| c / t)
        .collect();
    let p50 = samples[0].percentile(50.0);
    let p50_ratio = samples[count_i].percentile(50.0) / p50;
    println!();
    println!(
        "**`COUNT(*)` ÷ `rank_of_score` = {:.0}× at p50** (mean, median of rounds: {:.0}×); \
         goal ≥ 400×: **{}**. Rank p50 {}; goal ≤ 20 µs: **{}**.",
        p50_ratio,
        median(&ratios),
        met(p50_ratio >= 400.0),
        us(p50),
        met(p50 <= 20_000.0),
    );
    println!();
    Ok(())
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "missed"
    }
}

// ---------------------------------------------------------------------------
// Redis ranks.
// ---------------------------------------------------------------------------

fn redis_ranks(
    client: &redis::Client,
    key: &str,
    board: &Ranking,
    scores: &[i64],
    sizes: &Sizes,
) -> Result<()> {
    let n = scores.len();
    let mut conn = client.get_connection()?;
    redis::cmd("DEL").arg(key).query::<()>(&mut conn)?;
    let start = Instant::now();
    for first in (0..n).step_by(10_000) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(key);
        for (i, &s) in scores.iter().enumerate().skip(first).take(10_000) {
            zadd.arg(s).arg(player(i));
        }
        zadd.query::<()>(&mut conn)?;
    }
    let loaded = start.elapsed();
    let card: u64 = redis::cmd("ZCARD").arg(key).query(&mut conn)?;
    if card != n as u64 {
        return Err(format!("Redis holds {card} members, expected {n}").into());
    }
    let mut rng = Rng::new(0xBEEF_0000_1111_2222);
    // Redis breaks ties by member name, so its rank falls among the tied.
    for _ in 0..100 {
        let i = rng.below(n as u32) as usize;
        let r: u64 = redis::cmd("ZREVRANK")
            .arg(key)
            .arg(player(i))
            .query(&mut conn)?;
        let standard = board.rank(&player(i), Tie::Standard)?.ok_or("missing")?;
        let tied = scores.iter().filter(|&&s| s == scores[i]).count() as u64;
        if !(standard..standard + tied).contains(&(r + 1)) {
            return Err(format!("ZREVRANK {r} + 1 outside {standard}..{}", standard + tied).into());
        }
    }
    let labels = [
        "`board.rank(player, Tie::Ordinal)`",
        "`board.rank(player, Tie::Standard)`",
        "Redis `ZREVRANK key player` round trip",
    ];
    let mut samples: Vec<Samples> = labels.iter().map(|_| Samples::default()).collect();
    let mut means = vec![Vec::new(); labels.len()];
    for round in 0..=sizes.rounds {
        eprintln!("ranking: Redis ranks, round {round}");
        for i in 0..labels.len() {
            let v = (i + round) % labels.len();
            let mut s = Samples::default();
            let start = Instant::now();
            for _ in 0..sizes.queries {
                let who = player(rng.below(n as u32) as usize);
                let t = Instant::now();
                match v {
                    0 => drop(board.rank(&who, Tie::Ordinal)?.ok_or("missing")?),
                    1 => drop(board.rank(&who, Tie::Standard)?.ok_or("missing")?),
                    _ => drop(
                        redis::cmd("ZREVRANK")
                            .arg(key)
                            .arg(&who)
                            .query::<Option<u64>>(&mut conn)?
                            .ok_or("missing in Redis")?,
                    ),
                }
                s.push(t.elapsed());
            }
            // Round 0 warms up.
            if round > 0 {
                means[v].push(start.elapsed().as_nanos() as f64 / sizes.queries as f64);
                samples[v].append(&mut s);
            }
        }
    }
    println!("### Rank queries next to Redis");
    println!();
    println!(
        "The same {} players `ZADD`ed into one sorted set of the local `redis-server` \
         (loaded in {:.1} s, 10,000 members per `ZADD`), queried over one connection from \
         one thread; our queries on the SQLite board. Random players, interleaved, {} \
         rounds after a warm-up round. Redis's rank was checked to fall among the \
         players tied with ours on 100 players first (it breaks ties by member name).",
        thousands(n as u64),
        loaded.as_secs_f64(),
        sizes.rounds
    );
    println!();
    println!("| query | ops | p50 | p99 | mean |");
    println!("|---|---:|---:|---:|---:|");
    for (i, label) in labels.iter().enumerate() {
        println!(
            "| {label} | {} | {} | {} | {} |",
            samples[i].len(),
            us(samples[i].percentile(50.0)),
            us(samples[i].percentile(99.0)),
            us(samples[i].mean()),
        );
    }
    let ratio = samples[2].percentile(50.0) / samples[0].percentile(50.0);
    let mean_ratios: Vec<f64> = means[2].iter().zip(&means[0]).map(|(r, o)| r / o).collect();
    println!();
    println!(
        "**`ZREVRANK` round trip ÷ our ordinal rank = {ratio:.2}× at p50** (mean, median of \
         rounds: {:.2}×): {}.",
        median(&mean_ratios),
        if ratio > 1.0 {
            "ours is faster"
        } else {
            "Redis is faster"
        }
    );
    println!();
    Ok(())
}

// ---------------------------------------------------------------------------
// Queued updates.
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Writer {
    /// Producers and a worker at once: the figure that counts.
    Queue(Synchronous),
    /// Producers alone, on an empty board of its own: the group commit's
    /// capacity.
    EnqueueOnly(Synchronous),
    /// A worker alone, draining a backlog: the apply's capacity.
    DrainOnly(Synchronous),
    RedisZadd,
}

fn sync_name(sync: Synchronous) -> &'static str {
    if sync == Synchronous::Full {
        "FULL"
    } else {
        "NORMAL"
    }
}

impl Writer {
    fn label(self) -> String {
        match self {
            Writer::Queue(sync) => format!(
                "**`enqueue` + worker, `synchronous = {}`**{}",
                sync_name(sync),
                if sync == Synchronous::Full {
                    " (the default)"
                } else {
                    ""
                }
            ),
            Writer::EnqueueOnly(sync) => format!(
                "`enqueue` alone (no worker, empty board), `{}`",
                sync_name(sync)
            ),
            Writer::DrainOnly(sync) => format!(
                "worker alone, draining {} queued updates, `{}`",
                thousands(DRAIN_BACKLOG as u64),
                sync_name(sync)
            ),
            Writer::RedisZadd => "Redis `ZADD`, 50 connections (no persistence configured)".into(),
        }
    }
}

/// Updates queued for each drain-only round.
const DRAIN_BACKLOG: usize = 10_000;

#[derive(Default)]
struct Cell {
    updates: u64,
    /// Producer time: from the start until the last producer stopped.
    acked: Duration,
    /// Until everything was applied (`flush` or the drain returned).
    applied: Duration,
    samples: Samples,
    batches: u64,
    /// Bytes this process wrote (`wchar` of `/proc/self/io`).
    written: u64,
}

impl Cell {
    fn absorb(&mut self, mut other: Cell) {
        self.updates += other.updates;
        self.acked += other.acked;
        self.applied += other.applied;
        self.samples.append(&mut other.samples);
        self.batches += other.batches;
        self.written += other.written;
    }

    fn rate(&self) -> f64 {
        self.updates as f64 / self.applied.as_secs_f64()
    }
}

fn queued_updates(
    dir: &Path,
    path: &Path,
    redis: Option<&redis::Client>,
    key: &str,
    players: usize,
    sizes: &Sizes,
) -> Result<()> {
    let empty = dir.join("enqueue-only.db");
    {
        let db = Sqlite::open(&empty)?;
        Ranking::create(
            &db,
            BOARD,
            RankingConfig::new(SCORES).branching(100).shards(8),
        )?;
    }
    let mut writers = Vec::new();
    for sync in [Synchronous::Full, Synchronous::Normal] {
        writers.extend([
            Writer::Queue(sync),
            Writer::EnqueueOnly(sync),
            Writer::DrainOnly(sync),
        ]);
    }
    if redis.is_some() {
        writers.push(Writer::RedisZadd);
    }
    let mut cells: Vec<Cell> = writers.iter().map(|_| Cell::default()).collect();
    let mut rates = vec![Vec::new(); writers.len()];
    let rounds = sizes.rounds.min(3);
    for round in 0..rounds {
        for i in 0..writers.len() {
            let v = (i + round) % writers.len();
            eprintln!("ranking: updates, {:?}, round {round}", writers[v]);
            let cell = match writers[v] {
                Writer::Queue(sync) => producers_cell(path, sync, players, sizes.slice, true)?,
                Writer::EnqueueOnly(sync) => {
                    producers_cell(&empty, sync, players, sizes.slice, false)?
                }
                Writer::DrainOnly(sync) => drain_cell(path, sync, players)?,
                Writer::RedisZadd => zadd_cell(redis.expect("checked"), key, players, sizes.slice)?,
            };
            rates[v].push(cell.rate());
            cells[v].absorb(cell);
        }
    }
    println!("### Updates: durable queue vs Redis `ZADD`");
    println!();
    println!(
        "**`enqueue` + worker**: {PRODUCERS} producer threads call `board.enqueue(player, \
         score)` in a loop for {} s (random players of the {} on the board, random scores; \
         each call returns once its update is committed) while one worker with default \
         options (batches of up to 1,000, 20 ms linger) drains; then `flush` waits until all \
         of it is applied. The rate is updates ÷ time until applied (sustained). Two more \
         rows split that figure: the same producers with no worker, on an empty board in a \
         file of its own (what group commit alone acknowledges), and a worker alone draining \
         {} updates queued beforehand (what the apply alone sustains). Redis: \
         {REDIS_CONNECTIONS} threads, one connection each, `ZADD key score player` in a loop \
         for {} s. {rounds} rounds, all variants interleaved (order rotated). After every \
         queue round the worker's count equals the updates enqueued, and 500 of the players \
         written hold their last enqueued score.",
        sizes.slice.as_secs(),
        thousands(players as u64),
        thousands(DRAIN_BACKLOG as u64),
        sizes.slice.as_secs(),
    );
    println!();
    println!(
        "| writer | updates | updates/s (median of rounds) | ack p50 | ack p99 | worker \
         transactions | updates per transaction | bytes written per update |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let dash = || "—".to_owned();
    for (i, writer) in writers.iter().enumerate() {
        let c = &cells[i];
        let worker = matches!(writer, Writer::Queue(_) | Writer::DrainOnly(_));
        let acks = !matches!(writer, Writer::DrainOnly(_));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            writer.label(),
            thousands(c.updates),
            thousands(median(&rates[i]) as u64),
            if acks {
                us(c.samples.percentile(50.0))
            } else {
                dash()
            },
            if acks {
                us(c.samples.percentile(99.0))
            } else {
                dash()
            },
            if worker { thousands(c.batches) } else { dash() },
            if worker {
                format!("{:.0}", c.updates as f64 / c.batches.max(1) as f64)
            } else {
                dash()
            },
            if matches!(writer, Writer::RedisZadd) {
                dash()
            } else {
                thousands(c.written / c.updates.max(1))
            },
        );
    }
    println!();
    let redis_at = writers.iter().position(|w| *w == Writer::RedisZadd);
    for (i, writer) in writers.iter().enumerate() {
        let Writer::Queue(sync) = writer else {
            continue;
        };
        let rate = median(&rates[i]);
        print!(
            "- `{}`: **{} updates/s sustained**; goal ≥ 50,000: **{}**",
            sync_name(*sync),
            thousands(rate as u64),
            met(rate >= 50_000.0)
        );
        if let Some(r) = redis_at {
            let ratios: Vec<f64> = rates[i].iter().zip(&rates[r]).map(|(o, r)| o / r).collect();
            print!(
                "; ÷ Redis `ZADD` = **{:.3}×** (median of per-round ratios)",
                median(&ratios)
            );
        }
        println!(".");
    }
    println!();
    Ok(())
}

/// `wchar` from `/proc/self/io`: bytes this process passed to write calls.
fn bytes_written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("wchar: ").map(|v| v.trim().parse().ok()))
                .flatten()
        })
        .unwrap_or(0)
}

/// Producers for `slice`, with a worker draining if `worker`, then (with a
/// worker) a flush and the checks.
fn producers_cell(
    path: &Path,
    sync: Synchronous,
    players: usize,
    slice: Duration,
    worker: bool,
) -> Result<Cell> {
    let db = Sqlite::builder(path).synchronous(sync).open()?;
    let board = Ranking::open(&db, BOARD)?;
    let queued_before = board.queued()?;
    let worker = worker.then(|| board.worker().spawn()).transpose()?;
    let written = bytes_written();
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let results: Vec<Result<(Samples, HashMap<usize, i64>)>> = std::thread::scope(|s| {
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|t| {
                let (board, stop) = (&board, &stop);
                s.spawn(move || -> Result<(Samples, HashMap<usize, i64>)> {
                    let mut rng =
                        Rng::new(0xABCD_0000 + t as u64 + start.elapsed().as_nanos() as u64);
                    let mut samples = Samples::default();
                    // Each producer owns the players `≡ t mod 8`, so its last
                    // write to a player is the expected final score.
                    let mut last = HashMap::new();
                    while !stop.load(Ordering::Relaxed) {
                        let who = rng.below((players / PRODUCERS) as u32) as usize * PRODUCERS + t;
                        let score = SCORES.start + i64::from(rng.below(SCORES.end as u32));
                        let name = player(who);
                        let t0 = Instant::now();
                        board.enqueue(&name, score)?;
                        samples.push(t0.elapsed());
                        last.insert(who, score);
                    }
                    Ok((samples, last))
                })
            })
            .collect();
        std::thread::sleep(slice);
        stop.store(true, Ordering::Relaxed);
        producers
            .into_iter()
            .map(|p| p.join().unwrap_or_else(|_| Err("producer panicked".into())))
            .collect()
    });
    let acked = start.elapsed();
    let mut cell = Cell {
        acked,
        applied: acked,
        ..Cell::default()
    };
    let mut check = Vec::new();
    for result in results {
        let (mut samples, last) = result?;
        cell.updates += samples.len() as u64;
        cell.samples.append(&mut samples);
        check.extend(last.into_iter().take(500 / PRODUCERS + 1));
    }
    let Some(worker) = worker else {
        cell.written = bytes_written() - written;
        if board.queued()? != queued_before + cell.updates {
            return Err("acknowledged updates are missing from the queue".into());
        }
        return Ok(cell);
    };
    board.flush()?;
    cell.applied = start.elapsed();
    let stats = worker.stop()?;
    cell.written = bytes_written() - written;
    cell.batches = stats.batches;
    if stats.updates != cell.updates {
        return Err(format!(
            "the worker applied {} updates, {} were enqueued",
            stats.updates, cell.updates
        )
        .into());
    }
    for (who, score) in check {
        if board.score(&player(who))? != Some(score) {
            return Err(format!("player {who} lost its last queued score {score}").into());
        }
    }
    if board.len()? != players as u64 {
        return Err("players went missing".into());
    }
    Ok(cell)
}

/// Queues `DRAIN_BACKLOG` updates (untimed), then times one worker draining
/// them.
fn drain_cell(path: &Path, sync: Synchronous, players: usize) -> Result<Cell> {
    let db = Sqlite::builder(path).synchronous(sync).open()?;
    let board = Ranking::open(&db, BOARD)?;
    let mut rng = Rng::new(0xD4A1_0000 + bytes_written());
    let mut last = HashMap::new();
    for _ in 0..DRAIN_BACKLOG {
        let who = rng.below(players as u32) as usize;
        let score = SCORES.start + i64::from(rng.below(SCORES.end as u32));
        last.insert(who, score);
    }
    let last: Vec<(usize, i64)> = last.into_iter().collect();
    fill_queue(&board, &last)?;
    let queued = board.queued()?;
    let written = bytes_written();
    let start = Instant::now();
    let stats = board.worker().drain()?;
    let elapsed = start.elapsed();
    if stats.updates != queued {
        return Err(format!("drained {} of {queued} updates", stats.updates).into());
    }
    for &(who, score) in last.iter().take(500) {
        if board.score(&player(who))? != Some(score) {
            return Err(format!("player {who} lost its queued score {score}").into());
        }
    }
    Ok(Cell {
        updates: stats.updates,
        acked: elapsed,
        applied: elapsed,
        batches: stats.batches,
        written: bytes_written() - written,
        ..Cell::default()
    })
}

fn zadd_cell(client: &redis::Client, key: &str, players: usize, slice: Duration) -> Result<Cell> {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let results: Vec<Result<Samples>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..REDIS_CONNECTIONS)
            .map(|t| {
                let stop = &stop;
                s.spawn(move || -> Result<Samples> {
                    let mut conn = client.get_connection()?;
                    let mut rng = Rng::new(0x7777_0000 + t as u64);
                    let mut samples = Samples::default();
                    while !stop.load(Ordering::Relaxed) {
                        let who = player(rng.below(players as u32) as usize);
                        let score = SCORES.start + i64::from(rng.below(SCORES.end as u32));
                        let t0 = Instant::now();
                        redis::cmd("ZADD")
                            .arg(key)
                            .arg(score)
                            .arg(who)
                            .query::<()>(&mut conn)?;
                        samples.push(t0.elapsed());
                    }
                    Ok(samples)
                })
            })
            .collect();
        std::thread::sleep(slice);
        stop.store(true, Ordering::Relaxed);
        threads
            .into_iter()
            .map(|p| {
                p.join()
                    .unwrap_or_else(|_| Err("Redis client panicked".into()))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let mut cell = Cell {
        acked: elapsed,
        applied: elapsed,
        ..Cell::default()
    };
    for result in results {
        let mut samples = result?;
        cell.updates += samples.len() as u64;
        cell.samples.append(&mut samples);
    }
    Ok(cell)
}

/// Worker batch sizes for [`batch_sweep`], and the page cache each run gets.
const SWEEP_BATCHES: [usize; 3] = [1_000, 10_000, 50_000];
const SWEEP_CACHE: u64 = 256 << 20;

/// How the apply rate grows with the worker's batch size: a random update
/// to a big board dirties pages no other update in a small batch shares, and
/// a bigger batch shares more of them (job aggregation's lever). One round
/// per size on the same file, each draining the same number of queued
/// updates, `synchronous = FULL`, 256 MiB page cache.
fn batch_sweep(path: &Path, players: usize, sizes: &Sizes) -> Result<()> {
    let backlog = if sizes.players >= 1_000_000 {
        100_000
    } else {
        20_000
    };
    println!("### Worker batch size");
    println!();
    println!(
        "A worker alone drains {} updates queued beforehand (random players of the {}, \
         random scores), with `worker().batch_size(n)`, on a handle opened with \
         `synchronous = FULL` and `cache_size(256 MiB)`; one run per size, in this order, \
         on the same board.",
        thousands(backlog as u64),
        thousands(players as u64),
    );
    println!();
    println!("| batch size | updates/s | transactions | mean transaction (what an enqueue may wait) | bytes written per update |");
    println!("|---:|---:|---:|---:|---:|");
    for batch in SWEEP_BATCHES {
        eprintln!("ranking: batch sweep, {batch}");
        let db = Sqlite::builder(path)
            .synchronous(Synchronous::Full)
            .cache_size(SWEEP_CACHE)
            .open()?;
        let board = Ranking::open(&db, BOARD)?;
        let mut rng = Rng::new(0xBA7C_0000 + batch as u64);
        let mut last = HashMap::new();
        for _ in 0..backlog {
            let who = rng.below(players as u32) as usize;
            last.insert(who, SCORES.start + i64::from(rng.below(SCORES.end as u32)));
        }
        let last: Vec<(usize, i64)> = last.into_iter().collect();
        fill_queue(&board, &last)?;
        let queued = board.queued()?;
        let written = bytes_written();
        let start = Instant::now();
        let stats = board.worker().batch_size(batch).drain()?;
        let elapsed = start.elapsed();
        if stats.updates != queued {
            return Err(format!("drained {} of {queued} updates", stats.updates).into());
        }
        for &(who, score) in last.iter().take(500) {
            if board.score(&player(who))? != Some(score) {
                return Err(format!("player {who} lost its queued score {score}").into());
            }
        }
        println!(
            "| {} | {} | {} | {:.0} ms | {} |",
            thousands(batch as u64),
            thousands((stats.updates as f64 / elapsed.as_secs_f64()) as u64),
            thousands(stats.batches),
            // The write lock is held for one transaction at a time; an
            // enqueue can wait that long for its turn.
            elapsed.as_secs_f64() * 1e3 / stats.batches.max(1) as f64,
            thousands((bytes_written() - written) / stats.updates.max(1)),
        );
    }
    println!();
    Ok(())
}

/// Queues `updates` from 8 threads (untimed), so group commits fill up.
fn fill_queue(board: &Ranking, updates: &[(usize, i64)]) -> Result<()> {
    std::thread::scope(|s| -> Result<()> {
        let fillers: Vec<_> = updates
            .chunks(updates.len().div_ceil(PRODUCERS))
            .map(|chunk| {
                s.spawn(move || -> autoshard::Result<()> {
                    for &(who, score) in chunk {
                        board.enqueue(&player(who), score)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for f in fillers {
            f.join().map_err(|_| "filler panicked")??;
        }
        Ok(())
    })
}

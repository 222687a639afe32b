//! Durable queued updates (`enqueue` and a worker, and each half alone)
//! against Redis `ZADD`, under both `synchronous` settings: the cells
//! that run each writer for a slice, and the table that compares them.

use super::{met, player, Result, Sizes, BOARD, PRODUCERS, REDIS_CONNECTIONS, SCORES};
use crate::stats::{median, thousands, us, Rng, Samples};
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::{Sqlite, Synchronous};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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

pub(super) fn queued_updates(
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
            RankingConfig::new(SCORES).branching(100).node_shards(8),
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
pub(super) fn bytes_written() -> u64 {
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

/// Queues `updates` from 8 threads (untimed), so group commits fill up.
pub(super) fn fill_queue(board: &Ranking, updates: &[(usize, i64)]) -> Result<()> {
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

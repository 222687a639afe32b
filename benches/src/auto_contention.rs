//! Automatic shard counts in the paper's voting tool (issue 11 item 1): the
//! contention benchmark's hot questions at C = 64, optimistic, no retries,
//! with 15 cold questions beside them, for naive (`shards = 1`), static
//! (`shards = 10`) and automatic (`shards = 1..=256`) in the same run.
//!
//! The automatic variant is judged on two things at once: its failed hot
//! writes against naive's (goal ≤ 0.2×), and how many shard rows its cold
//! questions keep (goal ≤ 2 each; static keeps 10 whatever the load).
//!
//! Each cell starts from freshly inserted questions, so every automatic
//! cell includes its ramp-up from one shard. No compactor runs: the run is
//! far shorter than any quiet period worth having.

use crate::contention::{humantime, url};
use crate::model::{AutoVotes, Ballot, OneShardVotes, StaticVotes};
use crate::stats::{thousands, us, Rng, Samples};
use autoshard::{Concurrency, Error, Postgres, Store};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const HOT: u64 = 16;
const COLD: u64 = 15;
/// Cold ids start here, after the hot ones.
const FIRST_COLD: u64 = 1_000;
/// One save in this many goes to a random cold question.
const COLD_EVERY: u32 = 256;
const CLIENTS: usize = 64;
const SCHEMA: &str = "autoshard_bench_auto";

#[derive(Clone, Copy)]
enum Variant {
    Naive,
    Static,
    Auto,
}

const VARIANTS: [Variant; 3] = [Variant::Naive, Variant::Static, Variant::Auto];

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Naive => "naive (`shards = 1`)",
            Variant::Static => "static (`shards = 10`)",
            Variant::Auto => "automatic (`shards = 1..=256`)",
        }
    }
}

/// One cell's figures; failures and latency count hot saves only.
#[derive(Default)]
struct Cell {
    latency: Samples,
    ok: u64,
    failed: u64,
    votes: u64,
    elapsed: Duration,
    cold_saves: u64,
    /// Shard rows per cold question, and per hot question, at the end.
    cold_rows: Vec<u64>,
    hot_rows: Vec<u64>,
}

impl Cell {
    fn absorb(&mut self, mut other: Cell) {
        self.latency.append(&mut other.latency);
        self.ok += other.ok;
        self.failed += other.failed;
        self.votes += other.votes;
        self.elapsed += other.elapsed;
        self.cold_saves += other.cold_saves;
        self.cold_rows.append(&mut other.cold_rows);
        self.hot_rows.append(&mut other.hot_rows);
    }

    fn failure_rate(&self) -> f64 {
        self.failed as f64 / (self.ok + self.failed).max(1) as f64
    }
}

fn open(attempts: u32) -> Result<Postgres> {
    Ok(Postgres::builder(&url())
        .schema(SCHEMA)
        .pool_size(1)
        .concurrency(Concurrency::Optimistic)
        .max_attempts(attempts)
        .open()?)
}

fn ids() -> impl Iterator<Item = u64> {
    (0..HOT).chain(FIRST_COLD..FIRST_COLD + COLD)
}

/// One client: votes until the deadline, then flushes what failed saves
/// left pending (retrying), and returns its cell and the votes committed.
fn client<T: Ballot>(barrier: &Barrier, time: Duration, seed: u64) -> Result<(Cell, u64)> {
    let db = open(1)?;
    let mut questions: Vec<T> = ids()
        .map(|id| db.load::<T>(&id)?.ok_or_else(|| "question missing".into()))
        .collect::<Result<_>>()?;
    let mut pending = vec![0u64; questions.len()];
    let (mut cell, mut committed) = (Cell::default(), 0);
    let mut rng = Rng::new(seed);
    barrier.wait();
    let start = Instant::now();
    while start.elapsed() < time {
        let cold = rng.below(COLD_EVERY) == 0;
        let q = match cold {
            true => (HOT + u64::from(rng.below(COLD as u32))) as usize,
            false => rng.below(HOT as u32) as usize,
        };
        questions[q].vote();
        pending[q] += 1;
        let t = Instant::now();
        let saved = db.save(&mut questions[q]);
        if !cold {
            cell.latency.push(t.elapsed());
        }
        match saved {
            Ok(_) if cold => cell.cold_saves += 1,
            Ok(_) => {
                cell.ok += 1;
                cell.votes += pending[q];
            }
            Err(Error::Conflict { .. }) if !cold => cell.failed += 1,
            Err(Error::Conflict { .. }) => {}
            Err(e) => return Err(format!("save: {e:?}").into()),
        }
        if saved.is_ok() {
            committed += pending[q];
            pending[q] = 0;
        }
    }
    cell.elapsed = start.elapsed();
    drop(db);
    let flush = open(100_000)?;
    for (q, question) in questions.iter_mut().enumerate() {
        if pending[q] > 0 {
            flush.save(question)?;
            committed += pending[q];
        }
    }
    Ok((cell, committed))
}

fn run_typed<T: Ballot>(time: Duration) -> Result<Cell> {
    let db = open(100_000)?;
    for id in ids() {
        db.delete::<T>(&id)?;
        db.insert(&T::new(id))?;
    }
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let handles: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let barrier = barrier.clone();
            let seed = seed.wrapping_add(i as u64 * 0x9E37_79B9_7F4A_7C15);
            std::thread::spawn(move || client::<T>(&barrier, time, seed))
        })
        .collect();
    let (mut cell, mut committed) = (Cell::default(), 0);
    for handle in handles {
        let (mut c, n) = handle.join().map_err(|_| "client panicked")??;
        cell.elapsed = cell.elapsed.max(c.elapsed);
        c.elapsed = Duration::ZERO;
        cell.absorb(c);
        committed += n;
    }
    let mut stored = 0;
    for id in ids() {
        stored += db.load::<T>(&id)?.ok_or("question missing")?.votes();
        let rows = db.shard_count::<T>(&id, "votes")?;
        match id < HOT {
            true => cell.hot_rows.push(rows),
            false => cell.cold_rows.push(rows),
        }
    }
    if stored != committed as i64 {
        return Err(format!("stored {stored} votes, clients committed {committed}").into());
    }
    Ok(cell)
}

fn run_cell(variant: Variant, time: Duration) -> Result<Cell> {
    match variant {
        Variant::Naive => run_typed::<OneShardVotes>(time),
        Variant::Static => run_typed::<StaticVotes>(time),
        Variant::Auto => run_typed::<AutoVotes>(time),
    }
}

/// Printed after the contention tables, as their own section.
pub fn run(quick: bool) -> Result<()> {
    let (rounds, time) = if quick {
        (1, Duration::from_secs(1))
    } else {
        (3, Duration::from_secs(2))
    };
    let mut cells: Vec<Cell> = VARIANTS.iter().map(|_| Cell::default()).collect();
    for round in 0..rounds {
        for i in 0..VARIANTS.len() {
            let v = (i + round) % VARIANTS.len();
            eprintln!(
                "contention (automatic): {} round {round}",
                VARIANTS[v].label()
            );
            cells[v].absorb(run_cell(VARIANTS[v], time)?);
        }
    }
    println!("### Automatic shard counts (issue 11 item 1)");
    println!();
    println!(
        "C = {CLIENTS}, optimistic, no retries; {HOT} hot questions and {COLD} cold ones \
         (one save in {COLD_EVERY} goes to a random cold question); {rounds} round(s) of {} \
         per variant, interleaved and rotated, questions inserted afresh each round. Failed \
         writes and latency are over hot saves; rows are shard rows per question at the end \
         of each round.",
        humantime(time)
    );
    println!();
    println!(
        "| variant | votes/s | failed writes | × naive | mean | p99 | hot rows (mean) | cold rows (max) | cold saves |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let naive = cells[0].failure_rate();
    for (variant, cell) in VARIANTS.iter().zip(&cells) {
        let mean = |rows: &[u64]| rows.iter().sum::<u64>() as f64 / rows.len().max(1) as f64;
        println!(
            "| {} | {} | {:.1}% | {:.2}× | {} | {} | {:.1} | {} | {} |",
            variant.label(),
            thousands((cell.votes as f64 / cell.elapsed.as_secs_f64()).round() as u64),
            100.0 * cell.failure_rate(),
            cell.failure_rate() / naive,
            us(cell.latency.mean()),
            us(cell.latency.percentile(99.0)),
            mean(&cell.hot_rows),
            cell.cold_rows.iter().max().copied().unwrap_or(0),
            cell.cold_saves,
        );
    }
    println!();
    let auto = &cells[2];
    let ratio = auto.failure_rate() / naive;
    let cold_max = auto.cold_rows.iter().max().copied().unwrap_or(0);
    let check = |ok: bool| if ok { "met" } else { "**not met**" };
    println!(
        "Goal (same run): automatic failed writes {:.1}% against naive {:.1}%, {ratio:.2}× \
         (≤ 0.2×: {}); cold questions at most {cold_max} shard row(s) each (≤ 2: {}; static: {}).",
        100.0 * auto.failure_rate(),
        100.0 * naive,
        check(ratio <= 0.2),
        check(cold_max <= 2),
        cells[1].cold_rows.iter().max().copied().unwrap_or(0),
    );
    println!();
    Ok(())
}

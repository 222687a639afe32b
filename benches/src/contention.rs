//! The AutoShard paper's experiment (section 5, Figure 6) on PostgreSQL:
//! a voting tool with 16 questions, C clients voting on random questions as
//! fast as they can for a fixed time, in optimistic mode (Datastore's
//! concurrency control: a transaction that writes a row another one changed
//! since it read fails), without and with transaction retries, for three
//! versions of the same struct:
//!
//! - **naive**: `votes` unsharded, i.e. one row per question read, folded
//!   and written in one `REPEATABLE READ` transaction (`shards = 1`);
//! - **static**: `shards = 10`;
//! - **dynamic**: one new row per vote.
//!
//! Then the same hot counters in locking mode, where writers queue on the
//! row lock instead of failing, with the fold done in Rust under
//! `SELECT ... FOR UPDATE` or, for `fold = checked_sum`, as one SQL
//! increment.
//!
//! Every cell checks the stored totals against the votes its clients saw
//! committed, exactly. Needs PostgreSQL at `AUTOSHARD_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); each cell runs in a fresh
//! schema, dropped afterwards.

use crate::model::{Ballot, DynamicVotes, OneShardVotes, StaticVotes};
use crate::stats::{thousands, us, Rng, Samples};
use autoshard::{shard_method, Concurrency, Error, Pending, Postgres, Shardable, Store};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const QUESTIONS: u64 = 16;
const CLIENTS: [usize; 4] = [1, 4, 16, 64];
/// "With retries" means until it succeeds, as in the paper.
const RETRY_ATTEMPTS: u32 = 100_000;

pub(crate) fn url() -> String {
    std::env::var("AUTOSHARD_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The naive counter with `fold = checked_sum`: one SQL increment in
/// locking mode.
#[derive(Shardable, Debug)]
pub struct OneShardSum {
    #[shard(id)]
    pub id: u64,
    pub question: String,
    #[shard(neutral = 0, shards = 1, fold = autoshard::fold::checked_sum)]
    pub votes: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

/// The static counter with `fold = checked_sum`.
#[derive(Shardable, Debug)]
pub struct StaticSum {
    #[shard(id)]
    pub id: u64,
    pub question: String,
    #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum)]
    pub votes: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

macro_rules! sum_ballot {
    ($name:ident) => {
        impl $name {
            #[shard_method]
            fn vote_up(&mut self) {
                self.votes += 1;
            }
        }

        impl Ballot for $name {
            fn new(id: u64) -> Self {
                $name {
                    id,
                    question: "Hot question".into(),
                    votes: 0,
                    pending: Pending::default(),
                }
            }
            fn vote(&mut self) {
                self.vote_up();
            }
            fn votes(&self) -> i64 {
                self.votes
            }
        }
    };
}

sum_ballot!(OneShardSum);
sum_ballot!(StaticSum);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Naive,
    Static,
    Dynamic,
    NaiveSum,
    StaticSum,
}

impl Variant {
    const PAPER: [Variant; 3] = [Variant::Naive, Variant::Static, Variant::Dynamic];
    const LOCKING: [Variant; 5] = [
        Variant::Naive,
        Variant::NaiveSum,
        Variant::Static,
        Variant::StaticSum,
        Variant::Dynamic,
    ];

    fn label(self) -> &'static str {
        match self {
            Variant::Naive => "naive (`shards = 1`)",
            Variant::Static => "static (`shards = 10`)",
            Variant::Dynamic => "dynamic",
            Variant::NaiveSum => "naive, `checked_sum` (SQL `+`)",
            Variant::StaticSum => "static, `checked_sum` (SQL `+`)",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Variant::Naive => "naive",
            Variant::Static => "static (10)",
            Variant::Dynamic => "dynamic",
            Variant::NaiveSum => "naive sum",
            Variant::StaticSum => "static sum",
        }
    }
}

/// One cell's figures, summed over its clients.
#[derive(Default)]
pub(crate) struct Cell {
    /// Every timed `save` call, failed ones included.
    pub latency: Samples,
    ok: u64,
    failed: u64,
    /// Transactions tried, by successful and failed saves.
    attempts: u64,
    /// Votes that went out with a successful timed save.
    votes: u64,
    elapsed: Duration,
}

impl Cell {
    /// Sums another round of the same cell.
    pub(crate) fn absorb(&mut self, mut other: Cell) {
        self.latency.append(&mut other.latency);
        self.ok += other.ok;
        self.failed += other.failed;
        self.attempts += other.attempts;
        self.votes += other.votes;
        self.elapsed += other.elapsed;
    }

    pub(crate) fn failure_rate(&self) -> f64 {
        self.failed as f64 / (self.ok + self.failed).max(1) as f64
    }

    pub(crate) fn votes_per_sec(&self) -> f64 {
        self.votes as f64 / self.elapsed.as_secs_f64()
    }

    fn attempts_per_vote(&self) -> f64 {
        self.attempts as f64 / self.votes.max(1) as f64
    }
}

/// What one client did.
#[derive(Default)]
struct Client {
    latency: Samples,
    ok: u64,
    failed: u64,
    attempts: u64,
    votes: u64,
    /// All votes it got committed, including the final flush.
    committed: u64,
    start: Option<Instant>,
    end: Option<Instant>,
}

pub(crate) fn open(schema: &str, mode: Concurrency, attempts: u32) -> Result<Postgres> {
    Postgres::builder(&url())
        .schema(schema)
        .pool_size(1)
        .concurrency(mode)
        .max_attempts(attempts)
        .open()
        .map_err(|e| format!("open: {e:?}").into())
}

/// Loads the 16 questions once, then votes on random ones until the
/// deadline. A failed save keeps its vote pending (autoshard never drops a
/// delta), so it goes out with the client's next successful save of that
/// question; what the paper calls a failed write is the failed transaction.
fn client<T: Ballot>(
    mode: Concurrency,
    attempts: u32,
    barrier: &Barrier,
    time: Duration,
    seed: u64,
) -> Result<Client> {
    let mut c = Client::default();
    let setup = (|| -> Result<(Postgres, Vec<T>)> {
        let db = open(SCHEMA, mode, attempts)?;
        let questions = (0..QUESTIONS)
            .map(|id| db.load::<T>(&id)?.ok_or_else(|| "question missing".into()))
            .collect::<Result<Vec<T>>>()?;
        Ok((db, questions))
    })();
    barrier.wait();
    let (db, mut questions) = setup?;
    let mut pending = [0u64; QUESTIONS as usize];
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let deadline = start + time;
    while Instant::now() < deadline {
        let q = rng.below(QUESTIONS as u32) as usize;
        questions[q].vote();
        pending[q] += 1;
        let t = Instant::now();
        let saved = db.save(&mut questions[q]);
        c.latency.push(t.elapsed());
        match saved {
            Ok(saved) => {
                c.ok += 1;
                c.attempts += u64::from(saved.attempts);
                c.votes += pending[q];
                c.committed += pending[q];
                pending[q] = 0;
            }
            Err(Error::Conflict { attempts }) => {
                c.failed += 1;
                c.attempts += u64::from(attempts);
            }
            Err(e) => return Err(format!("save: {e:?}").into()),
        }
    }
    c.start = Some(start);
    c.end = Some(Instant::now());
    // Flush what failed writes left pending, retrying until it lands, so
    // the stored totals can be checked exactly (one connection per client
    // at a time: 64 clients stay within `max_connections = 100`).
    drop(db);
    let flush = open(SCHEMA, mode, RETRY_ATTEMPTS)?;
    for (q, question) in questions.iter_mut().enumerate() {
        if pending[q] > 0 {
            flush.save(question).map_err(|e| format!("flush: {e:?}"))?;
            c.committed += pending[q];
        }
    }
    Ok(c)
}

/// Every cell works in this schema: the benchmarks crate has no SQL client
/// of its own to drop a schema with, so it is reused by the next run, and
/// each cell deletes and re-inserts its 16 questions.
pub(crate) const SCHEMA: &str = "autoshard_bench_contention";

fn run_cell(
    variant: Variant,
    mode: Concurrency,
    retries: bool,
    clients: usize,
    time: Duration,
) -> Result<Cell> {
    match variant {
        Variant::Naive => run_typed::<OneShardVotes>(variant.short(), mode, retries, clients, time),
        Variant::Static => run_typed::<StaticVotes>(variant.short(), mode, retries, clients, time),
        Variant::Dynamic => {
            run_typed::<DynamicVotes>(variant.short(), mode, retries, clients, time)
        }
        Variant::NaiveSum => {
            run_typed::<OneShardSum>(variant.short(), mode, retries, clients, time)
        }
        Variant::StaticSum => run_typed::<StaticSum>(variant.short(), mode, retries, clients, time),
    }
}

/// Runs `clients` threads voting on a fresh set of `T` questions for
/// `time`; `label` names the cell in errors.
pub(crate) fn run_typed<T: Ballot>(
    label: &str,
    mode: Concurrency,
    retries: bool,
    clients: usize,
    time: Duration,
) -> Result<Cell> {
    let db = open(SCHEMA, mode, RETRY_ATTEMPTS)?;
    for id in 0..QUESTIONS {
        db.delete::<T>(&id)?;
        db.insert(&T::new(id))?;
    }
    let attempts = if retries { RETRY_ATTEMPTS } else { 1 };
    let barrier = Arc::new(Barrier::new(clients));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let barrier = barrier.clone();
            let seed = seed.wrapping_add(i as u64 * 0x9E37_79B9_7F4A_7C15);
            std::thread::spawn(move || client::<T>(mode, attempts, &barrier, time, seed))
        })
        .collect();
    let mut cell = Cell::default();
    let mut committed = 0;
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    for handle in handles {
        let mut c = handle.join().map_err(|_| "client panicked")??;
        cell.latency.append(&mut c.latency);
        cell.ok += c.ok;
        cell.failed += c.failed;
        cell.attempts += c.attempts;
        cell.votes += c.votes;
        committed += c.committed;
        first = first.min(c.start).or(c.start);
        last = last.max(c.end);
    }
    cell.elapsed = last.zip(first).map_or(Duration::ZERO, |(l, f)| l - f);
    let mut stored = 0;
    for id in 0..QUESTIONS {
        stored += db.load::<T>(&id)?.ok_or("question missing")?.votes();
    }
    if stored != committed as i64 {
        return Err(format!(
            "{label} {mode:?} C={clients}: stored {stored} votes, clients committed {committed}"
        )
        .into());
    }
    Ok(cell)
}

/// The optimistic grid: `cells[retries][variant][clients]`.
type Grid = Vec<Vec<Vec<Cell>>>;

/// Runs `variants` at `clients` in `rounds` rounds of `time` each, the
/// order rotated every round so that a disturbance (a checkpoint, another
/// process) is spread over the variants instead of hitting one.
fn rounds(
    variants: &[Variant],
    mode: Concurrency,
    retries: bool,
    clients: usize,
    (rounds, time): (usize, Duration),
) -> Result<Vec<Cell>> {
    let mut cells: Vec<Cell> = variants.iter().map(|_| Cell::default()).collect();
    for round in 0..rounds {
        for i in 0..variants.len() {
            let v = (i + round) % variants.len();
            eprintln!(
                "contention: {mode:?} C={clients} retries={retries} {:?} round {round}",
                variants[v]
            );
            cells[v].absorb(run_cell(variants[v], mode, retries, clients, time)?);
        }
    }
    Ok(cells)
}

pub fn run(_dir: &Path, quick: bool) -> Result<()> {
    let slices = if quick {
        (1, Duration::from_millis(1_000))
    } else {
        (3, Duration::from_secs(2))
    };
    open(SCHEMA, Concurrency::Locking, 1)
        .map_err(|e| format!("contention needs PostgreSQL at {} ({e})", url()))?;
    println!("## Contention: the paper's Figure 6 on PostgreSQL");
    println!();
    println!(
        "The paper's voting tool: {QUESTIONS} questions, C clients (threads, each with its own \
         `Postgres` handle and connection) voting on random questions as fast as they can for \
         {} per cell ({} round(s) of {}, variants interleaved, order rotated), in optimistic mode (`REPEATABLE READ`: read the shard row, fold, write; a \
         concurrent writer to the same row makes the transaction fail with 40001, as in \
         Datastore). *Without retries* is `max_attempts(1)`: a failed save is a failed write \
         (its vote stays pending and goes out with that client's next save of the question). \
         *With retries* re-runs the transaction until it commits. Latency is per `save` call, \
         retries included; throughput counts votes committed per second; attempts are \
         transactions tried per committed vote. Every cell checks the stored totals against \
         the committed votes exactly.",
        humantime(slices.1 * slices.0 as u32),
        slices.0,
        humantime(slices.1),
    );
    println!();
    let mut grid: Grid = (0..2)
        .map(|_| Variant::PAPER.iter().map(|_| Vec::new()).collect())
        .collect();
    for &clients in &CLIENTS {
        for (r, retries) in [false, true].into_iter().enumerate() {
            let cells = rounds(
                &Variant::PAPER,
                Concurrency::Optimistic,
                retries,
                clients,
                slices,
            )?;
            for (v, cell) in cells.into_iter().enumerate() {
                grid[r][v].push(cell);
            }
        }
    }
    println!(
        "| C | retries | variant | votes/s | failed writes | mean | p50 | p99 | attempts / vote |"
    );
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|");
    for (c_index, &clients) in CLIENTS.iter().enumerate() {
        for (r, retries) in ["no", "yes"].into_iter().enumerate() {
            for (v, variant) in Variant::PAPER.iter().enumerate() {
                let cell = &grid[r][v][c_index];
                println!(
                    "| {clients} | {retries} | {} | {} | {:.1}% | {} | {} | {} | {:.2} |",
                    variant.label(),
                    thousands(cell.votes_per_sec().round() as u64),
                    100.0 * cell.failure_rate(),
                    us(cell.latency.mean()),
                    us(cell.latency.percentile(50.0)),
                    us(cell.latency.percentile(99.0)),
                    cell.attempts_per_vote(),
                );
            }
        }
    }
    println!();
    goals(&grid);
    let chart = chart_path();
    draw(&grid, &chart)?;
    println!();
    println!("Chart: `{}`.", relative(&chart));
    println!();
    locking(slices)?;
    Ok(())
}

/// The goals at C = 64, read off the same run.
fn goals(grid: &Grid) {
    let last = CLIENTS.len() - 1;
    let at = |r: usize, v: usize| &grid[r][v][last];
    let (naive, stat, dynamic) = (at(0, 0), at(0, 1), at(0, 2));
    let (naive_r, stat_r) = (at(1, 0), at(1, 1));
    let check = |ok: bool| if ok { "met" } else { "**not met**" };
    let c = CLIENTS[last];
    println!("Goals at C = {c} (same run):");
    println!();
    let ratio = stat.failure_rate() / naive.failure_rate();
    println!(
        "- failed writes without retry: naive {:.1}%, static {:.1}% ({:.2}× naive; goal ≤ 0.2×: {}), dynamic {:.2}% (goal ≈ 0: {})",
        100.0 * naive.failure_rate(),
        100.0 * stat.failure_rate(),
        ratio,
        check(ratio <= 0.2),
        100.0 * dynamic.failure_rate(),
        check(dynamic.failure_rate() < 0.005),
    );
    let latency = stat_r.latency.mean() / naive_r.latency.mean();
    println!(
        "- with retries every vote landed (totals checked exactly in every cell); mean latency \
         static {} vs naive {} ({latency:.2}×; goal ≤ 0.7×: {})",
        us(stat_r.latency.mean()),
        us(naive_r.latency.mean()),
        check(latency <= 0.7),
    );
    let throughput = stat_r.votes_per_sec() / naive_r.votes_per_sec();
    let throughput_no = stat.votes_per_sec() / naive.votes_per_sec();
    println!(
        "- throughput static vs naive: {throughput:.2}× with retries, {throughput_no:.2}× without \
         (goal ≥ 2×: {})",
        check(throughput >= 2.0),
    );
}

fn chart_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/contention.svg")
}

pub(crate) fn relative(path: &Path) -> String {
    path.to_string_lossy()
        .replace(&format!("{}/../", env!("CARGO_MANIFEST_DIR")), "")
}

/// Figure 6's two views, plus throughput: failed writes without retries,
/// mean latency with retries, votes/s with retries, against C.
fn draw(grid: &Grid, path: &Path) -> Result<()> {
    let root = SVGBackend::new(path, (1260, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let colors = [RED, BLUE, GREEN];
    let xs: Vec<f64> = (0..CLIENTS.len()).map(|i| i as f64).collect();
    type Pick = fn(&Cell) -> f64;
    let views: [(&str, &str, usize, Pick); 3] = [
        ("failed writes, no retries", "% of transactions", 0, |c| {
            100.0 * c.failure_rate()
        }),
        ("mean latency, with retries", "ms per save", 1, |c| {
            c.latency.mean() / 1e6
        }),
        ("throughput, with retries", "votes/s", 1, |c| {
            c.votes_per_sec()
        }),
    ];
    for (panel, (title, unit, r, pick)) in panels.iter().zip(views) {
        let max = grid[r]
            .iter()
            .flat_map(|cells| cells.iter().map(pick))
            .fold(0.0f64, f64::max)
            .max(1e-9);
        let mut chart = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.2f64..(CLIENTS.len() as f64 - 0.8), 0.0..max * 1.1)?;
        chart
            .configure_mesh()
            .x_labels(CLIENTS.len())
            .x_label_formatter(&|x| {
                let i = x.round() as usize;
                CLIENTS.get(i).map_or(String::new(), |c| c.to_string())
            })
            .x_desc("clients C")
            .y_desc(unit)
            .draw()?;
        for (v, variant) in Variant::PAPER.iter().enumerate() {
            let color = colors[v];
            let points: Vec<(f64, f64)> = xs
                .iter()
                .zip(&grid[r][v])
                .map(|(x, cell)| (*x, pick(cell)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(variant.short())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// The hot counters in locking mode: no failures by construction, so the
/// question is what queueing on a row lock costs.
fn locking(slices: (usize, Duration)) -> Result<()> {
    println!("### Locking mode: hot counters");
    println!();
    println!(
        "Same clients and questions, `Concurrency::Locking` (`READ COMMITTED`): a save locks \
         its shard row (`SELECT ... FOR UPDATE`, fold in Rust, `UPDATE`), or with \
         `fold = checked_sum` adds in one `INSERT ... ON CONFLICT DO UPDATE SET int_value = \
         int_value + $1`. Writers queue on the row lock instead of failing; retries on \
         (only deadlocks would need them)."
    );
    println!();
    println!("| C | variant | votes/s | mean | p50 | p99 | attempts / vote |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for &clients in &CLIENTS {
        let cells = rounds(
            &Variant::LOCKING,
            Concurrency::Locking,
            true,
            clients,
            slices,
        )?;
        for (variant, cell) in Variant::LOCKING.iter().zip(cells) {
            println!(
                "| {clients} | {} | {} | {} | {} | {} | {:.2} |",
                variant.label(),
                thousands(cell.votes_per_sec().round() as u64),
                us(cell.latency.mean()),
                us(cell.latency.percentile(50.0)),
                us(cell.latency.percentile(99.0)),
                cell.attempts_per_vote(),
            );
        }
    }
    println!();
    Ok(())
}

pub(crate) fn humantime(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1_000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

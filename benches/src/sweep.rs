//! The AutoShard paper's announced extended evaluation (section 6: "the
//! impact of the number of shards on the transaction time"): the contention
//! benchmark's optimistic cell without retries, swept over the shard count
//! at two client counts, next to dynamic sharding. Needs PostgreSQL at
//! `AUTOSHARD_PG_URL`, like `contention`, and shares its schema.

use crate::contention::{humantime, open, relative, run_typed, url, Cell, SCHEMA};
use crate::model::{
    DynamicVotes, FiftyShardVotes, FiveShardVotes, HundredShardVotes, OneShardVotes, StaticVotes,
    TwentyShardVotes, TwoShardVotes,
};
use crate::stats::{thousands, us};
use autoshard::Concurrency;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The sweep; `None` is dynamic sharding.
const SHARDS: [Option<u32>; 8] = [
    Some(1),
    Some(2),
    Some(5),
    Some(10),
    Some(20),
    Some(50),
    Some(100),
    None,
];
const CLIENTS: [usize; 2] = [16, 64];

fn label(shards: Option<u32>) -> String {
    shards.map_or_else(|| "dynamic".into(), |n| format!("shards = {n}"))
}

/// One cell: optimistic, no retries (a failed save is a failed write).
fn cell(shards: Option<u32>, clients: usize, time: Duration) -> Result<Cell> {
    let label = label(shards);
    let mode = Concurrency::Optimistic;
    match shards {
        Some(1) => run_typed::<OneShardVotes>(&label, mode, false, clients, time),
        Some(2) => run_typed::<TwoShardVotes>(&label, mode, false, clients, time),
        Some(5) => run_typed::<FiveShardVotes>(&label, mode, false, clients, time),
        Some(10) => run_typed::<StaticVotes>(&label, mode, false, clients, time),
        Some(20) => run_typed::<TwentyShardVotes>(&label, mode, false, clients, time),
        Some(50) => run_typed::<FiftyShardVotes>(&label, mode, false, clients, time),
        Some(100) => run_typed::<HundredShardVotes>(&label, mode, false, clients, time),
        None => run_typed::<DynamicVotes>(&label, mode, false, clients, time),
        Some(n) => Err(format!("no benchmark kind with {n} shards").into()),
    }
}

pub fn run(_dir: &Path, quick: bool) -> Result<()> {
    let (rounds, time) = if quick {
        (1, Duration::from_millis(1_000))
    } else {
        (3, Duration::from_secs(2))
    };
    open(SCHEMA, Concurrency::Locking, 1)
        .map_err(|e| format!("sweep needs PostgreSQL at {} ({e})", url()))?;
    // `cells[c][s]`, rounds interleaved and rotated as in `contention`, so
    // a disturbance is spread over the shard counts instead of hitting one.
    let mut cells: Vec<Vec<Cell>> = CLIENTS
        .iter()
        .map(|_| SHARDS.iter().map(|_| Cell::default()).collect())
        .collect();
    for (c, &clients) in CLIENTS.iter().enumerate() {
        for round in 0..rounds {
            for i in 0..SHARDS.len() {
                let s = (i + round) % SHARDS.len();
                eprintln!("sweep: C={clients} {} round {round}", label(SHARDS[s]));
                cells[c][s].absorb(cell(SHARDS[s], clients, time)?);
            }
        }
    }
    println!("## Shard-count sweep (the paper's extended evaluation)");
    println!();
    println!(
        "The contention benchmark's voting tool on PostgreSQL, optimistic mode without retries \
         (a failed save is a failed write), {} per cell ({rounds} round(s) of {}, shard counts \
         interleaved and rotated), against the shard count of a static field and next to \
         dynamic sharding. Totals checked exactly in every cell.",
        humantime(time * rounds as u32),
        humantime(time),
    );
    println!();
    println!("| C | variant | votes/s | failed writes | mean | p50 | p99 |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for (c, &clients) in CLIENTS.iter().enumerate() {
        for (s, &shards) in SHARDS.iter().enumerate() {
            let cell = &cells[c][s];
            println!(
                "| {clients} | {} | {} | {:.1}% | {} | {} | {} |",
                label(shards),
                thousands(cell.votes_per_sec().round() as u64),
                100.0 * cell.failure_rate(),
                us(cell.latency.mean()),
                us(cell.latency.percentile(50.0)),
                us(cell.latency.percentile(99.0)),
            );
        }
    }
    println!();
    let chart = chart_path();
    draw(&cells, &chart)?;
    println!("Chart: `{}`.", relative(&chart));
    println!();
    Ok(())
}

fn chart_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/shard-sweep.svg")
}

/// Failed writes, mean and p99 save time against the shard count (log
/// axis), one line per client count; dynamic sharding, which has no shard
/// count, as a dashed level of the same colour.
fn draw(cells: &[Vec<Cell>], path: &Path) -> Result<()> {
    let root = SVGBackend::new(path, (1260, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let colors = [BLUE, RED];
    type Pick = fn(&Cell) -> f64;
    let views: [(&str, &str, Pick); 3] = [
        ("failed writes, no retries", "% of transactions", |c| {
            100.0 * c.failure_rate()
        }),
        ("mean save time", "ms", |c| c.latency.mean() / 1e6),
        ("p99 save time", "ms", |c| c.latency.percentile(99.0) / 1e6),
    ];
    let counts: Vec<f64> = SHARDS.iter().flatten().map(|&n| f64::from(n)).collect();
    let (lo, hi) = (counts[0] * 0.8, counts[counts.len() - 1] * 1.25);
    for (panel, (title, unit, pick)) in panels.iter().zip(views) {
        let max = cells
            .iter()
            .flat_map(|row| row.iter().map(pick))
            .fold(0.0f64, f64::max)
            .max(1e-9);
        let mut chart = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..max * 1.1)?;
        chart
            .configure_mesh()
            .x_desc("shards (log scale)")
            .y_desc(unit)
            .draw()?;
        for (c, &clients) in CLIENTS.iter().enumerate() {
            let color = colors[c];
            let points: Vec<(f64, f64)> = SHARDS
                .iter()
                .zip(&cells[c])
                .filter_map(|(s, cell)| s.map(|n| (f64::from(n), pick(cell))))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(format!("static, C = {clients}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
            let dynamic = pick(&cells[c][SHARDS.len() - 1]);
            chart
                .draw_series(DashedLineSeries::new(
                    [(lo, dynamic), (hi, dynamic)],
                    6,
                    4,
                    color.stroke_width(1),
                ))?
                .label(format!("dynamic, C = {clients}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.mix(0.5)));
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

//! Compaction: fold a million pending dynamic rows and time it.

use crate::model::Counter;
use crate::stats::{per_sec, thousands};
use autoshard::{CompactionStats, Pending, Sqlite, Store, Synchronous};
use rusqlite::Connection;
use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

struct Layout {
    entities: u64,
    rows_per_entity: u64,
}

struct Measured {
    stats: CompactionStats,
    elapsed: Duration,
    longest_batch: Duration,
    build: Duration,
}

/// Writes `entities` counters with `rows_per_entity` dynamic rows each, every
/// row holding 1. Entities go through the mapper (so their documents are
/// real); the extra rows go in by raw SQL in one transaction, since the
/// point is to measure compaction, not loading.
fn build(path: &Path, layout: &Layout) -> Result<Duration> {
    let start = Instant::now();
    {
        let db = Sqlite::builder(path).synchronous(Synchronous::Off).open()?;
        for id in 0..layout.entities {
            db.insert(&Counter {
                id,
                hits: 1,
                pending: Pending::default(),
            })?;
        }
    }
    let mut conn = Connection::open(path)?;
    conn.execute_batch("PRAGMA synchronous = OFF")?;
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare(
            "INSERT INTO as_shard_counter (entity, field, shard, value) VALUES (?1, 'hits', ?2, 1)",
        )?;
        for id in 0..layout.entities {
            for shard in 1..layout.rows_per_entity {
                insert.execute((id as i64, shard as i64))?;
            }
        }
    }
    tx.commit()?;
    // Start the timed run with an empty WAL, as after any quiet period.
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    Ok(start.elapsed())
}

fn measure(dir: &Path, layout: &Layout, tag: &str) -> Result<Measured> {
    let path = dir.join(format!("compact-{tag}.db"));
    let build = build(&path, layout)?;
    // The default handle: synchronous = FULL, 10,000-row batches.
    let db = Sqlite::open(&path)?;
    assert_eq!(
        db.shard_count::<Counter>(&0, "hits")?,
        layout.rows_per_entity
    );
    let mut longest_batch = Duration::ZERO;
    let start = Instant::now();
    let mut last = start;
    let stats = db.compact_with::<Counter>(&mut |_| {
        let now = Instant::now();
        longest_batch = longest_batch.max(now - last);
        last = now;
    })?;
    let elapsed = start.elapsed();
    let expected = layout.entities * (layout.rows_per_entity - 1);
    if stats.rows_merged != expected {
        return Err(format!("merged {} rows, expected {expected}", stats.rows_merged).into());
    }
    for id in 0..layout.entities {
        let c: Counter = db.load(&id)?.ok_or("counter missing")?;
        let rows = db.shard_count::<Counter>(&id, "hits")?;
        if c.hits != layout.rows_per_entity as i64 || rows != 1 {
            return Err(format!(
                "counter {id}: {} hits in {rows} rows after compaction",
                c.hits
            )
            .into());
        }
    }
    drop(db);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Ok(Measured {
        stats,
        elapsed,
        longest_batch,
        build,
    })
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let (layouts, reps) = if quick {
        (
            [
                Layout {
                    entities: 100,
                    rows_per_entity: 1_000,
                },
                Layout {
                    entities: 10,
                    rows_per_entity: 10_000,
                },
            ],
            1,
        )
    } else {
        (
            [
                Layout {
                    entities: 1_000,
                    rows_per_entity: 1_000,
                },
                Layout {
                    entities: 10,
                    rows_per_entity: 100_000,
                },
            ],
            3,
        )
    };
    println!("## Compaction");
    println!();
    println!(
        "Every entity starts with its rows all pending (each row holds 1); `compact::<Counter>()` \
         on a default handle (`synchronous = FULL`, batches of about 10,000 rows) \
         folds them into one row each. Afterwards every counter is loaded and checked. \
         Layouts alternate; {reps} run(s) each."
    );
    println!();
    println!("| entities × rows | run | rows folded | batches | time | rows folded/s | longest batch | build (not timed) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut best = Vec::new();
    for rep in 0..reps {
        for (i, layout) in layouts.iter().enumerate() {
            eprintln!(
                "compaction: {} x {} run {}",
                layout.entities,
                layout.rows_per_entity,
                rep + 1
            );
            let m = measure(dir, layout, &format!("{i}-{rep}"))?;
            let rate = m.stats.rows_merged as f64 / m.elapsed.as_secs_f64();
            best.push((i, rate));
            println!(
                "| {} × {} | {} | {} | {} | {:.2} s | {} | {} ms | {:.1} s |",
                thousands(layout.entities),
                thousands(layout.rows_per_entity),
                rep + 1,
                thousands(m.stats.rows_merged),
                m.stats.batches,
                m.elapsed.as_secs_f64(),
                per_sec(m.stats.rows_merged as f64, m.elapsed),
                m.longest_batch.as_millis(),
                m.build.as_secs_f64(),
            );
        }
    }
    println!();
    for (i, layout) in layouts.iter().enumerate() {
        let mut rates: Vec<f64> = best
            .iter()
            .filter(|(j, _)| *j == i)
            .map(|(_, r)| *r)
            .collect();
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        println!(
            "- {} × {}: median **{} rows folded/s**; goal ≥ 500,000: **{}**.",
            thousands(layout.entities),
            thousands(layout.rows_per_entity),
            thousands(median as u64),
            if median >= 500_000.0 { "met" } else { "missed" }
        );
    }
    println!();
    Ok(())
}

//! Mapper overhead: `save()` of one static shard delta against hand-written
//! rusqlite code doing the same job on an identical table.

use crate::model::Question;
use crate::stats::{median, us, Rng, Samples};
use autoshard::{Sqlite, Store, Synchronous};
use rusqlite::{Connection, TransactionBehavior};
use std::error::Error;
use std::path::Path;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const ID: u64 = 42;
const SHARDS: u32 = 10;

/// One way of adding a vote to question 42.
trait Variant {
    fn name(&self) -> &'static str;
    fn vote(&mut self) -> Result<()>;
    /// The stored total, read back to check every vote landed.
    fn total(&self) -> Result<i64>;
}

/// The mapper: a vote (one static shard delta), or with `DYNAMIC` a view
/// (the dynamic field `views`: each save appends a row, the statement that
/// stamps the row's append time for `stats`). A parameter, not a field, so
/// that callgrind reports the two apart (`Mapper<true>`).
struct Mapper<const DYNAMIC: bool> {
    db: Sqlite,
    question: Question,
}

impl<const DYNAMIC: bool> Variant for Mapper<DYNAMIC> {
    fn name(&self) -> &'static str {
        match DYNAMIC {
            false => "autoshard `vote_up(); save()`",
            true => "autoshard dynamic `view(); save()`",
        }
    }
    fn vote(&mut self) -> Result<()> {
        match DYNAMIC {
            false => self.question.vote_up(),
            true => self.question.view(),
        }
        self.db.save(&mut self.question)?;
        Ok(())
    }
    fn total(&self) -> Result<i64> {
        let stored = self.db.load::<Question>(&ID)?.ok_or("question vanished")?;
        Ok(if DYNAMIC { stored.views } else { stored.votes })
    }
}

/// The baseline: one `UPDATE ... SET value = value + 1`.
struct RawUpdate {
    conn: Connection,
    rng: Rng,
}

impl Variant for RawUpdate {
    fn name(&self) -> &'static str {
        "hand-written `UPDATE value = value + 1`"
    }
    fn vote(&mut self) -> Result<()> {
        let shard = self.rng.below(SHARDS);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.prepare_cached(
            "UPDATE as_shard_question SET value = value + 1 \
             WHERE entity = ?1 AND field = ?2 AND shard = ?3",
        )?
        .execute((ID as i64, "votes", shard))?;
        tx.commit()?;
        Ok(())
    }
    fn total(&self) -> Result<i64> {
        raw_total(&self.conn)
    }
}

/// The SQL the mapper issues (read the shard, fold in Rust, upsert), written
/// by hand: separates the cost of that SQL from the mapper's own code.
struct RawSameSql {
    conn: Connection,
    rng: Rng,
}

impl Variant for RawSameSql {
    fn name(&self) -> &'static str {
        "hand-written `SELECT` + upsert (the mapper's SQL)"
    }
    fn vote(&mut self) -> Result<()> {
        let shard = self.rng.below(SHARDS);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let stored: i64 = tx
            .prepare_cached(
                "SELECT value FROM as_shard_question \
                 WHERE entity = ?1 AND field = ?2 AND shard = ?3",
            )?
            .query_row((ID as i64, "votes", shard), |r| r.get(0))?;
        tx.prepare_cached(
            "INSERT INTO as_shard_question (entity, field, shard, value) \
             VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (entity, field, shard) DO UPDATE SET value = excluded.value",
        )?
        .execute((ID as i64, "votes", shard, stored + 1))?;
        tx.commit()?;
        Ok(())
    }
    fn total(&self) -> Result<i64> {
        raw_total(&self.conn)
    }
}

fn raw_total(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row(
        "SELECT sum(value) FROM as_shard_question WHERE entity = ?1 AND field = 'votes'",
        [ID as i64],
        |r| r.get(0),
    )?)
}

fn pragma(sync: Synchronous) -> &'static str {
    match sync {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
        _ => unreachable!("the benchmark runs FULL and NORMAL"),
    }
}

/// A database file whose tables the mapper created, holding question 42, so
/// the hand-written variants run on exactly the mapper's schema.
fn prepared_file(path: &Path, sync: Synchronous) -> Result<Sqlite> {
    let db = Sqlite::builder(path).synchronous(sync).open()?;
    db.insert(&Question::new(ID))?;
    Ok(db)
}

fn raw_connection(path: &Path, sync: Synchronous) -> Result<Connection> {
    drop(prepared_file(path, sync)?);
    let conn = Connection::open(path)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    assert_eq!(mode, "wal");
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA foreign_keys = ON;",
        pragma(sync)
    ))?;
    Ok(conn)
}

fn run_ops(variant: &mut dyn Variant, ops: usize, samples: &mut Samples) -> Result<f64> {
    let start = Instant::now();
    for _ in 0..ops {
        let t = Instant::now();
        variant.vote()?;
        samples.push(t.elapsed());
    }
    Ok(start.elapsed().as_nanos() as f64 / ops as f64)
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    println!("## Mapper overhead");
    println!();
    println!(
        "One op = add one vote to question 42 (10 static shards, random shard) in its own \
         `BEGIN IMMEDIATE` transaction on a WAL file. Variants run interleaved \
         (round-robin, order rotated each round), each warmed up first. The last \
         variant saves a view instead: one appended row of the dynamic field."
    );
    println!();
    for sync in [Synchronous::Full, Synchronous::Normal] {
        let (rounds, ops) = match (sync, quick) {
            (Synchronous::Full, false) => (20, 500),
            (Synchronous::Full, true) => (3, 100),
            (_, false) => (20, 20_000),
            (_, true) => (5, 2_000),
        };
        eprintln!(
            "mapper: synchronous = {}, {rounds} rounds x {ops} ops",
            pragma(sync)
        );
        let tag = pragma(sync).to_lowercase();
        let mapper_db = prepared_file(&dir.join(format!("mapper-{tag}.db")), sync)?;
        let question = mapper_db.load::<Question>(&ID)?.ok_or("question missing")?;
        let dynamic_db = prepared_file(&dir.join(format!("mapper-dynamic-{tag}.db")), sync)?;
        let viewed = dynamic_db
            .load::<Question>(&ID)?
            .ok_or("question missing")?;
        let mut variants: Vec<Box<dyn Variant>> = vec![
            Box::new(Mapper::<false> {
                db: mapper_db,
                question,
            }),
            Box::new(RawUpdate {
                conn: raw_connection(&dir.join(format!("raw-update-{tag}.db")), sync)?,
                rng: Rng::new(0x9E37_79B9_7F4A_7C15),
            }),
            Box::new(RawSameSql {
                conn: raw_connection(&dir.join(format!("raw-upsert-{tag}.db")), sync)?,
                rng: Rng::new(0xD1B5_4A32_D192_ED03),
            }),
            // Last: the table's ratios index the variants above.
            Box::new(Mapper::<true> {
                db: dynamic_db,
                question: viewed,
            }),
        ];
        let warmup = ops / 2;
        for v in variants.iter_mut() {
            run_ops(v.as_mut(), warmup, &mut Samples::default())?;
        }
        let k = variants.len();
        let mut samples: Vec<Samples> = (0..k)
            .map(|_| Samples::with_capacity(rounds * ops))
            .collect();
        let mut round_means = vec![Vec::new(); k];
        for round in 0..rounds {
            for i in 0..k {
                let v = (i + round) % k;
                let mean = run_ops(variants[v].as_mut(), ops, &mut samples[v])?;
                round_means[v].push(mean);
            }
        }
        let expected = (warmup + rounds * ops) as i64;
        for v in &variants {
            let total = v.total()?;
            if total != expected {
                return Err(
                    format!("{}: stored {total} votes, expected {expected}", v.name()).into(),
                );
            }
        }
        print_table(sync, rounds, ops, &variants, &samples, &round_means);
    }
    Ok(())
}

fn print_table(
    sync: Synchronous,
    rounds: usize,
    ops: usize,
    variants: &[Box<dyn Variant>],
    samples: &[Samples],
    round_means: &[Vec<f64>],
) {
    println!("### `synchronous = {}`", pragma(sync));
    println!();
    println!("{rounds} rounds × {ops} ops per variant; every vote checked in the stored total afterwards.");
    println!();
    println!(
        "| variant | ops | mean | p50 | p99 | mean ÷ hand-written UPDATE (median of rounds) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, v) in variants.iter().enumerate() {
        let ratios: Vec<f64> = round_means[i]
            .iter()
            .zip(&round_means[1])
            .map(|(a, b)| a / b)
            .collect();
        println!(
            "| {} | {} | {} | {} | {} | {:.2}× |",
            v.name(),
            samples[i].len(),
            us(samples[i].mean()),
            us(samples[i].percentile(50.0)),
            us(samples[i].percentile(99.0)),
            median(&ratios),
        );
    }
    let ratios: Vec<f64> = round_means[0]
        .iter()
        .zip(&round_means[1])
        .map(|(a, b)| a / b)
        .collect();
    let (lo, hi) = ratios
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &r| {
            (l.min(r), h.max(r))
        });
    let headline = median(&ratios);
    println!();
    println!(
        "**autoshard ÷ hand-written UPDATE = {headline:.2}×** (per-round range {lo:.2}–{hi:.2}×; \
         p50 ratio {:.2}×, p99 ratio {:.2}×); goal ≤ 1.3×: **{}**. The mapper adds {} per save \
         on the mean, {} at p50.",
        samples[0].percentile(50.0) / samples[1].percentile(50.0),
        samples[0].percentile(99.0) / samples[1].percentile(99.0),
        if headline <= 1.3 { "met" } else { "missed" },
        us(samples[0].mean() - samples[1].mean()),
        us(samples[0].percentile(50.0) - samples[1].percentile(50.0)),
    );
    println!();
}

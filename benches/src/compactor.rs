//! The background compactor against live writers: what it costs the writers
//! (throughput, p99), whether it keeps up, and the share of time it held the
//! writer, measured against its cap.

use crate::stats::{per_sec, thousands, us, Samples};
use autoshard::{
    shard_fold, shard_method, CompactorStats, Pending, Shardable, Sqlite, Store, Synchronous,
};
use std::error::Error;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// A page whose views pile up one dynamic row per save.
#[derive(Shardable, Debug)]
pub struct Page {
    #[shard(id)]
    pub id: u64,
    #[shard(neutral = 0)]
    pub views: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl Page {
    #[shard_method]
    fn view(&mut self) {
        self.views += 1;
    }

    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
}

const PAGES: u64 = 16;
const WRITERS: u64 = 8;

struct Measured {
    saves: u64,
    elapsed: Duration,
    latencies: Samples,
    /// Rows waiting for compaction when the writers stopped.
    pending_at_end: u64,
    compactor: Option<CompactorStats>,
}

fn open(path: &Path) -> autoshard::Result<Sqlite> {
    Sqlite::builder(path)
        .synchronous(Synchronous::Normal)
        .open()
}

/// A new file with the pages, at 0 views.
fn create(path: &Path) -> Result<Sqlite> {
    let db = open(path)?;
    for id in 0..PAGES {
        db.insert(&Page {
            id,
            views: 0,
            pending: Pending::default(),
        })?;
    }
    Ok(db)
}

/// Writer `w`: views pseudo-random pages, one save each, until `stop`;
/// its saves and their latencies.
fn write_until(path: &Path, w: u64, stop: &AtomicBool) -> Result<(u64, Samples)> {
    let db = open(path)?;
    let mut pages: Vec<Page> = (0..PAGES)
        .map(|id| db.load(&id)?.ok_or_else(|| "page missing".into()))
        .collect::<Result<_>>()?;
    let mut latencies = Samples::with_capacity(100_000);
    let mut saves = 0u64;
    let mut next = w;
    while !stop.load(Ordering::Relaxed) {
        let page = &mut pages[(next % PAGES) as usize];
        next = next
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
            >> 1;
        page.view();
        let t = Instant::now();
        db.save(page)?;
        latencies.push(t.elapsed());
        saves += 1;
    }
    Ok((saves, latencies))
}

/// `cap`: `None` runs the writers alone.
fn measure(path: &Path, seconds: f64, cap: Option<f64>) -> Result<Measured> {
    let db = create(path)?;
    let compactor = cap
        .map(|cap| -> Result<_> {
            Ok(open(path)?
                .compactor::<Page>()
                .interval(Duration::from_millis(100))
                .max_writer_share(cap)
                .spawn()?)
        })
        .transpose()?;
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let results: Vec<Result<(u64, Samples)>> = thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let stop = &stop;
                s.spawn(move || write_until(path, w, stop))
            })
            .collect();
        thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        writers
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .collect()
    });
    let elapsed = started.elapsed();
    let pending_at_end = db.stats::<Page>()?.pending();
    let compactor = compactor.map(|c| c.stop()).transpose()?;
    let mut saves = 0;
    let mut latencies = Samples::default();
    for result in results {
        let (n, mut l) = result?;
        saves += n;
        latencies.append(&mut l);
    }
    // Whatever the cap, nothing was lost: every save is one view.
    db.compact::<Page>()?;
    let views: i64 = (0..PAGES)
        .map(|id| Ok(db.load::<Page>(&id)?.ok_or("page missing")?.views))
        .sum::<Result<i64>>()?;
    if views != saves as i64 {
        return Err(format!("{views} views stored for {saves} saves").into());
    }
    Ok(Measured {
        saves,
        elapsed,
        latencies,
        pending_at_end,
        compactor,
    })
}

/// A backlog of `rows` pending rows (by raw SQL, one transaction), then one
/// pass of the compactor at `cap` while the writers keep saving; the writers
/// stop when the pass ends.
fn measure_backlog(path: &Path, rows: u64, cap: f64) -> Result<(Measured, Duration)> {
    let db = create(path)?;
    {
        let mut conn = rusqlite::Connection::open(path)?;
        let tx = conn.transaction()?;
        {
            let mut insert = tx.prepare(
                "INSERT INTO as_shard_page (entity, field, shard, value) VALUES (?1, 'views', ?2, 1)",
            )?;
            for n in 0..rows {
                insert.execute(((n % PAGES) as i64, (1 + n / PAGES) as i64))?;
            }
        }
        tx.commit()?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    }
    let compactor = open(path)?.compactor::<Page>().max_writer_share(cap);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let (pass, results) = thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let stop = &stop;
                s.spawn(move || write_until(path, w, stop))
            })
            .collect();
        let pass = compactor.run_once();
        stop.store(true, Ordering::Relaxed);
        let results: Vec<_> = writers
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .collect();
        (pass, results)
    });
    let elapsed = started.elapsed();
    let pass = pass?;
    let mut saves = 0;
    let mut latencies = Samples::default();
    for result in results {
        let (n, mut l) = result?;
        saves += n;
        latencies.append(&mut l);
    }
    if pass.rows_merged < rows {
        return Err(format!("merged {} of {rows} backlog rows", pass.rows_merged).into());
    }
    let views: i64 = (0..PAGES)
        .map(|id| Ok(db.load::<Page>(&id)?.ok_or("page missing")?.views))
        .sum::<Result<i64>>()?;
    if views != (rows + saves) as i64 {
        return Err(format!("{views} views stored for {rows} + {saves}").into());
    }
    Ok((
        Measured {
            saves,
            elapsed,
            latencies,
            pending_at_end: 0,
            compactor: Some(pass),
        },
        elapsed,
    ))
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let seconds = if quick { 2.0 } else { 5.0 };
    println!("## Background compactor");
    println!();
    println!(
        "{WRITERS} writer threads (a handle each) save views of {PAGES} pages for {seconds} s on one \
         SQLite file (`synchronous = NORMAL`, so the file's write lock, not fsync, is what \
         writers and compactor share); each save appends a dynamic row. Alongside, no \
         compactor or `db.compactor::<Page>()` with a pass every 100 ms, default batches \
         (10,000 rows) and the cap shown. *Writer share* is the compactor's own measure: \
         time from a batch's first statement in its write transaction to its commit, over \
         its life. *Pending* is `db.stats()` when the writers stopped. Afterwards every \
         view is checked to be stored exactly once."
    );
    println!();
    println!("| compactor cap | saves/s | p50 | p99 | rows merged | batches | writer share | longest batch | paused for the cap | pending at end |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, cap) in [None, Some(1.0), Some(0.25), Some(0.05)]
        .into_iter()
        .enumerate()
    {
        eprintln!("compactor: cap {cap:?}");
        let path = dir.join(format!("compactor-{i}.db"));
        let m = measure(&path, seconds, cap)?;
        let (merged, batches, share, longest, paused) = match &m.compactor {
            Some(c) => (
                thousands(c.rows_merged),
                thousands(c.batches),
                format!("{:.2}%", 100.0 * c.writer_share()),
                us(c.longest_batch.as_nanos() as f64),
                format!("{:.0} ms", c.throttled.as_secs_f64() * 1e3),
            ),
            None => ("–".into(), "–".into(), "–".into(), "–".into(), "–".into()),
        };
        println!(
            "| {} | {} | {} | {} | {merged} | {batches} | {share} | {longest} | {paused} | {} |",
            cap.map_or("none".into(), |c| format!("{c}")),
            per_sec(m.saves as f64, m.elapsed),
            us(m.latencies.percentile(50.0)),
            us(m.latencies.percentile(99.0)),
            thousands(m.pending_at_end),
        );
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    println!();

    let backlog: u64 = if quick { 50_000 } else { 400_000 };
    println!(
        "A backlog of {} pending rows, folded by one pass (`run_once`, default batches) \
         while the same {WRITERS} writers keep saving, at each cap: the cap binds here. \
         The writers run for as long as the pass takes.",
        thousands(backlog)
    );
    println!();
    println!("| cap | pass | rows merged/s | writer share | longest batch | paused | writers' saves/s | p50 | p99 |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, cap) in [1.0, 0.5, 0.25, 0.1].into_iter().enumerate() {
        eprintln!("compactor: backlog, cap {cap}");
        let path = dir.join(format!("compactor-backlog-{i}.db"));
        let (m, elapsed) = measure_backlog(&path, backlog, cap)?;
        let c = m.compactor.expect("a pass");
        println!(
            "| {cap} | {:.2} s | {} | {:.1}% | {} | {:.0} ms | {} | {} | {} |",
            elapsed.as_secs_f64(),
            per_sec(c.rows_merged as f64, elapsed),
            100.0 * c.writer_share(),
            us(c.longest_batch.as_nanos() as f64),
            c.throttled.as_secs_f64() * 1e3,
            per_sec(m.saves as f64, m.elapsed),
            us(m.latencies.percentile(50.0)),
            us(m.latencies.percentile(99.0)),
        );
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    println!();
    Ok(())
}

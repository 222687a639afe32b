//! Voting throughput: threads, each with its own `Sqlite` handle on one file,
//! voting on one hot question for a fixed time.

use crate::model::{Ballot, DocumentVotes, DynamicVotes, OneShardVotes, StaticVotes};
use crate::stats::{per_sec, us, Samples};
use autoshard::{Sqlite, Store, Synchronous};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const ID: u64 = 1;
const THREADS: [usize; 4] = [1, 2, 4, 8];
/// Saves each thread makes before the clock starts: connections opened,
/// statements prepared, pages cached.
const WARMUP_SAVES: u64 = 20;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Variant {
    Static,
    Dynamic,
    OneShard,
    Document,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::Static,
        Variant::Dynamic,
        Variant::OneShard,
        Variant::Document,
    ];

    fn label(self) -> &'static str {
        match self {
            Variant::Static => "static, `shards = 10`",
            Variant::Dynamic => "dynamic",
            Variant::OneShard => "static, `shards = 1` (one hot row)",
            Variant::Document => "unsharded: load, `votes += 1`, save document",
        }
    }
}

/// What one thread did.
#[derive(Default)]
struct BoardWorker {
    samples: Samples,
    saves: u64,
    busy: u64,
    /// Votes this thread got committed, warm-up included.
    committed: u64,
    start: Option<Instant>,
    end: Option<Instant>,
}

/// One cell: a variant at a thread count, possibly summed over rounds.
#[derive(Default)]
struct Cell {
    samples: Samples,
    saves: u64,
    busy: u64,
    elapsed: Duration,
    /// Stored total minus committed votes: negative means lost updates.
    drift: i64,
    committed: u64,
}

impl Cell {
    fn absorb(&mut self, mut other: Cell) {
        self.samples.append(&mut other.samples);
        self.saves += other.saves;
        self.busy += other.busy;
        self.elapsed += other.elapsed;
        self.drift += other.drift;
        self.committed += other.committed;
    }

    fn rate(&self) -> f64 {
        self.saves as f64 / self.elapsed.as_secs_f64()
    }
}

fn open(path: &Path, sync: Synchronous) -> Result<Sqlite> {
    Ok(Sqlite::builder(path).synchronous(sync).open()?)
}

/// Load once, then `vote(); save()` until the deadline: pending deltas make
/// the in-memory aggregate irrelevant, so no reload is needed.
fn sharded_worker<T: Ballot>(
    path: &Path,
    sync: Synchronous,
    barrier: &Barrier,
    time: Duration,
) -> Result<BoardWorker> {
    let mut w = BoardWorker::default();
    let setup = (|| -> Result<(Sqlite, T)> {
        let db = open(path, sync).map_err(|e| format!("open: {e:?}"))?;
        let mut q: T = db
            .load(&ID)
            .map_err(|e| format!("load: {e:?}"))?
            .ok_or("question missing")?;
        for _ in 0..WARMUP_SAVES {
            q.vote();
            db.save(&mut q)
                .map_err(|e| format!("warm-up save: {e:?}"))?;
            w.committed += 1;
        }
        Ok((db, q))
    })();
    // Every thread reaches the barrier, even one whose setup failed, so a
    // failure is reported instead of leaving the others waiting forever.
    barrier.wait();
    let (db, mut q) = setup?;
    let start = Instant::now();
    let deadline = start + time;
    let mut unsaved = 0;
    while Instant::now() < deadline {
        q.vote();
        unsaved += 1;
        let t = Instant::now();
        match db.save(&mut q) {
            Ok(_) => {
                w.samples.push(t.elapsed());
                w.saves += 1;
                w.committed += unsaved;
                unsaved = 0;
            }
            // The pending delta survives a failed save and goes out with the next.
            Err(e) if e.is_retryable() => w.busy += 1,
            Err(e) => return Err(format!("timed save: {e:?}").into()),
        }
    }
    w.start = Some(start);
    w.end = Some(Instant::now());
    while unsaved > 0 {
        if db.save(&mut q).is_ok() {
            w.committed += unsaved;
            unsaved = 0;
        }
    }
    Ok(w)
}

/// The single-row baseline as a document store offers it: no shard rows, so
/// every vote rewrites the document. Read and write are separate
/// transactions, so concurrent voters overwrite each other's votes.
fn document_worker(
    path: &Path,
    sync: Synchronous,
    barrier: &Barrier,
    time: Duration,
) -> Result<BoardWorker> {
    let mut w = BoardWorker::default();
    let vote = |db: &Sqlite| -> autoshard::Result<()> {
        let mut q: DocumentVotes = db.load(&ID)?.expect("question exists");
        q.votes += 1;
        db.save(&mut q)?;
        Ok(())
    };
    let setup = (|| -> Result<Sqlite> {
        let db = open(path, sync).map_err(|e| format!("open: {e:?}"))?;
        for _ in 0..WARMUP_SAVES {
            vote(&db).map_err(|e| format!("warm-up vote: {e:?}"))?;
            w.committed += 1;
        }
        Ok(db)
    })();
    barrier.wait();
    let db = setup?;
    let start = Instant::now();
    let deadline = start + time;
    while Instant::now() < deadline {
        let t = Instant::now();
        match vote(&db) {
            Ok(()) => {
                w.samples.push(t.elapsed());
                w.saves += 1;
                w.committed += 1;
            }
            Err(e) if e.is_retryable() => w.busy += 1,
            Err(e) => return Err(format!("timed save: {e:?}").into()),
        }
    }
    w.start = Some(start);
    w.end = Some(Instant::now());
    Ok(w)
}

fn stored_votes<T: Ballot>(path: &Path) -> Result<i64> {
    let db = Sqlite::open(path)?;
    Ok(db.load::<T>(&ID)?.ok_or("question missing")?.votes())
}

fn run_cell(
    variant: Variant,
    path: &Path,
    sync: Synchronous,
    threads: usize,
    time: Duration,
) -> Result<Cell> {
    {
        let db = open(path, sync)?;
        match variant {
            Variant::Static => db.insert(&StaticVotes::new(ID))?,
            Variant::Dynamic => db.insert(&DynamicVotes::new(ID))?,
            Variant::OneShard => db.insert(&OneShardVotes::new(ID))?,
            Variant::Document => db.insert(&DocumentVotes::new(ID))?,
        }
    }
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (path, barrier): (PathBuf, _) = (path.to_owned(), barrier.clone());
            std::thread::spawn(move || match variant {
                Variant::Static => sharded_worker::<StaticVotes>(&path, sync, &barrier, time),
                Variant::Dynamic => sharded_worker::<DynamicVotes>(&path, sync, &barrier, time),
                Variant::OneShard => sharded_worker::<OneShardVotes>(&path, sync, &barrier, time),
                Variant::Document => document_worker(&path, sync, &barrier, time),
            })
        })
        .collect();
    let mut cell = Cell::default();
    let (mut first, mut last) = (None::<Instant>, None::<Instant>);
    for h in handles {
        let mut w = h.join().map_err(|_| "voter panicked")??;
        cell.samples.append(&mut w.samples);
        cell.saves += w.saves;
        cell.busy += w.busy;
        cell.committed += w.committed;
        first = first.min(w.start).or(w.start);
        last = last.max(w.end);
    }
    cell.elapsed = last.zip(first).map_or(Duration::ZERO, |(l, f)| l - f);
    let stored = match variant {
        Variant::Static => stored_votes::<StaticVotes>(path)?,
        Variant::Dynamic => stored_votes::<DynamicVotes>(path)?,
        Variant::OneShard => stored_votes::<OneShardVotes>(path)?,
        Variant::Document => stored_votes::<DocumentVotes>(path)?,
    };
    cell.drift = stored - cell.committed as i64;
    if variant != Variant::Document && cell.drift != 0 {
        return Err(format!(
            "{variant:?}: stored {stored} votes, {} committed",
            cell.committed
        )
        .into());
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    Ok(cell)
}

impl Ballot for DocumentVotes {
    fn new(id: u64) -> Self {
        DocumentVotes {
            id,
            question: "Hot question".into(),
            votes: 0,
        }
    }
    fn vote(&mut self) {
        self.votes += 1;
    }
    fn votes(&self) -> i64 {
        self.votes
    }
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let (rounds, slice) = if quick {
        (1, Duration::from_millis(500))
    } else {
        (5, Duration::from_secs(1))
    };
    println!("## Voting throughput");
    println!();
    println!(
        "One hot question, {} per cell, threads each with their own `Sqlite` handle on one \
         WAL file (a fresh file per cell). A save is timed from the call to its return; \
         `busy` counts saves that gave up with `Error::Busy`. Variants are interleaved: \
         for each thread count, {rounds} round(s) of {} ms per variant, order rotated.",
        humantime(slice * rounds as u32),
        slice.as_millis()
    );
    println!();
    for sync in [Synchronous::Full, Synchronous::Normal] {
        let name = match sync {
            Synchronous::Full => "FULL",
            _ => "NORMAL",
        };
        println!("### `synchronous = {name}`");
        println!();
        println!(
            "| threads | variant | saves/s | p50 | p99 | busy | stored total | ÷ one hot row |"
        );
        println!("|---:|---|---:|---:|---:|---:|---|---:|");
        for threads in THREADS {
            let mut cells: Vec<Cell> = Variant::ALL.iter().map(|_| Cell::default()).collect();
            for round in 0..rounds {
                for i in 0..Variant::ALL.len() {
                    let v = (i + round) % Variant::ALL.len();
                    let variant = Variant::ALL[v];
                    eprintln!("voting: {name} {threads} threads {variant:?} round {round}");
                    let path = dir.join(format!("vote-{v}-{name}-{threads}-{round}.db"));
                    cells[v].absorb(run_cell(variant, &path, sync, threads, slice)?);
                }
            }
            let baseline = cells[2].rate();
            for (variant, cell) in Variant::ALL.iter().zip(&cells) {
                let check = if cell.drift == 0 {
                    "exact".to_owned()
                } else {
                    format!("**{} of {} votes lost**", -cell.drift, cell.committed)
                };
                println!(
                    "| {threads} | {} | {} | {} | {} | {} | {check} | {:.2}× |",
                    variant.label(),
                    per_sec(cell.saves as f64, cell.elapsed),
                    us(cell.samples.percentile(50.0)),
                    us(cell.samples.percentile(99.0)),
                    cell.busy,
                    cell.rate() / baseline,
                );
            }
        }
        println!();
    }
    Ok(())
}

fn humantime(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1_000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

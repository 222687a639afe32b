//! The cost of feature `tracing` with no subscriber installed: the calls
//! whose spans are cheapest relative to their work (an in-memory SQLite
//! `load`, `save` of one static delta, and `enqueue` with its group commit),
//! timed the same way in a build without the feature and one with it.
//!
//! One binary cannot hold both builds (a feature is per build), so the
//! figure is the ratio of two binaries run alternately in one session:
//!
//! ```text
//! cargo build --release -p autoshard-benches && cp target/release/autoshard-benches /tmp/bench-off
//! cargo build --release -p autoshard-benches --features tracing && cp target/release/autoshard-benches /tmp/bench-on
//! for i in 1 2 3; do /tmp/bench-off tracing-overhead; /tmp/bench-on tracing-overhead; done
//! ```

use crate::model::Question;
use crate::stats::median;
use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::{Sqlite, Store};
use std::error::Error;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Rounds per operation; the median round is reported.
const ROUNDS: usize = 7;

pub fn run(quick: bool) -> Result<()> {
    let ops = if quick { 2_000 } else { 20_000 };
    let db = Sqlite::memory()?;
    db.insert(&Question::new(1))?;
    let mut q: Question = db.load(&1)?.ok_or("question vanished")?;
    let board = Ranking::create(&db, "overhead", RankingConfig::new(0..1_000_000))?;

    let load = rounds(ops, |_| db.load::<Question>(&1).map(drop))?;
    let save = rounds(ops, |_| {
        q.vote_up();
        db.save(&mut q).map(drop)
    })?;
    let enqueue = rounds(ops, |i| board.enqueue(&format!("p{}", i % 1_000), i as i64))?;
    let votes = db.load::<Question>(&1)?.ok_or("question vanished")?.votes;
    if votes != (ROUNDS * ops) as i64 {
        return Err(format!("{votes} votes stored, {} saved", ROUNDS * ops).into());
    }

    println!("## tracing overhead (no subscriber)\n");
    println!(
        "Feature `tracing` compiled in: **{}**. {ops} calls per round, median of {ROUNDS} rounds, \
         in-memory SQLite, one thread.\n",
        cfg!(feature = "tracing")
    );
    println!("| call | per call |\n|---|---|");
    for (name, nanos) in [
        ("load", load),
        ("save (one static delta)", save),
        ("enqueue", enqueue),
    ] {
        println!("| `{name}` | {nanos:.0} ns |");
    }
    println!();
    Ok(())
}

/// The median over [`ROUNDS`] of the mean nanoseconds per call of `f`.
fn rounds(ops: usize, mut f: impl FnMut(usize) -> autoshard::Result<()>) -> Result<f64> {
    let mut per_call = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for i in 0..ops {
            f(i)?;
        }
        per_call.push(started.elapsed().as_nanos() as f64 / ops as f64);
    }
    Ok(median(&per_call))
}

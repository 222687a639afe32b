//! How the worker's apply rate grows with its batch size, on the board
//! the other sections loaded.

use super::updates::{bytes_written, fill_queue};
use super::{player, Result, Sizes, BOARD, SCORES};
use crate::stats::{thousands, Rng};
use autoshard::ranking::Ranking;
use autoshard::{Sqlite, Synchronous};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// Worker batch sizes for [`batch_sweep`], and the page cache each run gets.
const SWEEP_BATCHES: [usize; 3] = [1_000, 10_000, 50_000];
const SWEEP_CACHE: u64 = 256 << 20;

/// How the apply rate grows with the worker's batch size: a random update
/// to a big board dirties pages no other update in a small batch shares, and
/// a bigger batch shares more of them (job aggregation's lever). One round
/// per size on the same file, each draining the same number of queued
/// updates, `synchronous = FULL`, 256 MiB page cache.
pub(super) fn batch_sweep(path: &Path, players: usize, sizes: &Sizes) -> Result<()> {
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

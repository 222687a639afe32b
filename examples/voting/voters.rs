//! The voting itself: one thread per voter, each with its own `Sqlite`
//! handle as a separate application server would have, loading, voting and
//! saving until the time or the vote budget runs out; and the [`Tally`] of
//! what they saw acknowledged, which every later check compares against.

use super::format::{bar, ms, thousands};
use super::options::Options;
use super::{Question, Result, HOT};
use autoshard::{CompactorHandle, Sqlite, Store};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// What the voters saw acknowledged.
#[derive(Default)]
pub(super) struct Tally {
    /// Acknowledged saves per question (index 0 is question 1); each one
    /// carried one vote and one view.
    pub(super) per_question: [u64; 16],
    /// Save latencies, sorted after the run.
    latencies: Vec<Duration>,
    /// Saves whose transaction the store retried internally.
    retried_inside: u64,
    /// `Busy` errors the voters retried themselves.
    retried_by_caller: u64,
    elapsed: Duration,
}

impl Tally {
    pub(super) fn total(&self) -> u64 {
        self.per_question.iter().sum()
    }

    fn merge(&mut self, other: Tally) {
        for (mine, theirs) in self.per_question.iter_mut().zip(other.per_question) {
            *mine += theirs;
        }
        self.latencies.extend(other.latencies);
        self.retried_inside += other.retried_inside;
        self.retried_by_caller += other.retried_by_caller;
    }

    fn percentile(&self, p: f64) -> Duration {
        let last = self.latencies.len().saturating_sub(1);
        let index = ((last as f64) * p).round() as usize;
        self.latencies.get(index).copied().unwrap_or_default()
    }
}

pub(super) fn vote(path: &Path, options: &Options, compactor: &CompactorHandle) -> Result<Tally> {
    let stop = AtomicBool::new(false);
    let acknowledged = AtomicU64::new(0);
    // Votes not yet claimed by a voter, when the run is bounded by a count.
    let budget = AtomicU64::new(options.votes.unwrap_or(u64::MAX));
    let live = std::io::stdout().is_terminal();
    let start = Instant::now();
    let mut tally = thread::scope(|scope| -> Result<Tally> {
        let voters: Vec<_> = (0..options.voters)
            .map(|seed| {
                let (stop, acknowledged, budget) = (&stop, &acknowledged, &budget);
                scope.spawn(move || voter(path, options, seed as u64, stop, acknowledged, budget))
            })
            .collect();
        let deadline = options
            .votes
            .is_none()
            .then(|| Duration::from_secs_f64(options.seconds));
        while !voters.iter().all(|v| v.is_finished()) {
            let elapsed = start.elapsed();
            if deadline.is_some_and(|d| elapsed >= d) {
                stop.store(true, Ordering::Relaxed);
            }
            if live {
                let done = acknowledged.load(Ordering::Relaxed);
                let fraction = match (deadline, options.votes) {
                    (Some(d), _) => elapsed.as_secs_f64() / d.as_secs_f64(),
                    (None, Some(n)) => done as f64 / n.max(1) as f64,
                    (None, None) => 0.0,
                };
                print!(
                    "\r  voting     {} {:>8} votes  {:>7} votes/s  {:>8} view rows compacted ",
                    bar(fraction, 24),
                    thousands(done),
                    thousands((done as f64 / elapsed.as_secs_f64().max(1e-3)).round() as u64),
                    thousands(compactor.stats().rows_merged),
                );
                std::io::stdout().flush()?;
            }
            thread::sleep(Duration::from_millis(100));
        }
        if live {
            print!("\r{:110}\r", "");
        }
        let mut total = Tally::default();
        for voter in voters {
            total.merge(voter.join().expect("a voter thread panicked")?);
        }
        Ok(total)
    })?;
    tally.elapsed = start.elapsed();
    tally.latencies.sort_unstable();

    let votes = tally.total();
    let seconds = tally.elapsed.as_secs_f64();
    println!(
        "Voting: {} votes acknowledged in {seconds:.1} s = {} votes/s",
        thousands(votes),
        thousands((votes as f64 / seconds).round() as u64)
    );
    println!(
        "  save latency  p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(tally.percentile(0.50)),
        ms(tally.percentile(0.99)),
        ms(tally.latencies.last().copied().unwrap_or_default()),
    );
    println!(
        "  contention    {} saves retried inside the store, {} Busy errors retried by voters",
        thousands(tally.retried_inside),
        thousands(tally.retried_by_caller)
    );
    Ok(tally)
}

fn voter(
    path: &Path,
    options: &Options,
    seed: u64,
    stop: &AtomicBool,
    acknowledged: &AtomicU64,
    budget: &AtomicU64,
) -> Result<Tally> {
    let db = Sqlite::builder(path)
        .synchronous(options.synchronous)
        .open()?;
    let mut rng = SmallRng::seed_from_u64(0x5eed ^ seed);
    let mut tally = Tally::default();
    while !stop.load(Ordering::Relaxed) {
        let claimed =
            budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if claimed.is_err() {
            break;
        }
        let id = if rng.random::<f64>() < options.hot {
            HOT
        } else {
            rng.random_range(2..=16)
        };
        let started = Instant::now();
        let mut question: Question = db.load(&id)?.ok_or("a seeded question is missing")?;
        question.view();
        question.vote_up();
        // A failed save keeps its pending deltas, so saving the same object
        // again is the whole retry protocol.
        let saved = loop {
            match db.save(&mut question) {
                Ok(saved) => break saved,
                Err(e) if e.is_retryable() => tally.retried_by_caller += 1,
                Err(e) => return Err(e.into()),
            }
        };
        tally.latencies.push(started.elapsed());
        tally.retried_inside += u64::from(saved.attempts > 1);
        tally.per_question[id as usize - 1] += 1;
        acknowledged.fetch_add(1, Ordering::Relaxed);
    }
    Ok(tally)
}

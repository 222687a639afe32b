//! Many writer threads on one hot entity: the harness of the contention
//! tests, shared by the SQLite-only and the per-store suites.
#![allow(dead_code)] // not every suite reads every figure

use autoshard::{Shardable, Store};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// What the writers observed, summed over all of them.
#[derive(Debug, Default)]
pub struct Tally {
    pub saves: u64,
    pub retried: u64,
    pub max_attempts: u32,
    pub errors: Vec<String>,
}

impl Tally {
    fn absorb(&mut self, other: Tally) {
        self.saves += other.saves;
        self.retried += other.retried;
        self.max_attempts = self.max_attempts.max(other.max_attempts);
        self.errors.extend(other.errors);
    }
}

/// Runs `threads` writers, each with the handle `handle(i)` returns, each
/// loading entity `id` once and then calling `act` and `save` `saves`
/// times; every save must write `shard_writes` shard rows and no document.
/// Every save result is checked, none is unwrapped, so a single failure
/// anywhere shows up in the tally instead of a lost thread.
pub fn hammer<S, T>(
    threads: usize,
    saves: usize,
    id: T::Id,
    act: impl Fn(&mut T) + Copy + Send + 'static,
    shard_writes: u32,
    handle: impl Fn(usize) -> S,
) -> (Tally, Duration)
where
    S: Store + Send + 'static,
    T: Shardable + Send + 'static,
    T::Id: Clone + Send + 'static,
{
    let start = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|i| {
            let db = handle(i);
            let start = start.clone();
            let id = id.clone();
            thread::spawn(move || {
                let loaded = db.load::<T>(&id);
                let mut tally = Tally::default();
                // Reached even if the load failed: a writer that panicked
                // before it would leave the others waiting forever.
                start.wait();
                let mut entity = match loaded {
                    Ok(Some(entity)) => entity,
                    Ok(None) => {
                        tally.errors.push("load: the entity is missing".into());
                        return tally;
                    }
                    Err(e) => {
                        tally.errors.push(format!("load: {e:?}"));
                        return tally;
                    }
                };
                for _ in 0..saves {
                    act(&mut entity);
                    match db.save(&mut entity) {
                        Ok(saved) => {
                            tally.saves += 1;
                            tally.retried += u64::from(saved.attempts > 1);
                            tally.max_attempts = tally.max_attempts.max(saved.attempts);
                            if saved.attempts < 1
                                || saved.shard_writes != shard_writes
                                || saved.document_written
                            {
                                tally.errors.push(format!("unexpected {saved:?}"));
                            }
                        }
                        Err(e) => {
                            tally.errors.push(format!("{e} ({e:?})"));
                            // The pending delta survives a failed save, so
                            // the next iteration's save would carry two
                            // increments: stop rather than blur the count.
                            break;
                        }
                    }
                }
                tally
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    let mut total = Tally::default();
    for worker in workers {
        total.absorb(worker.join().expect("writer thread panicked"));
    }
    (total, began.elapsed())
}

pub fn assert_clean(tally: &Tally, expected_saves: usize) {
    assert!(
        tally.errors.is_empty(),
        "{} writer errors, first: {}",
        tally.errors.len(),
        tally.errors[0]
    );
    assert_eq!(tally.saves, expected_saves as u64);
}

//! The runtime-worker probe of the async tests (`async_stores.rs`,
//! `async_workers.rs`), included by path: it needs tokio, which the
//! shared `common` module does not.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A runtime-worker probe: a task that sleeps 1 ms at a time and records
/// how late it wakes at worst. A blocked worker (on a current-thread
/// runtime, the only one) shows as a late wake-up. Beside it a plain
/// thread does the same, as the reference for how late the machine's
/// scheduler alone makes a thread (a loaded 2-core machine: tens of ms);
/// a worker counts as blocked when the task is [`BLOCKED`] later than that.
pub struct Probe {
    stop: Arc<AtomicBool>,
    worst_us: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
    reference: std::thread::JoinHandle<Duration>,
}

/// How late a probe's task woke, and its reference thread.
#[derive(Debug)]
pub struct Lateness {
    pub task: Duration,
    pub thread: Duration,
}

impl Lateness {
    /// Whether a runtime worker was held back beyond the scheduler's own
    /// delays.
    pub fn blocked(&self) -> bool {
        self.task >= self.thread + BLOCKED
    }

    /// The one of two measurements that looks more blocked.
    pub fn worse(self, other: Lateness) -> Lateness {
        let margin = |l: &Lateness| l.task.as_secs_f64() - l.thread.as_secs_f64();
        if margin(&other) > margin(&self) {
            other
        } else {
            self
        }
    }
}

/// Asserts that `attempt` (a self-contained run measured by a probe) did not
/// block a runtime worker, measuring a second time if the first looked
/// blocked. A loaded 2-core machine's scheduler can hold back one wake-up of
/// the task and none of its reference thread (once: 63 ms against 11 ms,
/// with eight test binaries' threads busy); a worker really blocked by a
/// store call is blocked on every attempt, which the probes' controls show
/// is caught in one.
pub async fn assert_unblocked<F, Fut>(what: &str, mut attempt: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Lateness>,
{
    let first = attempt().await;
    if !first.blocked() {
        return;
    }
    eprintln!("{what}: a late wake-up ({first:?}), measured again");
    let second = attempt().await;
    assert!(
        !second.blocked(),
        "{what}: a runtime worker was blocked, twice: {first:?}, then {second:?}"
    );
}

impl Probe {
    pub fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let worst_us = Arc::new(AtomicU64::new(0));
        let (s, w) = (stop.clone(), worst_us.clone());
        let task = tokio::spawn(async move {
            // Bounded: at most 60 s of 1 ms sleeps.
            for _ in 0..60_000 {
                if s.load(Ordering::Relaxed) {
                    return;
                }
                let asked = Instant::now();
                tokio::time::sleep(Duration::from_millis(1)).await;
                let late = asked.elapsed().saturating_sub(Duration::from_millis(1));
                w.fetch_max(late.as_micros() as u64, Ordering::Relaxed);
            }
        });
        let s = stop.clone();
        let reference = std::thread::spawn(move || {
            let mut worst = Duration::ZERO;
            for _ in 0..60_000 {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let asked = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                worst = worst.max(asked.elapsed().saturating_sub(Duration::from_millis(1)));
            }
            worst
        });
        Probe {
            stop,
            worst_us,
            task,
            reference,
        }
    }

    /// The worst lateness seen.
    pub async fn finish(self) -> Lateness {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        Lateness {
            task: Duration::from_micros(self.worst_us.load(Ordering::Relaxed)),
            thread: self.reference.join().unwrap(),
        }
    }
}

/// How much later than its reference thread a probe's task may wake.
pub const BLOCKED: Duration = Duration::from_millis(50);

//! The tokio `spawn` latency probe: every few milliseconds it spawns an
//! empty task and records how long the task waited before a worker thread
//! ran it. If any route blocked a worker (a sync store call outside the
//! blocking pool), the spawned tasks queue behind it and p99 climbs to the
//! store's latency; the goal is p99 <= 1 ms under load.

use crate::model::ProbeView;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Samples kept for the percentiles (the newest; older ones are dropped).
const KEEP: usize = 1 << 16;
/// Time between two probes.
const EVERY: Duration = Duration::from_millis(2);

/// The probe's samples, shared with the routes that report them.
#[derive(Clone, Default)]
pub struct Probe {
    samples: Arc<Mutex<Samples>>,
}

#[derive(Default)]
struct Samples {
    micros: Vec<u32>,
    next: usize,
    total: u64,
}

impl Probe {
    /// Probes on the current runtime until `stop` turns true.
    pub fn spawn(&self, mut stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
        let probe = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                let spawned = Instant::now();
                if let Ok(waited) = tokio::spawn(async move { spawned.elapsed() }).await {
                    probe.record(waited);
                }
            }
        })
    }

    fn record(&self, waited: Duration) {
        let micros = u32::try_from(waited.as_micros()).unwrap_or(u32::MAX);
        let mut s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        if s.micros.len() < KEEP {
            s.micros.push(micros);
        } else {
            let at = s.next;
            s.micros[at] = micros;
        }
        s.next = (s.next + 1) % KEEP;
        s.total += 1;
    }

    /// Forgets the samples so far (the load generator calls it when its
    /// load starts, so the figures cover the load only).
    pub fn reset(&self) {
        *self.samples.lock().unwrap_or_else(|p| p.into_inner()) = Samples::default();
    }

    /// p50, p99 and max of the kept samples.
    pub fn view(&self) -> ProbeView {
        let s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        let (mut sorted, total) = (s.micros.clone(), s.total);
        drop(s);
        sorted.sort_unstable();
        let at = |q: f64| {
            let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
            u64::from(sorted[i])
        };
        if sorted.is_empty() {
            return ProbeView::default();
        }
        ProbeView {
            samples: total,
            p50_us: at(0.50),
            p99_us: at(0.99),
            max_us: u64::from(*sorted.last().unwrap_or(&0)),
        }
    }
}

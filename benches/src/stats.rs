//! Latency samples, their summaries, and how figures are printed.

use std::time::Duration;

/// Per-operation latencies in nanoseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    nanos: Vec<u64>,
}

impl Samples {
    pub fn with_capacity(n: usize) -> Self {
        Samples {
            nanos: Vec::with_capacity(n),
        }
    }

    pub fn push(&mut self, d: Duration) {
        self.nanos.push(d.as_nanos() as u64);
    }

    pub fn append(&mut self, other: &mut Samples) {
        self.nanos.append(&mut other.nanos);
    }

    pub fn len(&self) -> usize {
        self.nanos.len()
    }

    pub fn mean(&self) -> f64 {
        if self.nanos.is_empty() {
            return f64::NAN;
        }
        self.nanos.iter().map(|&n| n as f64).sum::<f64>() / self.nanos.len() as f64
    }

    /// Nearest-rank percentile, `p` in 0..=100.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.nanos.is_empty() {
            return f64::NAN;
        }
        let mut sorted = self.nanos.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1] as f64
    }
}

/// Median of a few figures (per-round ratios), robust to one noisy round.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// Nanoseconds as µs (ms from 10 ms up) with about three significant digits.
pub fn us(nanos: f64) -> String {
    let us = nanos / 1_000.0;
    if !us.is_finite() {
        "n/a".into()
    } else if us >= 10_000.0 {
        format!("{:.1} ms", us / 1_000.0)
    } else if us >= 100.0 {
        format!("{us:.0} µs")
    } else if us >= 10.0 {
        format!("{us:.1} µs")
    } else {
        format!("{us:.2} µs")
    }
}

/// A count per second, with thousands separators.
pub fn per_sec(count: f64, elapsed: Duration) -> String {
    thousands((count / elapsed.as_secs_f64()).round() as u64)
}

pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A tiny xorshift generator: the benchmarks need random shard numbers, not
/// a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    pub fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (((self.0 >> 32) * u64::from(n)) >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut s = Samples::default();
        for n in 1..=100 {
            s.push(Duration::from_nanos(n));
        }
        assert_eq!(s.percentile(50.0), 50.0);
        assert_eq!(s.percentile(99.0), 99.0);
        assert_eq!(s.percentile(100.0), 100.0);
        assert_eq!(s.mean(), 50.5);
    }

    #[test]
    fn median_and_formatting() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn rng_stays_in_range_and_covers_it() {
        let mut rng = Rng::new(7);
        let mut seen = [false; 10];
        for _ in 0..1_000 {
            seen[rng.below(10) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}

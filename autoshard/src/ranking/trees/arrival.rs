//! Board-wide arrival numbers for the trees of a split board.
//!
//! Within one tree, a score's arrival counter orders the players who reach
//! it. Across trees the counters are unrelated, so a tree of a split board
//! hands out arrival numbers of at least a floor taken here, once per write
//! transaction: microseconds since 2025-01-01, made strictly increasing in
//! this process and advanced past the block a transaction may use. Two
//! writes one after the other (in any tree, in any process on one clock)
//! get increasing arrival numbers, so "first to reach the score ranks
//! higher" holds across trees; equal numbers in two trees (writes within the
//! same microsecond in two processes) are ordered by tree index.
//!
//! A clock instead of a stored counter: a floor costs no transaction and no
//! lock shared by the trees, so `k` workers never wait for each other. The
//! price is bigger arrival numbers, so deeper arrival trees (`log_B` of the
//! number: 7 levels at B = 100 after a year, against 1 for a board of one
//! tree): see docs/design/sharded-trees.md, "Sharded trees".

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// 2025-01-01T00:00:00Z in Unix seconds.
const EPOCH_SECS: u64 = 1_735_689_600;

/// The next arrival number this process may hand out.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The first of `n` consecutive arrival numbers reserved for one write
/// transaction: above every number this process reserved before, and at
/// least the clock.
pub(crate) fn reserve(n: usize) -> u64 {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH_SECS))
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let n = n.max(1) as u64;
    let mut start = 0;
    // Infallible: the closure always returns `Some`.
    let _ = NEXT.fetch_update(Ordering::AcqRel, Ordering::Acquire, |next| {
        start = next.max(now);
        Some(start.saturating_add(n))
    });
    start
}

#[cfg(test)]
mod tests {
    #[test]
    fn blocks_never_overlap_and_follow_the_clock() {
        let a = super::reserve(1000);
        let b = super::reserve(1);
        let c = super::reserve(0);
        assert!(b >= a + 1000 && c > b, "{a} {b} {c}");
        // Past 2025 by a year or more, in microseconds.
        assert!(a > 365 * 86_400 * 1_000_000 / 2);
    }
}

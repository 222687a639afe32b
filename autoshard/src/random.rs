//! Random numbers for shard choice and jitter: fast, not secret.

use rand::distr::uniform::{SampleRange, SampleUniform};
use rand::rngs::SmallRng;
use rand::RngExt;
use std::cell::RefCell;

thread_local! {
    // A save's shard choice and every busy-handler sleep draw one number, so
    // the generator is a small non-cryptographic one, seeded once per thread
    // from the OS and never shared, hence never contended.
    static RNG: RefCell<SmallRng> = RefCell::new(rand::make_rng());
}

/// A uniform sample of `range` (`a..b`, `a..=b` or `..b`; panics if empty).
pub(crate) fn range<T: SampleUniform, R: SampleRange<T>>(range: R) -> T {
    let mut range = Some(range);
    let mut sample = |rng: &mut SmallRng| rng.random_range(range.take().expect("sampled once"));
    match RNG.try_with(|rng| sample(&mut rng.borrow_mut())) {
        Ok(n) => n,
        // This thread's generator is gone: the thread is exiting and another
        // thread-local's destructor (one holding a store handle) got here.
        Err(_) => sample(&mut rand::make_rng()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_stay_in_range_and_cover_it() {
        let mut seen = [false; 10];
        for _ in 0..1_000 {
            seen[range::<u32, _>(..10) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        for _ in 0..1_000 {
            assert!((5..=7u64).contains(&range(5..=7u64)));
        }
        assert_eq!(range(3..=3u64), 3);
    }
}

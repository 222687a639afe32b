//! Deadlines from the durations users configure. A duration option may be
//! as large as `Duration::MAX`, and no `Instant` is that far ahead
//! (`Instant + Duration` panics on overflow): a deadline that far away is
//! "never", so a huge timeout means "wait as long as it takes".

use std::time::{Duration, Instant};

/// The moment `timeout` after it was made, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deadline(Option<Instant>);

impl Deadline {
    pub fn after(timeout: Duration) -> Self {
        Deadline(Instant::now().checked_add(timeout))
    }

    pub fn passed(self) -> bool {
        self.0.is_some_and(|at| Instant::now() >= at)
    }

    /// The time left (zero once passed), or `None` for no deadline.
    pub fn left(self) -> Option<Duration> {
        self.0
            .map(|at| at.saturating_duration_since(Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_max_is_never() {
        let never = Deadline::after(Duration::MAX);
        assert!(!never.passed());
        assert_eq!(never.left(), None);
    }

    #[test]
    fn an_ordinary_timeout_passes() {
        let soon = Deadline::after(Duration::from_millis(20));
        assert!(!soon.passed());
        assert!(soon.left().unwrap() <= Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(30));
        assert!(soon.passed());
        assert_eq!(soon.left(), Some(Duration::ZERO));
        assert!(Deadline::after(Duration::ZERO).passed());
    }
}

//! Spans and events for operators (feature `tracing`), behind one macro so
//! a call site stays one line and nothing of `tracing` is compiled in
//! without the feature.
//!
//! With the feature, `span!` is `tracing::span!(..).entered()` and `event!`
//! is `tracing::event!`: their fields are evaluated only when a subscriber
//! is interested, so without one a call site costs a check of the
//! callsite's cached interest. Without the feature both expand to a
//! zero-sized value and their field tokens are dropped unparsed, so a
//! field must never be the only use of a variable (the build without the
//! feature would warn). `docs/guide/operations.md` lists the names and
//! fields; operators filter on the `autoshard` target.

/// An entered span; nothing without the feature. Leaving the scope exits it.
#[must_use = "a span is exited as soon as this is dropped"]
pub(crate) struct Entered(#[cfg(feature = "tracing")] pub(crate) tracing::span::EnteredSpan);

#[cfg(feature = "tracing")]
impl Entered {
    /// Records `value` under `field`, declared `Empty` when the span was made.
    #[inline]
    pub(crate) fn record(&self, field: &str, value: impl tracing::Value) {
        self.0.record(field, value);
    }
}

#[cfg(not(feature = "tracing"))]
impl Entered {
    #[inline(always)]
    pub(crate) fn record<V>(&self, _field: &str, _value: V) {}
}

/// `value` recorded with its `Display` (for [`Entered::record`]).
#[cfg(feature = "tracing")]
pub(crate) fn display<T: std::fmt::Display>(value: T) -> tracing::field::DisplayValue<T> {
    tracing::field::display(value)
}

#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn display<T>(value: T) -> T {
    value
}

/// An entity's id as errors render it (`42`, `alice`), rendered only when
/// a subscriber records it.
#[cfg(feature = "tracing")]
pub(crate) struct Id<'a, T: crate::Shardable>(pub(crate) &'a T::Id);

#[cfg(feature = "tracing")]
impl<T: crate::Shardable> std::fmt::Display for Id<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::entity::EntityId as _;
        match self.0.key() {
            Ok(key) => write!(f, "{key}"),
            Err(_) => f.write_str("?"),
        }
    }
}

/// `span!(LEVEL, "autoshard.name", field = value, ...)`: enters a span of
/// target `autoshard`; fields as `tracing::span!` takes them.
#[cfg(feature = "tracing")]
macro_rules! span {
    ($level:ident, $name:literal $(, $($fields:tt)*)?) => {
        $crate::trace::Entered(
            ::tracing::span!(target: "autoshard", ::tracing::Level::$level, $name $(, $($fields)*)?)
                .entered(),
        )
    };
}

#[cfg(not(feature = "tracing"))]
macro_rules! span {
    ($($ignored:tt)*) => {
        $crate::trace::Entered()
    };
}

/// `event!(LEVEL, field = value, ..., "message")`: an event of target
/// `autoshard`, in the current span.
#[cfg(feature = "tracing")]
macro_rules! event {
    ($level:ident, $($rest:tt)*) => {
        ::tracing::event!(target: "autoshard", ::tracing::Level::$level, $($rest)*)
    };
}

#[cfg(not(feature = "tracing"))]
macro_rules! event {
    ($($ignored:tt)*) => {
        ()
    };
}

pub(crate) use {event, span};

/// `let _retry = retry!(store = "postgres", attempt, error = %e);`: counts
/// the retry (`StoreMetrics::counters`, with or without the feature) and
/// enters the span `autoshard.retry` (the backoff runs in it) with one INFO event,
/// so a formatting subscriber shows each retry with its fields and the
/// spans it happened in.
macro_rules! retry {
    ($($fields:tt)*) => {{
        $crate::counters::RETRIES.add(1);
        let span = $crate::trace::span!(INFO, "autoshard.retry", $($fields)*);
        $crate::trace::event!(INFO, "autoshard: retrying");
        span
    }};
}

pub(crate) use retry;

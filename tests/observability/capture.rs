//! A real `tracing` subscriber that keeps what it is given: the spans
//! (name, fields, parent) and events of target `autoshard`, for the
//! assertions. Installed per thread with `tracing::subscriber::with_default`.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

#[derive(Debug, Clone)]
pub struct SpanSeen {
    pub name: &'static str,
    pub fields: BTreeMap<String, String>,
    /// Index into `Seen::spans`.
    pub parent: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct EventSeen {
    pub fields: BTreeMap<String, String>,
    /// The span it happened in (index into `Seen::spans`).
    pub span: Option<usize>,
}

#[derive(Debug, Default)]
pub struct Seen {
    pub spans: Vec<SpanSeen>,
    pub events: Vec<EventSeen>,
    entered: Vec<usize>,
}

impl Seen {
    pub fn named(&self, name: &str) -> Vec<&SpanSeen> {
        self.spans.iter().filter(|s| s.name == name).collect()
    }

    pub fn parent_of(&self, span: &SpanSeen) -> Option<&SpanSeen> {
        span.parent.map(|p| &self.spans[p])
    }

    /// The sum of field `field` over the spans named `name`.
    pub fn sum(&self, name: &str, field: &str) -> u64 {
        self.named(name)
            .iter()
            .filter_map(|s| s.fields.get(field))
            .map(|v| v.parse::<u64>().unwrap())
            .sum()
    }
}

#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Seen>>);

impl Capture {
    pub fn seen(&self) -> MutexGuard<'_, Seen> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on this thread with the capture as its subscriber.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        tracing::subscriber::with_default(self.clone(), f)
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Capture {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        // Asked again per call: other threads of the test binary run
        // without a subscriber at the same time.
        if meta.target().starts_with("autoshard") {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        meta.target().starts_with("autoshard")
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut seen = self.seen();
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = match attrs.parent() {
            Some(id) => Some(id.into_u64() as usize - 1),
            None if attrs.is_contextual() => seen.entered.last().copied(),
            None => None,
        };
        seen.spans.push(SpanSeen {
            name: attrs.metadata().name(),
            fields,
            parent,
        });
        Id::from_u64(seen.spans.len() as u64)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut seen = self.seen();
        let span = &mut seen.spans[span.into_u64() as usize - 1];
        values.record(&mut Fields(&mut span.fields));
    }

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut seen = self.seen();
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let span = seen.entered.last().copied();
        seen.events.push(EventSeen { fields, span });
    }

    fn enter(&self, span: &Id) {
        self.seen().entered.push(span.into_u64() as usize - 1);
    }

    fn exit(&self, span: &Id) {
        let mut seen = self.seen();
        let at = span.into_u64() as usize - 1;
        if let Some(i) = seen.entered.iter().rposition(|&s| s == at) {
            seen.entered.remove(i);
        }
    }
}

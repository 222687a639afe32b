//! Model-based property test: any sequence of inserts, shard-method calls,
//! saves, reloads, compactions and deletes leaves every loaded aggregate
//! equal to a plain in-memory model that folds the applied changes by hand.
//!
//! The model keeps, per id, the stored aggregate and the one object the
//! program holds (its aggregate view, its unsaved deltas and the unsharded
//! document it last read or wrote). A reload discards the held object's
//! unsaved deltas; a save of an entity deleted meanwhile fails and keeps them.
//! Every insert is a new incarnation (numbered by the model), and a held
//! object only saves into its own; a copy of it that commits the deltas it
//! shares with it leaves it refused; a sharded field assigned directly is
//! refused at save.
//!
//! `PROPTEST_CASES=2000 cargo test --test store_specific sqlite::model::` runs a longer
//! search; the default (64 cases) takes seconds.

use autoshard::{shard_fold, shard_method, Error, Pending, Shardable, Sqlite, Store, Synchronous};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashSet};

const IDS: u32 = 3;

#[derive(Shardable, Debug, Clone)]
struct Item {
    #[shard(id)]
    id: u32,
    label: String,
    #[shard(neutral = 0, shards = 3)]
    count: i64,
    #[shard(neutral = 0)]
    dyn_count: i64,
    #[shard(neutral = HashSet::new())]
    tags: HashSet<String>,
    // f64::MIN, not -inf: the store refuses non-finite values, and every
    // generated value is above it, so it is still max's identity here.
    #[shard(neutral = f64::MIN, shards = 2, fold = autoshard::fold::max_f64)]
    peak: f64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Item {
    #[shard_method]
    fn add(&mut self, by: i64) {
        self.count += by;
    }
    #[shard_method]
    fn add_dyn(&mut self, by: i64) {
        self.dyn_count += by;
    }
    #[shard_method]
    fn tag(&mut self, tag: String) {
        self.tags.insert(tag);
    }
    #[shard_method]
    fn record(&mut self, value: f64) {
        self.peak = self.peak.max(value);
    }
    #[shard_fold]
    fn fold_count(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_dyn_count(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_tags(mut a: HashSet<String>, b: HashSet<String>) -> HashSet<String> {
        a.extend(b);
        a
    }
}

/// An aggregate (or a delta) as the model sees it.
#[derive(Debug, Clone, PartialEq)]
struct Agg {
    count: i64,
    dyn_count: i64,
    tags: BTreeSet<String>,
    peak: f64,
}

impl Agg {
    fn neutral() -> Self {
        Agg {
            count: 0,
            dyn_count: 0,
            tags: BTreeSet::new(),
            peak: f64::MIN,
        }
    }

    fn fold(&mut self, delta: &Agg) {
        self.count += delta.count;
        self.dyn_count += delta.dyn_count;
        self.tags.extend(delta.tags.iter().cloned());
        self.peak = self.peak.max(delta.peak);
    }

    fn of(item: &Item) -> Self {
        Agg {
            count: item.count,
            dyn_count: item.dyn_count,
            tags: item.tags.iter().cloned().collect(),
            peak: item.peak,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Stored {
    label: String,
    agg: Agg,
    /// Which of the model's inserts created it.
    incarnation: u64,
}

#[derive(Debug)]
struct Held {
    item: Item,
    label: String,
    agg: Agg,
    delta: Agg,
    /// The label as last read or written: what decides whether a save
    /// writes the document.
    snapshot: String,
    /// The incarnation it was loaded or inserted as.
    incarnation: u64,
    /// A copy committed the deltas this object shares with it.
    stale_copy: bool,
}

#[derive(Debug, Clone)]
enum Change {
    Add(i64),
    AddDyn(i64),
    Tag(String),
    Record(f64),
}

#[derive(Debug, Clone)]
enum Op {
    /// Insert a fresh object, after applying `before` to it.
    Insert {
        id: u32,
        label: String,
        count: i64,
        before: Vec<Change>,
    },
    /// Load (or reload, discarding unsaved changes) the held object.
    Load(u32),
    Change(u32, Change),
    Relabel(u32, String),
    Save(u32),
    Compact,
    Delete(u32),
    /// Another program inserts the id; the held object (if any) stays.
    InsertAside(u32, String),
    /// Save a copy of the held object (made with `Clone`), then drop it.
    CopySave(u32),
    /// Assign the held object's `count` directly, try to save, undo it.
    Assign(u32, i64),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (-50i64..50).prop_map(Change::Add),
        (-50i64..50).prop_map(Change::AddDyn),
        "[a-d]{1,2}".prop_map(Change::Tag),
        (-1000i32..1000).prop_map(|v| Change::Record(f64::from(v) / 8.0)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS;
    prop_oneof![
        2 => (id.clone(), "[xy]{0,2}", -100i64..100, prop::collection::vec(change(), 0..3))
            .prop_map(|(id, label, count, before)| Op::Insert { id, label, count, before }),
        2 => id.clone().prop_map(Op::Load),
        8 => (id.clone(), change()).prop_map(|(id, c)| Op::Change(id, c)),
        1 => (id.clone(), "[xy]{0,2}").prop_map(|(id, l)| Op::Relabel(id, l)),
        5 => id.clone().prop_map(Op::Save),
        1 => Just(Op::Compact),
        1 => id.clone().prop_map(Op::Delete),
        1 => (id.clone(), "[xy]{0,2}").prop_map(|(id, l)| Op::InsertAside(id, l)),
        1 => id.clone().prop_map(Op::CopySave),
        1 => (id, -100i64..100).prop_map(|(id, v)| Op::Assign(id, v)),
    ]
}

fn apply(item: &mut Item, agg: &mut Agg, delta: &mut Agg, change: &Change) {
    match change {
        Change::Add(by) => {
            item.add(*by);
            agg.count += by;
            delta.count += by;
        }
        Change::AddDyn(by) => {
            item.add_dyn(*by);
            agg.dyn_count += by;
            delta.dyn_count += by;
        }
        Change::Tag(tag) => {
            item.tag(tag.clone());
            agg.tags.insert(tag.clone());
            delta.tags.insert(tag.clone());
        }
        Change::Record(v) => {
            item.record(*v);
            agg.peak = agg.peak.max(*v);
            delta.peak = delta.peak.max(*v);
        }
    }
}

struct Harness {
    // Held for the database file's lifetime.
    _dir: tempfile::TempDir,
    store: Sqlite,
    stored: BTreeMap<u32, Stored>,
    held: BTreeMap<u32, Held>,
    inserts: u64,
}

impl Harness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // A file (not memory) with tiny compaction batches, so compaction
        // runs span several transactions; fsync is irrelevant to semantics.
        let store = Sqlite::builder(dir.path().join("model.db"))
            .synchronous(Synchronous::Off)
            .compaction_batch_rows(4)
            .open()
            .unwrap();
        Harness {
            _dir: dir,
            store,
            stored: BTreeMap::new(),
            held: BTreeMap::new(),
            inserts: 0,
        }
    }

    fn load(&self, id: u32) -> Result<Option<(Item, Stored)>, TestCaseError> {
        let item: Option<Item> = self
            .store
            .load(&id)
            .map_err(|e| TestCaseError::fail(format!("load {id}: {e}")))?;
        Ok(item.map(|item| {
            let stored = Stored {
                label: item.label.clone(),
                agg: Agg::of(&item),
                incarnation: self.stored.get(&id).map_or(0, |s| s.incarnation),
            };
            (item, stored)
        }))
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Insert {
                id,
                label,
                count,
                before,
            } => {
                let mut item = Item {
                    id: *id,
                    label: label.clone(),
                    count: *count,
                    dyn_count: 0,
                    tags: HashSet::new(),
                    peak: f64::MIN,
                    pending: Pending::default(),
                };
                let mut agg = Agg {
                    count: *count,
                    ..Agg::neutral()
                };
                let mut delta = Agg::neutral();
                for c in before {
                    apply(&mut item, &mut agg, &mut delta, c);
                }
                let result = self.store.insert(&item);
                if self.stored.contains_key(id) {
                    prop_assert!(
                        matches!(result, Err(Error::AlreadyExists { .. })),
                        "{result:?}"
                    );
                    return Ok(());
                }
                prop_assert!(result.is_ok(), "{result:?}");
                // The stored aggregate includes the changes made before the
                // insert, so they are not pending any more.
                self.inserts += 1;
                self.stored.insert(
                    *id,
                    Stored {
                        label: label.clone(),
                        agg: agg.clone(),
                        incarnation: self.inserts,
                    },
                );
                self.held.insert(
                    *id,
                    Held {
                        item,
                        label: label.clone(),
                        agg,
                        delta: Agg::neutral(),
                        snapshot: label.clone(),
                        incarnation: self.inserts,
                        stale_copy: false,
                    },
                );
            }
            Op::Load(id) => match self.load(*id)? {
                Some((item, stored)) => {
                    self.held.insert(
                        *id,
                        Held {
                            item,
                            label: stored.label.clone(),
                            agg: stored.agg.clone(),
                            delta: Agg::neutral(),
                            snapshot: stored.label,
                            incarnation: stored.incarnation,
                            stale_copy: false,
                        },
                    );
                }
                None => {
                    prop_assert!(!self.stored.contains_key(id));
                    self.held.remove(id);
                }
            },
            Op::Change(id, c) => {
                if let Some(h) = self.held.get_mut(id) {
                    apply(&mut h.item, &mut h.agg, &mut h.delta, c);
                }
            }
            Op::Relabel(id, label) => {
                if let Some(h) = self.held.get_mut(id) {
                    h.item.label = label.clone();
                    h.label = label.clone();
                }
            }
            Op::Save(id) => {
                let Some(h) = self.held.get_mut(id) else {
                    return Ok(());
                };
                let result = self.store.save(&mut h.item);
                save_step(h, self.stored.get_mut(id), result)?;
            }
            Op::CopySave(id) => {
                let Some(h) = self.held.get_mut(id) else {
                    return Ok(());
                };
                // A clone made with nothing pending shares nothing with
                // its original (`Pending`'s `Clone`): not a stale copy,
                // whatever the original is.
                let shared = h.delta != Agg::neutral();
                let mut copy = Held {
                    item: h.item.clone(),
                    label: h.label.clone(),
                    agg: h.agg.clone(),
                    delta: h.delta.clone(),
                    snapshot: h.snapshot.clone(),
                    incarnation: h.incarnation,
                    stale_copy: h.stale_copy && shared,
                };
                let result = self.store.save(&mut copy.item);
                if save_step(&mut copy, self.stored.get_mut(id), result)? && shared {
                    h.stale_copy = true;
                }
            }
            Op::Assign(id, count) => {
                let Some(h) = self.held.get_mut(id) else {
                    return Ok(());
                };
                h.item.count = *count;
                let result = self.store.save(&mut h.item);
                if *count == h.agg.count {
                    save_step(h, self.stored.get_mut(id), result)?;
                } else if h.stale_copy {
                    prop_assert!(matches!(result, Err(Error::StaleCopy { .. })), "{result:?}");
                } else {
                    prop_assert!(
                        matches!(result, Err(Error::DirectWrite { field: "count", .. })),
                        "{result:?}"
                    );
                }
                h.item.count = h.agg.count;
            }
            Op::InsertAside(id, label) => {
                let item = Item {
                    id: *id,
                    label: label.clone(),
                    count: 0,
                    dyn_count: 0,
                    tags: HashSet::new(),
                    peak: f64::MIN,
                    pending: Pending::default(),
                };
                let result = self.store.insert(&item);
                if self.stored.contains_key(id) {
                    prop_assert!(
                        matches!(result, Err(Error::AlreadyExists { .. })),
                        "{result:?}"
                    );
                    return Ok(());
                }
                prop_assert!(result.is_ok(), "{result:?}");
                self.inserts += 1;
                self.stored.insert(
                    *id,
                    Stored {
                        label: label.clone(),
                        agg: Agg::neutral(),
                        incarnation: self.inserts,
                    },
                );
            }
            Op::Compact => {
                let stats = self
                    .store
                    .compact::<Item>()
                    .map_err(|e| TestCaseError::fail(format!("compact: {e}")))?;
                prop_assert_eq!(stats.entities_visited, self.stored.len() as u64);
                for id in self.stored.keys() {
                    for (field, rows) in [("dyn_count", 1), ("tags", 1), ("count", 3), ("peak", 2)]
                    {
                        let count = self
                            .store
                            .shard_count::<Item>(id, field)
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        prop_assert_eq!(count, rows, "{} of {} after compaction", field, id);
                    }
                }
            }
            Op::Delete(id) => {
                let deleted = self
                    .store
                    .delete::<Item>(id)
                    .map_err(|e| TestCaseError::fail(format!("delete: {e}")))?;
                prop_assert_eq!(deleted, self.stored.remove(id).is_some());
            }
        }
        self.check()
    }

    /// Every stored entity loads as the model says, and every held object
    /// shows the aggregate the model says.
    fn check(&self) -> Result<(), TestCaseError> {
        for id in 0..IDS {
            let loaded = self.load(id)?.map(|(_, stored)| stored);
            prop_assert_eq!(loaded.as_ref(), self.stored.get(&id), "entity {}", id);
        }
        for (id, h) in &self.held {
            prop_assert_eq!(&Agg::of(&h.item), &h.agg, "held object {}", id);
            prop_assert_eq!(&h.item.label, &h.label);
        }
        Ok(())
    }
}

/// Checks a save of the held object `h` against the model and applies it;
/// whether it committed.
fn save_step(
    h: &mut Held,
    stored: Option<&mut Stored>,
    result: autoshard::Result<autoshard::Saved>,
) -> Result<bool, TestCaseError> {
    let document_changed = h.label != h.snapshot;
    let has_delta = h.delta != Agg::neutral();
    if h.stale_copy {
        prop_assert!(matches!(result, Err(Error::StaleCopy { .. })), "{result:?}");
        return Ok(false);
    }
    match stored {
        Some(stored) if stored.incarnation == h.incarnation => {
            let saved = result.map_err(|e| TestCaseError::fail(format!("save: {e}")))?;
            prop_assert_eq!(saved.document_written, document_changed);
            prop_assert_eq!(saved.attempts, u32::from(document_changed || has_delta));
            stored.agg.fold(&h.delta);
            if document_changed {
                stored.label = h.label.clone();
            }
            h.snapshot = h.label.clone();
            h.delta = Agg::neutral();
            Ok(saved.attempts > 0)
        }
        _ if !document_changed && !has_delta => {
            // Nothing to write costs no transaction, so the store never
            // learns the entity is gone or replaced.
            prop_assert!(result.is_ok(), "{result:?}");
            Ok(false)
        }
        _ => {
            prop_assert!(matches!(result, Err(Error::NotFound { .. })), "{result:?}");
            Ok(false)
        }
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_store_agrees_with_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let mut harness = Harness::new();
        for op in &ops {
            harness.step(op)?;
        }
    }
}

/// A hand-written sequence through the tricky paths (changes before insert,
/// a save after a delete, a re-insert, compaction in between, a copy, a
/// direct assignment, a replaced entity), so they are covered whatever the
/// random search draws.
#[test]
fn a_known_sequence_agrees_with_the_model() {
    let mut harness = Harness::new();
    let ops = [
        Op::Insert {
            id: 1,
            label: "x".into(),
            count: 5,
            before: vec![Change::Add(2), Change::Tag("a".into())],
        },
        Op::Save(1),
        Op::Change(1, Change::AddDyn(3)),
        Op::Change(1, Change::Record(2.5)),
        Op::Save(1),
        Op::Change(1, Change::AddDyn(4)),
        Op::Save(1),
        Op::Compact,
        Op::Change(1, Change::Add(7)),
        Op::Load(1),
        Op::Change(1, Change::Add(-1)),
        Op::Relabel(1, "y".into()),
        Op::Delete(1),
        Op::Save(1),
        Op::Insert {
            id: 1,
            label: "z".into(),
            count: 0,
            before: vec![],
        },
        Op::Change(1, Change::Tag("b".into())),
        Op::Save(1),
        Op::Compact,
        // A copy commits the shared delta; the original is refused after.
        Op::Change(1, Change::Add(4)),
        Op::CopySave(1),
        Op::Save(1),
        Op::Load(1),
        // A direct assignment is refused, and the object saves once undone.
        Op::Change(1, Change::AddDyn(1)),
        Op::Assign(1, 100),
        Op::Save(1),
        // Replaced behind the held object's back: its save is refused.
        Op::Delete(1),
        Op::InsertAside(1, "w".into()),
        Op::Change(1, Change::Add(1)),
        Op::Save(1),
    ];
    for op in &ops {
        harness.step(op).unwrap();
    }
    let item: Item = harness.store.load(&1).unwrap().unwrap();
    assert_eq!((item.label.as_str(), item.count), ("w", 0));
    assert!(item.tags.is_empty());
}

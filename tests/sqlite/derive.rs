//! What the derive and the attribute macros generate, run against a real
//! store: every shape of entity and shard method the attribute reference
//! promises, checked by saving and loading the aggregate back.
//!
//! Each test loads into a fresh object (and, where it matters, through a
//! second `Sqlite` handle on the same file) so that a delta the shard method
//! failed to capture in `pending` shows up as a wrong total, not as a value
//! that only lives in the caller's copy.

use autoshard::{shard_fold, shard_method, Pending, Saved, Shardable, Sqlite, Store};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::num::ParseIntError;
use std::ops::Add;

// --- several sharded fields of different types ----------------------------

/// One entity with every kind of sharded value the issue names: an `i64`
/// sum (static), an `f64` max through `fold = path` (dynamic), a set union,
/// and a `(count, sum, max)` tuple, keyed by a `String` under its own kind.
#[derive(Shardable, Debug)]
#[shard(kind = "Driver")]
struct Racer {
    #[shard(id)]
    name: String,
    team: String,
    #[shard(neutral = 0, shards = 8)]
    points: i64,
    #[shard(neutral = f64::MIN, fold = autoshard::fold::max_f64)]
    top_speed: f64,
    #[shard(neutral = HashSet::new(), shards = 3)]
    fans: HashSet<String>,
    #[shard(neutral = (0, 0, i64::MIN), fold = Self::merge_laps)]
    laps: (u64, i64, i64),
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Racer {
    fn new(name: &str) -> Self {
        Racer {
            name: name.to_owned(),
            team: "red".to_owned(),
            points: 0,
            top_speed: f64::MIN,
            fans: HashSet::new(),
            laps: (0, 0, i64::MIN),
            pending: Pending::default(),
        }
    }

    #[shard_method]
    fn score(&mut self, points: i64) -> i64 {
        self.points += points;
        self.points
    }

    /// By-value, non-`Copy` argument: the first run gets a clone.
    #[shard_method]
    fn cheer(&mut self, fan: String) {
        self.fans.insert(fan);
    }

    /// `&str` and `&mut Vec` arguments; the `&mut` one sees both runs.
    #[shard_method]
    fn sign(&mut self, fan: &str, receipts: &mut Vec<String>) {
        self.fans.insert(fan.to_owned());
        receipts.push(format!("{fan} -> {}", self.fans.len()));
    }

    #[shard_method]
    fn lap(&mut self, speed: f64, millis: i64) {
        self.top_speed = self.top_speed.max(speed);
        self.laps.0 += 1;
        self.laps.1 += millis;
        self.laps.2 = self.laps.2.max(millis);
    }

    /// `?` and an early `return` in a shard method.
    #[shard_method]
    fn score_text(&mut self, input: &str) -> Result<i64, ParseIntError> {
        let points: i64 = input.trim().parse()?;
        if points == 0 {
            return Ok(self.points);
        }
        self.points += points;
        Ok(self.points)
    }

    /// Generic shard methods: a by-value generic argument and a slice of one.
    #[shard_method]
    fn score_any<N: Into<i64> + Clone>(&mut self, points: N) {
        self.points += points.into();
    }

    #[shard_method]
    fn cheer_all<S: AsRef<str>>(&mut self, fans: &[S]) -> usize {
        self.fans.extend(fans.iter().map(|f| f.as_ref().to_owned()));
        self.fans.len()
    }

    /// Nested shard methods: the inner calls must not run twice each.
    #[shard_method]
    fn podium(&mut self, fan: String) {
        self.score(25);
        self.cheer(fan);
        self.lap(300.5, 80_000);
    }

    #[shard_fold]
    fn fold_points(a: i64, b: i64) -> i64 {
        a + b
    }

    #[shard_fold]
    fn fold_fans(mut a: HashSet<String>, b: HashSet<String>) -> HashSet<String> {
        a.extend(b);
        a
    }

    fn merge_laps(a: (u64, i64, i64), b: (u64, i64, i64)) -> (u64, i64, i64) {
        (a.0 + b.0, a.1 + b.1, a.2.max(b.2))
    }
}

fn set(names: &[&str]) -> HashSet<String> {
    names.iter().map(|&n| n.to_owned()).collect()
}

fn load_racer(db: &Sqlite, name: &str) -> Racer {
    db.load(&name.to_owned())
        .unwrap()
        .expect("racer was inserted")
}

#[test]
fn kind_attribute_names_the_stored_kind() {
    assert_eq!(Racer::KIND, "Driver");
    assert_eq!(Counter::<i64>::KIND, "Counter");
}

#[test]
fn insert_then_load_returns_every_field() {
    let db = Sqlite::memory().unwrap();
    let mut racer = Racer::new("ada");
    racer.points = 7;
    racer.top_speed = 210.25;
    racer.fans = set(&["x", "y"]);
    racer.laps = (2, 150_000, 80_000);
    db.insert(&racer).unwrap();

    let loaded = load_racer(&db, "ada");
    assert_eq!(loaded.name, "ada");
    assert_eq!(loaded.team, "red");
    assert_eq!(loaded.points, 7);
    assert_eq!(loaded.top_speed, 210.25);
    assert_eq!(loaded.fans, set(&["x", "y"]));
    assert_eq!(loaded.laps, (2, 150_000, 80_000));
    assert_eq!(db.shard_count::<Racer>(&"ada".into(), "points").unwrap(), 8);
    assert_eq!(db.shard_count::<Racer>(&"ada".into(), "fans").unwrap(), 3);
    assert_eq!(
        db.shard_count::<Racer>(&"ada".into(), "top_speed").unwrap(),
        1
    );
}

#[test]
fn every_sharded_field_type_saves_its_delta() {
    let db = Sqlite::memory().unwrap();
    let mut racer = Racer::new("ada");
    racer.points = 10;
    racer.fans = set(&["old"]);
    db.insert(&racer).unwrap();

    let mut racer = load_racer(&db, "ada");
    assert_eq!(racer.score(5), 15);
    racer.cheer("new".to_owned());
    racer.lap(250.0, 90_000);
    racer.lap(240.0, 85_000);
    assert_eq!((racer.points, racer.top_speed), (15, 250.0));
    let saved = db.save(&mut racer).unwrap();
    // One write per non-neutral field, none for the unchanged document.
    assert_eq!(saved.shard_writes, 4);
    assert!(!saved.document_written);

    let loaded = load_racer(&db, "ada");
    assert_eq!(loaded.points, 15);
    assert_eq!(loaded.top_speed, 250.0);
    assert_eq!(loaded.fans, set(&["old", "new"]));
    assert_eq!(loaded.laps, (2, 175_000, 90_000));
    // Static fields stay within their shards; dynamic ones gained a row.
    assert_eq!(db.shard_count::<Racer>(&"ada".into(), "points").unwrap(), 8);
    assert_eq!(db.shard_count::<Racer>(&"ada".into(), "laps").unwrap(), 2);
}

#[test]
fn nothing_pending_after_save_so_a_second_save_writes_nothing() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Racer::new("ada")).unwrap();
    let mut racer = load_racer(&db, "ada");
    racer.score(3);
    db.save(&mut racer).unwrap();
    assert_eq!(db.save(&mut racer).unwrap(), Saved::default());
    // The object keeps showing the aggregate after the save.
    assert_eq!(racer.points, 3);
    assert_eq!(load_racer(&db, "ada").points, 3);
}

#[test]
fn by_value_str_and_mut_vec_arguments() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Racer::new("ada")).unwrap();
    let mut racer = load_racer(&db, "ada");

    let mut receipts = Vec::new();
    racer.sign("zoe", &mut receipts);
    // The body runs twice: the `&mut` argument sees the pending run (one
    // fan in the delta) and then the aggregate run.
    assert_eq!(receipts, ["zoe -> 1", "zoe -> 1"]);
    let owned = String::from("bob");
    racer.cheer(owned.clone());
    assert_eq!(owned, "bob");
    db.save(&mut racer).unwrap();

    assert_eq!(load_racer(&db, "ada").fans, set(&["zoe", "bob"]));
}

#[test]
fn question_mark_and_early_return_keep_their_meaning() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Racer::new("ada")).unwrap();
    let mut racer = load_racer(&db, "ada");

    assert!(racer.score_text("ten").is_err());
    assert_eq!(racer.score_text(" 0 "), Ok(0));
    // Neither call changed anything, so there is nothing to save.
    assert_eq!(db.save(&mut racer).unwrap().shard_writes, 0);

    assert_eq!(racer.score_text("12"), Ok(12));
    assert_eq!(racer.score_text("0"), Ok(12));
    db.save(&mut racer).unwrap();
    assert_eq!(load_racer(&db, "ada").points, 12);
}

#[test]
fn generic_shard_methods() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Racer::new("ada")).unwrap();
    let mut racer = load_racer(&db, "ada");
    racer.score_any(4i32);
    racer.score_any(5u8);
    assert_eq!(racer.cheer_all(&["a", "b"]), 2);
    assert_eq!(racer.cheer_all(&[String::from("b"), String::from("c")]), 3);
    db.save(&mut racer).unwrap();

    let loaded = load_racer(&db, "ada");
    assert_eq!(loaded.points, 9);
    assert_eq!(loaded.fans, set(&["a", "b", "c"]));
}

#[test]
fn nested_shard_methods_count_once() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Racer::new("ada")).unwrap();
    let mut racer = load_racer(&db, "ada");
    racer.podium("kim".to_owned());
    racer.podium("lee".to_owned());
    // Running each inner call twice would give 100 points and 4 laps.
    assert_eq!(racer.points, 50);
    assert_eq!(racer.laps, (2, 160_000, 80_000));
    db.save(&mut racer).unwrap();

    let loaded = load_racer(&db, "ada");
    assert_eq!(loaded.points, 50);
    assert_eq!(loaded.laps, (2, 160_000, 80_000));
    assert_eq!(loaded.top_speed, 300.5);
    assert_eq!(loaded.fans, set(&["kim", "lee"]));
}

#[test]
fn unsharded_field_changes_are_written() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Racer::new("ada")).unwrap();
    let mut racer = load_racer(&db, "ada");
    racer.team = "blue".to_owned();
    racer.score(1);
    let saved = db.save(&mut racer).unwrap();
    assert!(saved.document_written);
    assert_eq!(saved.shard_writes, 1);

    let loaded = load_racer(&db, "ada");
    assert_eq!((loaded.team.as_str(), loaded.points), ("blue", 1));
}

#[test]
fn a_second_handle_sees_the_saved_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("derive.db");
    let writer = Sqlite::open(&path).unwrap();
    let reader = Sqlite::open(&path).unwrap();
    writer.insert(&Racer::new("ada")).unwrap();

    let mut a = load_racer(&writer, "ada");
    let mut b = load_racer(&reader, "ada");
    a.score(2);
    a.cheer("one".to_owned());
    b.score(3);
    b.cheer("two".to_owned());
    b.lap(199.5, 70_000);
    writer.save(&mut a).unwrap();
    reader.save(&mut b).unwrap();

    // Both objects were loaded at zero: only their deltas reach the store,
    // so neither save overwrites the other.
    for db in [&writer, &reader] {
        let loaded = load_racer(db, "ada");
        assert_eq!(loaded.points, 5);
        assert_eq!(loaded.fans, set(&["one", "two"]));
        assert_eq!(loaded.laps, (1, 70_000, 70_000));
        assert_eq!(loaded.top_speed, 199.5);
    }
}

// --- a generic entity ------------------------------------------------------

/// The bounds the fold and `neutral` need sit on the struct, so that the
/// derived impl, which copies the struct's generics, has them. The trailing
/// comma guards against the derive emitting `,,` when it appends its own.
#[derive(Shardable, Debug)]
struct Counter<T>
where
    T: Copy + Default + Add<Output = T>,
{
    #[shard(id)]
    id: u32,
    label: String,
    #[shard(neutral = T::default(), shards = 4)]
    total: T,
    #[shard(neutral = T::default())]
    recent: T,
    #[shard(pending)]
    pending: Pending<Counter<T>>,
}

impl<T> Counter<T>
where
    T: Copy + Default + Add<Output = T>,
    T: Serialize + DeserializeOwned + PartialEq + Send + Sync + 'static,
{
    fn new(id: u32, total: T) -> Self {
        Counter {
            id,
            label: format!("counter {id}"),
            total,
            recent: T::default(),
            pending: Pending::default(),
        }
    }

    #[shard_method]
    fn add(&mut self, by: T) {
        self.total = self.total + by;
        self.recent = self.recent + by;
    }

    #[shard_method]
    fn add_all<I: IntoIterator<Item = T> + Clone>(&mut self, items: I) {
        for by in items {
            self.add(by);
        }
    }

    #[shard_fold]
    fn fold_total(a: T, b: T) -> T {
        a + b
    }

    #[shard_fold]
    fn fold_recent(a: T, b: T) -> T {
        a + b
    }
}

#[test]
fn generic_entity_with_integers() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Counter::new(1, 100i64)).unwrap();
    let mut c: Counter<i64> = db.load(&1).unwrap().unwrap();
    c.add(5);
    c.add_all(vec![1, 2, 3]);
    assert_eq!((c.total, c.recent), (111, 11));
    db.save(&mut c).unwrap();

    let loaded: Counter<i64> = db.load(&1).unwrap().unwrap();
    assert_eq!((loaded.total, loaded.recent), (111, 11));
    assert_eq!(loaded.label, "counter 1");
    assert_eq!(db.shard_count::<Counter<i64>>(&1, "total").unwrap(), 4);
}

#[test]
fn generic_entity_with_floats() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Counter::new(2, 0.5f64)).unwrap();
    let mut c: Counter<f64> = db.load(&2).unwrap().unwrap();
    c.add(0.25);
    db.save(&mut c).unwrap();
    c.add(1.0);
    db.save(&mut c).unwrap();

    let loaded: Counter<f64> = db.load(&2).unwrap().unwrap();
    assert_eq!((loaded.total, loaded.recent), (1.75, 1.25));
    assert_eq!(db.shard_count::<Counter<f64>>(&2, "recent").unwrap(), 3);
}

/// Floating-point addition is not associative: the aggregate adds each
/// change in turn, ((0.1 + 0.1) + 0.2) + 0.3, while the store's expected
/// value is 0.1 + ((0.1 + 0.2) + 0.3), and the two differ in the last bit.
/// That is rounding, not a change made outside a shard method.
#[test]
fn float_sums_that_round_differently_are_not_direct_writes() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Counter::new(3, 0.1f64)).unwrap();
    let mut c: Counter<f64> = db.load(&3).unwrap().unwrap();
    for by in [0.1, 0.2, 0.3] {
        c.add(by);
    }
    assert_ne!(c.total, 0.1 + ((0.1 + 0.2) + 0.3));
    db.save(&mut c).unwrap();
    c.add(1e-3);
    db.save(&mut c).unwrap();
    let loaded: Counter<f64> = db.load(&3).unwrap().unwrap();
    assert!((loaded.total - 0.701).abs() < 1e-12, "{}", loaded.total);
}

/// A shard method whose body the fold cannot replay leaves the object
/// showing a value the store will not hold; save refuses it like a direct
/// assignment, before writing anything.
#[derive(Shardable, Debug)]
struct Gauge {
    #[shard(id)]
    id: u32,
    #[shard(neutral = 0, shards = 2)]
    level: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Gauge {
    #[shard_method]
    fn set(&mut self, level: i64) {
        self.level = level;
    }
    #[shard_method]
    fn bump_if_low(&mut self) {
        if self.level < 100 {
            self.level += 1;
        }
    }
    #[shard_fold]
    fn fold_level(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[test]
fn shard_methods_the_fold_cannot_replay_are_refused_at_save() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Gauge {
        id: 1,
        level: 150,
        pending: Pending::default(),
    })
    .unwrap();
    let refused = |g: &mut Gauge| match db.save(g) {
        Err(autoshard::Error::DirectWrite { field: "level", .. }) => {}
        other => panic!("expected DirectWrite, got {other:?}"),
    };
    // The first run sees the delta 0 (< 100) and adds 1; the second sees
    // 150 and adds nothing: the store would hold 151, the object shows 150.
    let mut g: Gauge = db.load(&1).unwrap().unwrap();
    g.bump_if_low();
    refused(&mut g);
    // An assignment: the store would hold 150 + 5, the object shows 5.
    let mut g: Gauge = db.load(&1).unwrap().unwrap();
    g.set(5);
    refused(&mut g);
    assert_eq!(db.load::<Gauge>(&1).unwrap().unwrap().level, 150);
}

// --- names ---------------------------------------------------------------

/// A raw identifier is stored under its plain name.
#[derive(Shardable, Debug)]
struct Tagged {
    #[shard(id)]
    id: i32,
    #[shard(neutral = 0)]
    r#type: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Tagged {
    #[shard_method]
    fn bump(&mut self) {
        self.r#type += 1;
    }

    /// The receiver spelled out is the same `&mut self`.
    #[allow(clippy::needless_arbitrary_self_type)]
    #[shard_method]
    fn bump_by(self: &mut Self, by: i64) {
        self.r#type += by;
    }

    #[shard_fold]
    fn fold_type(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[test]
fn raw_identifier_fields_are_stored_by_plain_name() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Tagged {
        id: -3,
        r#type: 1,
        pending: Pending::default(),
    })
    .unwrap();
    let mut t: Tagged = db.load(&-3).unwrap().unwrap();
    t.bump();
    t.bump_by(10);
    db.save(&mut t).unwrap();
    assert_eq!(db.load::<Tagged>(&-3).unwrap().unwrap().r#type, 12);
    assert_eq!(db.shard_count::<Tagged>(&-3, "type").unwrap(), 2);
}

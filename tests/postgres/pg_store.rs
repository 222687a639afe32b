//! What only the PostgreSQL store has: identifier limits, the two
//! concurrency modes meeting a real concurrent transaction, SQL sums and
//! their limits, and `autoshard::open` with a `postgres://` URL. The
//! behaviour it shares with SQLite is in the `stores_*` suites.
#![cfg(feature = "postgres")]

use autoshard::{shard_fold, shard_method, Concurrency, Error, Pending, Postgres};
use autoshard::{Shardable, Store};
use std::thread;
use std::time::{Duration, Instant};

use crate::stores;
use stores::pg;

#[derive(Shardable, Debug)]
struct Hot {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 1)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Hot {
    fn new(id: u64) -> Self {
        Hot {
            id,
            votes: 0,
            pending: Pending::default(),
        }
    }
    #[shard_method]
    fn vote(&mut self) {
        self.votes += 1;
    }
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
}

// --- names ---------------------------------------------------------------

#[derive(Shardable, Debug)]
#[shard(kind = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuA")]
struct LongA {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 2)]
    n: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl LongA {
    #[shard_fold]
    fn fold_n(a: i64, b: i64) -> i64 {
        a + b
    }
}

#[derive(Shardable, Debug)]
#[shard(kind = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuB")]
struct LongB {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 2)]
    n: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl LongB {
    #[shard_fold]
    fn fold_n(a: i64, b: i64) -> i64 {
        a + b
    }
}

/// PostgreSQL would truncate a 64-byte name to 63 bytes, silently making
/// two names one: such a name is refused instead. The longest kind names
/// (48 bytes, differing only in their last byte) in the longest schema
/// name keep separate tables.
#[test]
fn names_that_postgres_would_truncate_are_refused() {
    let long = format!("s{}", "x".repeat(63));
    let err = Postgres::builder(&pg::url())
        .schema(&long)
        .open()
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidName { name, reason } if *name == long && reason.contains("63")),
        "{err:?}"
    );
    for bad in ["", "1abc", "a-b", "a\"b", "naïve"] {
        let err = Postgres::builder(&pg::url())
            .schema(bad)
            .open()
            .unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{bad:?}: {err:?}");
    }

    let schema = format!("t{}", "y".repeat(62));
    let _drop = pg::DropSchema(schema.clone());
    let db = Postgres::builder(&pg::url())
        .schema(&schema)
        .open()
        .unwrap();
    db.insert(&LongA {
        id: 1,
        n: 1,
        pending: Pending::default(),
    })
    .unwrap();
    db.insert(&LongB {
        id: 1,
        n: 2,
        pending: Pending::default(),
    })
    .unwrap();
    assert_eq!(db.load::<LongA>(&1).unwrap().unwrap().n, 1);
    assert_eq!(db.load::<LongB>(&1).unwrap().unwrap().n, 2);
    let tables = pg::client()
        .query(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1",
            &[&schema],
        )
        .unwrap()[0]
        .get::<_, i64>(0);
    assert_eq!(tables, 2 + 2 * 2, "registry, writers, and two per kind");
}

#[derive(Shardable, Debug)]
struct Page {
    #[shard(id)]
    url: String,
    #[shard(neutral = 0, shards = 2)]
    hits: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Page {
    #[shard_fold]
    fn fold_hits(a: i64, b: i64) -> i64 {
        a + b
    }
}

/// PostgreSQL text cannot hold NUL (SQLite's can): a typed error up front,
/// not a server error half-way.
#[test]
fn a_nul_in_a_string_id_is_refused() {
    let db = pg::fresh(Concurrency::Locking, Default::default());
    let page = Page {
        url: "a\0b".into(),
        hits: 0,
        pending: Pending::default(),
    };
    let err = db.insert(&page).unwrap_err();
    assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
    let err = db.load::<Page>(&"a\0b".to_string()).unwrap_err();
    assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
    assert!(db.shard_rows("page").is_empty());
}

// --- concurrency modes ----------------------------------------------------

/// Holds the only shard row of `Hot` 1 in a transaction of its own for
/// `hold`, as a concurrent writer would, then commits an increment.
fn concurrent_writer(schema: &str, hold: Duration) -> thread::JoinHandle<()> {
    let sql = format!(
        "UPDATE \"{schema}\".as_shard_hot SET int_value = int_value + 100 \
         WHERE entity = 1 AND field = 'votes'"
    );
    let mut client = pg::client();
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let writer = thread::spawn(move || {
        let mut tx = client.transaction().unwrap();
        assert_eq!(tx.execute(&sql, &[]).unwrap(), 1);
        locked_tx.send(()).unwrap();
        thread::sleep(hold);
        tx.commit().unwrap();
    });
    locked.recv().unwrap();
    writer
}

fn open_mode(schema: &str, concurrency: Concurrency, attempts: u32) -> Postgres {
    Postgres::builder(&pg::url())
        .schema(schema)
        .concurrency(concurrency)
        .max_attempts(attempts)
        .open()
        .unwrap()
}

/// Optimistic mode is Datastore's: a save that read the row before a
/// concurrent writer committed to it fails with a serialization failure.
/// Without retries that is `Error::Conflict`, retryable, with nothing
/// written and the delta kept; with retries the save re-runs and both
/// increments land.
#[test]
fn optimistic_saves_fail_on_a_concurrent_write_and_retry() {
    let db = pg::fresh(Concurrency::Optimistic, Default::default());
    db.insert(&Hot::new(1)).unwrap();
    let schema = db.store.schema().to_owned();

    let once = open_mode(&schema, Concurrency::Optimistic, 1);
    let mut hot: Hot = once.load(&1).unwrap().unwrap();
    hot.vote();
    let writer = concurrent_writer(&schema, Duration::from_millis(200));
    let err = once.save(&mut hot).unwrap_err();
    writer.join().unwrap();
    assert!(matches!(err, Error::Conflict { attempts: 1 }), "{err:?}");
    assert!(err.is_retryable());
    assert_eq!(once.load::<Hot>(&1).unwrap().unwrap().votes, 100);
    // The kept delta lands once.
    assert_eq!(once.save(&mut hot).unwrap().attempts, 1);
    assert_eq!(once.load::<Hot>(&1).unwrap().unwrap().votes, 101);

    let retrying = open_mode(&schema, Concurrency::Optimistic, 5);
    hot.vote();
    let writer = concurrent_writer(&schema, Duration::from_millis(200));
    let saved = retrying.save(&mut hot).unwrap();
    writer.join().unwrap();
    assert_eq!(saved.attempts, 2);
    assert_eq!(retrying.load::<Hot>(&1).unwrap().unwrap().votes, 202);
}

/// Locking mode queues behind the concurrent writer's row lock instead of
/// failing, and folds onto the value it committed.
#[test]
fn locking_saves_wait_for_a_concurrent_write() {
    let db = pg::fresh(Concurrency::Locking, Default::default());
    db.insert(&Hot::new(1)).unwrap();
    let schema = db.store.schema().to_owned();
    let once = open_mode(&schema, Concurrency::Locking, 1);
    let mut hot: Hot = once.load(&1).unwrap().unwrap();
    hot.vote();
    let hold = Duration::from_millis(300);
    let began = Instant::now();
    let writer = concurrent_writer(&schema, hold);
    let saved = once.save(&mut hot).unwrap();
    writer.join().unwrap();
    assert_eq!(saved.attempts, 1);
    assert!(began.elapsed() >= hold, "{:?}", began.elapsed());
    assert_eq!(once.load::<Hot>(&1).unwrap().unwrap().votes, 101);
}

// --- SQL sums ---------------------------------------------------------------

#[derive(Shardable, Debug)]
struct Widths {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 1, fold = autoshard::fold::checked_sum)]
    wide: i64,
    #[shard(neutral = 0, shards = 1, fold = autoshard::fold::checked_sum)]
    narrow: i32,
    #[shard(neutral = 0, shards = 1, fold = autoshard::fold::checked_sum)]
    unsigned: u64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Widths {
    #[shard_method]
    fn add(&mut self, wide: i64, narrow: i32, unsigned: u64) {
        self.wide = self.wide.wrapping_add(wide);
        self.narrow = self.narrow.wrapping_add(narrow);
        self.unsigned = self.unsigned.wrapping_add(unsigned);
    }
}

/// Locking mode adds a `checked_sum` field in SQL only where `bigint`
/// arithmetic is the field's own: an `i32` must overflow at `i32::MAX`
/// (not be stored past it and fail to load), and a `u64` must go on past
/// `i64::MAX` (stored as JSON), exactly as the Rust fold does. Run in both
/// modes: the optimistic one always folds in Rust, so the answers match.
#[test]
fn sql_sums_overflow_exactly_where_the_rust_fold_does() {
    for mode in [Concurrency::Locking, Concurrency::Optimistic] {
        let db = pg::fresh(mode, Default::default());
        db.insert(&Widths {
            id: 1,
            wide: i64::MAX - 1,
            narrow: i32::MAX - 1,
            unsigned: i64::MAX as u64 - 1,
            pending: Pending::default(),
        })
        .unwrap();
        let mut w: Widths = db.load(&1).unwrap().unwrap();
        w.add(1, 1, 10);
        db.save(&mut w).unwrap();
        let loaded: Widths = db.load(&1).unwrap().unwrap();
        assert_eq!(
            (loaded.wide, loaded.narrow, loaded.unsigned),
            (i64::MAX, i32::MAX, i64::MAX as u64 + 9),
            "{mode:?}"
        );
        for (wide, narrow, field) in [(1, 0, "wide"), (0, 1, "narrow")] {
            let mut w: Widths = db.load(&1).unwrap().unwrap();
            w.add(wide, narrow, 0);
            let err = db.save(&mut w).unwrap_err();
            match &err {
                Error::Fold {
                    field: f, source, ..
                } if *f == field => {
                    assert!(source.is::<autoshard::fold::Overflow>(), "{err:?}")
                }
                _ => panic!("{mode:?} {field}: {err:?}"),
            }
        }
        let loaded: Widths = db.load(&1).unwrap().unwrap();
        assert_eq!((loaded.wide, loaded.narrow), (i64::MAX, i32::MAX));
    }
}

// --- open(url) ----------------------------------------------------------------

/// The same code runs on either store, picked by a URL.
#[test]
fn open_picks_postgres_from_the_url_and_its_schema() {
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let url = pg::url();
    let separator = if url.contains('?') { '&' } else { '?' };
    let store = autoshard::open(&format!("{url}{separator}schema={schema}")).unwrap();
    assert_eq!(store.scheme(), "postgres", "{store:?}");
    store.insert(&Hot::new(7)).unwrap();
    let mut hot: Hot = store.load(&7).unwrap().unwrap();
    hot.vote();
    store.save(&mut hot).unwrap();
    let direct = Postgres::builder(&url).schema(&schema).open().unwrap();
    assert_eq!(direct.load::<Hot>(&7).unwrap().unwrap().votes, 1);

    let postgresql = url.replacen("postgres://", "postgresql://", 1);
    let store = autoshard::open(&format!("{postgresql}{separator}schema={schema}")).unwrap();
    assert_eq!(store.load::<Hot>(&7).unwrap().unwrap().votes, 1);
}

/// Nothing listens: a typed, retryable error, not a hang or a panic.
#[test]
fn an_unreachable_server_is_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = Postgres::open(&format!("postgres://postgres@127.0.0.1:{port}/test")).unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(err.is_retryable());
    let err = autoshard::open("postgres://postgres@127.0.0.1:1/x?bogus_option=1").unwrap_err();
    assert!(matches!(err, Error::InvalidUrl { .. }), "{err:?}");
}

// --- incarnations (issue 12) ------------------------------------------------

/// A save that writes only shard rows checks its entity's incarnation after
/// those writes. Here another transaction deletes entity 1 and inserts it
/// again, and commits while the save waits for the shard row it holds: the
/// save's write then lands in the new entity's row, and the check after it
/// sees the new incarnation and rolls back. Checked before the writes
/// instead (no lock), the save passed the check, then wrote into the new
/// entity: the control run returned `Ok(Saved { attempts: 1,
/// document_written: false, shard_writes: 1 })` in locking mode. (In
/// optimistic mode the write fails with a serialization failure either
/// way, and the retry finds the new incarnation.)
#[test]
fn a_save_racing_a_delete_and_insert_does_not_write_into_the_new_entity() {
    for mode in [Concurrency::Locking, Concurrency::Optimistic] {
        let db = pg::fresh(mode, Default::default());
        db.insert(&Hot::new(1)).unwrap();
        let schema = db.store.schema().to_owned();
        let mut hot: Hot = db.load(&1).unwrap().unwrap();
        hot.vote();

        let mut client = pg::client();
        let (replaced_tx, replaced) = std::sync::mpsc::channel();
        let replace = thread::spawn(move || {
            let mut tx = client.transaction().unwrap();
            tx.batch_execute(&format!(
                "DELETE FROM \"{schema}\".as_entity_hot WHERE id = 1; \
                 INSERT INTO \"{schema}\".as_entity_hot (id, doc, incarnation) \
                 VALUES (1, '{{}}', 42); \
                 INSERT INTO \"{schema}\".as_shard_hot (entity, field, shard, int_value) \
                 VALUES (1, 'votes', 0, 1000)"
            ))
            .unwrap();
            replaced_tx.send(()).unwrap();
            thread::sleep(Duration::from_millis(300));
            tx.commit().unwrap();
        });
        replaced.recv().unwrap();
        let err = db.save(&mut hot).unwrap_err();
        replace.join().unwrap();
        assert!(matches!(err, Error::NotFound { .. }), "{mode:?}: {err:?}");
        assert_eq!(db.load::<Hot>(&1).unwrap().unwrap().votes, 1000, "{mode:?}");
    }
}

/// A schema made before incarnations: the entity table gains the column
/// (entities stored before are incarnation 0) when a handle first uses the
/// kind. Without the `ALTER TABLE` in `KindTables::ensure` the first load
/// fails with `column "incarnation" does not exist`.
#[test]
fn a_schema_from_before_incarnations_gains_the_column_and_keeps_its_entities() {
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    pg::client()
        .batch_execute(&format!(
            r#"CREATE SCHEMA "{schema}";
            SET search_path TO "{schema}";
            CREATE TABLE autoshard_kinds (
                kind text COLLATE "C" PRIMARY KEY,
                base text COLLATE "C" NOT NULL UNIQUE,
                id_type text NOT NULL
            );
            INSERT INTO autoshard_kinds VALUES ('Hot', 'hot', 'integer');
            CREATE TABLE as_entity_hot (
                id bigint NOT NULL,
                doc text NOT NULL,
                CONSTRAINT as_entity_pk_hot PRIMARY KEY (id)
            );
            CREATE TABLE as_shard_hot (
                entity bigint NOT NULL,
                field text COLLATE "C" NOT NULL,
                shard bigint NOT NULL,
                int_value bigint,
                real_value double precision,
                text_value text,
                CONSTRAINT as_shard_pk_hot PRIMARY KEY (entity, field, shard),
                CONSTRAINT as_shard_fk_hot FOREIGN KEY (entity)
                    REFERENCES as_entity_hot (id) ON DELETE CASCADE,
                CONSTRAINT as_one_value_hot
                    CHECK (num_nonnulls(int_value, real_value, text_value) = 1)
            ) WITH (fillfactor = 70);
            CREATE SEQUENCE as_seq_hot MINVALUE 1048576 START WITH 1048576;
            INSERT INTO as_entity_hot VALUES (1, '{{}}');
            INSERT INTO as_shard_hot (entity, field, shard, int_value) VALUES (1, 'votes', 0, 7);"#
        ))
        .unwrap();
    let incarnation = |id: i64| -> i64 {
        pg::client()
            .query_one(
                &format!("SELECT incarnation FROM \"{schema}\".as_entity_hot WHERE id = $1"),
                &[&id],
            )
            .unwrap()
            .get(0)
    };

    let db = open_mode(&schema, Concurrency::Locking, 8);
    let mut old: Hot = db.load(&1).unwrap().unwrap();
    assert_eq!(old.votes, 7);
    assert_eq!(incarnation(1), 0);
    old.vote();
    db.save(&mut old).unwrap();

    let other = open_mode(&schema, Concurrency::Optimistic, 8);
    let mut again: Hot = other.load(&1).unwrap().unwrap();
    assert_eq!(again.votes, 8);
    again.vote();
    other.save(&mut again).unwrap();

    assert!(db.delete::<Hot>(&1).unwrap());
    db.insert(&Hot::new(1)).unwrap();
    assert_ne!(incarnation(1), 0);
    old.vote();
    let err = db.save(&mut old).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    assert_eq!(db.load::<Hot>(&1).unwrap().unwrap().votes, 0);
}

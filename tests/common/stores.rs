//! Plumbing for test suites written once and run against every store.
//!
//! A suite is a set of generic functions `fn name<S: TestStore>()`;
//! `store_tests!(name, ...)` instantiates each as `sqlite::name` and
//! `postgres::name`. Every test gets an isolated store from
//! [`TestStore::fresh`]: a new SQLite file in a temporary directory, or a new
//! PostgreSQL schema (dropped when the test ends), so suites run in
//! parallel under the default harness.
//!
//! PostgreSQL tests connect to `AUTOSHARD_PG_URL`, else to
//! `postgres://postgres@127.0.0.1:5432/test` when a server answers there,
//! else to a throwaway server the run starts; Redis Cluster tests to
//! `AUTOSHARD_REDIS_CLUSTER_URL`, else to a cluster the run starts
//! (`autoshard-test-servers`, stopped by pid when the run ends).
#![allow(dead_code)] // each suite uses its own part of this

use autoshard::{Sqlite, Store, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Every shard row of one kind: `(entity, field, shard) -> value`, the
/// entity rendered as text.
pub type Rows = BTreeMap<(String, String, i64), Value>;

/// Every document of one kind: id (as text) -> JSON.
pub type Documents = BTreeMap<String, String>;

/// Every score-tree row of one ranking board: `(height, idx, part, shard)`
/// -> the decoded vector.
pub type RankNodes = BTreeMap<(i64, i64, i64, i64), Vec<i64>>;

fn decode_vector(blob: &[u8]) -> Vec<i64> {
    blob.chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Options a suite may need; `None` keeps the store's default.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub compaction_batch_rows: Option<usize>,
    pub max_attempts: Option<u32>,
    pub pool_size: Option<usize>,
}

/// A store under test, with what a generic test needs to know about it.
pub trait TestStore: Store + Clone + Send + Sync + 'static {
    const NAME: &'static str;

    /// An isolated, empty store.
    fn fresh() -> Fresh<Self> {
        Self::fresh_with(Options::default())
    }

    fn fresh_with(options: Options) -> Fresh<Self>;
}

/// A fresh store, a way to open more handles on the same database, and
/// whatever keeps the database alive until the test ends.
pub struct Fresh<S> {
    pub store: S,
    open: Box<dyn Fn(&Options) -> S + Send + Sync>,
    rows: Box<dyn Fn(&str) -> Rows + Send + Sync>,
    documents: Box<dyn Fn(&str) -> Documents + Send + Sync>,
    rank_nodes: Box<dyn Fn(&str) -> RankNodes + Send + Sync>,
    keeps_tree: Box<dyn Fn(&str) -> bool + Send + Sync>,
    execute: Box<dyn Fn(&str) -> u64 + Send + Sync>,
    execute_queue: Box<dyn Fn(&str) -> u64 + Send + Sync>,
    // Dropped last: the temporary directory or the schema.
    _cleanup: Box<dyn Send + Sync>,
}

impl<S> std::ops::Deref for Fresh<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.store
    }
}

impl<S> Fresh<S> {
    /// A separate handle (its own pool) on the same database, as another
    /// thread or process would open it.
    pub fn open_another(&self) -> S {
        (self.open)(&Options::default())
    }

    pub fn open_with(&self, options: Options) -> S {
        (self.open)(&options)
    }

    /// The shard rows of kind base `base` (the lower-cased kind), read
    /// behind the store's back.
    pub fn shard_rows(&self, base: &str) -> Rows {
        (self.rows)(base)
    }

    /// The rows of one field of one entity: shard number -> value.
    pub fn field_rows(&self, base: &str, entity: &str, field: &str) -> BTreeMap<i64, Value> {
        self.shard_rows(base)
            .into_iter()
            .filter(|((e, f, _), _)| e == entity && f == field)
            .map(|((_, _, s), v)| (s, v))
            .collect()
    }

    /// The stored documents of kind base `base`: id -> JSON text.
    pub fn documents(&self, base: &str) -> Documents {
        (self.documents)(base)
    }

    /// The score-tree rows of ranking board `board`, read behind the
    /// store's back.
    pub fn rank_nodes(&self, board: &str) -> RankNodes {
        (self.rank_nodes)(board)
    }

    /// Whether board `board` is stored as the count tree, whose rows
    /// [`rank_nodes`](Self::rank_nodes) returns. A board Redis Cluster
    /// orders natively keeps none: its `rank_nodes` are its sorted sets'
    /// members, as negative heights, so that "nothing was written" can
    /// still be checked.
    pub fn keeps_tree(&self, board: &str) -> bool {
        (self.keeps_tree)(board)
    }

    /// Runs one SQL statement behind the store's back (unqualified table
    /// names: in the store's schema); the rows it changed.
    pub fn execute(&self, sql: &str) -> u64 {
        (self.execute)(sql)
    }

    /// As [`execute`](Self::execute), on the ranking queue's storage (on
    /// SQLite its own file, `<db>-queue`).
    pub fn execute_queue(&self, sql: &str) -> u64 {
        (self.execute_queue)(sql)
    }
}

/// Unique per process and call: names temporary schemas.
fn unique_suffix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    )
}

impl TestStore for Sqlite {
    const NAME: &'static str = "sqlite";

    fn fresh_with(options: Options) -> Fresh<Self> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("test.db");
        let open = {
            let path = path.clone();
            move |options: &Options| {
                let mut builder =
                    Sqlite::builder(&path).synchronous(autoshard::Synchronous::Normal);
                if let Some(rows) = options.compaction_batch_rows {
                    builder = builder.compaction_batch_rows(rows);
                }
                if let Some(attempts) = options.max_attempts {
                    builder = builder.max_attempts(attempts);
                }
                if let Some(size) = options.pool_size {
                    builder = builder.pool_size(size);
                }
                builder.open().expect("open the SQLite store")
            }
        };
        let rows_path = path.clone();
        let docs_path = path.clone();
        let sql_path = path.clone();
        // The ranking queue's own file.
        let mut queue_path = path.clone().into_os_string();
        queue_path.push("-queue");
        let queue_path = std::path::PathBuf::from(queue_path);
        Fresh {
            store: open(&options),
            open: Box::new(open),
            rows: Box::new(move |base| sqlite_rows(&rows_path, base)),
            documents: Box::new(move |base| sqlite_documents(&docs_path, base)),
            rank_nodes: Box::new(move |board| sqlite_rank_nodes(&path, board)),
            keeps_tree: Box::new(|_| true),
            execute: Box::new(move |sql| sqlite_execute(&sql_path, sql)),
            execute_queue: Box::new(move |sql| sqlite_execute(&queue_path, sql)),
            _cleanup: Box::new(dir),
        }
    }
}

fn sqlite_key(key: rusqlite::types::Value) -> String {
    match key {
        rusqlite::types::Value::Integer(i) => i.to_string(),
        rusqlite::types::Value::Text(s) => s,
        other => panic!("unexpected key {other:?}"),
    }
}

fn sqlite_rows(path: &std::path::Path, base: &str) -> Rows {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let Ok(mut stmt) = conn.prepare(&format!(
        "SELECT entity, field, shard, value FROM as_shard_{base}"
    )) else {
        return Rows::new();
    };
    let rows = stmt
        .query_map([], |r| {
            Ok((
                (sqlite_key(r.get(0)?), r.get(1)?, r.get(2)?),
                r.get::<_, Value>(3)?,
            ))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn sqlite_rank_nodes(path: &std::path::Path, board: &str) -> RankNodes {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT height, idx, part, shard, v FROM autoshard_rank_nodes n \
             JOIN autoshard_rank_boards b ON b.id = n.board WHERE b.name = ?1",
        )
        .unwrap();
    let rows = stmt
        .query_map([board], |r| {
            Ok((
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?),
                decode_vector(&r.get::<_, Vec<u8>>(4)?),
            ))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn sqlite_execute(path: &std::path::Path, sql: &str) -> u64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    conn.execute(sql, []).unwrap() as u64
}

fn sqlite_documents(path: &std::path::Path, base: &str) -> Documents {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let Ok(mut stmt) = conn.prepare(&format!("SELECT id, doc FROM as_entity_{base}")) else {
        return BTreeMap::new();
    };
    let rows = stmt
        .query_map([], |r| Ok((sqlite_key(r.get(0)?), r.get(1)?)))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

#[cfg(feature = "postgres")]
#[path = "stores_pg.rs"]
pub mod pg;

#[cfg(feature = "redis")]
#[path = "stores_redis.rs"]
pub mod redis_cluster;

/// The tests of a suite whose guarantee is the same on Redis Cluster
/// (`redis_cluster::name`); the others differ there and are checked by
/// `tests/redis_*.rs` (see docs/design/store-redis.md, "Redis Cluster").
#[macro_export]
macro_rules! redis_cluster_tests {
    ($($test:ident),* $(,)?) => {
        #[cfg(feature = "redis")]
        mod redis_cluster {
            $(#[test] fn $test() { super::$test::<::autoshard::RedisCluster>(); })*
        }
    };
}

/// [`store_tests!`] and [`redis_cluster_tests!`] for the same list: a suite
/// whose every test holds as it is on all stores.
#[macro_export]
macro_rules! every_store_tests {
    ($($test:ident),* $(,)?) => {
        store_tests!($($test),*);
        redis_cluster_tests!($($test),*);
    };
}

/// Instantiates generic tests `fn name<S: TestStore>()` once per store:
/// `sqlite::name`, `postgres::name` (locking mode) and
/// `postgres_optimistic::name`.
#[macro_export]
macro_rules! store_tests {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $test() { super::$test::<::autoshard::Sqlite>(); })*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(#[test] fn $test() { super::$test::<::autoshard::Postgres>(); })*
        }
        #[cfg(feature = "postgres")]
        mod postgres_optimistic {
            $(#[test] fn $test() { super::$test::<$crate::stores::pg::Optimistic>(); })*
        }
    };
}

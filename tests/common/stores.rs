//! Plumbing for test suites written once and run against every store.
//!
//! A suite is a set of generic functions `fn name<S: TestStore>()`;
//! `store_tests!(name, ...)` instantiates each as `sqlite::name` and
//! `postgres::name`. Every test gets an isolated store from
//! [`TestStore::fresh`]: a new SQLite file in a temporary directory, or a new
//! PostgreSQL schema (dropped when the test ends), so suites run in
//! parallel under the default harness.
//!
//! PostgreSQL tests connect to `AUTOSHARD_PG_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`) and fail if it is not
//! reachable: `.ci/run` starts the server.
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
pub mod pg {
    use super::*;
    use autoshard::{Concurrency, Postgres, PostgresBuilder};

    pub fn url() -> String {
        std::env::var("AUTOSHARD_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
    }

    /// The connection string of a child process's sessions: tagged with
    /// `tag`, so the parent can tell when the killed child's server
    /// processes are gone ([`wait_for_sessions`]).
    #[allow(dead_code)] // not every test file kills children
    pub fn tagged_url(tag: &str) -> String {
        let url = url();
        let glue = if url.contains('?') { '&' } else { '?' };
        format!("{url}{glue}application_name={tag}")
    }

    /// Waits (up to 30 s) until no session tagged `tag` is left: after a
    /// SIGKILL the child's server process may still be running, or
    /// committing, its last transaction.
    #[allow(dead_code)] // not every test file kills children
    pub fn wait_for_sessions(tag: &str) {
        let mut client = client();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let alive: i64 = client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                    &[&tag],
                )
                .unwrap()
                .get(0);
            if alive == 0 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the killed child's sessions ({tag}) linger"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A plain client, for reading rows behind the store's back.
    pub fn client() -> postgres::Client {
        postgres::Client::connect(&url(), postgres::NoTls).unwrap_or_else(|e| {
            panic!(
                "cannot connect to PostgreSQL at {} ({e}); start it or set AUTOSHARD_PG_URL",
                url()
            )
        })
    }

    /// A new schema name; [`DropSchema`] removes it.
    pub fn new_schema() -> String {
        format!("t_{}", unique_suffix())
    }

    /// Drops a test's schema when the test ends, pass or fail.
    pub struct DropSchema(pub String);

    impl Drop for DropSchema {
        fn drop(&mut self) {
            if let Ok(mut client) = postgres::Client::connect(&url(), postgres::NoTls) {
                let _ =
                    client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.0));
            }
        }
    }

    /// A fresh schema for a crash test whose children reach it by URL
    /// (`autoshard::open`): the parent's URL, the children's (tagged, so
    /// [`settle`](CrashSchema::settle) can wait for a killed child's
    /// sessions), and the schema's removal when the test ends.
    #[allow(dead_code)] // not every test file kills children
    pub struct CrashSchema {
        pub url: String,
        pub child_url: String,
        tag: String,
        _cleanup: DropSchema,
    }

    #[allow(dead_code)] // not every test file kills children
    impl CrashSchema {
        /// `test` names the test in the children's `application_name`.
        pub fn new(test: &str) -> CrashSchema {
            let schema = new_schema();
            let tag = format!("{test}_{schema}");
            let with_schema = |url: String| {
                let glue = if url.contains('?') { '&' } else { '?' };
                format!("{url}{glue}schema={schema}")
            };
            CrashSchema {
                url: with_schema(url()),
                child_url: with_schema(tagged_url(&tag)),
                tag,
                _cleanup: DropSchema(schema),
            }
        }

        /// Returns once no killed child's server session is left: one may
        /// still be committing its last transaction after the SIGKILL.
        pub fn settle(&self) {
            wait_for_sessions(&self.tag);
        }
    }

    pub fn builder(schema: &str, options: &Options) -> PostgresBuilder {
        let mut builder = Postgres::builder(&url()).schema(schema);
        if let Some(rows) = options.compaction_batch_rows {
            builder = builder.compaction_batch_rows(rows);
        }
        if let Some(attempts) = options.max_attempts {
            builder = builder.max_attempts(attempts);
        }
        if let Some(size) = options.pool_size {
            builder = builder.pool_size(size);
        }
        builder
    }

    /// A fresh schema with a store in `concurrency` mode.
    pub fn fresh(concurrency: Concurrency, options: Options) -> Fresh<Postgres> {
        let schema = new_schema();
        let cleanup = DropSchema(schema.clone());
        let open = {
            let schema = schema.clone();
            move |options: &Options| {
                builder(&schema, options)
                    .concurrency(concurrency)
                    .open()
                    .unwrap_or_else(|e| panic!("open the PostgreSQL store at {}: {e}", url()))
            }
        };
        let rows_schema = schema.clone();
        let docs_schema = schema.clone();
        let sql_schema = schema.clone();
        let queue_schema = schema.clone();
        Fresh {
            store: open(&options),
            open: Box::new(open),
            rows: Box::new(move |base| rows(&rows_schema, base)),
            documents: Box::new(move |base| documents(&docs_schema, base)),
            rank_nodes: Box::new(move |board| rank_nodes(&schema, board)),
            execute: Box::new(move |sql| execute(&sql_schema, sql)),
            execute_queue: Box::new(move |sql| execute(&queue_schema, sql)),
            _cleanup: Box::new(cleanup),
        }
    }

    fn text_key(row: &postgres::Row) -> String {
        row.get(0)
    }

    pub fn rows(schema: &str, base: &str) -> Rows {
        let mut client = client();
        let Ok(rows) = client.query(
            &format!(
                "SELECT entity::text, field, shard, int_value, real_value, text_value \
                 FROM \"{schema}\".\"as_shard_{base}\""
            ),
            &[],
        ) else {
            return Rows::new();
        };
        rows.iter()
            .map(|r| {
                let value = match (r.get(3), r.get(4), r.get(5)) {
                    (Some(i), None, None) => Value::Integer(i),
                    (None, Some(f), None) => Value::Real(f),
                    (None, None, Some(s)) => Value::Text(s),
                    other => panic!("bad value columns {other:?}"),
                };
                ((text_key(r), r.get(1), r.get(2)), value)
            })
            .collect()
    }

    pub fn rank_nodes(schema: &str, board: &str) -> RankNodes {
        let mut client = client();
        let rows = client
            .query(
                &format!(
                    "SELECT n.height::int8, n.idx, n.part::int8, n.shard::int8, n.v \
                     FROM \"{schema}\".autoshard_rank_nodes n \
                     JOIN \"{schema}\".autoshard_rank_boards b ON b.id = n.board \
                     WHERE b.name = $1"
                ),
                &[&board],
            )
            .unwrap();
        rows.iter()
            .map(|r| {
                (
                    (r.get(0), r.get(1), r.get(2), r.get(3)),
                    decode_vector(r.get(4)),
                )
            })
            .collect()
    }

    pub fn execute(schema: &str, sql: &str) -> u64 {
        let mut client = client();
        let mut tx = client.transaction().unwrap();
        tx.batch_execute(&format!("SET LOCAL search_path TO \"{schema}\""))
            .unwrap();
        let n = tx.execute(sql, &[]).unwrap();
        tx.commit().unwrap();
        n
    }

    pub fn documents(schema: &str, base: &str) -> Documents {
        let mut client = client();
        let Ok(rows) = client.query(
            &format!("SELECT id::text, doc FROM \"{schema}\".\"as_entity_{base}\""),
            &[],
        ) else {
            return Documents::new();
        };
        rows.iter().map(|r| (text_key(r), r.get(1))).collect()
    }

    impl TestStore for Postgres {
        const NAME: &'static str = "postgres";

        fn fresh_with(options: Options) -> Fresh<Self> {
            fresh(Concurrency::Locking, options)
        }
    }

    /// The same store in optimistic mode, as a third store under test.
    #[derive(Clone, Debug)]
    pub struct Optimistic(pub Postgres);

    /// Delegates to the wrapped store.
    impl autoshard::__private::Backend for Optimistic {
        fn __entities(&self) -> autoshard::__private::Entities<'_> {
            self.0.__entities()
        }
        fn __boards(&self) -> autoshard::__private::Boards {
            self.0.__boards()
        }
    }

    impl TestStore for Optimistic {
        const NAME: &'static str = "postgres_optimistic";

        fn fresh_with(options: Options) -> Fresh<Self> {
            // Retries are what make optimistic saves succeed under
            // contention; the suites check totals, not failure rates.
            let options = Options {
                max_attempts: options.max_attempts.or(Some(1_000)),
                ..options
            };
            let Fresh {
                store,
                open,
                rows,
                documents,
                rank_nodes,
                execute,
                execute_queue,
                _cleanup,
            } = fresh(Concurrency::Optimistic, options);
            Fresh {
                store: Optimistic(store),
                open: Box::new(move |o| {
                    Optimistic(open(&Options {
                        max_attempts: o.max_attempts.or(Some(1_000)),
                        ..o.clone()
                    }))
                }),
                rows,
                documents,
                rank_nodes,
                execute,
                execute_queue,
                _cleanup,
            }
        }
    }
}

#[cfg(feature = "redis")]
pub mod redis_cluster {
    use super::*;
    use autoshard::{RedisCluster, RedisClusterBuilder};

    /// The cluster's nodes, from `AUTOSHARD_REDIS_CLUSTER_URL`; a test that
    /// needs a cluster fails without one, saying how to start it.
    pub fn nodes() -> Vec<String> {
        let url = std::env::var("AUTOSHARD_REDIS_CLUSTER_URL").unwrap_or_else(|_| {
            panic!(
                "AUTOSHARD_REDIS_CLUSTER_URL is not set: start a cluster with \
                 `scripts/redis-cluster start` and export \
                 AUTOSHARD_REDIS_CLUSTER_URL=redis-cluster://127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103 \
                 (`.ci/run` does both)"
            )
        });
        let hosts = url
            .strip_prefix("redis-cluster://")
            .expect("AUTOSHARD_REDIS_CLUSTER_URL starts with redis-cluster://");
        let hosts = hosts.split('?').next().unwrap().trim_end_matches('/');
        hosts.split(',').map(str::to_owned).collect()
    }

    pub fn url(prefix: &str) -> String {
        format!("redis-cluster://{}?prefix={prefix}", nodes().join(","))
    }

    /// A plain connection to every master, for reading keys behind the
    /// store's back (`SCAN` is per node).
    pub fn masters() -> Vec<redis::Connection> {
        let first = &nodes()[0];
        let mut conn = redis::Client::open(format!("redis://{first}"))
            .and_then(|c| c.get_connection())
            .unwrap_or_else(|e| {
                panic!(
                    "cannot reach Redis Cluster node {first} ({e}): `scripts/redis-cluster start`"
                )
            });
        let listing: String = redis::cmd("CLUSTER").arg("NODES").query(&mut conn).unwrap();
        listing
            .lines()
            .filter(|l| {
                l.split(' ')
                    .nth(2)
                    .is_some_and(|f| f.contains("master") && !f.contains("fail"))
            })
            .map(|l| {
                let addr = l.split(' ').nth(1).unwrap().split('@').next().unwrap();
                redis::Client::open(format!("redis://{addr}"))
                    .and_then(|c| c.get_connection())
                    .unwrap()
            })
            .collect()
    }

    /// Every key matching `pattern` on every master.
    pub fn scan(pattern: &str) -> Vec<(usize, String)> {
        let mut keys = Vec::new();
        for (n, mut conn) in masters().into_iter().enumerate() {
            let found: Vec<String> = redis::cmd("SCAN")
                .cursor_arg(0)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .clone()
                .iter(&mut conn)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            keys.extend(found.into_iter().map(|k| (n, k)));
        }
        keys
    }

    fn hgetall(key: &str) -> BTreeMap<String, String> {
        let mut conns = masters();
        for conn in &mut conns {
            let r: redis::RedisResult<BTreeMap<String, String>> =
                redis::cmd("HGETALL").arg(key).query(conn);
            if let Ok(map) = r {
                return map;
            }
        }
        panic!("no master serves {key}")
    }

    /// Decodes a stored value as the store encodes it.
    pub fn decode(stored: &str) -> Value {
        match stored.as_bytes()[0] {
            b'f' => Value::Real(stored[1..].parse().unwrap()),
            b'j' => Value::Text(stored[1..].to_owned()),
            _ => Value::Integer(stored.parse().unwrap()),
        }
    }

    /// Every document of `base` under `prefix`: id -> (incarnation, JSON).
    pub fn documents_with_inc(prefix: &str, base: &str) -> BTreeMap<String, (String, String)> {
        scan(&format!("{prefix}:*:{base}:d:*"))
            .into_iter()
            .map(|(_, key)| {
                let id = key.splitn(5, ':').nth(4).unwrap()[1..].to_owned();
                let mut doc = hgetall(&key);
                (id, (doc.remove("inc").unwrap(), doc.remove("doc").unwrap()))
            })
            .collect()
    }

    /// The shard rows of the live incarnation of every entity of `base`.
    pub fn rows(prefix: &str, base: &str) -> Rows {
        let docs = documents_with_inc(prefix, base);
        let mut rows = Rows::new();
        for (_, key) in scan(&format!("{prefix}:*:{base}:b*")) {
            let id = key.splitn(5, ':').nth(4).unwrap()[1..].to_owned();
            let bucket = hgetall(&key);
            if docs.get(&id).map(|(inc, _)| inc) != bucket.get("~") {
                continue;
            }
            for (name, value) in bucket {
                let Some(rest) = name.strip_prefix("r:") else {
                    continue;
                };
                let (field, shard) = rest.rsplit_once(':').unwrap();
                rows.insert(
                    (id.clone(), field.to_owned(), shard.parse().unwrap()),
                    decode(&value),
                );
            }
        }
        rows
    }

    /// The score-tree rows of board `board` under `prefix`: the registry
    /// names its id, the board's `n` hash holds `height:idx:part:shard`
    /// fields (see `stores/redis/boards.rs`).
    pub fn rank_nodes(prefix: &str, board: &str) -> RankNodes {
        let registry = scan(&format!("{prefix}:*:boards"));
        let (_, registry) = registry.first().expect("no board registry");
        let record = hgetall(registry)
            .remove(board)
            .unwrap_or_else(|| panic!("no board {board:?}"));
        let id = record.split('|').next().unwrap();
        let Some((_, nodes)) = scan(&format!("{prefix}:*:rk{id}:n")).pop() else {
            return RankNodes::new();
        };
        let mut rows = RankNodes::new();
        for conn in &mut masters() {
            let found: redis::RedisResult<BTreeMap<String, Vec<u8>>> =
                redis::cmd("HGETALL").arg(&nodes).query(conn);
            let Ok(found) = found else { continue };
            for (field, v) in found {
                let k: Vec<i64> = field.split(':').map(|n| n.parse().unwrap()).collect();
                rows.insert((k[0], k[1], k[2], k[3]), decode_vector(&v));
            }
            return rows;
        }
        panic!("no master serves {nodes}")
    }

    /// Removes every key under a test's prefix when the test ends.
    pub struct DropPrefix(pub String);

    impl Drop for DropPrefix {
        fn drop(&mut self) {
            // Not during a panic caused by a missing cluster.
            let Ok(masters) = std::panic::catch_unwind(masters) else {
                return;
            };
            for mut conn in masters {
                let keys: Vec<String> = match redis::cmd("SCAN")
                    .cursor_arg(0)
                    .arg("MATCH")
                    .arg(format!("{}:*", self.0))
                    .arg("COUNT")
                    .arg(1000)
                    .clone()
                    .iter(&mut conn)
                {
                    Ok(iter) => iter.filter_map(Result::ok).collect(),
                    Err(_) => continue,
                };
                for key in keys {
                    let _ = redis::cmd("UNLINK").arg(&key).query::<i64>(&mut conn);
                }
            }
        }
    }

    pub fn builder(prefix: &str, options: &Options) -> RedisClusterBuilder {
        let mut builder = RedisCluster::builder(nodes()).prefix(prefix);
        if let Some(rows) = options.compaction_batch_rows {
            builder = builder.compaction_batch_rows(rows);
        }
        if let Some(attempts) = options.max_attempts {
            builder = builder.max_attempts(attempts);
        }
        if let Some(size) = options.pool_size {
            builder = builder.pool_size(size);
        }
        builder
    }

    pub fn new_prefix() -> String {
        format!("t_{}", unique_suffix())
    }

    impl TestStore for RedisCluster {
        const NAME: &'static str = "redis_cluster";

        fn fresh_with(options: Options) -> Fresh<Self> {
            let prefix = new_prefix();
            let cleanup = DropPrefix(prefix.clone());
            let open = {
                let prefix = prefix.clone();
                move |options: &Options| {
                    builder(&prefix, options)
                        .open()
                        .unwrap_or_else(|e| panic!("open the Redis Cluster store: {e}"))
                }
            };
            let rows_prefix = prefix.clone();
            let docs_prefix = prefix.clone();
            let nodes_prefix = prefix.clone();
            Fresh {
                store: open(&options),
                open: Box::new(open),
                rows: Box::new(move |base| rows(&rows_prefix, base)),
                documents: Box::new(move |base| {
                    documents_with_inc(&docs_prefix, base)
                        .into_iter()
                        .map(|(id, (_, doc))| (id, doc))
                        .collect()
                }),
                rank_nodes: Box::new(move |board| rank_nodes(&nodes_prefix, board)),
                execute: Box::new(|_| panic!("Redis Cluster has no SQL to execute")),
                execute_queue: Box::new(|_| panic!("Redis Cluster has no SQL to execute")),
                _cleanup: Box::new(cleanup),
            }
        }
    }
}

/// The tests of a suite whose guarantee is the same on Redis Cluster
/// (`redis_cluster::name`); the others differ there and are checked by
/// `tests/redis_*.rs` (see docs/design.md, "Redis Cluster").
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

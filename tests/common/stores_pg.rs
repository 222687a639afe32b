//! The PostgreSQL side of the shared suites: a fresh schema per test, the
//! two concurrency modes as store types, and raw access for the checks.

use super::*;
use autoshard::{Concurrency, Postgres, PostgresBuilder};

/// `AUTOSHARD_PG_URL`, else the default URL when a server answers there,
/// else a throwaway server the test run starts (`autoshard-test-servers`).
pub fn url() -> String {
    autoshard_test_servers::postgres_url()
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
            let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.0));
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
        keeps_tree: Box::new(|_| true),
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
            keeps_tree,
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
            keeps_tree,
            execute,
            execute_queue,
            _cleanup,
        }
    }
}

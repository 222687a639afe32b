//! The PostgreSQL store.
//!
//! Many processes share one server, so unlike SQLite (one writer at a time)
//! concurrent saves really do meet on hot rows, and the store offers the two
//! ways of handling that which the AutoShard paper contrasts:
//! [`Concurrency::Optimistic`] (Datastore's: read, fold, write under
//! `REPEATABLE READ`; a concurrent writer to the same row makes the
//! transaction fail and it is retried) and [`Concurrency::Locking`]
//! (`READ COMMITTED`; the shard row is locked, or a sum is added in one
//! `UPDATE`). Either way a failed transaction is re-run whole, a bounded
//! number of times.
//!
//! Every write transaction also records an operation id (the connection's
//! *writer* id and a sequence number) in the same transaction, so a save
//! whose `COMMIT` got no answer can find out whether it was applied instead
//! of guessing: see `docs/design/store-postgres.md`, "Exactly once on PostgreSQL".

mod approx;
mod boards;
mod counts;
mod entities;
mod error;
mod lifecycle;
mod query;
mod queue;
pub(crate) mod ranked;
mod runtime;
mod schema;
pub(crate) mod tx;
mod values;

use crate::error::{Error, Result};
use crate::seam::{Backend, Boards, Entities, Kind};
use crate::stores::pool::{Checkout, Pool, Pooled};
use crate::stores::registry::KindCache;
use error::{classify, refused_for_now, Class};
use postgres::{Client, NoTls, Statement};
use schema::KindTables;
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tx::Tx;

/// The URL schemes [`crate::open`] hands to this store.
pub(crate) const SCHEMES: &[&str] = &["postgres", "postgresql"];

/// How concurrent writers to one shard row are reconciled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Concurrency {
    /// `READ COMMITTED`. A static save locks its shard row
    /// (`SELECT ... FOR UPDATE`) and folds under the lock, or, for a field
    /// whose fold is [`fold::checked_sum`](crate::fold::checked_sum) over a
    /// 64-bit integer, adds its delta in one `INSERT ... ON CONFLICT DO
    /// UPDATE SET int_value = int_value + delta`. Writers to one row queue
    /// instead of failing; only deadlocks are retried.
    #[default]
    Locking,
    /// `REPEATABLE READ`: read the shard row, fold, write, as Google Cloud
    /// Datastore does. A transaction that writes a row another transaction
    /// changed since its snapshot fails with a serialization failure
    /// (SQLSTATE 40001) and is re-run, up to `max_attempts` times.
    Optimistic,
}

impl Concurrency {
    fn isolation(self) -> &'static str {
        match self {
            Concurrency::Locking => "READ COMMITTED",
            Concurrency::Optimistic => "REPEATABLE READ",
        }
    }
}

/// Options for opening a [`Postgres`] store.
///
/// ```no_run
/// use autoshard::{Concurrency, Postgres};
/// let db = Postgres::builder("postgres://postgres@127.0.0.1:5432/app")
///     .schema("voting")
///     .pool_size(16)
///     .concurrency(Concurrency::Optimistic)
///     .max_attempts(20)
///     .open()?;
/// # Ok::<(), autoshard::Error>(())
/// ```
#[derive(Clone)]
pub struct PostgresBuilder {
    url: String,
    schema: String,
    pool_size: usize,
    concurrency: Concurrency,
    max_attempts: u32,
    compaction_batch_rows: usize,
    in_doubt_timeout: Duration,
    lock_timeout: Duration,
    pool_timeout: Duration,
    exactly_once: bool,
}

impl std::fmt::Debug for PostgresBuilder {
    // The URL may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBuilder")
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("concurrency", &self.concurrency)
            .field("max_attempts", &self.max_attempts)
            .field("compaction_batch_rows", &self.compaction_batch_rows)
            .field("lock_timeout", &self.lock_timeout)
            .field("pool_timeout", &self.pool_timeout)
            .finish_non_exhaustive()
    }
}

impl PostgresBuilder {
    /// The schema holding autoshard's tables (default `public`), created if
    /// missing. 1 to 63 ASCII letters, digits or `_`, not starting with a
    /// digit.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Connections this handle keeps open for concurrent callers (default
    /// 4, at least 1). Callers beyond that wait for a connection, and so do
    /// callers whose new connection the server refuses (a role's or the
    /// server's connection limit), for at most
    /// [`pool_timeout`](Self::pool_timeout).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// How long a call waits for a connection when the pool's are all in
    /// use or the server refuses another (SQLSTATE 53300, a connection
    /// limit) before it fails with [`Error::PoolTimeout`], which is
    /// retryable (default 5 s). `open` waits as long for its first
    /// connection when the server refuses it. `Duration::MAX` waits for as
    /// long as it takes.
    pub fn pool_timeout(mut self, timeout: Duration) -> Self {
        self.pool_timeout = timeout;
        self
    }

    /// How long a statement waits for a lock another transaction holds (a
    /// shard row, a ranking board's advisory lock) before the call fails
    /// with [`Error::Busy`], which is retryable: PostgreSQL's
    /// `lock_timeout`, set on every connection (default 5 s). The wait is
    /// not repeated by the store's retries. `Duration::ZERO` fails at once
    /// (1 ms) and `Duration::MAX` (or anything from 2^31 ms up) waits for
    /// as long as it takes, as PostgreSQL does by default.
    pub fn lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// How concurrent writers to one shard row are reconciled (default
    /// [`Concurrency::Locking`]).
    pub fn concurrency(mut self, concurrency: Concurrency) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// How many times a transaction is tried before a serialization failure,
    /// deadlock or lost connection is returned (default 8, at least 1; 1
    /// means no retry).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Rows a compaction transaction reads before it commits (default
    /// 10,000).
    pub fn compaction_batch_rows(mut self, rows: usize) -> Self {
        self.compaction_batch_rows = rows.max(1);
        self
    }

    /// How long a write whose `COMMIT` got no answer keeps trying to reach
    /// the server to find out whether it was applied (default 30 s), before
    /// it gives up with [`Error::InDoubt`]. `Duration::MAX` never gives up.
    pub fn in_doubt_timeout(mut self, timeout: Duration) -> Self {
        self.in_doubt_timeout = timeout;
        self
    }

    /// Turns operation ids off: a `COMMIT` that got no answer is then
    /// retried as if it had failed, which counts it twice when it had in
    /// fact been applied. Only for the control run of the exactly-once test.
    #[doc(hidden)]
    pub fn exactly_once(mut self, on: bool) -> Self {
        self.exactly_once = on;
        self
    }

    /// Connects, creating the schema and autoshard's bookkeeping tables if
    /// needed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] for a malformed connection string;
    /// [`Error::InvalidName`] for a schema name that is not a plain
    /// identifier; [`Error::Unavailable`] when the server cannot be reached;
    /// [`Error::Postgres`] when it refuses (authentication, permissions).
    pub fn open(self) -> Result<Postgres> {
        runtime::blocking(|| self.connect_and_open())
    }

    fn connect_and_open(self) -> Result<Postgres> {
        let config = postgres::Config::from_str(&self.url).map_err(|e| Error::InvalidUrl {
            reason: format!("not a PostgreSQL connection string: {e}"),
        })?;
        let names = schema::Names::new(&self.schema)?;
        let mut client = self.connect_first(&config)?;
        schema::ensure_base(&mut client, &names)?;
        let first = register(&names, self.exactly_once, client)?;
        Ok(Postgres {
            inner: Arc::new(Inner {
                config,
                pool: Pool::new(self.pool_size, first).waiting(self.pool_timeout, refused_for_now),
                kinds: KindCache::default(),
                boards: OnceLock::new(),
                names,
                options: self,
            }),
        })
    }
}

impl PostgresBuilder {
    /// The first connection: an unreachable server is
    /// [`Error::Unavailable`]; a server at its connection limit is asked
    /// again until `pool_timeout`, then [`Error::PoolTimeout`].
    fn connect_first(&self, config: &postgres::Config) -> Result<Client> {
        let started = Instant::now();
        let deadline = started.checked_add(self.pool_timeout);
        loop {
            match connect(config, self.lock_timeout) {
                Err(Error::Postgres(e)) if classify(&e) == Class::Lost => {
                    return Err(Error::Unavailable {
                        attempts: 1,
                        source: Box::new(e),
                    })
                }
                Err(e) if refused_for_now(&e) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(Error::PoolTimeout {
                            waited: started.elapsed(),
                            open: 0,
                            refused: Some(Box::new(e)),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                other => return other,
            }
        }
    }
}

/// A PostgreSQL database shared by many threads and processes.
///
/// Cloning is cheap and shares the connection pool. All tables live in one
/// schema ([`PostgresBuilder::schema`]); handles on the same schema, in this
/// process or others, see one another's writes.
#[derive(Clone)]
pub struct Postgres {
    inner: Arc<Inner>,
}

struct Inner {
    config: postgres::Config,
    names: schema::Names,
    pool: Pool<Conn>,
    kinds: KindCache<KindTables>,
    /// The board and queue statements of the schema, built on first use.
    boards: OnceLock<boards::Sql>,
    options: PostgresBuilder,
}

/// The last handle's connections close off any runtime's thread
/// (`runtime.rs`): dropped on one, each would panic.
impl Drop for Inner {
    fn drop(&mut self) {
        runtime::drop_off_runtime(self.pool.take_idle());
    }
}

/// A pooled connection and what it keeps between transactions.
pub(crate) struct Conn {
    client: Client,
    statements: HashMap<String, Statement>,
    /// This connection's row in `autoshard_writers` (0: exactly-once off).
    writer: i64,
    /// The last operation number used by this writer.
    seq: i64,
}

impl Pooled for Conn {
    // A connection released by a panicking caller may be mid-transaction:
    // closing it makes the server roll back.
    fn reusable(&self) -> bool {
        !std::thread::panicking() && !self.client.is_closed()
    }
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("schema", &self.inner.options.schema)
            .field("concurrency", &self.inner.options.concurrency)
            .finish_non_exhaustive()
    }
}

impl Postgres {
    /// Connects to `url` (`postgres://user:password@host:port/database`, or
    /// any connection string the `postgres` crate accepts) with the default
    /// options.
    ///
    /// # Errors
    ///
    /// As [`PostgresBuilder::open`].
    pub fn open(url: &str) -> Result<Self> {
        Self::builder(url).open()
    }

    /// Options for connecting to `url`.
    pub fn builder(url: &str) -> PostgresBuilder {
        PostgresBuilder {
            url: url.to_owned(),
            schema: "public".to_owned(),
            pool_size: 4,
            concurrency: Concurrency::default(),
            max_attempts: 8,
            compaction_batch_rows: 10_000,
            in_doubt_timeout: Duration::from_secs(30),
            lock_timeout: Duration::from_secs(5),
            pool_timeout: Duration::from_secs(5),
            exactly_once: true,
        }
    }

    /// The schema this handle works in.
    pub fn schema(&self) -> &str {
        &self.inner.options.schema
    }

    /// The concurrency mode this handle was opened with.
    pub fn concurrency(&self) -> Concurrency {
        self.inner.options.concurrency
    }

    pub(crate) fn compaction_batch_rows(&self) -> usize {
        self.inner.options.compaction_batch_rows
    }

    /// A pooled connection, opened (and registered) if none is idle.
    fn checkout(&self) -> Result<Checkout<'_, Conn>> {
        self.inner.pool.checkout(|| {
            let client = connect(&self.inner.config, self.inner.options.lock_timeout)?;
            register(&self.inner.names, self.inner.options.exactly_once, client)
        })
    }

    /// After a lost connection the idle ones are probably dead too.
    fn drop_idle(&self) {
        self.inner.pool.drop_idle();
    }

    /// The quoted schema name, for tables other modules keep in it.
    pub(crate) fn quoted_schema(&self) -> &str {
        &self.inner.names.schema
    }

    /// A statement serializing DDL on this schema across processes; run it
    /// first in the transaction that creates tables.
    pub(crate) fn ddl_lock(&self) -> String {
        self.inner.names.ddl_lock()
    }

    /// The tables of `kind`, created on first use.
    fn tables(&self, kind: &Kind) -> Result<Arc<KindTables>> {
        self.inner.kinds.get(kind, || {
            let tables = KindTables::new(kind, &self.inner.names)?;
            self.write(|tx| tables.ensure(tx, kind, &self.inner.names))?;
            Ok(tables)
        })
    }
}

impl Backend for Postgres {
    fn __entities(&self) -> Entities<'_> {
        Entities(self)
    }

    fn __boards(&self) -> Boards {
        Boards(Arc::new(self.clone()))
    }
}

/// `postgres://…` or `postgresql://…`, with an optional `schema=NAME` query
/// parameter (the rest of the URL goes to the `postgres` crate as is).
pub(crate) fn open_url(url: &str) -> Result<Postgres> {
    let (url, schema) = take_query_param(url, "schema");
    let mut builder = Postgres::builder(&url);
    if let Some(schema) = schema {
        builder = builder.schema(schema);
    }
    builder.open()
}

/// Removes `name=value` from the URL's query string (the `postgres` crate
/// refuses parameters it does not know).
fn take_query_param(url: &str, name: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut value = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.split_once('=') {
            Some((key, v)) if key == name => {
                value = Some(v.to_owned());
                false
            }
            _ => true,
        })
        .collect();
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, value)
}

/// Gives a new connection its writer id (see the module docs).
fn register(names: &schema::Names, exactly_once: bool, mut client: Client) -> Result<Conn> {
    let writer = if exactly_once {
        // Rows of writers whose connection is long gone; locked ones
        // belong to a check in progress, which needs them.
        client.execute(&names.cleanup_writers, &[])?;
        client.query_one(&names.register_writer, &[])?.get(0)
    } else {
        0
    };
    Ok(Conn {
        client,
        statements: HashMap::new(),
        writer,
        seq: 0,
    })
}

/// A new session, with the store's `lock_timeout` (PostgreSQL's default
/// is to wait for a lock forever).
fn connect(config: &postgres::Config, lock_timeout: Duration) -> Result<Client> {
    let mut client = config.connect(NoTls)?;
    let mut set = format!("SET lock_timeout = {}", lock_timeout_ms(lock_timeout));
    if custom_plans() {
        set.push_str("; SET plan_cache_mode = force_custom_plan");
    }
    client.batch_execute(&set)?;
    Ok(client)
}

/// `__private::pg_hooks::custom_plans`: connections made while it is on
/// plan every statement afresh on every call (a benchmark's "before").
/// The store itself leaves the choice to PostgreSQL: a generic plan forced
/// on every statement froze plans made while the tables were empty (a
/// write batch's node load took 18 s per call at 20,000 players).
#[cfg(feature = "failpoints")]
pub(crate) static CUSTOM_PLANS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

fn custom_plans() -> bool {
    #[cfg(feature = "failpoints")]
    return CUSTOM_PLANS.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "failpoints"))]
    false
}

/// `lock_timeout` in PostgreSQL's unit: milliseconds from 1 to 2^31 - 1,
/// or 0 for no limit.
fn lock_timeout_ms(timeout: Duration) -> u128 {
    match timeout.as_millis() {
        ms if ms > i32::MAX as u128 => 0,
        ms => ms.max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_timeouts_in_milliseconds() {
        assert_eq!(lock_timeout_ms(Duration::from_secs(5)), 5_000);
        assert_eq!(lock_timeout_ms(Duration::ZERO), 1, "zero fails at once");
        assert_eq!(lock_timeout_ms(Duration::from_micros(10)), 1);
        assert_eq!(
            lock_timeout_ms(Duration::from_millis(i32::MAX as u64)),
            2_147_483_647
        );
        assert_eq!(lock_timeout_ms(Duration::MAX), 0, "no limit");
    }

    #[test]
    fn the_schema_parameter_is_taken_out() {
        assert_eq!(
            take_query_param("postgres://h/db?schema=s1&sslmode=disable", "schema"),
            ("postgres://h/db?sslmode=disable".into(), Some("s1".into()))
        );
        assert_eq!(
            take_query_param("postgres://h/db?schema=s1", "schema"),
            ("postgres://h/db".into(), Some("s1".into()))
        );
        assert_eq!(
            take_query_param("postgres://h/db", "schema"),
            ("postgres://h/db".into(), None)
        );
    }
}

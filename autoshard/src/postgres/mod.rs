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
//! of guessing: see `docs/design.md`, "Exactly once on PostgreSQL".

mod mapper;
mod schema;

use crate::error::{Error, Result};
use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, SimpleQueryMessage, Statement};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub(crate) use schema::KindTables;

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
    /// 4, at least 1). Callers beyond that wait for a connection.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
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
    /// it gives up with [`Error::InDoubt`].
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
    pub fn open(self) -> Result<Postgres> {
        let config = postgres::Config::from_str(&self.url).map_err(|e| Error::InvalidUrl {
            reason: format!("not a PostgreSQL connection string: {e}"),
        })?;
        let names = schema::Names::new(&self.schema)?;
        let mut client = connect(&config).map_err(|e| match e {
            Error::Postgres(e) if classify(&e) == Class::Lost => Error::Unavailable {
                attempts: 1,
                source: Box::new(e),
            },
            e => e,
        })?;
        schema::ensure_base(&mut client, &names)?;
        let store = Postgres {
            inner: Arc::new(Inner {
                config,
                names,
                pool: Mutex::new(Pool {
                    idle: Vec::new(),
                    open: 1,
                }),
                returned: Condvar::new(),
                kinds: Mutex::new(HashMap::new()),
                options: self,
            }),
        };
        let first = store.register(client)?;
        store.checkin(first);
        Ok(store)
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
    pool: Mutex<Pool>,
    returned: Condvar,
    kinds: Mutex<HashMap<&'static str, Arc<KindTables>>>,
    options: PostgresBuilder,
}

struct Pool {
    idle: Vec<Conn>,
    open: usize,
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

    fn checkout(&self) -> Result<Checkout<'_>> {
        let mut pool = self.inner.pool.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(conn) = pool.idle.pop() {
                return Ok(Checkout {
                    store: self,
                    conn: Some(conn),
                });
            }
            if pool.open < self.inner.options.pool_size {
                pool.open += 1;
                drop(pool);
                let conn = connect(&self.inner.config).and_then(|client| self.register(client));
                return match conn {
                    Ok(conn) => Ok(Checkout {
                        store: self,
                        conn: Some(conn),
                    }),
                    Err(e) => {
                        self.discard();
                        Err(e)
                    }
                };
            }
            pool = self
                .inner
                .returned
                .wait(pool)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    fn checkin(&self, conn: Conn) {
        let mut pool = self.inner.pool.lock().unwrap_or_else(|p| p.into_inner());
        pool.idle.push(conn);
        self.inner.returned.notify_one();
    }

    /// A connection was lost or closed: make room for a new one.
    fn discard(&self) {
        let mut pool = self.inner.pool.lock().unwrap_or_else(|p| p.into_inner());
        pool.open -= 1;
        self.inner.returned.notify_one();
    }

    /// After a lost connection the idle ones are probably dead too (the
    /// server restarted): drop them rather than spend attempts finding out.
    fn drop_idle(&self) {
        let idle = {
            let mut pool = self.inner.pool.lock().unwrap_or_else(|p| p.into_inner());
            let idle = std::mem::take(&mut pool.idle);
            pool.open -= idle.len();
            self.inner.returned.notify_all();
            idle
        };
        drop(idle);
    }

    /// Gives a new connection its writer id (see the module docs).
    fn register(&self, mut client: Client) -> Result<Conn> {
        let writer = if self.inner.options.exactly_once {
            let names = &self.inner.names;
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

    /// Runs `body` in a write transaction, re-running the whole transaction
    /// after a serialization failure, a deadlock or a lost connection.
    /// Returns the result and the attempts made.
    pub(crate) fn write<R>(&self, body: impl FnMut(&mut Tx<'_>) -> Result<R>) -> Result<(R, u32)> {
        self.write_at(self.inner.options.concurrency.isolation(), body)
    }

    /// [`write`](Self::write) at `READ COMMITTED` whatever the store's
    /// [`Concurrency`]: for callers that take their own locks and must read
    /// the latest committed rows after each lock (the ranking tree), which a
    /// `REPEATABLE READ` snapshot taken before the lock would not show.
    pub(crate) fn write_read_committed<R>(
        &self,
        body: impl FnMut(&mut Tx<'_>) -> Result<R>,
    ) -> Result<(R, u32)> {
        self.write_at(Concurrency::Locking.isolation(), body)
    }

    fn write_at<R>(
        &self,
        isolation: &str,
        mut body: impl FnMut(&mut Tx<'_>) -> Result<R>,
    ) -> Result<(R, u32)> {
        let max = self.inner.options.max_attempts;
        for attempt in 1..=max {
            let last = attempt == max;
            match self.attempt(isolation, &mut body) {
                Ok(r) => return Ok((r, attempt)),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Conflict) if last => {
                    return Err(Error::Conflict { attempts: attempt })
                }
                Err(Failure::Conflict) => backoff_conflict(attempt),
                Err(Failure::InDoubt {
                    result,
                    writer,
                    seq,
                }) => {
                    if self.resolve(writer, seq)? {
                        return Ok((result, attempt));
                    }
                    // Not applied: an ordinary failed attempt.
                    if last {
                        return Err(Error::Unavailable {
                            attempts: attempt,
                            source: "the connection was lost during COMMIT".into(),
                        });
                    }
                    backoff_lost(attempt);
                }
                Err(Failure::Lost(e)) if last => {
                    return Err(Error::Unavailable {
                        attempts: attempt,
                        source: Box::new(e),
                    })
                }
                Err(Failure::Lost(_)) => backoff_lost(attempt),
            }
        }
        unreachable!("the last attempt returns")
    }

    fn attempt<R>(
        &self,
        isolation: &str,
        body: &mut dyn FnMut(&mut Tx<'_>) -> Result<R>,
    ) -> Result<R, Failure<R>> {
        let mut checkout = self.checkout().map_err(|e| self.failure(e))?;
        let conn = checkout.conn.as_mut().expect("present until drop");
        let options = &self.inner.options;
        conn.seq += 1;
        let (writer, seq) = (conn.writer, conn.seq);
        let begin = format!("BEGIN ISOLATION LEVEL {isolation}");
        let begun = if options.exactly_once {
            // One round trip: the mark is written (and its row locked) before
            // COMMIT is ever sent, which is what `resolve` relies on.
            let sql = format!("{begin}; {}", self.inner.names.mark(writer, seq));
            conn.client
                .simple_query(&sql)
                .map_err(Error::from)
                .and_then(|messages| check_marked(&messages))
        } else {
            conn.client.batch_execute(&begin).map_err(Error::from)
        };
        if let Err(e) = begun {
            return Err(self.rollback(checkout, e));
        }
        let mut tx = Tx {
            client: &mut conn.client,
            statements: &mut conn.statements,
            mode: options.concurrency,
        };
        let result = match body(&mut tx) {
            Ok(result) => result,
            Err(e) => return Err(self.rollback(checkout, e)),
        };
        match conn.client.batch_execute("COMMIT") {
            Ok(()) => Ok(result),
            // The server answered: the transaction did not commit.
            Err(e) if e.as_db_error().is_some() && classify(&e) != Class::Lost => {
                Err(self.failure(Error::from(e)))
            }
            // No answer: it may or may not have committed.
            Err(e) => {
                checkout.broken();
                self.drop_idle();
                if options.exactly_once {
                    Err(Failure::InDoubt {
                        result,
                        writer,
                        seq,
                    })
                } else {
                    Err(Failure::Lost(e))
                }
            }
        }
    }

    /// Ends a failed transaction and classifies the failure.
    fn rollback<R>(&self, mut checkout: Checkout<'_>, error: Error) -> Failure<R> {
        let failure = self.failure(error);
        if let Failure::Lost(_) = failure {
            checkout.broken();
            self.drop_idle();
        } else if let Some(conn) = checkout.conn.as_mut() {
            if conn.client.batch_execute("ROLLBACK").is_err() {
                checkout.broken();
            }
        }
        failure
    }

    fn failure<R>(&self, error: Error) -> Failure<R> {
        match &error {
            Error::Postgres(e) => match classify(e) {
                Class::Conflict => Failure::Conflict,
                Class::Lost => match error {
                    Error::Postgres(e) => Failure::Lost(e),
                    _ => unreachable!(),
                },
                Class::Other => Failure::Fatal(error),
            },
            _ => Failure::Fatal(error),
        }
    }

    /// Whether the transaction that wrote operation `seq` of `writer`
    /// committed. Its connection is gone, but its backend may still be
    /// running it: terminate that backend, then wait on the writer row, which
    /// the transaction locked before its COMMIT was sent, so the answer is
    /// final once the lock is ours.
    fn resolve(&self, writer: i64, seq: i64) -> Result<bool> {
        let deadline = Instant::now() + self.inner.options.in_doubt_timeout;
        let mut tries = 0;
        loop {
            tries += 1;
            let error = match self.check_applied(writer, seq) {
                Ok(Some(applied)) => return Ok(applied),
                Ok(None) => "the writer's row is missing".into(),
                Err(Error::Postgres(e)) if classify(&e) == Class::Lost => {
                    self.drop_idle();
                    if Instant::now() < deadline {
                        backoff_lost(tries);
                        continue;
                    }
                    Box::new(e) as Box<dyn std::error::Error + Send + Sync>
                }
                Err(e) => Box::new(e),
            };
            return Err(Error::InDoubt {
                writer,
                seq,
                source: error,
            });
        }
    }

    fn check_applied(&self, writer: i64, seq: i64) -> Result<Option<bool>> {
        let mut checkout = self.checkout()?;
        let conn = checkout.conn.as_mut().expect("present until drop");
        let names = &self.inner.names;
        let timeout = self.inner.options.in_doubt_timeout.as_millis().max(1);
        let outcome = (|| {
            conn.client.batch_execute(&format!(
                "BEGIN; SET LOCAL lock_timeout = {timeout}; SET LOCAL statement_timeout = {timeout}"
            ))?;
            conn.client.query(&names.terminate_writer, &[&writer])?;
            let stored = conn.client.query_opt(&names.lock_writer, &[&writer])?;
            conn.client.batch_execute("COMMIT")?;
            Ok::<_, postgres::Error>(stored.map(|row| row.get::<_, i64>(0) >= seq))
        })();
        if outcome.is_err() {
            checkout.broken();
        }
        Ok(outcome?)
    }

    /// Runs `body` outside a transaction: every read is one statement, so
    /// it sees one snapshot without `BEGIN`/`COMMIT` round trips. Retried
    /// after a lost connection.
    pub(crate) fn read<R>(&self, mut body: impl FnMut(&mut Tx<'_>) -> Result<R>) -> Result<R> {
        let max = self.inner.options.max_attempts;
        for attempt in 1..=max {
            let outcome = self.checkout().and_then(|mut checkout| {
                let conn = checkout.conn.as_mut().expect("present until drop");
                let mut tx = Tx {
                    client: &mut conn.client,
                    statements: &mut conn.statements,
                    mode: self.inner.options.concurrency,
                };
                let outcome = body(&mut tx);
                if matches!(&outcome, Err(Error::Postgres(e)) if classify(e) == Class::Lost) {
                    checkout.broken();
                }
                outcome
            });
            match outcome {
                Err(Error::Postgres(e)) if classify(&e) == Class::Lost => {
                    self.drop_idle();
                    if attempt == max {
                        return Err(Error::Unavailable {
                            attempts: attempt,
                            source: Box::new(e),
                        });
                    }
                    backoff_lost(attempt);
                }
                other => return other,
            }
        }
        unreachable!("the last attempt returns")
    }

    /// Runs `body` in one `REPEATABLE READ READ ONLY` transaction: several
    /// statements that must agree with one another (a rank computed from a
    /// path, an arrival tree and a player row) see one snapshot. Retried
    /// after a lost connection.
    pub(crate) fn read_snapshot<R>(
        &self,
        mut body: impl FnMut(&mut Tx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.read(|tx| {
            tx.batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
            let outcome = body(tx);
            // A read-only transaction has nothing to commit: ROLLBACK ends
            // it the same way, also after an error.
            match (outcome, tx.batch("ROLLBACK")) {
                (Err(e), _) => Err(e),
                (Ok(_), Err(e)) => Err(e.into()),
                (Ok(r), Ok(())) => Ok(r),
            }
        })
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

    /// The tables of kind `T`, created on first use.
    pub(crate) fn tables<T: crate::Shardable>(&self) -> Result<Arc<KindTables>> {
        let cached = self
            .inner
            .kinds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(T::KIND)
            .cloned();
        if let Some(tables) = cached {
            tables.check_key_kind::<T>()?;
            return Ok(tables);
        }
        let tables = Arc::new(KindTables::new::<T>(&self.inner.names)?);
        self.write(|tx| tables.ensure(tx, &self.inner.names))?;
        self.inner
            .kinds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(T::KIND, tables.clone());
        Ok(tables)
    }
}

/// Why an attempt failed, and so what `write` does next.
enum Failure<R> {
    /// Serialization failure or deadlock: retry.
    Conflict,
    /// The connection broke before COMMIT was sent: nothing was applied.
    Lost(postgres::Error),
    /// The connection broke during COMMIT: `result` stands if the
    /// transaction turns out to have committed.
    InDoubt { result: R, writer: i64, seq: i64 },
    /// Anything else: return it.
    Fatal(Error),
}

/// The `BEGIN; UPDATE autoshard_writers ...` batch must have updated the
/// writer's row; without it there would be no evidence to check later.
fn check_marked(messages: &[SimpleQueryMessage]) -> Result<()> {
    let updated = messages.iter().rev().find_map(|m| match m {
        SimpleQueryMessage::CommandComplete(n) => Some(*n),
        _ => None,
    });
    if updated == Some(1) {
        return Ok(());
    }
    Err(Error::SchemaMismatch {
        kind: "autoshard_writers".into(),
        reason: "this connection's writer row is missing (deleted by hand?)".into(),
    })
}

fn connect(config: &postgres::Config) -> Result<Client> {
    Ok(config.connect(NoTls)?)
}

/// Returns the connection to the pool, or discards it if it broke or the
/// caller panicked (it may be mid-transaction; closing it makes the server
/// roll back).
struct Checkout<'a> {
    store: &'a Postgres,
    conn: Option<Conn>,
}

impl Checkout<'_> {
    fn broken(&mut self) {
        if self.conn.take().is_some() {
            self.store.discard();
        }
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if std::thread::panicking() || conn.client.is_closed() {
                drop(conn);
                self.store.discard();
            } else {
                self.store.checkin(conn);
            }
        }
    }
}

/// One transaction's view of its connection: statements are prepared once
/// per connection and cached.
pub(crate) struct Tx<'a> {
    client: &'a mut Client,
    statements: &'a mut HashMap<String, Statement>,
    pub(crate) mode: Concurrency,
}

type Params<'p> = [&'p (dyn ToSql + Sync)];

impl Tx<'_> {
    fn prepare(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql)?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    pub fn query(&mut self, sql: &str, params: &Params<'_>) -> Result<Vec<Row>, postgres::Error> {
        let statement = self.prepare(sql)?;
        self.client.query(&statement, params)
    }

    pub fn query_opt(
        &mut self,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<Option<Row>, postgres::Error> {
        let statement = self.prepare(sql)?;
        self.client.query_opt(&statement, params)
    }

    pub fn execute(&mut self, sql: &str, params: &Params<'_>) -> Result<u64, postgres::Error> {
        let statement = self.prepare(sql)?;
        self.client.execute(&statement, params)
    }

    /// Statements without parameters or results (DDL).
    pub fn batch(&mut self, sql: &str) -> Result<(), postgres::Error> {
        self.client.batch_execute(sql)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Serialization failure (40001) or deadlock (40P01): the transaction
    /// was rolled back and may succeed if run again.
    Conflict,
    /// The connection is gone (I/O error, closed, or the server ended the
    /// session: SQLSTATE classes 08 and 57P).
    Lost,
    Other,
}

pub(crate) fn classify(error: &postgres::Error) -> Class {
    if let Some(code) = error.code() {
        return match code.code() {
            "40001" | "40P01" => Class::Conflict,
            c if c.starts_with("08") || c.starts_with("57P") => Class::Lost,
            _ => Class::Other,
        };
    }
    let io = std::error::Error::source(error).is_some_and(|s| s.is::<std::io::Error>());
    if error.is_closed() || io {
        Class::Lost
    } else {
        Class::Other
    }
}

/// Whether a PostgreSQL error is worth retrying (see [`Error::is_retryable`]).
pub(crate) fn is_retryable(error: &postgres::Error) -> bool {
    classify(error) != Class::Other
}

/// Full jitter, 0.1 ms doubling to 100 ms: a conflict means another writer
/// is in the row right now, so the retry should land at a random later
/// moment, not in step with the other loser.
fn backoff_conflict(attempt: u32) {
    let cap = (100u64 << attempt.min(10)).min(100_000);
    std::thread::sleep(Duration::from_micros(crate::random::range(0..=cap)));
}

/// A lost connection needs the server back: 10 ms doubling to 1 s.
fn backoff_lost(attempt: u32) {
    let cap = (10u64 << attempt.min(7)).min(1_000);
    std::thread::sleep(Duration::from_millis(crate::random::range(cap / 2..=cap)));
}

//! The embedded SQLite store.
//!
//! One file, many handles: every write is a short `BEGIN IMMEDIATE`
//! transaction, so writers queue for SQLite's single write lock instead of
//! failing late with `SQLITE_BUSY` on commit. Waiting is done by a busy
//! handler with short jittered sleeps (SQLite's default handler sleeps up to
//! 100 ms at a time, far longer than a shard write holds the lock), and a
//! whole transaction that still meets `BUSY` is retried a bounded number of
//! times.

mod approx;
mod boards;
mod checkpoint;
mod counts;
mod entities;
mod error;
mod lifecycle;
mod query;
mod queue;
mod ranked;
mod schema;
mod trees;
mod values;
mod writer;

use crate::deadline::Deadline;
use crate::error::{Error, Result, Retryable};
use crate::seam::{Backend, Boards, Entities, Kind};
use crate::stores::pool::{Pool, Pooled};
use crate::stores::registry::KindCache;
use crate::trace;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use schema::KindTables;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use writer::WriterQueue;

/// The URL schemes [`crate::open`] hands to this store.
pub(crate) const SCHEMES: &[&str] = &["sqlite"];

/// How hard SQLite works to make a commit durable (`PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Synchronous {
    /// No fsync: a power loss may lose or corrupt recent commits.
    Off,
    /// In WAL mode, commits survive a process crash but the last ones may be
    /// lost on power loss.
    Normal,
    /// The default: every commit is fsynced before it is acknowledged, so an
    /// acknowledged save survives power loss.
    #[default]
    Full,
    /// `PRAGMA synchronous = EXTRA`; in WAL mode SQLite treats it like
    /// `Full`.
    Extra,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Off => "OFF",
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
            Synchronous::Extra => "EXTRA",
        }
    }
}

/// Options for opening a [`Sqlite`] store.
///
/// ```
/// use autoshard::{Sqlite, Synchronous};
/// use std::time::Duration;
/// # let dir = tempfile::tempdir()?;
/// let db = Sqlite::builder(dir.path().join("app.db"))
///     .synchronous(Synchronous::Normal)
///     .busy_timeout(Duration::from_secs(2))
///     .pool_size(4)
///     .open()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SqliteBuilder {
    path: Option<PathBuf>,
    synchronous: Synchronous,
    busy_timeout: Duration,
    max_attempts: u32,
    pool_size: usize,
    compaction_batch_rows: usize,
    mmap_size: u64,
    cache_size: u64,
    writer_cache_size: u64,
    background_checkpoint: bool,
    contention_wait: Option<Duration>,
}

impl SqliteBuilder {
    /// Lets saves raise automatic shard counts (`shards = LOW..=HIGH`): a
    /// save that waited at least `wait` for the writer lock counts as
    /// contention on every automatic field it writes, and doubles the
    /// entity's count. Off by default, so on SQLite automatic counts stay
    /// at their low end: the writer lock is the whole database's, so the
    /// wait is not the entity's, and more shard rows do not shorten it
    /// (BENCHMARKS.md §2: on SQLite static sharding adds no write
    /// parallelism). For tests of the protocol, and to watch which
    /// entities a workload makes wait.
    pub fn contention_wait(mut self, wait: Duration) -> Self {
        self.contention_wait = Some(wait);
        self
    }

    /// `PRAGMA synchronous`; [`Synchronous::Full`] by default.
    pub fn synchronous(mut self, synchronous: Synchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// How long one transaction waits for the write lock before it is
    /// retried (default 5 s). `Duration::MAX` waits as long as it takes.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How many times a transaction is tried before
    /// [`Error::Busy`](crate::Error::Busy) (default 8, at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Connections this handle keeps open for concurrent callers (default 4,
    /// always 1 for an in-memory database, which lives in its connection).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Rows a compaction transaction reads before it commits (default
    /// 10,000). Smaller batches hold the write lock for less time.
    pub fn compaction_batch_rows(mut self, rows: usize) -> Self {
        self.compaction_batch_rows = rows.max(1);
        self
    }

    /// Bytes of the file each connection maps into memory (`PRAGMA
    /// mmap_size`; default 0, SQLite's default: off). Reads of mapped pages
    /// skip a copy through the kernel, which matters for read-heavy work
    /// such as rank queries on a large board. An I/O error on a mapped page
    /// arrives as a signal instead of an error code, which is why it is not
    /// on by default.
    pub fn mmap_size(mut self, bytes: u64) -> Self {
        self.mmap_size = bytes;
        self
    }

    /// Bytes of page cache each connection keeps (`PRAGMA cache_size`;
    /// default 2,000 KiB, SQLite's default). A write transaction that dirties
    /// more pages than fit spills them to the WAL before it commits, so a
    /// large batch on a large file (a queue worker applying 1,000 updates to
    /// a million-player board) writes each page several times.
    pub fn cache_size(mut self, bytes: u64) -> Self {
        self.cache_size = bytes;
        self
    }

    /// Bytes of page cache of the connection ranking boards are written
    /// through (default 256 MiB): each
    /// handle writes its boards through one connection of its own (writers
    /// of a file take turns anyway), whose `PRAGMA cache_size` is this. A
    /// queue worker's batch on a large board touches pages all over the
    /// file; with a cache that holds them, the next batch finds them there
    /// instead of reading them again, and a large batch does not spill
    /// dirty pages to the WAL before its commit. SQLite allocates cache
    /// pages as they are used, so the memory is at most the pages written
    /// boards touch, and never more than this bound. Other connections keep
    /// [`cache_size`](SqliteBuilder::cache_size).
    pub fn writer_cache_size(mut self, bytes: u64) -> Self {
        self.writer_cache_size = bytes;
        self
    }

    /// Opens (creating if needed) the database.
    ///
    /// # Errors
    ///
    /// [`Error::Sqlite`] when the file cannot be opened or created, or is
    /// not a database; [`Error::Busy`] when other handles keep it locked
    /// through the whole busy timeout (recovering it, or switching a new
    /// file to WAL).
    pub fn open(self) -> Result<Sqlite> {
        let pool_size = if self.path.is_some() {
            self.pool_size
        } else {
            1
        };
        let first = self.connect()?;
        let writers = match &self.path {
            Some(path) => WriterQueue::for_file(path)?,
            None => Arc::new(WriterQueue::default()),
        };
        Ok(Sqlite {
            inner: Arc::new(Inner {
                pool: Pool::new(pool_size, first),
                kinds: KindCache::default(),
                writers,
                queue: OnceLock::new(),
                writer: OnceLock::new(),
                trees: Default::default(),
                generations: Default::default(),
                options: SqliteBuilder { pool_size, ..self },
            }),
        })
    }

    fn connect(&self) -> Result<Connection> {
        let mut conn = match &self.path {
            Some(path) => Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
                    | OpenFlags::SQLITE_OPEN_URI,
            )?,
            None => Connection::open_in_memory()?,
        };
        conn.busy_handler(Some(wait_for_lock))?;
        conn.set_prepared_statement_cache_capacity(128);
        // Handles opened at once race for WAL recovery, and the losers get
        // SQLITE_BUSY_RECOVERY from the first pragma: wait for it like a
        // transaction waits for the write lock, instead of failing the open.
        // Handles opening a new file at once all try to switch it to WAL,
        // and SQLite answers one of two such lock upgrades with SQLITE_BUSY
        // at once, without the busy handler (it would deadlock): that
        // pragma is tried again until the busy timeout has passed.
        let deadline = Deadline::after(self.busy_timeout);
        let outer = LOCK_DEADLINE.replace(Some(deadline));
        let mut attempts = 0;
        let pragmas = loop {
            attempts += 1;
            match self.pragmas(&conn) {
                Err(e) if e.is_retryable() && !deadline.passed() => backoff(attempts),
                other => break other,
            }
        };
        LOCK_DEADLINE.set(outer);
        match pragmas {
            Err(e) if e.is_retryable() => Err(Error::Busy { attempts }),
            other => other.map(|()| conn).map_err(Error::from),
        }
    }

    /// [`connect`](SqliteBuilder::connect) for the board writer's
    /// connection: its own page cache size, and its checkpoints on a thread
    /// (`checkpoint.rs`).
    fn connect_writer(&self) -> Result<Connection> {
        let mut conn = self.connect()?;
        let kib = self.writer_cache_size.div_ceil(1024);
        conn.execute_batch(&format!("PRAGMA cache_size = -{kib};"))?;
        checkpoint::install(self, &mut conn)?;
        Ok(conn)
    }

    fn pragmas(&self, conn: &Connection) -> rusqlite::Result<()> {
        // journal_mode answers with a row, so it cannot go through execute.
        let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {}; PRAGMA foreign_keys = ON; PRAGMA mmap_size = {}; \
             PRAGMA cache_size = -{};",
            self.synchronous.pragma(),
            self.mmap_size,
            // A negative cache_size is in KiB.
            self.cache_size.div_ceil(1024)
        ))
    }
}

/// [`SqliteBuilder::writer_cache_size`]'s default: 256 MiB, the pages of a
/// board of about 2.5 million players.
const DEFAULT_WRITER_CACHE_SIZE: u64 = 256 << 20;

/// An embedded SQLite database: the default store.
///
/// Cloning is cheap and shares the connection pool; separate handles (other
/// threads opening the same path, other processes) are safe too.
#[derive(Clone)]
pub struct Sqlite {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool<Connection>,
    kinds: KindCache<KindTables>,
    writers: Arc<WriterQueue>,
    /// The ranking queue's own database (`queue.rs`), opened on first use.
    queue: OnceLock<Sqlite>,
    /// The connection ranking boards are written through (`writer.rs`),
    /// opened on first use; never for an in-memory database, which lives
    /// in the pool's one connection.
    writer: OnceLock<Pool<Connection>>,
    /// The databases of split boards' trees (`trees.rs`), opened on first use.
    trees: trees::TreeDbs,
    /// Whether this handle made sure the boards' generation table exists.
    generations: std::sync::atomic::AtomicBool,
    options: SqliteBuilder,
}

impl Pooled for Connection {
    // The connection survives a panic mid-transaction (dropping the
    // transaction rolled it back), and an in-memory database lives in it.
    fn reusable(&self) -> bool {
        true
    }
}

impl std::fmt::Debug for Sqlite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sqlite")
            .field("path", &self.inner.options.path)
            .finish_non_exhaustive()
    }
}

impl Sqlite {
    /// Opens (creating if needed) the database file at `path` with the
    /// default options.
    ///
    /// # Errors
    ///
    /// As [`SqliteBuilder::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::builder(path).open()
    }

    /// A private in-memory database, gone when the last clone is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::Sqlite`] if SQLite cannot allocate the database.
    pub fn memory() -> Result<Self> {
        Self::builder_options(None).open()
    }

    /// Options for opening the database file at `path`.
    pub fn builder(path: impl AsRef<Path>) -> SqliteBuilder {
        Self::builder_options(Some(path.as_ref().to_owned()))
    }

    fn builder_options(path: Option<PathBuf>) -> SqliteBuilder {
        SqliteBuilder {
            path,
            synchronous: Synchronous::default(),
            busy_timeout: Duration::from_secs(5),
            max_attempts: 8,
            pool_size: 4,
            compaction_batch_rows: 10_000,
            mmap_size: 0,
            cache_size: 2_048_000,
            writer_cache_size: DEFAULT_WRITER_CACHE_SIZE,
            background_checkpoint: false,
            contention_wait: None,
        }
    }

    /// The ranking queue's database: the file `<path>-queue` next to this
    /// one, opened with this handle's options (a private in-memory database
    /// for an in-memory one). Its own file has its own write lock, so an
    /// enqueue never waits for a board transaction (`queue.rs`).
    pub(crate) fn queue_db(&self) -> Result<&Sqlite> {
        if let Some(queue) = self.inner.queue.get() {
            return Ok(queue);
        }
        let options = &self.inner.options;
        let path = options.path.as_ref().map(|p| {
            let mut name = p.clone().into_os_string();
            name.push("-queue");
            PathBuf::from(name)
        });
        let queue = SqliteBuilder {
            path,
            ..options.clone()
        }
        .open()?;
        // A racing first call may have set it: both name one file.
        Ok(self.inner.queue.get_or_init(|| queue))
    }

    /// Creates the boards' write-generation table once per handle, in a
    /// transaction of its own, so that files made before it gain it.
    pub(crate) fn ensure_generations(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        if self.inner.generations.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.write(|tx| {
            Ok(tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS autoshard_rank_generations (
                     board INTEGER PRIMARY KEY,
                     generation INTEGER NOT NULL
                 ) STRICT;",
            )?)
        })?;
        self.inner.generations.store(true, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn compaction_batch_rows(&self) -> usize {
        self.inner.options.compaction_batch_rows
    }

    /// [`SqliteBuilder::contention_wait`], if set.
    pub(crate) fn contention_wait(&self) -> Option<Duration> {
        self.inner.options.contention_wait
    }

    /// How long the write transaction under way waited for the writer lock.
    pub(crate) fn lock_waited() -> Duration {
        LOCK_WAITED.get()
    }

    /// Runs `f` on a pooled connection.
    pub(crate) fn with_conn<R>(&self, f: impl FnOnce(&mut Connection) -> Result<R>) -> Result<R> {
        self.with_conn_of(false, false, f)
    }

    /// [`with_conn`](Sqlite::with_conn) on the board writer's connection
    /// (`writer.rs`) if `writer`, and the database is a file.
    fn with_conn_of<R>(
        &self,
        writer: bool,
        write: bool,
        f: impl FnOnce(&mut Connection) -> Result<R>,
    ) -> Result<R> {
        let options = &self.inner.options;
        let checkout = || match self.writer_pool(writer)? {
            Some(pool) => pool.checkout(|| options.connect_writer()),
            None => self.inner.pool.checkout(|| options.connect()),
        };
        let mut conn = checkout()?;
        // A connection opened while the file was read-only stays read-only
        // after the file is writable again. One that failed a write is
        // closed below, but with board writes on their own connection
        // (`writer.rs`) a pooled connection may have only read so far: a
        // write must not be its first failure (`tests/sqlite/read_only.rs`,
        // `recovers_once_the_file_is_writable`: the first save after the
        // chmod failed once). Reopening costs one more open, and only
        // while the file was read-only.
        if write && options.path.is_some() && conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
            conn.broken();
            conn = checkout()?;
        }
        let result = f(&mut conn);
        if let Err(Error::Sqlite(e)) = &result {
            // SQLite opens a file it may not write read-only, and the
            // connection stays so after the file is writable again: the next
            // call opens a new one instead. (An in-memory database lives in
            // its connection and is never read-only.)
            if error::needs_reopening(e) && self.inner.options.path.is_some() {
                conn.broken();
            }
        }
        result
    }

    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE`), retrying the
    /// whole transaction on `BUSY`. Returns the result and the attempts made.
    pub(crate) fn write<R>(
        &self,
        mut body: impl FnMut(&Transaction<'_>) -> Result<R>,
    ) -> Result<(R, u32)> {
        self.transact(false, TransactionBehavior::Immediate, &mut body)
    }

    /// Runs `body` in a read transaction, so it sees one consistent snapshot.
    pub(crate) fn read<R>(&self, mut body: impl FnMut(&Transaction<'_>) -> Result<R>) -> Result<R> {
        self.transact(false, TransactionBehavior::Deferred, &mut body)
            .map(|(r, _)| r)
    }

    fn transact<R>(
        &self,
        writer: bool,
        behavior: TransactionBehavior,
        body: &mut dyn FnMut(&Transaction<'_>) -> Result<R>,
    ) -> Result<(R, u32)> {
        let options = &self.inner.options;
        let asked = std::time::Instant::now();
        let _turn = match behavior {
            TransactionBehavior::Deferred => None,
            _ => Some(
                self.inner
                    .writers
                    .wait_turn(options.busy_timeout)
                    .ok_or(Error::Busy { attempts: 0 })?,
            ),
        };
        let write = !matches!(behavior, TransactionBehavior::Deferred);
        self.with_conn_of(writer, write, |conn| {
            for attempt in 1..=options.max_attempts {
                LOCK_DEADLINE.set(Some(Deadline::after(options.busy_timeout)));
                let began = if attempt == 1 {
                    asked
                } else {
                    std::time::Instant::now()
                };
                let outcome = conn
                    .transaction_with_behavior(behavior)
                    .map_err(Error::from)
                    .and_then(|tx| {
                        LOCK_WAITED.set(began.elapsed());
                        let r = body(&tx)?;
                        tx.commit()?;
                        Ok(r)
                    });
                LOCK_DEADLINE.set(None);
                match outcome {
                    Err(e) if e.is_retryable() && attempt < options.max_attempts => {
                        let _retry = trace::retry!(store = "sqlite", attempt, error = %e);
                        backoff(attempt)
                    }
                    Err(e) if e.is_retryable() => return Err(Error::Busy { attempts: attempt }),
                    other => return other.map(|r| (r, attempt)),
                }
            }
            unreachable!("the last attempt returns")
        })
    }

    /// The tables of `kind`, created on first use.
    fn tables(&self, kind: &Kind) -> Result<Arc<KindTables>> {
        self.inner.kinds.get(kind, || {
            let tables = KindTables::new(kind)?;
            self.write(|tx| tables.ensure(tx, kind))?;
            Ok(tables)
        })
    }
}

impl Backend for Sqlite {
    fn __entities(&self) -> Entities<'_> {
        Entities(self)
    }

    fn __boards(&self) -> Boards {
        Boards(Arc::new(self.clone()))
    }
}

/// `sqlite::memory:`, or `sqlite://PATH` / `sqlite:PATH`.
pub(crate) fn open_url(url: &str) -> Result<Sqlite> {
    let rest = &url["sqlite:".len()..];
    if rest == ":memory:" {
        return Sqlite::memory();
    }
    let path = rest.strip_prefix("//").unwrap_or(rest);
    if path.is_empty() {
        return Err(Error::InvalidUrl {
            reason: "a sqlite URL needs a path (`sqlite://app.db`) or `sqlite::memory:`".into(),
        });
    }
    Sqlite::open(path)
}

thread_local! {
    // The busy handler is set once per connection but the deadline is per
    // transaction; a connection is used by one thread at a time, so the
    // current transaction's deadline lives here.
    static LOCK_DEADLINE: Cell<Option<Deadline>> = const { Cell::new(None) };
    // How long the current transaction waited for the writer lock (this
    // process's queue and SQLite's), for a save's automatic shard counts;
    // here rather than an argument because every write shares the body's
    // signature and only saves look.
    static LOCK_WAITED: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

fn wait_for_lock(calls: i32) -> bool {
    let Some(deadline) = LOCK_DEADLINE.get() else {
        return false;
    };
    if deadline.passed() {
        return false;
    }
    // 20 µs doubling to 1 ms, jittered so waiting writers don't wake in step.
    let base = 20u64 << calls.clamp(0, 6);
    let micros = base.min(1_000);
    let jittered = crate::random::range(micros / 2..=micros);
    std::thread::sleep(Duration::from_micros(jittered));
    true
}

fn backoff(attempt: u32) {
    let cap = 1u64 << attempt.min(10);
    let micros = crate::random::range(100..=100 + cap * 100);
    std::thread::sleep(Duration::from_micros(micros));
}

//! The one error type of the crate.

use std::fmt;

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in autoshard.
///
/// Conditions worth retrying (lock contention) answer `true` to
/// [`Error::is_retryable`]; everything else is a bug in the input or the data
/// and will fail the same way again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `save` or `shard_count` named an entity that is not stored (never
    /// inserted, or deleted meanwhile). Nothing was written.
    ///
    /// `save` also returns it for an object whose entity was deleted and
    /// inserted again since the object was loaded or inserted: every insert
    /// starts a new *incarnation* of the id, and an object only writes into
    /// the one it came from. An object built in code (neither loaded nor
    /// inserted) belongs to none. Saving the same object again cannot
    /// succeed; load the entity instead.
    #[error("no {kind} with id {id}")]
    NotFound {
        /// The entity kind.
        kind: &'static str,
        /// The id, rendered for display.
        id: String,
    },

    /// `insert` of an id that is already stored. Nothing was written.
    #[error("{kind} with id {id} already exists")]
    AlreadyExists {
        /// The entity kind.
        kind: &'static str,
        /// The id, rendered for display.
        id: String,
    },

    /// The store stayed locked by other writers through every retry. Nothing
    /// was written; the object still holds its pending changes, so the same
    /// call can simply be made again.
    ///
    /// On SQLite: the write lock stayed taken through `busy_timeout` on
    /// every one of `max_attempts` attempts. On PostgreSQL: a lock the call
    /// needed (a row, or a ranking board's advisory lock) stayed held by
    /// another transaction for the whole `lock_timeout` (SQLSTATE 55P03);
    /// that wait is not repeated, so `attempts` is the attempt that waited.
    #[error("the store is busy: {}", busy_detail(*attempts))]
    Busy {
        /// How many times the transaction was tried; 0 when it never got its
        /// turn among this process's writers to the same file.
        attempts: u32,
    },

    /// A stored value could not be decoded into the field's type: the row
    /// was written by another program or an incompatible version of the
    /// struct.
    #[error("corrupt {kind} {id}: field `{field}`: {reason}")]
    Corrupt {
        /// The entity kind.
        kind: &'static str,
        /// The id, rendered for display.
        id: String,
        /// The field whose stored value is bad (`<document>` for the main row).
        field: String,
        /// What was wrong with it.
        reason: String,
    },

    /// A board's stored configuration was written by a later version of
    /// autoshard, in a catalog record version this one does not read
    /// (`docs/design/catalog.md`). Nothing was read or written: upgrade
    /// autoshard to open it.
    #[error(
        "{kind} {id} was stored by a later autoshard (catalog record version {version}); \
         this one reads versions up to {supported}: upgrade autoshard to open it"
    )]
    UpgradeRequired {
        /// What was opened (`"ranking"`).
        kind: &'static str,
        /// Its name.
        id: String,
        /// The record's version.
        version: u32,
        /// The newest version this library reads.
        supported: u32,
    },

    /// A value cannot be stored faithfully (a NaN or infinite float; a
    /// string holding NUL in an unsharded field, which PostgreSQL's JSON
    /// cannot read back, so every store refuses it), could
    /// not be serialized, or is a string id longer than
    /// [`MAX_ID_LEN`](crate::MAX_ID_LEN) (field `<id>`). Nothing was written.
    #[error("{kind}.{field}: {reason}")]
    InvalidValue {
        /// The entity kind.
        kind: &'static str,
        /// The field holding the value.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },

    /// A fold returned an error (for example [`fold::Overflow`] from one of
    /// the checked folds): on a save, nothing was written and the pending
    /// delta is kept. From `load`, the stored rows do not fold: for an
    /// integer sum whose exact total does not fit the field's type the
    /// source is [`fold::OutOfRange`], which holds the total (see
    /// [`Store::save_delta`](crate::Store::save_delta) for the repair).
    ///
    /// [`fold::Overflow`]: crate::fold::Overflow
    /// [`fold::OutOfRange`]: crate::fold::OutOfRange
    #[error("{kind}.{field}: fold failed: {source}")]
    Fold {
        /// The entity kind.
        kind: &'static str,
        /// The sharded field.
        field: &'static str,
        /// The error the fold returned.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// An identifier given to the store (kind name, id, ranking board or
    /// player name) is not allowed, or two kinds would share one table.
    /// Nothing was written.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The offending name.
        name: String,
        /// Which rule it broke.
        reason: String,
    },

    /// The database holds tables for this kind that disagree with the struct
    /// (for example the id changed from an integer to a string).
    #[error("schema mismatch for {kind}: {reason}")]
    SchemaMismatch {
        /// The entity kind.
        kind: String,
        /// What disagrees.
        reason: String,
    },

    /// A shard method panicked part-way, so the object's aggregate and
    /// pending values can no longer be trusted. Load the entity again.
    #[error("{kind}: a shard method panicked; reload the entity before saving")]
    Poisoned {
        /// The entity kind.
        kind: &'static str,
    },

    /// `save` of a copy of an object, made with `Clone` while the object
    /// held unsaved shard changes, after another copy made from the same
    /// object committed those changes: saving this copy would count them
    /// twice. The first copy to commit wins; nothing was written here, and
    /// no later save of this copy can succeed: load the entity again.
    #[error(
        "{kind} {id}: another copy of this object already saved the pending changes they \
         shared; reload the entity"
    )]
    StaleCopy {
        /// The entity kind.
        kind: &'static str,
        /// The id, rendered for display.
        id: String,
    },

    /// `save` found a sharded field that does not hold its base (the value
    /// it was loaded, inserted or last saved with) folded with its pending
    /// delta, which is what the store will hold. It was changed outside a
    /// `#[shard_method]` (say `q.votes = 10`), or by a shard method whose
    /// change the fold cannot replay (an assignment, a branch on the
    /// field's own value). The store records only deltas, so the change
    /// would be lost while the object shows it. Nothing was written and the
    /// object is unchanged: undo the change or make it through a shard
    /// method, or load the entity again.
    #[error(
        "{kind} {id}: sharded field `{field}` was changed outside a #[shard_method] (or by one \
         its fold cannot replay), so no save can record the change; nothing was written"
    )]
    DirectWrite {
        /// The entity kind.
        kind: &'static str,
        /// The id, rendered for display.
        id: String,
        /// The sharded field.
        field: &'static str,
    },

    /// A ranking score outside the board's configured range `[min, max)`,
    /// given to a write or a query. Nothing was written.
    #[error("score {score} is outside the board's range {min}..{max}")]
    ScoreOutOfRange {
        /// The refused score.
        score: i64,
        /// The board's smallest allowed score.
        min: i64,
        /// One past the board's largest allowed score.
        max: i64,
    },

    /// A composite score (an `Update::dims` and the other tuple calls)
    /// with another number of values than the board has dimensions.
    /// Nothing was written.
    #[error("a score of {got} values given to a board of {expected} dimensions")]
    DimensionCount {
        /// The board's dimensions.
        expected: usize,
        /// The values given.
        got: usize,
    },

    /// A composite score's value outside its dimension's range `[min,
    /// max)`; the first such value. Nothing was written.
    #[error("value {value} of dimension {dimension} is outside its range {min}..{max}")]
    DimensionOutOfRange {
        /// The dimension, 0-based in the order of `RankingConfig::dimensions`.
        dimension: usize,
        /// The refused value.
        value: i64,
        /// The dimension's smallest value.
        min: i64,
        /// One past the dimension's largest value.
        max: i64,
    },

    /// `Ranking::create` with a configuration that cannot make a tree (empty
    /// score range, branching outside 2..=1000, zero shards or queues, entry
    /// data over `MAX_ENTRY_DATA` bytes; composite dimensions: not 1 to 4,
    /// an empty one, a product of widths over `2^64 - 1`, `Increment`, a
    /// board-wide order), or a
    /// query argument outside its domain (a page starting at rank 0 or
    /// ending before it starts). Nothing was written.
    #[error("invalid ranking argument: {reason}")]
    InvalidRanking {
        /// Which rule was broken.
        reason: String,
    },

    /// A [`Query`](crate::Query) that cannot run: a limit of 0, a limit or
    /// offset beyond `i64::MAX` (what SQL's `LIMIT` takes), a NaN to
    /// compare with, or a string holding NUL to compare a document field
    /// with (no store keeps one in a document). Unknown fields and values of the wrong type do not
    /// compile. Nothing was read.
    #[error("invalid query on {kind}: {reason}")]
    InvalidQuery {
        /// The entity kind queried.
        kind: &'static str,
        /// Which rule was broken.
        reason: String,
    },

    /// `Ranking::open` of a board that was never created. Nothing was written.
    #[error("no ranking board named {name:?}")]
    RankingNotFound {
        /// The board name.
        name: String,
    },

    /// `Ranking::create` of a board name that is already taken. Nothing was
    /// written; the existing board is unchanged.
    #[error("a ranking board named {name:?} already exists")]
    RankingExists {
        /// The board name.
        name: String,
    },

    /// A [`Family`](crate::ranking::Family) submission or query named a
    /// window the family does not keep. Nothing was written.
    #[error("ranking family {family:?} keeps no {window} window")]
    UnknownWindow {
        /// The family.
        family: String,
        /// The window's name (`"day"`, `"week"`, ...).
        window: &'static str,
    },

    /// A [`Family`](crate::ranking::Family) submission or query named a
    /// filter dimension the family does not declare (`value` `None`), or a
    /// value the dimension does not allow. Nothing was written.
    #[error("ranking family {family:?} has no filter {filter:?}{}", value.as_ref().map(|v| format!(" with the value {v:?}")).unwrap_or_default())]
    UnknownFilter {
        /// The family.
        family: String,
        /// The filter dimension.
        filter: String,
        /// The value, when the dimension exists but does not allow it.
        value: Option<String>,
    },

    /// Entry data longer than the board keeps
    /// ([`RankingConfig::entry_data`](crate::ranking::RankingConfig::entry_data);
    /// `max` 0 for a board that keeps none). Nothing was written.
    #[error("entry data of {len} bytes is over the board's limit of {max}")]
    EntryDataTooLarge {
        /// The length given.
        len: usize,
        /// The board's limit.
        max: usize,
    },

    /// `Ranking::open_or_create` found the board stored with another
    /// configuration than the one given (another range, branching, shards,
    /// queues, policy or order). Nothing was written; the board is
    /// unchanged.
    #[error("ranking board {name:?} exists with another configuration: {reason}")]
    RankingMismatch {
        /// The board name.
        name: String,
        /// Every field that differs, stored value first.
        reason: String,
    },

    /// An exact query on an approximate board
    /// ([`RankingConfig::approximate`](crate::ranking::RankingConfig::approximate)),
    /// which keeps no tree to answer it from: use
    /// [`Ranking::approx_rank`](crate::ranking::Ranking::approx_rank); or an
    /// approximate query (`approx_rank`, `refresh`) on an exact board.
    /// Nothing was read or written.
    #[error("ranking board {name:?}: {call} {reason}")]
    ApproximateBoard {
        /// The board name.
        name: String,
        /// The call refused (`"rank"`, `"approx_rank"`, ...).
        call: &'static str,
        /// Why, and what to call instead.
        reason: &'static str,
    },

    /// [`Ranking::approx_rank`](crate::ranking::Ranking::approx_rank) on an
    /// approximate board no [`Ranking::refresh`](crate::ranking::Ranking::refresh)
    /// has published a snapshot for yet.
    #[error("approximate board {name:?} has no bucket snapshot yet: run refresh first")]
    NoSnapshot {
        /// The board name.
        name: String,
    },

    /// `Ranking::flush` waited its whole time limit and updates enqueued
    /// before it are still queued: no worker is running, or it cannot keep
    /// up. Nothing was written or lost; the updates stay queued for a
    /// worker to apply.
    #[error(
        "flush gave up after {waited:?}: {remaining} updates enqueued before it are still \
         queued (is a worker running?)"
    )]
    FlushTimeout {
        /// Updates enqueued before the flush that were still queued.
        remaining: u64,
        /// How long the flush waited.
        waited: std::time::Duration,
    },

    /// An error from SQLite that none of the variants above describes.
    #[cfg(feature = "sqlite")]
    #[error(transparent)]
    Sqlite(rusqlite::Error),

    /// Concurrent transactions kept changing the same rows: every attempt
    /// ended in a serialization failure (SQLSTATE 40001, the optimistic
    /// mode's write conflict) or a deadlock (40P01). Nothing was written;
    /// the object still holds its pending changes, so the same call can be
    /// made again. With `max_attempts(1)` this is the first conflict.
    #[error(
        "write conflict: concurrent transactions changed the same rows through {attempts} attempts"
    )]
    Conflict {
        /// How many times the transaction was tried.
        attempts: u32,
    },

    /// The database server could not be reached, or the connection broke
    /// mid-operation, through every attempt. Nothing was written: a write
    /// whose `COMMIT` got no answer was checked and found not applied (or
    /// it would have succeeded). Retryable.
    #[error(
        "the database is unavailable after {attempts} attempts: {}",
        server_message(&**source)
    )]
    Unavailable {
        /// How many times the operation was tried.
        attempts: u32,
        /// The last connection error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The server refused the credentials, or what they may do: a wrong
    /// password or an unknown user (Redis `WRONGPASS`, or `NOAUTH` when it
    /// requires a password and none was given; PostgreSQL SQLSTATE 28P01
    /// and 28000, which also covers a role that does not exist), a
    /// database that does not exist (PostgreSQL 3D000), or a user not
    /// allowed a command or table the store needs (Redis ACL `NOPERM`,
    /// PostgreSQL 42501). Nothing was written. Not retryable: the same
    /// credentials are refused again; fix the URL or the server's users.
    #[error("the database refused access: {}", server_message(&**source))]
    AccessDenied {
        /// The server's refusal.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The connection broke while a write was committing, and the store
    /// could not find out (within `in_doubt_timeout`) whether the commit
    /// happened: the server stayed unreachable. The write may or may not be
    /// stored. The object still holds its pending changes, but saving them
    /// again may count them twice: reload the entity instead. Not retryable.
    #[error(
        "commit outcome unknown (writer {writer}, operation {seq}): {}",
        server_message(&**source)
    )]
    InDoubt {
        /// The connection's writer id (a row of `autoshard_writers`).
        writer: i64,
        /// The operation number: applied if the writer's stored number
        /// reached it.
        seq: i64,
        /// Why the outcome could not be checked.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The database server cancelled a statement: it ran longer than the
    /// server's `statement_timeout` (set on the server, database, role or
    /// connection), or an operator cancelled it (PostgreSQL SQLSTATE
    /// 57014). Nothing was written. Not retryable: the same statement would
    /// most likely run as long again. Compaction, whose batches can shrink,
    /// first re-runs a cancelled batch with half the rows (see
    /// [`CompactionStats::timeouts`](crate::CompactionStats::timeouts)).
    #[error("the server cancelled a statement: {}", server_message(&**source))]
    Cancelled {
        /// The server's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// No pooled connection became free within the pool timeout: the
    /// handle's `pool_size` connections were all in use, or the server
    /// refused to open more (a role's or the server's connection limit,
    /// PostgreSQL SQLSTATE 53300) and none of the open ones came back.
    /// Nothing was written. Retryable.
    #[error(
        "no database connection became free within {waited:?} ({open} open, all in use){}",
        refused
            .as_ref()
            .map(|e| format!("; the server refused another: {}", server_message(&**e)))
            .unwrap_or_default()
    )]
    PoolTimeout {
        /// How long the caller waited.
        waited: std::time::Duration,
        /// Connections the handle had open, all checked out.
        open: usize,
        /// The server's refusal of the last connection attempt, if one was
        /// refused.
        #[source]
        refused: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// [`open`](crate::open) was given a URL it cannot use: an unknown
    /// scheme, or a malformed connection string. Nothing was opened.
    #[error("invalid store url: {reason}")]
    InvalidUrl {
        /// What was wrong with it (the URL itself is left out: it may hold a
        /// password).
        reason: String,
    },

    /// A background job ([`crate::Job`]) could not start: the operating
    /// system refused a thread (a process or memory limit). Nothing was
    /// started; the job's work is still where it was (queued, uncompacted).
    #[error("the {job} could not start a thread: {reason}")]
    Spawn {
        /// The job (`"compactor"`, `"queue worker"`, ...).
        job: &'static str,
        /// The operating system's error.
        reason: String,
    },

    /// The store does not implement this operation yet (no store of this
    /// crate returns it today; `Store::stats` on Redis Cluster did until
    /// it was implemented). Nothing was read or written.
    #[error("{operation} is not implemented on the {store} store yet")]
    Unsupported {
        /// The store (`"redis-cluster"`, ...).
        store: &'static str,
        /// The operation.
        operation: &'static str,
    },

    /// A group commit of concurrent
    /// [`Ranking::enqueue`](crate::ranking::Ranking::enqueue) calls failed,
    /// and its error is not one of the variants that can be copied to every
    /// caller in the group (the caller that ran the transaction got the
    /// original). Nothing of that group was queued.
    #[error("the group commit this call was part of failed: {reason}")]
    GroupCommit {
        /// The original error, rendered.
        reason: String,
        /// Whether the original error was retryable.
        retryable: bool,
    },

    /// A sync call of the PostgreSQL store on the thread that drives a
    /// current-thread tokio runtime (`#[tokio::main(flavor =
    /// "current_thread")]`, `#[tokio::test]`) or in a `LocalSet`, where its
    /// driver cannot block: it starts a runtime of its own, which tokio
    /// forbids there.
    /// Nothing was read or written. Use [`open_async`](crate::open_async)
    /// (feature `tokio`), or call the sync store from
    /// `tokio::task::spawn_blocking` or a multi-thread runtime, where it
    /// works (blocking a worker, which the async API never does).
    #[error(
        "the sync {store} store cannot block the thread of a current-thread tokio runtime: \
         use autoshard::open_async (feature `tokio`) or tokio::task::spawn_blocking"
    )]
    InsideRuntime {
        /// The store (`"postgres"`).
        store: &'static str,
    },

    /// An error from PostgreSQL that none of the variants above describes.
    /// Displays the server's message, SQLSTATE, detail and hint.
    #[cfg(feature = "postgres")]
    #[error("{}", server_message(.0))]
    Postgres(#[source] postgres::Error),

    /// An error from Redis Cluster that none of the variants above
    /// describes (a lost connection or a cluster failing over, through
    /// every attempt, is [`Error::Unavailable`] instead).
    #[cfg(feature = "redis")]
    #[error(transparent)]
    Redis(redis::RedisError),
}

/// A driver error as one line: a server error's severity, message,
/// SQLSTATE, detail and hint (the PostgreSQL driver itself displays only
/// "db error"), or else the error and its causes.
fn server_message(error: &(dyn std::error::Error + 'static)) -> String {
    #[cfg(feature = "postgres")]
    if let Some(db) = find_db_error(error) {
        let mut shown = format!(
            "PostgreSQL {} {}: {}",
            db.severity(),
            db.code().code(),
            db.message()
        );
        if let Some(detail) = db.detail() {
            shown.push_str(&format!("; detail: {detail}"));
        }
        if let Some(hint) = db.hint() {
            shown.push_str(&format!("; hint: {hint}"));
        }
        return shown;
    }
    let mut shown = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        shown.push_str(&format!(": {e}"));
        cause = e.source();
    }
    shown
}

#[cfg(feature = "postgres")]
fn find_db_error<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e postgres::error::DbError> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(db) = e.downcast_ref::<postgres::error::DbError>() {
            return Some(db);
        }
        cause = e.source();
    }
    None
}

/// Store driver errors that may go away when the call is made again (lock
/// contention, a lost connection); each store implements it for its
/// driver's error type, so this module names no store.
pub(crate) trait Retryable {
    fn is_retryable(&self) -> bool;
}

fn busy_detail(attempts: u32) -> String {
    match attempts {
        0 => "other writers in this process held it for the whole busy timeout".into(),
        n => format!("the write lock stayed taken through {n} attempts"),
    }
}

impl Error {
    /// Whether making the same call again may succeed: the store was busy,
    /// a concurrent writer conflicted, or the server was unreachable. Errors
    /// about the input or the data are final.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Busy { .. }
            | Error::Conflict { .. }
            | Error::Unavailable { .. }
            | Error::PoolTimeout { .. } => true,
            Error::GroupCommit { retryable, .. } => *retryable,
            #[cfg(feature = "sqlite")]
            Error::Sqlite(e) => Retryable::is_retryable(e),
            #[cfg(feature = "postgres")]
            Error::Postgres(e) => Retryable::is_retryable(e),
            #[cfg(feature = "redis")]
            Error::Redis(e) => Retryable::is_retryable(e),
            _ => false,
        }
    }

    pub(crate) fn not_found(kind: &'static str, id: impl fmt::Display) -> Self {
        Error::NotFound {
            kind,
            id: id.to_string(),
        }
    }
}

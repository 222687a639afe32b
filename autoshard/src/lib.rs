//! Declarative sharding of hot spot data objects.
//!
//! A vote counter that thousands of users hit at once turns one database row
//! into a queue of writers. autoshard implements the AutoShard paper
//! ("AutoShard: Declaratively Managing Hot Spot Data Objects in NoSQL
//! Document Stores", WebDB 2014) for Rust: annotate the hot fields, and
//! every save spreads its delta over shard rows instead of rewriting one.
//!
//! ```
//! use autoshard::{shard_fold, shard_method, Pending, Shardable, Sqlite, Store};
//!
//! #[derive(Shardable, Debug)]
//! struct Question {
//!     #[shard(id)]
//!     id: u64,
//!     question: String,
//!     #[shard(neutral = 0, shards = 10)] // static sharding: 10 shard rows
//!     votes: i64,
//!     #[shard(neutral = 0)] // dynamic sharding: one row per save, compacted later
//!     views: i64,
//!     #[shard(pending)]
//!     pending: Pending<Self>,
//! }
//!
//! impl Question {
//!     #[shard_method]
//!     fn vote_up(&mut self) {
//!         self.votes += 1;
//!     }
//!     #[shard_method]
//!     fn view(&mut self) {
//!         self.views += 1;
//!     }
//!     #[shard_fold]
//!     fn fold_votes(a: i64, b: i64) -> i64 {
//!         a + b
//!     }
//!     #[shard_fold]
//!     fn fold_views(a: i64, b: i64) -> i64 {
//!         a + b
//!     }
//! }
//!
//! # fn main() -> autoshard::Result<()> {
//! let db = Sqlite::memory()?; // Sqlite::open("moderator.db") for a file
//! let question = Question {
//!     id: 42,
//!     question: "How do you plan to improve public education?".into(),
//!     votes: 76,
//!     views: 0,
//!     pending: Pending::default(),
//! };
//! db.insert(&question)?;
//!
//! let mut q: Question = db.load(&42)?.expect("just inserted");
//! q.vote_up();
//! q.view();
//! db.save(&mut q)?; // one transaction: one shard updated, one appended
//!
//! let q: Question = db.load(&42)?.unwrap();
//! assert_eq!((q.votes, q.views), (77, 1));
//! assert_eq!(db.shard_count::<Question>(&42, "votes")?, 10);
//!
//! let stats = db.compact::<Question>()?; // folds the dynamic `views` rows
//! assert_eq!(stats.rows_merged, 1);
//! # Ok(())
//! # }
//! ```
//!
//! Read the caveats before use (`docs/design/sharding.md` has the full semantics):
//!
//! - a shard method's body runs **twice** per call, once on the pending delta
//!   and once on the aggregate, so side effects in it happen twice;
//! - a fold must be commutative and associative, with `neutral` as its
//!   identity: shard rows are folded in no particular order.
//!
//! [`Store::compactor`] runs the compaction job on a thread of its own,
//! holding the writer for at most a set share of the time; the cargo
//! feature `testing` adds `autoshard::testing`, which checks a struct's
//! folds and shard methods against those laws in the application's tests.
#![warn(missing_docs)]
// The seam serves every store; a build with only some of them leaves parts
// of it unused. The default and the all-features builds (clippy's, with
// `-D warnings`) keep the full check.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_imports)
)]

// Generated code names `::autoshard`; unit tests derive entities in here.
#[cfg(test)]
extern crate self as autoshard;

mod any;
mod compactor;
mod counters;
mod deadline;
mod entity;
mod error;
#[cfg(feature = "failpoints")]
mod failpoints;
pub mod fold;
mod hash;
mod job;
mod mapper;
mod metrics;
mod naming;
#[cfg(feature = "tokio")]
mod nonblocking;
mod query;
mod random;
pub mod ranking;
mod seam;
mod stats;
mod store;
mod stores;
mod sum;
#[cfg(feature = "testing")]
pub mod testing;
mod trace;
mod value;

// The README and the guide's pages (`docs/guide/`) as doc tests, so that a page whose
// code no longer matches the API fails `cargo test`; nothing is compiled
// into the library. `cargo test -p autoshard --doc guide` runs them alone.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../../README.md")]
    mod readme {}
    #[doc = include_str!("../../docs/guide/counters.md")]
    mod counters {}
    #[doc = include_str!("../../docs/guide/compaction.md")]
    mod compaction {}
    #[doc = include_str!("../../docs/guide/queries.md")]
    mod queries {}
    #[doc = include_str!("../../docs/guide/leaderboards.md")]
    mod leaderboards {}
    #[doc = include_str!("../../docs/guide/periodic-and-filtered-boards.md")]
    mod periodic_and_filtered_boards {}
    #[doc = include_str!("../../docs/guide/composite-scores.md")]
    mod composite_scores {}
    #[doc = include_str!("../../docs/guide/entity-boards.md")]
    mod entity_boards {}
    #[doc = include_str!("../../docs/guide/approximate-boards.md")]
    mod approximate_boards {}
    #[doc = include_str!("../../docs/guide/stores.md")]
    mod stores {}
    #[doc = include_str!("../../docs/guide/operations.md")]
    mod operations {}
    #[cfg(feature = "tokio")]
    #[doc = include_str!("../../docs/guide/async.md")]
    mod async_services {}
    #[doc = include_str!("../../docs/guide/service.md")]
    mod service {}
}

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use crate::any::{open, AnyStore};
#[cfg(feature = "tokio")]
pub use crate::compactor::CompactorTask;
pub use crate::compactor::{Compactor, CompactorHandle, CompactorStats};
pub use crate::entity::{EntityId, Key, KeyKind, Pending, Shardable, MAX_ID_LEN};
pub use crate::error::{Error, Result};
pub use crate::job::Job;
pub use crate::mapper::Saved;
pub use crate::metrics::{BoardMetrics, KindLag, ProcessCounters, StoreMetrics};
#[cfg(feature = "tokio")]
pub use crate::nonblocking::{
    open_async, AsyncFamily, AsyncFamilyUpdate, AsyncQuery, AsyncRanking, AsyncStore, Background,
    BackgroundJob, DEFAULT_THREADS,
};
pub use crate::query::{Comparable, Field, Filter, Query, Queryable, SortKey};
pub use crate::seam::compaction::counts::{
    AutoStats, CountChange, ShardCount, DEFAULT_QUIET_PERIOD,
};
pub use crate::seam::{CompactionStats, Skipped};
pub use crate::stats::{FieldStats, KindStats};
pub use crate::store::Store;
#[cfg(feature = "postgres")]
pub use crate::stores::postgres::{Concurrency, Postgres, PostgresBuilder};
#[cfg(feature = "redis")]
pub use crate::stores::redis::{Durability, RedisCluster, RedisClusterBuilder};
#[cfg(feature = "sqlite")]
pub use crate::stores::sqlite::{Sqlite, SqliteBuilder, Synchronous};
pub use crate::value::ShardValue;
pub use crate::value::{Value, ValueError};

/// Derives [`Shardable`] for a struct with named fields.
///
/// Attribute reference (`#[shard(...)]`):
///
/// - `#[shard(id)]` on exactly one field: the entity's id, an integer type
///   or `String`.
/// - `#[shard(neutral = EXPR, shards = N)]`: a statically sharded field with
///   `N` shard rows (1 to 10,000); each save folds its delta into one random
///   shard. `neutral` is the identity of the fold, e.g. `0` for a sum.
/// - `#[shard(neutral = EXPR, shards = LOW..=HIGH)]`: an automatic shard
///   count (`1 <= LOW < HIGH <= 10,000`, an inclusive range of literals,
///   e.g. `shards = 1..=256`). Each entity has its own count, stored with
///   it: it starts at `LOW`, the store raises it (doubling, up to `HIGH`)
///   when it observes contention on that entity's field, and compaction
///   halves it again once the entity has been quiet for
///   [`Compactor::quiet_period`]. [`Saved::shard_count`] and
///   [`Store::stats`] show the count and why it changed; `docs/design/auto-shards.md`
///   ("Automatic shard counts") states the protocol. SQLite and PostgreSQL
///   only ([`Error::Unsupported`] on Redis Cluster).
/// - `#[shard(neutral = EXPR)]` without `shards`: a dynamically sharded field;
///   each save appends a shard row, and [`Store::compact`] folds them.
/// - `#[shard(fold = PATH)]` with either of the above: the fold function; by
///   default `Self::fold_<field>`, which `#[shard_fold]` marks.
/// - `#[shard(ranked = "board")]` with either sharding: the field's folded
///   total feeds the ranking board `board` (player: the entity's id as
///   text), written in the same transaction as every insert, save,
///   `save_delta` and delete, so the board equals the totals exactly. The
///   field is an integer type up to `i64`/`u32` whose fold adds
///   (`fold::checked_sum`); the application creates the board with
///   [`ranking::Policy::Increment`] first. SQLite and PostgreSQL only
///   ([`Error::Unsupported`] on Redis Cluster). See
///   [`ranking::entity_board`] for an example and the errors.
/// - `#[shard(pending)]` on one field of type [`Pending<Self>`]: holds the
///   unsaved deltas. Required when any field is sharded.
/// - `#[shard(kind = "Name")]` on the struct: the stored kind (default: the
///   struct's name), which names its tables.
///
/// Every other field is stored in the entity's JSON document via serde.
///
/// The derive also implements [`Queryable`]: a struct of typed field
/// handles, one per field, that [`Store::query`]'s closures receive
/// (`.filter(|q| q.votes.ge(50))`).
/// Sharded field types need `Serialize + DeserializeOwned + PartialEq + Send
/// + Sync + 'static`; a fold may return the value or a `Result` of it (see
/// [`fold`]).
///
/// ```
/// use autoshard::{Pending, Shardable};
/// use std::collections::HashSet;
///
/// #[derive(Shardable)]
/// #[shard(kind = "Page")]
/// struct PageStats {
///     #[shard(id)]
///     url: String,
///     #[shard(neutral = 0, shards = 8, fold = autoshard::fold::checked_sum)]
///     hits: u64,
///     #[shard(neutral = HashSet::new())]
///     visitors: HashSet<String>,
///     #[shard(pending)]
///     pending: Pending<Self>,
/// }
///
/// impl PageStats {
///     #[autoshard::shard_fold]
///     fn fold_visitors(mut a: HashSet<String>, b: HashSet<String>) -> HashSet<String> {
///         a.extend(b);
///         a
///     }
/// }
/// ```
pub use autoshard_derive::Shardable;

/// Marks a `&mut self` method as a shard method.
///
/// The body is kept verbatim in a hidden sibling method; the method itself
/// becomes a wrapper that runs the body twice: first with every sharded
/// field swapped with its pending delta (so the delta records the change),
/// then on the aggregate (so the object shows the new value). Its return
/// value is the second run's. By-value arguments are cloned for the first
/// run, so they must be `Clone`; `&mut` arguments see both runs.
///
/// A shard method called from inside another one runs once, in whichever
/// view the outer call is in. If the body panics, the entity is poisoned:
/// [`Store::save`] refuses it with [`Error::Poisoned`].
///
/// Sharded fields must change only in shard methods, and only in ways the
/// fold can replay (`+=` under a sum, not `=`): [`Store::save`] refuses any
/// other change with [`Error::DirectWrite`], since the store records only
/// the deltas.
pub use autoshard_derive::shard_method;

/// Marks a fold function: `fn(a: T, b: T) -> T` (or `-> Result<T, E>`)
/// without `self`. It is linked to the field `<name>` when named
/// `fold_<name>`, or to any field that names it with `#[shard(fold = ...)]`.
pub use autoshard_derive::shard_fold;

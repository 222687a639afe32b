//! The async API (feature `tokio`): [`open_async`], [`AsyncStore`],
//! [`AsyncRanking`] and [`AsyncFamily`], the sync calls as `async fn`s.
//!
//! There is one implementation of the mapper and the boards, the sync one:
//! each async call ships an owned job to threads the store owns and awaits
//! its result (`threads.rs`). The background jobs (compactor, board and
//! family workers) start and stop from async code with a [`Background`]
//! handle that never blocks the runtime (`tasks.rs`).
//! `docs/design/async.md` has the reasons.

mod family;
mod ranking;
mod store;
mod tasks;
mod threads;

pub use self::family::{AsyncFamily, AsyncFamilyUpdate};
pub use self::ranking::AsyncRanking;
pub use self::store::{AsyncQuery, AsyncStore, DEFAULT_THREADS};
pub use self::tasks::{Background, BackgroundJob};

use crate::error::Result;

/// Opens the store a URL names, as [`open`](crate::open) does, for async
/// code: the store's calls run on [`DEFAULT_THREADS`] threads of its own,
/// so awaiting them never blocks a runtime's worker, on either runtime
/// flavor and on every store (PostgreSQL's sync driver panics on a
/// runtime's thread; here it never runs on one).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> autoshard::Result<()> {
/// let url = std::env::var("APP_STORE").unwrap_or_else(|_| "sqlite::memory:".into());
/// let db = autoshard::open_async(&url).await?;
/// assert_eq!(db.scheme(), "sqlite");
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// As [`open`](crate::open).
pub async fn open_async(url: &str) -> Result<AsyncStore> {
    // Opening connects (and may create tables): a job like any other, on
    // threads started for it and kept by the store.
    let threads = threads::Threads::start(DEFAULT_THREADS, "autoshard")?;
    let url = url.to_owned();
    let store = threads.run(move || crate::any::open(&url)).await??;
    AsyncStore::with_threads(store, threads)
}

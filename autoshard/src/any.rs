//! Choosing the store by configuration: [`open`] takes a URL and returns
//! an [`AnyStore`], which is a [`Store`] whichever store it wraps.

use crate::error::{Error, Result};
use crate::seam::{Backend, BoardStore, Boards, Entities, EntityStore};
#[cfg(doc)]
use crate::store::Store;
use crate::stores;
use std::fmt;
use std::sync::Arc;

/// A store chosen at run time; see [`open`]. It is a [`Store`] and a
/// [`RankingStore`](crate::ranking::RankingStore) whichever store it wraps.
/// Cloning is cheap and shares the store.
#[derive(Clone)]
pub struct AnyStore {
    store: Arc<dyn AnyBackend>,
    scheme: &'static str,
}

/// What [`AnyStore`] needs of the store it wraps.
trait AnyBackend: EntityStore + BoardStore + fmt::Debug {}
impl<S: EntityStore + BoardStore + fmt::Debug> AnyBackend for S {}

impl AnyStore {
    fn new(
        store: impl EntityStore + BoardStore + fmt::Debug + 'static,
        scheme: &'static str,
    ) -> Self {
        AnyStore {
            store: Arc::new(store),
            scheme,
        }
    }

    /// The URL scheme the store was opened with (`"sqlite"`, `"postgres"`,
    /// ...): which store this is.
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }
}

impl fmt::Debug for AnyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.store.fmt(f)
    }
}

impl Backend for AnyStore {
    fn __entities(&self) -> Entities<'_> {
        Entities(&*self.store)
    }

    fn __boards(&self) -> Boards {
        Boards(self.store.clone())
    }
}

/// A store opened with its builder, as an [`AnyStore`] (for
/// [`AsyncStore::new`](crate::AsyncStore::new) with options [`open`]'s
/// URL cannot give).
macro_rules! from_store {
    ($($feature:literal, $store:ty, $scheme:literal;)*) => {$(
        #[cfg(feature = $feature)]
        impl From<$store> for AnyStore {
            fn from(store: $store) -> Self {
                AnyStore::new(store, $scheme)
            }
        }
    )*};
}
from_store! {
    "sqlite", crate::Sqlite, "sqlite";
    "postgres", crate::Postgres, "postgres";
    "redis", crate::RedisCluster, "redis-cluster";
}

/// A store's URL schemes and how to open it: the one line a store adds here.
type Opener = fn(&str) -> Result<AnyStore>;
const STORES: &[(&[&str], Opener)] = &[
    #[cfg(feature = "sqlite")]
    (stores::sqlite::SCHEMES, |url| {
        stores::sqlite::open_url(url).map(|s| AnyStore::new(s, "sqlite"))
    }),
    #[cfg(feature = "postgres")]
    (stores::postgres::SCHEMES, |url| {
        stores::postgres::open_url(url).map(|s| AnyStore::new(s, "postgres"))
    }),
    #[cfg(feature = "redis")]
    (stores::redis::SCHEMES, |url| {
        stores::redis::open_url(url).map(|s| AnyStore::new(s, "redis-cluster"))
    }),
];

/// Opens the store a URL names, with default options, so an application
/// switches store by configuration rather than code:
///
/// - `sqlite::memory:`: a private in-memory SQLite database;
/// - `sqlite://PATH` or `sqlite:PATH`: the SQLite file at `PATH` (relative
///   or absolute: `sqlite:///var/lib/app.db`), created if missing;
/// - `postgres://…` or `postgresql://…`: a PostgreSQL server (feature
///   `postgres`, on by default). An optional `schema=NAME` query parameter
///   picks the schema (default `public`); the rest of the URL is passed to
///   the `postgres` crate as is.
/// - `redis-cluster://host:port,host:port,...`: a Redis Cluster reached
///   through any of the nodes listed (feature `redis`). An optional
///   `prefix=NAME` query parameter namespaces the keys (default
///   `autoshard`).
///
/// Any other scheme is [`Error::InvalidUrl`]. For options beyond these, use
/// the stores' builders.
///
/// ```
/// use autoshard::{AnyStore, Store};
/// # #[derive(autoshard::Shardable)]
/// # struct Question {
/// #     #[shard(id)]
/// #     id: u64,
/// #     #[shard(neutral = 0, shards = 4, fold = autoshard::fold::checked_sum)]
/// #     votes: i64,
/// #     #[shard(pending)]
/// #     pending: autoshard::Pending<Self>,
/// # }
/// let url = std::env::var("APP_STORE").unwrap_or_else(|_| "sqlite::memory:".into());
/// let store: AnyStore = autoshard::open(&url)?;
/// store.insert(&Question { id: 1, votes: 0, pending: Default::default() })?;
/// assert_eq!(store.load::<Question>(&1)?.unwrap().votes, 0);
/// # Ok::<(), autoshard::Error>(())
/// ```
///
/// # Errors
///
/// [`Error::InvalidUrl`] for a scheme this build does not know or a
/// malformed URL; then whatever the store's own `open` returns (for
/// example [`Error::Unavailable`] when a server cannot be reached).
pub fn open(url: &str) -> Result<AnyStore> {
    let Some((scheme, _)) = url.split_once(':') else {
        return Err(Error::InvalidUrl {
            reason: "no scheme: expected `sqlite://PATH`, `sqlite::memory:` or `postgres://...`"
                .into(),
        });
    };
    match STORES.iter().find(|(schemes, _)| schemes.contains(&scheme)) {
        Some((_, open)) => open(url),
        None => Err(Error::InvalidUrl {
            reason: format!(
                "unknown scheme `{scheme}`: this build knows {}",
                STORES
                    .iter()
                    .flat_map(|(schemes, _)| schemes.iter())
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_schemes_are_typed_errors() {
        for url in [
            "mysql://localhost/db",
            "redis://x",
            "app.db",
            "",
            "sqlite://",
        ] {
            let err = open(url).unwrap_err();
            assert!(matches!(err, Error::InvalidUrl { .. }), "{url}: {err:?}");
        }
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn sqlite_urls() {
        assert_eq!(open("sqlite::memory:").unwrap().scheme(), "sqlite");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let url = format!("sqlite://{}", path.display());
        assert_eq!(open(&url).unwrap().scheme(), "sqlite");
        assert!(path.exists());
        let other = dir.path().join("b.db");
        assert_eq!(
            open(&format!("sqlite:{}", other.display()))
                .unwrap()
                .scheme(),
            "sqlite"
        );
        assert!(other.exists());
    }
}

//! Choosing the store by configuration: [`open`] takes a URL and returns
//! an [`AnyStore`], which is a [`Store`] whichever backend it wraps.

use crate::entity::Shardable;
use crate::error::{Error, Result};
use crate::store::{CompactionStats, Saved, Store};
use crate::Sqlite;

/// A store chosen at run time; see [`open`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyStore {
    /// An embedded SQLite database.
    Sqlite(Sqlite),
    /// A PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(crate::Postgres),
}

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
pub fn open(url: &str) -> Result<AnyStore> {
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    match scheme {
        "sqlite" => {
            let rest = &url["sqlite:".len()..];
            if rest == ":memory:" {
                return Sqlite::memory().map(AnyStore::Sqlite);
            }
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(Error::InvalidUrl {
                    reason: "a sqlite URL needs a path (`sqlite://app.db`) or `sqlite::memory:`"
                        .into(),
                });
            }
            Sqlite::open(path).map(AnyStore::Sqlite)
        }
        "postgres" | "postgresql" => open_postgres(url),
        "" => Err(Error::InvalidUrl {
            reason: "no scheme: expected `sqlite://PATH`, `sqlite::memory:` or `postgres://...`"
                .into(),
        }),
        other => Err(Error::InvalidUrl {
            reason: format!(
                "unknown scheme `{other}`: expected `sqlite` or `postgres`/`postgresql`"
            ),
        }),
    }
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str) -> Result<AnyStore> {
    let (url, schema) = take_query_param(url, "schema");
    let mut builder = crate::Postgres::builder(&url);
    if let Some(schema) = schema {
        builder = builder.schema(schema);
    }
    builder.open().map(AnyStore::Postgres)
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_url: &str) -> Result<AnyStore> {
    Err(Error::InvalidUrl {
        reason: "autoshard was built without its `postgres` feature".into(),
    })
}

/// Removes `name=value` from the URL's query string (the `postgres` crate
/// refuses parameters it does not know).
#[cfg(feature = "postgres")]
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

macro_rules! delegate {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            AnyStore::Sqlite($store) => $call,
            #[cfg(feature = "postgres")]
            AnyStore::Postgres($store) => $call,
        }
    };
}

impl Store for AnyStore {
    fn insert<T: Shardable>(&self, entity: &T) -> Result<()> {
        delegate!(self, s => s.insert(entity))
    }

    fn load<T: Shardable>(&self, id: &T::Id) -> Result<Option<T>> {
        delegate!(self, s => s.load(id))
    }

    fn save<T: Shardable>(&self, entity: &mut T) -> Result<Saved> {
        delegate!(self, s => s.save(entity))
    }

    fn delete<T: Shardable>(&self, id: &T::Id) -> Result<bool> {
        delegate!(self, s => s.delete::<T>(id))
    }

    fn compact_with<T: Shardable>(
        &self,
        progress: &mut dyn FnMut(&CompactionStats),
    ) -> Result<CompactionStats> {
        delegate!(self, s => s.compact_with::<T>(progress))
    }

    fn shard_count<T: Shardable>(&self, id: &T::Id, field: &str) -> Result<u64> {
        delegate!(self, s => s.shard_count::<T>(id, field))
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

    #[test]
    fn sqlite_urls() {
        assert!(matches!(open("sqlite::memory:"), Ok(AnyStore::Sqlite(_))));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let url = format!("sqlite://{}", path.display());
        assert!(matches!(open(&url), Ok(AnyStore::Sqlite(_))));
        assert!(path.exists());
        let other = dir.path().join("b.db");
        assert!(matches!(
            open(&format!("sqlite:{}", other.display())),
            Ok(AnyStore::Sqlite(_))
        ));
        assert!(other.exists());
    }

    #[cfg(feature = "postgres")]
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

//! The stores, one folder each, and the store-neutral pieces they share
//! (connection pool, kind registry). Nothing outside a store's folder names
//! its driver.

pub(crate) mod pool;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod query_sql;
pub(crate) mod registry;

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "redis")]
pub(crate) mod redis;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

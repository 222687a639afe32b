//! The servers autoshard's tests need, started when no URL names one, so
//! `cargo test --workspace` needs no set-up by hand.
//!
//! - [`redis_cluster_url`]: `AUTOSHARD_REDIS_CLUSTER_URL` when set; else a
//!   Redis Cluster of 3 masters + 3 replicas on free loopback ports, data
//!   in a temporary directory.
//! - [`postgres_url`]: `AUTOSHARD_PG_URL` when set; else the default URL
//!   (`postgres://postgres@127.0.0.1:5432/test`, or
//!   `AUTOSHARD_PG_DEFAULT_URL`) when something answers there; else a
//!   throwaway PostgreSQL from the installed `initdb` and `pg_ctl`.
//!
//! What is started belongs to the *run*: the `cargo` process the test
//! binary descends from (or the test process itself when run by hand).
//! The test binaries of one `cargo test` share one cluster, and a
//! watchdog (a small `sh` loop, started with the servers and detached from
//! the test process) stops every server by pid once the run's owner and
//! every test process that used the servers are gone: after a pass, a
//! failure, a panic or a SIGKILL alike. Test threads come and go, so no
//! server's lifetime is tied to one (`PR_SET_PDEATHSIG` would be).
//!
//! A server that cannot be started fails the test that needs it with a
//! message saying what to install; nothing is skipped.
#![warn(missing_docs)]

mod postgres;
mod process;
mod redis;
mod run;

pub use crate::redis::{kill_redis_node, revive_redis_node};

use std::sync::OnceLock;

/// The Redis Cluster the tests use, as `redis-cluster://host:port,...`
/// (no prefix): `AUTOSHARD_REDIS_CLUSTER_URL` when set, else the run's own
/// cluster, started on first use.
///
/// # Panics
///
/// When no URL is set and the cluster cannot be started (no `redis-server`
/// installed, say), with a message saying what to install.
pub fn redis_cluster_url() -> String {
    if let Ok(url) = std::env::var("AUTOSHARD_REDIS_CLUSTER_URL") {
        return url;
    }
    static STARTED: OnceLock<Result<String, String>> = OnceLock::new();
    STARTED
        .get_or_init(redis::shared_cluster)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The `host:port` of each node of a Redis Cluster that only the tests
/// naming `name` use (3 masters + 3 replicas, like the run's own), started
/// on their first call and stopped with the run's servers, whatever
/// `AUTOSHARD_REDIS_CLUSTER_URL` says. For tests that kill nodes
/// ([`kill_redis_node`]): no other test sees their failovers, so they run
/// beside the rest instead of alone.
///
/// # Panics
///
/// When the cluster cannot be started, with a message saying what to
/// install.
pub fn private_redis_cluster(name: &str) -> Vec<String> {
    assert!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
        "a private cluster's name is letters, digits and '-': {name:?}"
    );
    let url = redis::cluster(&format!("redis-{name}")).unwrap_or_else(|e| panic!("{e}"));
    nodes_of(&url)
}

/// The `host:port` of each node named by [`redis_cluster_url`].
pub fn redis_cluster_nodes() -> Vec<String> {
    nodes_of(&redis_cluster_url())
}

fn nodes_of(url: &str) -> Vec<String> {
    let hosts = url.strip_prefix("redis-cluster://").unwrap_or_else(|| {
        panic!("AUTOSHARD_REDIS_CLUSTER_URL={url:?} does not start with redis-cluster://")
    });
    let hosts = hosts.split('?').next().unwrap_or("").trim_end_matches('/');
    hosts.split(',').map(str::to_owned).collect()
}

/// Whether the cluster of [`redis_cluster_url`] was started by this crate
/// (so [`kill_redis_node`] and [`revive_redis_node`] can reach its
/// nodes), rather than named by `AUTOSHARD_REDIS_CLUSTER_URL`.
pub fn redis_cluster_is_ours() -> bool {
    std::env::var_os("AUTOSHARD_REDIS_CLUSTER_URL").is_none()
}

/// The PostgreSQL server the tests use: `AUTOSHARD_PG_URL` when set; else
/// the default URL when something answers there; else a throwaway server
/// for the run, started on first use.
///
/// # Panics
///
/// When a throwaway server is needed and cannot be started, with a
/// message saying what to install.
pub fn postgres_url() -> String {
    if let Ok(url) = std::env::var("AUTOSHARD_PG_URL") {
        return url;
    }
    static FOUND: OnceLock<Result<String, String>> = OnceLock::new();
    FOUND
        .get_or_init(postgres::default_or_throwaway)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

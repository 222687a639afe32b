//! Store URLs for the async tests, one fresh namespace per call, and the
//! guard that removes it when the test ends: a SQLite file's directory, a
//! PostgreSQL schema (in the shared `test` database, where it would
//! otherwise stay after the run), or nothing for a Redis prefix (the
//! run's cluster goes away with the run).

use std::sync::atomic::{AtomicU32, Ordering};

/// What one URL needs removed when the test ends, pass or fail.
pub enum Scratch {
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Schema(String),
    Nothing,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let Scratch::Schema(schema) = self else {
            return;
        };
        let drop_schema = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
        // The sync client runs a runtime of its own: not on a test's.
        let _ = std::thread::spawn(move || {
            let url = autoshard_test_servers::postgres_url();
            let base = url.split('?').next().unwrap_or(&url).to_owned();
            if let Ok(mut client) = postgres::Client::connect(&base, postgres::NoTls) {
                let _ = client.batch_execute(&drop_schema);
            }
        })
        .join();
    }
}

fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{n}", std::process::id())
}

/// A SQLite file in a directory of its own.
pub fn sqlite() -> (Scratch, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("async.db").display());
    (Scratch::Dir(dir), url)
}

/// A fresh schema on the test run's PostgreSQL.
pub fn postgres(prefix: &str) -> (Scratch, String) {
    let url = autoshard_test_servers::postgres_url();
    let glue = if url.contains('?') { '&' } else { '?' };
    let schema = unique(prefix);
    let url = format!("{url}{glue}schema={schema}");
    (Scratch::Schema(schema), url)
}

/// A fresh key prefix on the test run's Redis Cluster.
pub fn redis(prefix: &str) -> (Scratch, String) {
    let nodes = autoshard_test_servers::redis_cluster_nodes().join(",");
    let url = format!("redis-cluster://{nodes}?prefix={}", unique(prefix));
    (Scratch::Nothing, url)
}

//! With `AUTOSHARD_PG_URL` unset and nothing answering at the default URL,
//! the tests get a throwaway PostgreSQL that serves queries. The default
//! URL is pointed at a port where nothing listens
//! (`AUTOSHARD_PG_DEFAULT_URL`), so this runs on a machine whose own server
//! is up as well. One test in this binary: it sets an environment variable
//! before any other thread reads one.

use std::net::TcpListener;

#[test]
fn nothing_at_the_default_url_starts_a_throwaway_server() {
    if let Ok(url) = std::env::var("AUTOSHARD_PG_URL") {
        // A given URL is used as it is; there is nothing to fall back from.
        assert_eq!(autoshard_test_servers::postgres_url(), url);
        return;
    }
    // A port that was free a moment ago; nothing listens there now.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let nowhere = format!("postgres://postgres@127.0.0.1:{port}/test");
    // The only test of this binary: no other thread reads the environment.
    std::env::set_var("AUTOSHARD_PG_DEFAULT_URL", &nowhere);
    let url = autoshard_test_servers::postgres_url();
    assert_ne!(url, nowhere);
    let mut client = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("connect to the throwaway server at {url}: {e}"));
    let row = client
        .query_one("SELECT current_database(), 6 * 7", &[])
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "test");
    assert_eq!(row.get::<_, i32>(1), 42);
    // The same URL on every later call: one server per run.
    assert_eq!(autoshard_test_servers::postgres_url(), url);
}

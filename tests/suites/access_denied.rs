//! Refused credentials and rights are `Error::AccessDenied`, not
//! retryable (issue 21), on a real server: a Redis Cluster node of the
//! test's own that requires a password (started here, on a free port of
//! 7300-7319, stopped by pid), and the PostgreSQL server of the suite.
//!
//! Before the fix, against the same servers, a wrong password failed
//! `wrong password: expected AccessDenied, got Err(Unavailable { attempts:
//! 1, source: It failed to check startup nodes. - Io: Failed to connect to
//! each cluster node (127.0.0.1:7300: Password authentication failed -
//! AuthenticationFailed) })`, marked retryable (no password and an unknown
//! user the same; the message said `"NOAUTH": Authentication required.`
//! for none), and an unknown PostgreSQL role `unknown role: expected
//! AccessDenied, got Err(Postgres(... code: SqlState(E28000), message:
//! "role \"autoshard_no_such_role\" does not exist" ...))`; the other cases
//! were raw `Redis` / `Postgres` errors too (every server error was).

use autoshard::{shard_fold, shard_method, Error, Pending, Shardable, Store};

#[derive(Shardable, Debug)]
struct Counter {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 2)]
    n: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Counter {
    #[shard_method]
    fn bump(&mut self) {
        self.n += 1;
    }
    #[shard_fold]
    fn fold_n(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn counter(id: u64) -> Counter {
    Counter {
        id,
        n: 0,
        pending: Pending::default(),
    }
}

/// Checks `result` is `AccessDenied`, final, and names what the server said.
fn assert_denied<T: std::fmt::Debug>(result: autoshard::Result<T>, said: &str, case: &str) {
    match result {
        Err(e @ Error::AccessDenied { .. }) => {
            assert!(!e.is_retryable(), "{case}: retryable");
            assert!(e.to_string().contains(said), "{case}: {e}");
        }
        other => panic!("{case}: expected AccessDenied, got {other:?}"),
    }
}

#[cfg(feature = "redis")]
mod redis_node {
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// A one-node Redis Cluster requiring a password, stopped on drop.
    pub struct Node {
        pub port: u16,
        child: Child,
        _dir: tempfile::TempDir,
    }

    pub const PASSWORD: &str = "s3cret";

    impl Node {
        pub fn start() -> Node {
            let dir = tempfile::tempdir().unwrap();
            for port in 7300..7320 {
                if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
                    continue;
                }
                let child = Command::new("redis-server")
                    .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                    .args(["--cluster-enabled", "yes", "--requirepass", PASSWORD])
                    .args(["--save", "", "--appendonly", "no"])
                    .arg("--cluster-config-file")
                    .arg(dir.path().join(format!("nodes-{port}.conf")))
                    .arg("--dir")
                    .arg(dir.path())
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("redis-server on the PATH");
                let mut node = Node {
                    port,
                    child,
                    _dir: dir,
                };
                if node.configure() {
                    return node;
                }
                let _ = node.child.kill();
                let _ = node.child.wait();
                return Node::start();
            }
            panic!("no free port in 7300-7319");
        }

        /// Assigns every slot and waits for the cluster to be up; false
        /// when the server did not come up (the port was taken meanwhile).
        fn configure(&mut self) -> bool {
            let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", self.port);
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut conn = loop {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return false;
                }
                match redis::Client::open(url.as_str()).and_then(|c| c.get_connection()) {
                    Ok(conn) => break conn,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Err(e) => panic!("redis-server on {} did not start: {e}", self.port),
                }
            };
            let _: () = redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(0)
                .arg(16383)
                .query(&mut conn)
                .unwrap();
            // A user that may do anything but run scripts, which every
            // write of the store is.
            let _: () = redis::cmd("ACL")
                .arg("SETUSER")
                .arg("noscripts")
                .arg("on")
                .arg(">pw")
                .arg("~*")
                .arg("+@all")
                .arg("-@scripting")
                .query(&mut conn)
                .unwrap();
            loop {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap();
                if info.contains("cluster_state:ok") {
                    return true;
                }
                assert!(
                    Instant::now() < deadline,
                    "the one-node cluster never came up"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }

        /// A plain connection with the password.
        pub fn admin(&self) -> redis::Connection {
            let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", self.port);
            redis::Client::open(url).unwrap().get_connection().unwrap()
        }

        pub fn url(&self, credentials: &str) -> String {
            format!("redis-cluster://{credentials}127.0.0.1:{}", self.port)
        }
    }

    impl Drop for Node {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(feature = "redis")]
#[test]
fn redis_refused_credentials_and_rights_are_access_denied_and_final() {
    use redis_node::{Node, PASSWORD};
    let node = Node::start();
    let cases = [
        (
            "wrong password",
            ":wrong@".to_owned(),
            "authentication failed",
        ),
        ("no password", String::new(), "NOAUTH"),
        (
            "unknown user",
            format!("nobody:{PASSWORD}@"),
            "authentication failed",
        ),
    ];
    for (case, credentials, said) in cases {
        let url = node.url(&credentials);
        assert_denied(autoshard::open(&url), said, case);
    }

    // Control: the right password opens the store and it works.
    let db = autoshard::open(&node.url(&format!(":{PASSWORD}@"))).unwrap();
    db.insert(&counter(1)).unwrap();
    let mut c: Counter = db.load(&1).unwrap().unwrap();
    c.bump();
    db.save(&mut c).unwrap();
    assert_eq!(db.load::<Counter>(&1).unwrap().unwrap().n, 1);

    // An ACL that refuses the scripts every write runs: the store opens
    // (it runs no command yet), and the first write is refused, final.
    let limited = autoshard::open(&node.url("noscripts:pw@")).unwrap();
    assert_denied(limited.insert(&counter(2)), "no permissions", "no scripts");

    // The password changed under an open store: once its connections are
    // gone, it cannot reconnect, which is said as such once it gives up.
    // Before, `expected AccessDenied, got Err(Unavailable { attempts: 2,
    // .. Password authentication failed - AuthenticationFailed) })`.
    let nodes = [format!(":{PASSWORD}@127.0.0.1:{}", node.port)];
    let running = autoshard::RedisCluster::builder(nodes)
        .max_attempts(2)
        .open()
        .unwrap();
    running.insert(&counter(3)).unwrap();
    let mut admin = node.admin();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("changed")
        .query(&mut admin)
        .unwrap();
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
        .unwrap();
    assert_denied(
        running.load::<Counter>(&3),
        "authentication failed",
        "password changed",
    );
}

#[cfg(feature = "postgres")]
mod pg {
    use super::*;

    fn url(user: &str, database: &str) -> String {
        let base = autoshard_test_servers::postgres_url();
        let rest = base
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('@'))
            .map(|(_, host)| host)
            .expect("AUTOSHARD_PG_URL is postgres://user@host:port/database");
        let host = rest.split('/').next().unwrap();
        format!("postgres://{user}@{host}/{database}")
    }

    /// The server here trusts every role from 127.0.0.1, so a wrong
    /// password cannot be shown; a role and a database that do not exist
    /// are refused the same way (28000, 3D000), and so is a role without
    /// the right to create the store's schema (42501).
    #[test]
    fn postgres_refused_roles_databases_and_rights_are_access_denied_and_final() {
        let database = url("postgres", "test")
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned();
        assert_denied(
            autoshard::open(&url("autoshard_no_such_role", &database)),
            "28000",
            "unknown role",
        );
        assert_denied(
            autoshard::open(&url("postgres", "autoshard_no_such_database")),
            "3D000",
            "unknown database",
        );

        let role = format!("autoshard_denied_{}", std::process::id());
        let mut admin =
            postgres::Client::connect(&url("postgres", &database), postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!(
                "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN"
            ))
            .unwrap();
        let opened = autoshard::Postgres::builder(&url(&role, &database))
            .schema(format!("{role}_schema"))
            .open();
        admin.batch_execute(&format!("DROP ROLE {role}")).unwrap();
        assert_denied(opened, "42501", "no right to create the schema");

        // Control: the suite's own role opens the store.
        let db = autoshard::Postgres::builder(&url("postgres", &database))
            .schema(format!("{role}_ok"))
            .open()
            .unwrap();
        db.insert(&counter(1)).unwrap();
        admin
            .batch_execute(&format!("DROP SCHEMA {role}_ok CASCADE"))
            .unwrap();
    }
}

//! The Redis Cluster side of the shared suites: a fresh key prefix per
//! test on the run's cluster, and raw access for the checks.

use super::*;
use autoshard::{RedisCluster, RedisClusterBuilder};

/// The cluster's nodes: `AUTOSHARD_REDIS_CLUSTER_URL`'s, else those of
/// the cluster the test run starts (`autoshard-test-servers`); a test that
/// needs a cluster fails without one, saying what to install.
pub fn nodes() -> Vec<String> {
    autoshard_test_servers::redis_cluster_nodes()
}

pub fn url(prefix: &str) -> String {
    format!("redis-cluster://{}?prefix={prefix}", nodes().join(","))
}

/// A plain connection to every master, for reading keys behind the
/// store's back (`SCAN` is per node).
pub fn masters() -> Vec<redis::Connection> {
    let first = &nodes()[0];
    let mut conn = redis::Client::open(format!("redis://{first}"))
        .and_then(|c| c.get_connection())
        .unwrap_or_else(|e| panic!("cannot reach Redis Cluster node {first} ({e})"));
    let listing: String = redis::cmd("CLUSTER").arg("NODES").query(&mut conn).unwrap();
    listing
        .lines()
        .filter(|l| {
            l.split(' ')
                .nth(2)
                .is_some_and(|f| f.contains("master") && !f.contains("fail"))
        })
        .map(|l| {
            let addr = l.split(' ').nth(1).unwrap().split('@').next().unwrap();
            redis::Client::open(format!("redis://{addr}"))
                .and_then(|c| c.get_connection())
                .unwrap()
        })
        .collect()
}

/// Every key matching `pattern` on every master.
pub fn scan(pattern: &str) -> Vec<(usize, String)> {
    let mut keys = Vec::new();
    for (n, mut conn) in masters().into_iter().enumerate() {
        let found: Vec<String> = redis::cmd("SCAN")
            .cursor_arg(0)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .clone()
            .iter(&mut conn)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        keys.extend(found.into_iter().map(|k| (n, k)));
    }
    keys
}

fn hgetall(key: &str) -> BTreeMap<String, String> {
    let mut conns = masters();
    for conn in &mut conns {
        let r: redis::RedisResult<BTreeMap<String, String>> =
            redis::cmd("HGETALL").arg(key).query(conn);
        if let Ok(map) = r {
            return map;
        }
    }
    panic!("no master serves {key}")
}

/// Decodes a stored value as the store encodes it.
pub fn decode(stored: &str) -> Value {
    match stored.as_bytes()[0] {
        b'f' => Value::Real(stored[1..].parse().unwrap()),
        b'j' => Value::Text(stored[1..].to_owned()),
        _ => Value::Integer(stored.parse().unwrap()),
    }
}

/// Every document of `base` under `prefix`: id -> (incarnation, JSON).
pub fn documents_with_inc(prefix: &str, base: &str) -> BTreeMap<String, (String, String)> {
    scan(&format!("{prefix}:*:{base}:d:*"))
        .into_iter()
        .map(|(_, key)| {
            let id = key.splitn(5, ':').nth(4).unwrap()[1..].to_owned();
            let mut doc = hgetall(&key);
            (id, (doc.remove("inc").unwrap(), doc.remove("doc").unwrap()))
        })
        .collect()
}

/// The shard rows of the live incarnation of every entity of `base`.
pub fn rows(prefix: &str, base: &str) -> Rows {
    let docs = documents_with_inc(prefix, base);
    let mut rows = Rows::new();
    for (_, key) in scan(&format!("{prefix}:*:{base}:b*")) {
        let id = key.splitn(5, ':').nth(4).unwrap()[1..].to_owned();
        let bucket = hgetall(&key);
        if docs.get(&id).map(|(inc, _)| inc) != bucket.get("~") {
            continue;
        }
        for (name, value) in bucket {
            let Some(rest) = name.strip_prefix("r:") else {
                continue;
            };
            let (field, shard) = rest.rsplit_once(':').unwrap();
            rows.insert(
                (id.clone(), field.to_owned(), shard.parse().unwrap()),
                decode(&value),
            );
        }
    }
    rows
}

/// The score-tree rows of board `board` under `prefix`: the registry
/// names its id, the board's `n` hash holds `height:idx:part:shard`
/// fields (see `stores/redis/boards.rs`).
pub fn rank_nodes(prefix: &str, board: &str) -> RankNodes {
    let record = record(prefix, board);
    let id = record.split('|').next().unwrap();
    if record.ends_with("|~native") {
        return native_rows(prefix, id);
    }
    let Some((_, nodes)) = scan(&format!("{prefix}:*:rk{id}:n")).pop() else {
        return RankNodes::new();
    };
    let mut rows = RankNodes::new();
    for conn in &mut masters() {
        let found: redis::RedisResult<BTreeMap<String, Vec<u8>>> =
            redis::cmd("HGETALL").arg(&nodes).query(conn);
        let Ok(found) = found else { continue };
        for (field, v) in found {
            let k: Vec<i64> = field.split(':').map(|n| n.parse().unwrap()).collect();
            rows.insert((k[0], k[1], k[2], k[3]), decode_vector(&v));
        }
        return rows;
    }
    panic!("no master serves {nodes}")
}

/// Board `board`'s registry record under `prefix`.
fn record(prefix: &str, board: &str) -> String {
    let registry = scan(&format!("{prefix}:*:boards"));
    let (_, registry) = registry.first().expect("no board registry");
    hgetall(registry)
        .remove(board)
        .unwrap_or_else(|| panic!("no board {board:?}"))
}

/// Whether board `board` is stored natively (sorted sets, no count tree).
pub fn native(prefix: &str, board: &str) -> bool {
    record(prefix, board).ends_with("|~native")
}

/// A native board's sorted sets as rows: the ranking order's members
/// under height -1, the distinct scores under -2, by position, each
/// member's bytes as numbers.
fn native_rows(prefix: &str, id: &str) -> RankNodes {
    let mut rows = RankNodes::new();
    for (height, set) in [(-1, "o"), (-2, "s")] {
        let Some((n, key)) = scan(&format!("{prefix}:*:rk{id}:{set}")).pop() else {
            continue;
        };
        let mut conn = masters().into_iter().nth(n).unwrap();
        let members: Vec<Vec<u8>> = redis::cmd("ZRANGE")
            .arg(&key)
            .arg(0)
            .arg(-1)
            .query(&mut conn)
            .unwrap();
        for (i, member) in members.into_iter().enumerate() {
            let v = member.into_iter().map(i64::from).collect();
            rows.insert((height, i as i64, 0, 0), v);
        }
    }
    rows
}

/// Removes every key under a test's prefix when the test ends.
pub struct DropPrefix(pub String);

impl Drop for DropPrefix {
    fn drop(&mut self) {
        // Not during a panic caused by a missing cluster.
        let Ok(masters) = std::panic::catch_unwind(masters) else {
            return;
        };
        for mut conn in masters {
            let keys: Vec<String> = match redis::cmd("SCAN")
                .cursor_arg(0)
                .arg("MATCH")
                .arg(format!("{}:*", self.0))
                .arg("COUNT")
                .arg(1000)
                .clone()
                .iter(&mut conn)
            {
                Ok(iter) => iter.filter_map(Result::ok).collect(),
                Err(_) => continue,
            };
            for key in keys {
                let _ = redis::cmd("UNLINK").arg(&key).query::<i64>(&mut conn);
            }
        }
    }
}

pub fn builder(prefix: &str, options: &Options) -> RedisClusterBuilder {
    let mut builder = RedisCluster::builder(nodes()).prefix(prefix);
    if let Some(rows) = options.compaction_batch_rows {
        builder = builder.compaction_batch_rows(rows);
    }
    if let Some(attempts) = options.max_attempts {
        builder = builder.max_attempts(attempts);
    }
    if let Some(size) = options.pool_size {
        builder = builder.pool_size(size);
    }
    builder
}

pub fn new_prefix() -> String {
    format!("t_{}", unique_suffix())
}

impl TestStore for RedisCluster {
    const NAME: &'static str = "redis_cluster";

    fn fresh_with(options: Options) -> Fresh<Self> {
        let prefix = new_prefix();
        let cleanup = DropPrefix(prefix.clone());
        let open = {
            let prefix = prefix.clone();
            move |options: &Options| {
                builder(&prefix, options)
                    .open()
                    .unwrap_or_else(|e| panic!("open the Redis Cluster store: {e}"))
            }
        };
        let rows_prefix = prefix.clone();
        let docs_prefix = prefix.clone();
        let nodes_prefix = prefix.clone();
        let tree_prefix = prefix.clone();
        Fresh {
            store: open(&options),
            open: Box::new(open),
            rows: Box::new(move |base| rows(&rows_prefix, base)),
            documents: Box::new(move |base| {
                documents_with_inc(&docs_prefix, base)
                    .into_iter()
                    .map(|(id, (_, doc))| (id, doc))
                    .collect()
            }),
            rank_nodes: Box::new(move |board| rank_nodes(&nodes_prefix, board)),
            keeps_tree: Box::new(move |board| !native(&tree_prefix, board)),
            execute: Box::new(|_| panic!("Redis Cluster has no SQL to execute")),
            execute_queue: Box::new(|_| panic!("Redis Cluster has no SQL to execute")),
            _cleanup: Box::new(cleanup),
        }
    }
}

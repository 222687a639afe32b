//! The Redis Cluster store.
//!
//! Redis Cluster partitions keys over masters by hash slot, so unlike one
//! SQLite file or one PostgreSQL server, a hot entity's shards really do
//! live on different machines: this is the setting of the AutoShard paper.
//! Each entity has a home slot (its document) and [`keys::BUCKETS`]
//! buckets on slots spread over the ring ([`keys`]); a static shard lives
//! in bucket `shard mod 12`, a dynamic row in a random bucket.
//!
//! There are no multi-slot transactions in Redis Cluster. Every write is
//! cut into *pieces*, each one Lua script on one slot ([`scripts`]): the
//! document if it changed, and one piece per pending delta. A piece is
//! applied exactly once even when its reply is lost: it carries an
//! operation id (the connection's writer id and a sequence number) that
//! the script checks and records in the same atomic step, so the store
//! resends a piece whose reply was lost until it gets an answer (`OK`, or
//! `DUP`: an earlier send was applied). What a save spanning several
//! pieces guarantees, and what it does not, is in `docs/design/store-redis.md`
//! ("Redis Cluster").

mod approx;
mod board_codec;
mod board_keys;
mod board_tx;
mod boards;
mod census;
mod compaction;
mod entities;
mod error;
pub(crate) mod exec;
mod keys;
mod lifecycle;
mod native_scripts;
mod native_writes;
mod placement;
mod ranked;
#[cfg(feature = "failpoints")]
pub(crate) use ranked::hooks as ranked_hooks;
mod scripts;
mod static_fold;
mod writes;

use crate::error::{Error, Result};
use crate::seam::{Backend, BoardSpec, Boards, Entities, Kind};
use crate::stores::pool::{Checkout, Pool, Pooled};
use crate::stores::registry::{self, KindCache};
use error::{classify, Class};
use exec::{Piece, Reply};
use redis::cluster::{ClusterClient, ClusterConnection};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The URL schemes [`crate::open`] hands to this store.
pub(crate) const SCHEMES: &[&str] = &["redis-cluster"];

/// When a write counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// When the piece's master has applied it (and, with `appendfsync
    /// always`, written it to its append-only file). Replication is
    /// asynchronous: a failover right after the reply can lose the write,
    /// as the Redis Cluster specification says.
    #[default]
    Async,
    /// Additionally wait, after each piece, until `replicas` replicas of
    /// the piece's master acknowledged it (`WAIT replicas timeout`). If
    /// fewer do within `timeout`, the call fails with [`Error::InDoubt`]:
    /// the piece is applied on the master but may not survive a failover.
    Replicated {
        /// Replica acknowledgements to wait for (1 with one replica per
        /// master).
        replicas: u32,
        /// How long to wait for them.
        timeout: Duration,
    },
}

/// Options for opening a [`RedisCluster`] store.
///
/// ```no_run
/// use autoshard::{Durability, RedisCluster};
/// use std::time::Duration;
/// let db = RedisCluster::builder(["127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"])
///     .prefix("voting")
///     .durability(Durability::Replicated { replicas: 1, timeout: Duration::from_millis(500) })
///     .open()?;
/// # Ok::<(), autoshard::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct RedisClusterBuilder {
    nodes: Vec<String>,
    prefix: String,
    pool_size: usize,
    max_attempts: u32,
    compaction_batch_rows: usize,
    in_doubt_timeout: Duration,
    response_timeout: Duration,
    durability: Durability,
    exactly_once: bool,
    address_map: Vec<((String, u16), (String, u16))>,
}

impl RedisClusterBuilder {
    /// The prefix of every key this handle writes (default `autoshard`),
    /// so that several applications or tests share one cluster: 1 to 64
    /// ASCII letters, digits, `_`, `-` or `.`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Cluster connections this handle keeps for concurrent callers
    /// (default 4, at least 1). Each holds one TCP connection per node it
    /// talks to.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// How many times a compare-and-set fold, or a piece the cluster
    /// refused while failing over, is tried (default 8, at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Rows a compaction batch reads before it returns (default 10,000).
    pub fn compaction_batch_rows(mut self, rows: usize) -> Self {
        self.compaction_batch_rows = rows.max(1);
        self
    }

    /// How long a piece whose reply was lost keeps being resent (default
    /// 30 s) before the call gives up with [`Error::InDoubt`].
    pub fn in_doubt_timeout(mut self, timeout: Duration) -> Self {
        self.in_doubt_timeout = timeout;
        self
    }

    /// How long to wait for one reply before the connection counts as lost
    /// (default 3 s).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// When a write counts as done (default [`Durability::Async`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Turns operation ids off: a piece whose reply was lost is then
    /// resent blindly, which counts it twice when it had been applied.
    /// Only for the control run of the exactly-once test.
    #[doc(hidden)]
    pub fn exactly_once(mut self, on: bool) -> Self {
        self.exactly_once = on;
        self
    }

    /// Connects to node `from` (as the cluster names it) at `to` instead:
    /// for tests that put a proxy in front of each node.
    #[doc(hidden)]
    pub fn map_address(mut self, from: (&str, u16), to: (&str, u16)) -> Self {
        self.address_map
            .push(((from.0.to_owned(), from.1), (to.0.to_owned(), to.1)));
        self
    }

    /// Connects to the cluster and checks the prefix.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a bad prefix; [`Error::InvalidUrl`] for
    /// node addresses the client refuses; [`Error::Unavailable`] when no
    /// node answers; [`Error::AccessDenied`] when the nodes refuse the
    /// credentials (a password and user go in a node's address:
    /// `:password@host:port` or `user:password@host:port`);
    /// [`Error::Redis`] for other refusals.
    pub fn open(self) -> Result<RedisCluster> {
        check_prefix(&self.prefix)?;
        if self.nodes.is_empty() {
            return Err(Error::InvalidUrl {
                reason: "no Redis Cluster node given".into(),
            });
        }
        let urls: Vec<String> = self.nodes.iter().map(|n| format!("redis://{n}")).collect();
        let mut builder = ClusterClient::builder(urls)
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(self.response_timeout)
            // No retries inside the client: after a dropped connection it
            // reconnects and resends by itself, and if that resend is then
            // refused (the master is dead) it reports only the refusal, so
            // a piece that was applied before the drop would count as not
            // sent, fail `Unavailable`, and be counted twice when the
            // caller saves again (the failover defect in ROADMAP.md).
            // The store's loops see every error instead, rebuild the
            // connection (a fresh slot map) on a redirection or a lost
            // connection, and resend a piece that may have been applied
            // under its operation id.
            .retries(0);
        if !self.address_map.is_empty() {
            let map: HashMap<_, _> = self
                .address_map
                .iter()
                .map(|((fh, fp), (th, tp))| {
                    (
                        redis::cluster::NodeAddress::new(fh.as_str(), *fp),
                        redis::cluster::NodeAddress::new(th.as_str(), *tp),
                    )
                })
                .collect();
            builder = builder.node_address_map(map);
        }
        let client = builder.build().map_err(|e| Error::InvalidUrl {
            reason: format!("the Redis Cluster client refused the nodes: {e}"),
        })?;
        let first = Conn::connect(&client).map_err(|e| match classify(&e) {
            Class::Other => e.into(),
            _ => gave_up(&self.nodes, 1, e),
        })?;
        Ok(RedisCluster {
            inner: Arc::new(Inner {
                client,
                pool: Pool::new(self.pool_size, first),
                kinds: KindCache::default(),
                boards: Mutex::default(),
                ranked_boards: Mutex::default(),
                options: self,
            }),
        })
    }
}

fn check_prefix(prefix: &str) -> Result<()> {
    let ok = !prefix.is_empty()
        && prefix.len() <= 64
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        return Ok(());
    }
    Err(Error::InvalidName {
        name: prefix.to_owned(),
        reason: "a key prefix is 1 to 64 ASCII letters, digits, `_`, `-` or `.`".into(),
    })
}

/// A Redis Cluster shared by many threads and processes.
///
/// Cloning is cheap and shares the connection pool. Handles with the same
/// [prefix](RedisClusterBuilder::prefix), in this process or others, see
/// one another's writes.
#[derive(Clone)]
pub struct RedisCluster {
    inner: Arc<Inner>,
}

struct Inner {
    client: ClusterClient,
    pool: Pool<Conn>,
    kinds: KindCache<entities::KindInfo>,
    /// The shape of every board this handle created or opened, by id: a
    /// board's shape never changes, and its transactions need it.
    /// Boards' shapes by id, and whether each is stored natively.
    boards: Mutex<HashMap<i64, (BoardSpec, bool)>>,
    /// The ids of the boards that ranked fields feed, by name: a ranked
    /// save looks its boards up here, and again in the registry when the
    /// id it found was deleted (`ranked.rs`).
    ranked_boards: Mutex<HashMap<String, i64>>,
    options: RedisClusterBuilder,
}

impl std::fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCluster")
            .field("nodes", &self.inner.options.nodes)
            .field("prefix", &self.inner.options.prefix)
            .field("durability", &self.inner.options.durability)
            .finish_non_exhaustive()
    }
}

/// A pooled cluster connection, and the writer id its pieces carry.
pub(crate) struct Conn {
    /// `None` after an I/O error: rebuilt (with a fresh slot map) on next
    /// use. The sync client otherwise keeps talking to a dead master's
    /// address long after a failover.
    cluster: Option<ClusterConnection>,
    /// Random, positive; never reused by another connection.
    writer: i64,
    /// The last sequence number this writer used.
    seq: i64,
}

impl Conn {
    fn connect(client: &ClusterClient) -> redis::RedisResult<Conn> {
        Ok(Conn {
            cluster: Some(client.get_connection()?),
            writer: crate::random::range(1..i64::MAX),
            seq: 0,
        })
    }

    /// Takes a new writer id: after a piece of this one may or may not
    /// have applied and will not be sent again by this connection, so no
    /// later piece raises the writer's marks past it (`ranked.rs`).
    pub(super) fn retire(&mut self) {
        self.writer = crate::random::range(1..i64::MAX);
        self.seq = 0;
    }

    fn cluster(&mut self, client: &ClusterClient) -> redis::RedisResult<&mut ClusterConnection> {
        if self.cluster.is_none() {
            self.cluster = Some(client.get_connection()?);
        }
        Ok(self.cluster.as_mut().expect("just set"))
    }
}

impl Pooled for Conn {
    fn reusable(&self) -> bool {
        !std::thread::panicking()
    }
}

impl RedisCluster {
    /// Connects to the cluster through any of `nodes` (`host:port`) with
    /// the default options.
    ///
    /// # Errors
    ///
    /// As [`RedisClusterBuilder::open`].
    pub fn open<S: AsRef<str>>(nodes: impl IntoIterator<Item = S>) -> Result<Self> {
        Self::builder(nodes).open()
    }

    /// Options for connecting through any of `nodes` (`host:port`).
    pub fn builder<S: AsRef<str>>(nodes: impl IntoIterator<Item = S>) -> RedisClusterBuilder {
        RedisClusterBuilder {
            nodes: nodes.into_iter().map(|n| n.as_ref().to_owned()).collect(),
            prefix: "autoshard".into(),
            pool_size: 4,
            max_attempts: 8,
            compaction_batch_rows: 10_000,
            in_doubt_timeout: Duration::from_secs(30),
            response_timeout: Duration::from_secs(3),
            durability: Durability::Async,
            exactly_once: true,
            address_map: Vec::new(),
        }
    }

    /// The key prefix of this handle.
    pub fn prefix(&self) -> &str {
        &self.inner.options.prefix
    }

    /// The durability mode this handle was opened with.
    pub fn durability(&self) -> Durability {
        self.inner.options.durability
    }

    fn options(&self) -> &RedisClusterBuilder {
        &self.inner.options
    }

    fn checkout(&self) -> Result<Checkout<'_, Conn>> {
        self.inner.pool.checkout(|| {
            // The connection is made lazily by `Conn::cluster`, so a pool
            // slot never fails to open here.
            Ok(Conn {
                cluster: None,
                writer: crate::random::range(1..i64::MAX),
                seq: 0,
            })
        })
    }

    /// Runs `f` on a cluster connection, rebuilding it and trying again
    /// after a lost connection or a cluster that is failing over, up to
    /// `max_attempts`. For reads and idempotent writes only.
    pub(crate) fn with_conn<R>(
        &self,
        conn: &mut Conn,
        mut f: impl FnMut(&mut ClusterConnection) -> redis::RedisResult<R>,
    ) -> Result<R> {
        let max = self.options().max_attempts;
        for attempt in 1..=max {
            exec::count_round_trip();
            let outcome = conn.cluster(&self.inner.client).and_then(&mut f);
            match outcome {
                Ok(r) => return Ok(r),
                Err(e) if classify(&e) == Class::Other => return Err(e.into()),
                Err(e) => {
                    // Any failure may mean a stale slot map (the client
                    // follows no redirection itself): start afresh.
                    conn.cluster = None;
                    if attempt == max {
                        return Err(gave_up(&self.options().nodes, attempt, e));
                    }
                    let _retry = crate::trace::retry!(store = "redis", attempt, error = %e);
                    backoff(attempt);
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    /// The keys of `kind`, registered on first use.
    fn kind(&self, kind: &Kind) -> Result<Arc<entities::KindInfo>> {
        self.inner.kinds.get(kind, || {
            let info = entities::KindInfo::new(kind, &self.options().prefix)?;
            let registry = keys::registry(&self.options().prefix);
            let value = format!("{}|{}", kind.name, kind.key_kind.registry_name());
            let mut checkout = self.checkout()?;
            loop {
                let stored: Option<String> = self.with_conn(&mut checkout, |c| {
                    redis::cmd("HGET")
                        .arg(&registry)
                        .arg(&info.keys.base)
                        .query(c)
                })?;
                let owner = stored.map(|s| match s.split_once('|') {
                    Some((k, t)) => (k.to_owned(), t.to_owned()),
                    None => (s, String::new()),
                });
                if !registry::check_owner(kind, owner)? {
                    return Ok(info);
                }
                let set: bool = self.with_conn(&mut checkout, |c| {
                    redis::cmd("HSETNX")
                        .arg(&registry)
                        .arg(&info.keys.base)
                        .arg(&value)
                        .query(c)
                })?;
                if set {
                    return Ok(info);
                }
                // Another handle registered it meanwhile: check what it wrote.
            }
        })
    }
}

/// [`Error::Unavailable`] after `attempts` connection failures, the last
/// `error`; or [`Error::AccessDenied`] when the reason is that the nodes
/// refuse the credentials (the cluster client reports that as an I/O
/// error, and retrying cannot help), asked once, only on giving up.
fn gave_up(nodes: &[String], attempts: u32, error: redis::RedisError) -> Error {
    let urls: Vec<String> = nodes.iter().map(|n| format!("redis://{n}")).collect();
    match error::refused_credentials(&urls) {
        Some(refusal) => refusal.into(),
        None => Error::Unavailable {
            attempts,
            source: Box::new(error),
        },
    }
}

/// 10 ms doubling to 500 ms, jittered: a lost connection or a failover
/// needs the cluster to settle.
fn backoff(attempt: u32) {
    let cap = (10u64 << attempt.min(6)).min(500);
    std::thread::sleep(Duration::from_millis(crate::random::range(cap / 2..=cap)));
}

impl Backend for RedisCluster {
    fn __entities(&self) -> Entities<'_> {
        Entities(self)
    }

    fn __boards(&self) -> Boards {
        Boards(Arc::new(self.clone()))
    }
}

/// `redis-cluster://host:port,host:port,...`, with an optional
/// `prefix=NAME` query parameter.
pub(crate) fn open_url(url: &str) -> Result<RedisCluster> {
    let (nodes, prefix) = parse_url(url)?;
    let mut builder = RedisCluster::builder(nodes);
    if let Some(prefix) = prefix {
        builder = builder.prefix(prefix);
    }
    builder.open()
}

fn parse_url(url: &str) -> Result<(Vec<String>, Option<String>)> {
    let invalid = |reason: &str| Error::InvalidUrl {
        reason: reason.to_owned(),
    };
    let rest = url
        .strip_prefix("redis-cluster://")
        .ok_or_else(|| invalid("expected `redis-cluster://host:port,host:port,...`"))?;
    let (hosts, query) = match rest.split_once('?') {
        Some((hosts, query)) => (hosts, Some(query)),
        None => (rest, None),
    };
    let hosts = hosts.trim_end_matches('/');
    let mut nodes = Vec::new();
    for node in hosts.split(',').filter(|n| !n.is_empty()) {
        let (host, port) = node
            .rsplit_once(':')
            .ok_or_else(|| invalid("every node needs a port: `host:port`"))?;
        if host.is_empty() || port.parse::<u16>().is_err() {
            return Err(invalid("every node needs a port: `host:port`"));
        }
        nodes.push(node.to_owned());
    }
    if nodes.is_empty() {
        return Err(invalid("no Redis Cluster node in the URL"));
    }
    let mut prefix = None;
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        match pair.split_once('=') {
            Some(("prefix", value)) => prefix = Some(value.to_owned()),
            _ => return Err(invalid("the only query parameter is `prefix=NAME`")),
        }
    }
    Ok((nodes, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_nodes_and_an_optional_prefix() {
        assert_eq!(
            parse_url("redis-cluster://127.0.0.1:7101,127.0.0.1:7102?prefix=app").unwrap(),
            (
                vec!["127.0.0.1:7101".into(), "127.0.0.1:7102".into()],
                Some("app".into())
            )
        );
        assert_eq!(
            parse_url("redis-cluster://h:1/").unwrap(),
            (vec!["h:1".into()], None)
        );
        for bad in [
            "redis-cluster://",
            "redis-cluster://h",
            "redis-cluster://h:x",
            "redis-cluster://h:1?schema=x",
            "redis://h:1",
        ] {
            assert!(
                matches!(parse_url(bad), Err(Error::InvalidUrl { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn prefixes_are_plain_names() {
        assert!(check_prefix("app_1.test-x").is_ok());
        for bad in ["", "a{b}", "a:b", "a b", &"x".repeat(65)] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
    }
}

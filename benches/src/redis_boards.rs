//! Redis-native boards (issue 18 items 2-3) against Redis doing the same
//! job by hand, side by side in one run on the same master: direct
//! `set_score` vs `ZADD` from 1, 8 and 50 clients, a worker drain vs `ZADD`
//! from 50 clients, `rank` p50 vs a `ZREVRANK` round trip and `submit` p50
//! vs its job by hand in one script. The raw
//! commands go to a key with the board's hash tag, so to the board's
//! master, with the cluster's own durability setting (printed).
//!
//! Runs against the cluster of `AUTOSHARD_REDIS_CLUSTER_URL` (it writes
//! under a fresh prefix and deletes its keys at the end); not capped: the
//! clients share the machine's cores with the nodes.

use crate::stats::{thousands, Samples};
use autoshard::ranking::{Ranking, RankingConfig, Tie};
use autoshard::RedisCluster;
use redis::cluster::ClusterClient;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const RANGE: i64 = 1_000_000;
const PLAYERS: u64 = 100_000;

fn nodes() -> Result<Vec<String>> {
    let url = std::env::var("AUTOSHARD_REDIS_CLUSTER_URL")
        .map_err(|_| "set AUTOSHARD_REDIS_CLUSTER_URL=redis-cluster://host:port,...")?;
    let list = url
        .strip_prefix("redis-cluster://")
        .ok_or("AUTOSHARD_REDIS_CLUSTER_URL is not a redis-cluster:// URL")?;
    Ok(list.split(',').map(str::to_owned).collect())
}

/// CPU seconds used so far by this process and by the cluster's masters
/// and replicas (`INFO cpu` of every node): what a call costs the whole
/// machine, which on one box with 2 cores is what bounds its rate.
#[derive(Clone, Copy, Default)]
struct Cpu {
    client: f64,
    masters: f64,
    replicas: f64,
}

impl Cpu {
    fn now(nodes: &mut [(redis::Connection, bool)]) -> Cpu {
        let mut cpu = Cpu {
            client: own_cpu(),
            ..Cpu::default()
        };
        for (node, master) in nodes.iter_mut() {
            let info: String = redis::cmd("INFO")
                .arg("cpu")
                .query(node)
                .unwrap_or_default();
            let used: f64 = info
                .lines()
                .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
                .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
                .sum();
            match master {
                true => cpu.masters += used,
                false => cpu.replicas += used,
            }
        }
        cpu
    }

    /// µs per call since `before`, as `client / masters / replicas`.
    fn per_call(self, before: Cpu, calls: f64) -> String {
        let us = |a: f64, b: f64| (a - b) / calls * 1e6;
        format!(
            "{:.0} / {:.0} / {:.0}",
            us(self.client, before.client),
            us(self.masters, before.masters),
            us(self.replicas, before.replicas)
        )
    }
}

/// This process's CPU seconds (Linux' `/proc/self/stat`; NaN elsewhere).
fn own_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's name, which ends with the last ')':
    // user and system time are the 12th and 13th, in clock ticks (100/s).
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) / 100.0,
        _ => f64::NAN,
    }
}

/// A direct connection to every node of the cluster, and whether it is a
/// master.
fn every_node(
    conn: &mut redis::cluster::ClusterConnection,
) -> Result<Vec<(redis::Connection, bool)>> {
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(conn)?;
    let mut all = Vec::new();
    for line in nodes.lines() {
        let mut fields = line.split(' ');
        let addr = fields.nth(1).and_then(|a| a.split('@').next());
        let flags = fields.next().unwrap_or("");
        let (Some(addr), false) = (addr, flags.contains("fail")) else {
            continue;
        };
        let node = redis::Client::open(format!("redis://{addr}"))?.get_connection()?;
        all.push((node, flags.contains("master")));
    }
    Ok(all)
}

/// Clears every master's `INFO commandstats`.
fn reset_stats(nodes: &mut [(redis::Connection, bool)]) {
    for (node, _) in nodes.iter_mut().filter(|(_, master)| *master) {
        let _: redis::RedisResult<()> = redis::cmd("CONFIG").arg("RESETSTAT").query(node);
    }
}

/// The masters' server time per `EVALSHA` since `reset_stats`, split into
/// the commands the scripts called and the rest (Lua, and dispatching each
/// call), from `INFO commandstats`.
fn script_time(nodes: &mut [(redis::Connection, bool)]) -> String {
    let (mut scripts, mut script_us, mut inner_us) = (0.0, 0.0, 0.0);
    let mut calls: Vec<(String, f64)> = Vec::new();
    for (node, _) in nodes.iter_mut().filter(|(_, master)| *master) {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(node)
            .unwrap_or_default();
        for line in info.lines() {
            let Some((name, stats)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let stat = |key: &str| {
                stats
                    .split(',')
                    .find_map(|f| f.strip_prefix(key)?.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            let (n, us) = (stat("calls="), stat("usec="));
            match name {
                "evalsha" => (scripts, script_us) = (scripts + n, script_us + us),
                // The bench's own probes and the replicas' acknowledgements,
                // not the scripts' (subcommands count as `config|resetstat`).
                _ if name.contains('|') => {}
                "info" | "ping" | "readonly" | "replconf" | "psync" => {}
                _ => {
                    inner_us += us;
                    match calls.iter_mut().find(|(c, _)| c == name) {
                        Some((_, total)) => *total += n,
                        None => calls.push((name.to_owned(), n)),
                    }
                }
            }
        }
    }
    if scripts == 0.0 {
        return "no scripts ran".into();
    }
    calls.sort_by(|a, b| b.1.total_cmp(&a.1));
    let per: Vec<String> = calls
        .iter()
        .filter(|(_, n)| n / scripts >= 0.05)
        .map(|(name, n)| format!("{name} {:.1}", n / scripts))
        .collect();
    format!(
        "`EVALSHA` {:.1} µs per call: the commands it calls {:.1} µs, the rest (Lua, each call's dispatch) {:.1} µs; commands per script: {}",
        script_us / scripts,
        inner_us / scripts,
        (script_us - inner_us) / scripts,
        per.join(", ")
    )
}

/// Runs `f(client, i)` from `clients` threads for `length`: calls per
/// second over all of them, and the calls.
fn rate<C: Send>(
    clients: usize,
    length: Duration,
    make: impl Fn(usize) -> C + Sync,
    f: impl Fn(&mut C, u64) + Sync,
) -> (f64, f64) {
    let done = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for c in 0..clients {
            let (done, make, f) = (&done, &make, &f);
            s.spawn(move || {
                let mut client = make(c);
                let mut n = 0u64;
                while start.elapsed() < length {
                    f(&mut client, (c as u64) << 32 | n);
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    let calls = done.load(Ordering::Relaxed) as f64;
    (calls / start.elapsed().as_secs_f64(), calls)
}

fn player(i: u64) -> String {
    format!("p{}", (i.wrapping_mul(2_654_435_761)) % PLAYERS)
}

fn score(i: u64) -> i64 {
    (i.wrapping_mul(7919) % RANGE as u64) as i64
}

/// The board's hash tag, from its ranking order's key.
fn tag_of(conn: &mut redis::cluster::ClusterConnection, prefix: &str) -> Result<String> {
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(conn)?;
    for line in nodes.lines().filter(|l| l.contains("master")) {
        let addr = line.split(' ').nth(1).and_then(|a| a.split('@').next());
        let Some(addr) = addr else { continue };
        let mut node = redis::Client::open(format!("redis://{addr}"))?.get_connection()?;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*:rk*:o"))
            .query(&mut node)?;
        if let Some(key) = keys.first() {
            let open = key.find('{').ok_or("no tag")?;
            let close = key.find('}').ok_or("no tag")?;
            return Ok(key[open + 1..close].to_owned());
        }
    }
    Err("the board's ranking order was not found".into())
}

pub fn run(_dir: &Path, quick: bool) -> Result<()> {
    let nodes = nodes()?;
    let length = Duration::from_secs(if quick { 2 } else { 5 });
    let prefix = format!("bench_native_{}", std::process::id());
    let open = |pool: usize| {
        RedisCluster::builder(&nodes)
            .prefix(&prefix)
            .pool_size(pool)
            .open()
    };
    let db = open(4)?;
    let board = Ranking::create(&db, "board", RankingConfig::new(0..RANGE).queues(4))?;
    // Players to rank and a ranking order to find.
    // Every timed write moves its player: the seed's score is never the
    // one a timed call gives (with `score(i)` here, a single client's calls
    // re-set each player's seeded score, which a board skips as no change
    // and `ZADD` does not: figures before 2026-11-29 at 1 client).
    let seed: Vec<(String, i64)> = (0..PLAYERS)
        .map(|i| (player(i), (score(i) + 1) % RANGE))
        .collect();
    for chunk in seed.chunks(5_000) {
        let batch: Vec<(&str, i64)> = chunk.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        board.set_scores(&batch)?;
    }
    let urls: Vec<String> = nodes.iter().map(|n| format!("redis://{n}")).collect();
    let client = ClusterClient::new(urls)?;
    let mut conn = client.get_connection()?;
    let tag = tag_of(&mut conn, &prefix)?;
    let raw = format!("{prefix}:{{{tag}}}:raw");
    // The raw sorted set holds the same players, so a `ZADD` moves one
    // as a `set_score` does.
    for chunk in seed.chunks(5_000) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(&raw);
        for (p, s) in chunk {
            zadd.arg(*s).arg(p);
        }
        let _: i64 = zadd.query(&mut conn)?;
    }
    let fsync: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query(&mut conn)
        .unwrap_or_default();
    println!("\n## Redis-native boards vs raw commands on the board's master");
    println!(
        "cluster {}, appendfsync {:?}, {PLAYERS} players, {} s per figure",
        nodes.join(","),
        fsync.get(1).map(String::as_str).unwrap_or("?"),
        length.as_secs()
    );
    let mut every = every_node(&mut conn)?;
    println!(
        "\nCPU µs per call: this process (the clients) / the masters / the replicas, from `INFO cpu` of every node."
    );
    println!("\n| clients | `set_score`/s | `ZADD`/s | ratio | `set_score` CPU µs per call | `ZADD` CPU µs per call |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut zadd50 = 0.0;
    let mut scripts = Vec::new();
    for clients in [1, 8, 50] {
        reset_stats(&mut every);
        let before = Cpu::now(&mut every);
        let (ours, ours_calls) = rate(
            clients,
            length,
            |_| {
                let db = open(1).expect("a handle");
                Ranking::open(&db, "board").expect("the board")
            },
            |board, i| board.set_score(&player(i), score(i)).expect("a write"),
        );
        let after = Cpu::now(&mut every);
        let split = script_time(&mut every);
        let ours_cpu = after.per_call(before, ours_calls);
        let before = after;
        let (theirs, theirs_calls) = rate(
            clients,
            length,
            |_| client.get_connection().expect("a connection"),
            |c, i| {
                redis::cmd("ZADD")
                    .arg(&raw)
                    .arg(score(i))
                    .arg(player(i))
                    .query::<i64>(c)
                    .expect("ZADD");
            },
        );
        let theirs_cpu = Cpu::now(&mut every).per_call(before, theirs_calls);
        if clients == 50 {
            zadd50 = theirs;
        }
        println!(
            "| {clients} | {} | {} | {:.2}× | {ours_cpu} | {theirs_cpu} |",
            thousands(ours as u64),
            thousands(theirs as u64),
            ours / theirs
        );
        scripts.push(format!("- {clients} clients: {split}"));
    }

    println!(
        "\nThe masters' server time per `set_score` script:\n{}",
        scripts.join("\n")
    );

    // The drain: a backlog queued first, then one worker in batches of
    // 1,000.
    let backlog: u64 = if quick { 20_000 } else { 100_000 };
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let board = &board;
            s.spawn(move || {
                for i in (t..backlog).step_by(8) {
                    board
                        .enqueue(&player(i + 7), score(i + 3))
                        .expect("enqueue");
                }
            });
        }
    });
    println!("queued: {}", board.queued()?);
    let start = Instant::now();
    let stats = board.worker().batch_size(1_000).drain()?;
    let drained = stats.updates as f64 / start.elapsed().as_secs_f64();
    println!(
        "\nworker drain, batches of 1,000: {} updates/s ({} updates in {} batches, {:.0} ms); `ZADD` from 50 clients: {}/s; ratio {:.2}×",
        thousands(drained as u64),
        thousands(stats.updates),
        stats.batches,
        start.elapsed().as_secs_f64() * 1e3,
        thousands(zadd50 as u64),
        drained / zadd50
    );

    // Read latency, one client, one round trip each.
    let reads = if quick { 2_000 } else { 10_000 };
    let (mut ours, mut theirs) = (Samples::with_capacity(reads), Samples::with_capacity(reads));
    for i in 0..reads as u64 {
        let p = player(i);
        let t = Instant::now();
        board.rank(&p, Tie::Standard)?;
        ours.push(t.elapsed());
        let t = Instant::now();
        let _: Option<i64> = redis::cmd("ZREVRANK").arg(&raw).arg(&p).query(&mut conn)?;
        theirs.push(t.elapsed());
    }
    let (a, b) = (ours.percentile(50.0), theirs.percentile(50.0));
    println!(
        "`rank` p50 {:.0} µs, `ZREVRANK` p50 {:.0} µs: ratio {:.2}× ({reads} each, interleaved)",
        a / 1e3,
        b / 1e3,
        a / b
    );

    // A submission and its two ranks, one client: `submit` against the
    // same job by hand in one round trip, a script of `ZSCORE` (the old
    // score), `ZREVRANK`, `ZADD` and `ZREVRANK` (a cluster connection
    // pipelines no `MULTI`).
    let by_hand = redis::Script::new(
        "local old = redis.call('ZSCORE', KEYS[1], ARGV[2]) \
         local was = redis.call('ZREVRANK', KEYS[1], ARGV[2]) \
         redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) \
         return {old, was, redis.call('ZREVRANK', KEYS[1], ARGV[2])}",
    );
    let (mut ours, mut theirs) = (Samples::with_capacity(reads), Samples::with_capacity(reads));
    for i in 0..reads as u64 {
        let (p, s) = (player(i), score(i + 11));
        let t = Instant::now();
        board.submit(&p, s)?;
        ours.push(t.elapsed());
        let t = Instant::now();
        let _: redis::Value = by_hand.key(&raw).arg(s).arg(&p).invoke(&mut conn)?;
        theirs.push(t.elapsed());
    }
    let (a, b) = (ours.percentile(50.0), theirs.percentile(50.0));
    println!(
        "`submit` p50 {:.0} µs, a script of `ZSCORE`, `ZREVRANK`, `ZADD`, `ZREVRANK` p50 {:.0} µs: ratio {:.2}× ({reads} each, interleaved)",
        a / 1e3,
        b / 1e3,
        a / b
    );
    board.check_integrity()?;
    Ranking::delete(&db, "board")?;
    let _: i64 = redis::cmd("UNLINK").arg(&raw).query(&mut conn)?;
    Ok(())
}

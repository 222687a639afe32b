//! One board over several masters (issue 18 item 3): `trees(1)` against
//! `trees(3)` on a 3-master Redis Cluster whose every `redis-server` runs
//! in a CPU quota of its own, so a master's core, not the machine, bounds
//! a board's writes. Same client threads, same players, side by side in
//! one run (alternating rounds); `set_score` calls per second and `rank`
//! p50.
//!
//! Starts its own cluster (3 masters, no replicas, `appendonly no`: the
//! quota, not the disk, is what is measured) on free loopback ports, each
//! node in a cgroup `autoshard-bench-<pid>-<node>` with
//! `cpu.max = "<QUOTA_US> 100000"` (cgroup v2) or
//! `cpu.cfs_quota_us = <QUOTA_US>` (v1), and stops it at the end.

use crate::stats::{thousands, us, Samples};
use autoshard::ranking::{Ranking, RankingConfig, Tie};
use autoshard::RedisCluster;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Each node's CPU quota per 100 ms period: 30% of a core.
const QUOTA_US: u32 = 30_000;
const MASTERS: usize = 3;
const PLAYERS: u64 = 20_000;
const RANGE: i64 = 1_000_000;
/// Client threads calling `set_score`, each count on both boards: 12
/// leave the split board's capped masters idle part of the time (each
/// client waits out a round trip and a throttled master), 32 keep them
/// busier.
const CLIENTS: [usize; 2] = [12, 32];

/// The nodes' processes and cgroups; stops and removes them when dropped.
struct Cluster {
    nodes: Vec<Child>,
    groups: Vec<PathBuf>,
    ports: Vec<u16>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
        for group in &self.groups {
            let _ = fs::remove_dir(group);
        }
    }
}

/// A new cgroup with a CPU quota, and how it was made (printed).
fn capped_group(name: &str) -> Result<(PathBuf, &'static str)> {
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers");
    if v2.exists() {
        let dir = Path::new("/sys/fs/cgroup").join(name);
        fs::create_dir(&dir)?;
        fs::write(dir.join("cpu.max"), format!("{QUOTA_US} 100000"))?;
        return Ok((dir, "cgroup v2 cpu.max"));
    }
    let dir = Path::new("/sys/fs/cgroup/cpu").join(name);
    fs::create_dir(&dir)?;
    fs::write(dir.join("cpu.cfs_period_us"), "100000")?;
    fs::write(dir.join("cpu.cfs_quota_us"), QUOTA_US.to_string())?;
    Ok((dir, "cgroup v1 cpu.cfs_quota_us"))
}

/// Periods the group's processes were throttled in (cpu.stat).
fn throttled(group: &Path) -> u64 {
    let stat = fs::read_to_string(group.join("cpu.stat")).unwrap_or_default();
    stat.lines()
        .find_map(|l| l.strip_prefix("nr_throttled "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn ping(port: u16, args: &[&str]) -> Option<String> {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .ok()?
        .get_connection()
        .ok()?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut conn).ok()
}

fn wait(what: &str, mut ok: impl FnMut() -> bool) -> Result<()> {
    let start = Instant::now();
    while !ok() {
        if start.elapsed() > Duration::from_secs(60) {
            return Err(format!("timed out waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn start_cluster(dir: &Path) -> Result<(Cluster, &'static str)> {
    let mut cluster = Cluster {
        nodes: Vec::new(),
        groups: Vec::new(),
        ports: Vec::new(),
    };
    let mut method = "";
    for i in 0..MASTERS {
        let (port, bus) = (free_port()?, free_port()?);
        let data = dir.join(format!("node{i}"));
        fs::create_dir_all(&data)?;
        let (group, how) = capped_group(&format!("autoshard-bench-{}-{i}", std::process::id()))?;
        method = how;
        cluster.groups.push(group.clone());
        let node = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--cluster-port",
                &bus.to_string(),
                "--cluster-enabled",
                "yes",
            ])
            .args([
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
            ])
            .args(["--appendonly", "no", "--save", ""])
            .arg("--dir")
            .arg(&data)
            .stdout(Stdio::null())
            .spawn()?;
        fs::write(group.join("cgroup.procs"), node.id().to_string())?;
        cluster.nodes.push(node);
        cluster.ports.push(port);
    }
    for &port in &cluster.ports {
        wait("a node to answer", || ping(port, &["PING"]).is_some())?;
    }
    let addrs: Vec<String> = cluster
        .ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let created = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .stdout(Stdio::null())
        .status()?;
    if !created.success() {
        return Err("redis-cli --cluster create failed".into());
    }
    let ports = cluster.ports.clone();
    wait("cluster_state:ok", || {
        ports
            .iter()
            .all(|&p| ping(p, &["CLUSTER", "INFO"]).is_some_and(|i| i.contains("cluster_state:ok")))
    })?;
    Ok((cluster, method))
}

fn player(i: u64) -> String {
    format!("p{}", i.wrapping_mul(2_654_435_761) % PLAYERS)
}

fn score(i: u64) -> i64 {
    (i.wrapping_mul(7919) % RANGE as u64) as i64
}

/// Client `c`'s `set_score` calls until `length` after `start`: how many.
fn write_until(board: &Ranking, c: u64, start: Instant, length: Duration) -> u64 {
    let mut n = 0u64;
    while start.elapsed() < length {
        let i = c << 32 | n;
        board.set_score(&player(i), score(i)).expect("a write");
        n += 1;
    }
    n
}

/// `set_score` calls per second from `clients` threads for `length`.
fn writes(board: &Ranking, clients: usize, length: Duration) -> f64 {
    let done = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for c in 0..clients as u64 {
            let done = &done;
            s.spawn(move || {
                done.fetch_add(write_until(board, c, start, length), Ordering::Relaxed)
            });
        }
    });
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// Reads beside `clients` writers for `length`: one reader alternating
/// `rank` and a middle page; their p50s (ns) and how many failed (a read
/// transaction gives up with `Error::Conflict` after 1,000 attempts, each
/// re-run when a tree it read moved).
fn reads_under_writes(board: &Ranking, clients: usize, length: Duration) -> (f64, f64, u64) {
    let start = Instant::now();
    let (mut ranks, mut pages) = (Samples::with_capacity(1_000), Samples::with_capacity(1_000));
    let mut failed = 0;
    std::thread::scope(|s| {
        for c in 0..clients as u64 {
            s.spawn(move || write_until(board, c, start, length));
        }
        let mut i = 0u64;
        while start.elapsed() < length {
            let t = Instant::now();
            match board.rank(&player(i * 7), Tie::Standard) {
                Ok(_) => ranks.push(t.elapsed()),
                Err(_) => failed += 1,
            }
            let from = PLAYERS / 2 + i % 100;
            let t = Instant::now();
            match board.page(from, from + 9) {
                Ok(_) => pages.push(t.elapsed()),
                Err(_) => failed += 1,
            }
            i += 1;
        }
    });
    (ranks.percentile(50.0), pages.percentile(50.0), failed)
}

/// `rank` (standard) p50 over `n` players, one client, in nanoseconds.
fn rank_p50(board: &Ranking, n: u64) -> f64 {
    let mut samples = Samples::with_capacity(n as usize);
    for i in 0..n {
        let start = Instant::now();
        board.rank(&player(i * 7), Tie::Standard).expect("a rank");
        samples.push(start.elapsed());
    }
    samples.percentile(50.0)
}

/// `page` of 10 entries from the middle of the board and `score_at_rank`
/// there, p50s over `n` calls each, one client, in nanoseconds: a split
/// board finds the position from pivots across its trees.
fn middle_p50s(board: &Ranking, n: u64) -> (f64, f64) {
    let mut pages = Samples::with_capacity(n as usize);
    let mut scores = Samples::with_capacity(n as usize);
    for i in 0..n {
        let from = PLAYERS / 2 + i % 100;
        let start = Instant::now();
        board.page(from, from + 9).expect("a page");
        pages.push(start.elapsed());
        let start = Instant::now();
        board.score_at_rank(from).expect("a score");
        scores.push(start.elapsed());
    }
    (pages.percentile(50.0), scores.percentile(50.0))
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let (cluster, method) = start_cluster(dir)?;
    let nodes: Vec<String> = cluster
        .ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let db = RedisCluster::builder(&nodes).pool_size(CLIENTS[1]).open()?;
    let boards: Vec<(u32, Ranking)> = [1u32, 3]
        .into_iter()
        .map(|k| {
            let config = RankingConfig::new(0..RANGE).trees(k);
            Ok((k, Ranking::create(&db, &format!("trees{k}"), config)?))
        })
        .collect::<Result<_>>()?;
    for (_, board) in &boards {
        let seed: Vec<(String, i64)> = (0..PLAYERS).map(|i| (player(i), score(i))).collect();
        for chunk in seed.chunks(2_000) {
            let batch: Vec<(&str, i64)> = chunk.iter().map(|(p, s)| (p.as_str(), *s)).collect();
            board.set_scores(&batch)?;
        }
    }
    let length = Duration::from_secs(if quick { 2 } else { 5 });
    let rounds = if quick { 1 } else { 2 };
    let before: Vec<u64> = cluster.groups.iter().map(|g| throttled(g)).collect();
    // Per board: set_score/s at each client count, rank p50, page p50,
    // score_at_rank p50.
    let mut figures = vec![([0.0; 2], 0.0, 0.0, 0.0); boards.len()];
    let reads = if quick { 200 } else { 500 };
    for _ in 0..rounds {
        for (b, (_, board)) in boards.iter().enumerate() {
            for (c, &clients) in CLIENTS.iter().enumerate() {
                figures[b].0[c] += writes(board, clients, length) / f64::from(rounds);
            }
            figures[b].1 += rank_p50(board, reads) / f64::from(rounds);
            let (page, score) = middle_p50s(board, reads);
            figures[b].2 += page / f64::from(rounds);
            figures[b].3 += score / f64::from(rounds);
        }
    }
    let under: Vec<(f64, f64, u64)> = boards
        .iter()
        .map(|(_, board)| reads_under_writes(board, CLIENTS[0], length))
        .collect();
    let after: Vec<u64> = cluster.groups.iter().map(|g| throttled(g)).collect();
    println!("\n## Redis Cluster: one board over several masters");
    println!(
        "{MASTERS} masters, each `redis-server` in its own {method} = {QUOTA_US}/100000 \
         ({}% of a core), appendonly no; {:?} client threads calling `set_score`, \
         {PLAYERS} players, {} s x {rounds} rounds alternating; rank (standard), a \
         10-entry page from the middle and `score_at_rank` there, p50 from one client",
        QUOTA_US / 1_000,
        CLIENTS,
        length.as_secs()
    );
    println!(
        "periods throttled per node during the run: {:?}",
        before
            .iter()
            .zip(&after)
            .map(|(b, a)| a - b)
            .collect::<Vec<_>>()
    );
    println!(
        "\n| board | set_score/s, {0} clients | vs trees(1) | set_score/s, {1} clients | vs trees(1) | rank p50 | middle page p50 | middle `score_at_rank` p50 |",
        CLIENTS[0], CLIENTS[1]
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (b, (k, _)) in boards.iter().enumerate() {
        let (w, rank, page, score) = figures[b];
        println!(
            "| trees({k}) | {} | {:.2}x | {} | {:.2}x | {} | {} | {} |",
            thousands(w[0] as u64),
            w[0] / figures[0].0[0],
            thousands(w[1] as u64),
            w[1] / figures[0].0[1],
            us(rank),
            us(page),
            us(score)
        );
    }
    println!(
        "\nReads beside {} writers ({} s per board): one reader alternating `rank` and a middle page\n",
        CLIENTS[0],
        length.as_secs()
    );
    println!("| board | rank p50 | middle page p50 | reads failed |");
    println!("|---|---:|---:|---:|");
    for ((k, _), (rank, page, failed)) in boards.iter().zip(&under) {
        println!("| trees({k}) | {} | {} | {failed} |", us(*rank), us(*page));
    }
    for (_, board) in boards {
        let name = board.name().to_owned();
        drop(board);
        let _ = Ranking::delete(&db, &name);
    }
    drop(cluster);
    Ok(())
}

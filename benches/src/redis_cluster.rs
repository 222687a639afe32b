//! The paper's voting workload on Redis Cluster, where a hot entity's
//! shards really live on different machines: naive (one key), static (12
//! shards) and dynamic sharding on 3 masters, each master capped at a
//! twelfth of a core (8%) with a CPU quota (a cgroup per node, standing in for
//! separate machines on a 2-core box); then the sharded counter and the
//! hot key on 1 master vs 3; then the contention experiment with
//! optimistic compare-and-set folds.
//!
//! Starts its own clusters with `scripts/redis-cluster` (ports 7201-7203
//! and 7211, no replicas, `appendfsync everysec`, quota 8% per node) and
//! stops them at the end. Needs `redis-server` and a writable cgroup `cpu`
//! controller (root).

use crate::stats::{median, thousands};
use autoshard::{shard_fold, shard_method, Error, Pending, RedisCluster, Shardable, Store};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// CPU quota per node, percent of one core (`AUTOSHARD_BENCH_REDIS_QUOTA`
/// to change it). Small enough that the masters, not the voters on the
/// same 2 cores, are the bottleneck.
fn quota() -> u32 {
    std::env::var("AUTOSHARD_BENCH_REDIS_QUOTA")
        .ok()
        .and_then(|q| q.parse().ok())
        .unwrap_or(8)
}
/// Concurrent voters (one handle each).
const CLIENTS: usize = 8;

#[derive(Shardable, Debug)]
#[shard(kind = "Naive")]
struct Naive {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 1, fold = autoshard::fold::checked_sum)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

#[derive(Shardable, Debug)]
#[shard(kind = "Static")]
struct Static {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 12, fold = autoshard::fold::checked_sum)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

#[derive(Shardable, Debug)]
#[shard(kind = "Dynamic")]
struct Dynamic {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

/// A fold the store cannot add with `HINCRBY` (an `i32` sum): read, fold
/// in Rust, compare-and-set, as on Datastore.
#[derive(Shardable, Debug)]
#[shard(kind = "CasNaive")]
struct CasNaive {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 1)]
    votes: i32,
    #[shard(pending)]
    pending: Pending<Self>,
}

#[derive(Shardable, Debug)]
#[shard(kind = "CasStatic")]
struct CasStatic {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 12)]
    votes: i32,
    #[shard(pending)]
    pending: Pending<Self>,
}

macro_rules! votes {
    ($($t:ident: $ty:ty),*) => {$(
        impl $t {
            #[shard_method]
            fn vote(&mut self) {
                self.votes += 1;
            }
        }
        impl Voter for $t {
            fn fresh(id: u64) -> Self {
                $t { id, votes: 0, pending: Pending::default() }
            }
            fn vote_once(&mut self) {
                self.vote();
            }
            fn total(&self) -> i64 {
                i64::from(self.votes)
            }
        }
    )*};
}

impl CasNaive {
    #[shard_fold]
    fn fold_votes(a: i32, b: i32) -> i32 {
        a + b
    }
}

impl CasStatic {
    #[shard_fold]
    fn fold_votes(a: i32, b: i32) -> i32 {
        a + b
    }
}

votes!(Naive: i64, Static: i64, Dynamic: i64, CasNaive: i32, CasStatic: i32);

trait Voter: Shardable<Id = u64> + Send + 'static {
    fn fresh(id: u64) -> Self;
    fn vote_once(&mut self);
    fn total(&self) -> i64;
}

/// A cluster started for the benchmark, stopped when dropped.
struct Cluster {
    ports: Vec<u16>,
    dir: PathBuf,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/redis-cluster")
}

impl Cluster {
    fn start(ports: &[u16], dir: &Path) -> Result<Cluster> {
        let cluster = Cluster {
            ports: ports.to_vec(),
            dir: dir.to_owned(),
        };
        cluster.script("stop")?;
        cluster.script("start")?;
        Ok(cluster)
    }

    fn script(&self, command: &str) -> Result<()> {
        let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
        let status = Command::new("bash")
            .arg(script())
            .arg(command)
            .env("AUTOSHARD_REDIS_PORTS", ports.join(" "))
            .env("AUTOSHARD_REDIS_REPLICAS", "0")
            .env("AUTOSHARD_REDIS_APPENDFSYNC", "everysec")
            .env("AUTOSHARD_REDIS_CPU_QUOTA", quota().to_string())
            .env("AUTOSHARD_REDIS_DIR", &self.dir)
            .status()?;
        if !status.success() {
            return Err(format!("scripts/redis-cluster {command} failed").into());
        }
        Ok(())
    }

    fn store(&self, prefix: &str, attempts: u32) -> Result<RedisCluster> {
        let nodes: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        Ok(RedisCluster::builder(nodes)
            .prefix(prefix)
            .pool_size(1)
            .max_attempts(attempts)
            .open()?)
    }

    /// CPU time (user + system, clock ticks) each node has used so far.
    fn cpu_ticks(&self) -> Vec<u64> {
        self.ports
            .iter()
            .map(|port| {
                let pid = std::fs::read_to_string(self.dir.join(format!("{port}/redis.pid")))
                    .unwrap_or_default();
                let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                    .unwrap_or_default();
                // Fields after the command name (which is in parentheses).
                let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
                let fields: Vec<&str> = rest.split_whitespace().collect();
                let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
                field(11).unwrap_or(0) + field(12).unwrap_or(0)
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.script("stop");
    }
}

/// What one slice of voting measured.
#[derive(Debug, Default, Clone)]
struct Slice {
    saves: u64,
    failed: u64,
    elapsed: Duration,
    /// CPU ticks per node during the slice.
    cpu: Vec<u64>,
}

impl Slice {
    fn per_sec(&self) -> f64 {
        self.saves as f64 / self.elapsed.as_secs_f64()
    }
}

/// `CLIENTS` voters on one entity of `T` for `length`; a failed save
/// (conflict with `max_attempts(1)`) is counted and its vote dropped.
fn slice<T: Voter>(cluster: &Cluster, stores: &[RedisCluster], length: Duration) -> Result<Slice> {
    let stop = Arc::new(AtomicBool::new(false));
    let saves = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(stores.len() + 1));
    let threads: Vec<_> = stores
        .iter()
        .cloned()
        .map(|db| {
            let (stop, saves, failed, barrier) =
                (stop.clone(), saves.clone(), failed.clone(), barrier.clone());
            thread::spawn(move || -> std::result::Result<(), String> {
                let mut v: T = db.load(&1).map_err(|e| e.to_string())?.ok_or("gone")?;
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    v.vote_once();
                    match db.save(&mut v) {
                        Ok(_) => {
                            saves.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Conflict { .. }) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            v = db.load(&1).map_err(|e| e.to_string())?.ok_or("gone")?;
                        }
                        Err(e) => return Err(e.to_string()),
                    }
                }
                Ok(())
            })
        })
        .collect();
    barrier.wait();
    let before = cluster.cpu_ticks();
    let start = Instant::now();
    thread::sleep(length);
    stop.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let after = cluster.cpu_ticks();
    for t in threads {
        t.join().map_err(|_| "voter panicked")??;
    }
    Ok(Slice {
        saves: saves.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        elapsed,
        cpu: before.iter().zip(&after).map(|(b, a)| a - b).collect(),
    })
}

/// Runs the variants round-robin, `rounds` slices each, and checks every
/// stored total against the acknowledged saves.
fn compare(
    cluster: &Cluster,
    prefix: &str,
    variants: &[(&'static str, Variant)],
    attempts: u32,
    rounds: usize,
    length: Duration,
) -> Result<Vec<Vec<Slice>>> {
    let stores: Vec<RedisCluster> = (0..CLIENTS)
        .map(|_| cluster.store(prefix, attempts))
        .collect::<Result<_>>()?;
    for (_, v) in variants {
        (v.insert)(&stores[0])?;
    }
    let mut out = vec![Vec::new(); variants.len()];
    for round in 0..rounds {
        for k in 0..variants.len() {
            let i = (k + round) % variants.len();
            let s = (variants[i].1.run)(cluster, &stores, length)?;
            eprintln!("  {} {}: {:.0} saves/s", variants[i].0, round, s.per_sec());
            out[i].push(s);
        }
    }
    for (i, (name, v)) in variants.iter().enumerate() {
        let acked: u64 = out[i].iter().map(|s| s.saves).sum();
        let stored = (v.total)(&stores[0])?;
        if stored != acked as i64 {
            return Err(format!("{name}: stored {stored}, acknowledged {acked}").into());
        }
    }
    Ok(out)
}

type Run = fn(&Cluster, &[RedisCluster], Duration) -> Result<Slice>;

#[derive(Clone, Copy)]
struct Variant {
    insert: fn(&RedisCluster) -> Result<()>,
    run: Run,
    total: fn(&RedisCluster) -> Result<i64>,
}

fn variant<T: Voter>() -> Variant {
    Variant {
        insert: |db| Ok(db.insert(&T::fresh(1))?),
        run: slice::<T>,
        total: |db| Ok(db.load::<T>(&1)?.ok_or("gone")?.total()),
    }
}

fn median_rate(slices: &[Slice]) -> f64 {
    median(&slices.iter().map(Slice::per_sec).collect::<Vec<_>>())
}

fn cpu_split(slices: &[Slice]) -> String {
    let n = slices[0].cpu.len();
    let sums: Vec<u64> = (0..n)
        .map(|i| slices.iter().map(|s| s.cpu[i]).sum())
        .collect();
    let total: u64 = sums.iter().sum::<u64>().max(1);
    let seconds: f64 = slices.iter().map(|s| s.elapsed.as_secs_f64()).sum();
    sums.iter()
        .map(|t| {
            // Clock ticks are 1/100 s here (`getconf CLK_TCK`).
            let core = *t as f64 / 100.0 / seconds;
            format!(
                "{:.0}% ({:.2} core)",
                100.0 * *t as f64 / total as f64,
                core
            )
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

pub fn run(_dir: &Path, quick: bool) -> Result<()> {
    let (rounds, length) = if quick {
        (1, Duration::from_secs(1))
    } else {
        (3, Duration::from_secs(4))
    };
    let base = std::env::temp_dir().join("autoshard-bench-redis");
    println!("## Redis Cluster: the voting workload on 3 masters");
    println!();
    println!(
        "{CLIENTS} voters (one handle and connection each) on one hot entity, {rounds} slices of \
         {length:?} per variant, round-robin. Clusters started by `scripts/redis-cluster` \
         without replicas, `appendfsync everysec`, each node capped at {}% of a core by a \
         CPU quota: a cgroup v1 `cpu` group per node (`cpu.cfs_quota_us` = {} of a 100,000 µs \
         period; `cpu.max` on cgroup v2), holding the server's pid, as a stand-in for separate \
         machines. Every stored total is checked against the acknowledged saves.",
        quota(),
        quota() * 1000
    );
    println!();
    let three = Cluster::start(&[7201, 7202, 7203], &base.join("three"))?;
    let one = Cluster::start(&[7211], &base.join("one"))?;

    let voting = [
        ("naive (1 key)", variant::<Naive>()),
        ("static (12 shards)", variant::<Static>()),
        ("dynamic", variant::<Dynamic>()),
    ];
    eprintln!("redis: voting on 3 masters");
    let on_three = compare(&three, "vote3", &voting, 8, rounds, length)?;
    println!("| variant | saves/s (median) | vs naive | CPU per master (share, cores) |");
    println!("|---|---:|---:|---|");
    let naive = median_rate(&on_three[0]);
    for ((name, _), slices) in voting.iter().zip(&on_three) {
        let rate = median_rate(slices);
        println!(
            "| {name} | {} | {:.2}× | {} |",
            thousands(rate.round() as u64),
            rate / naive,
            cpu_split(slices)
        );
    }
    let static_ratio = median_rate(&on_three[1]) / naive;
    println!();
    println!(
        "- static vs naive throughput: {static_ratio:.2}× (goal ≥ 2×: {})",
        if static_ratio >= 2.0 {
            "met"
        } else {
            "**not met**"
        }
    );
    println!();

    println!("### 1 master vs 3 masters");
    println!();
    eprintln!("redis: 1 master");
    let on_one = compare(&one, "vote1", &voting, 8, rounds, length)?;
    println!("| variant | 1 master | 3 masters | 3 vs 1 |");
    println!("|---|---:|---:|---:|");
    let mut chart = Vec::new();
    for (i, (name, _)) in voting.iter().enumerate() {
        let (a, b) = (median_rate(&on_one[i]), median_rate(&on_three[i]));
        println!(
            "| {name} | {} | {} | {:.2}× |",
            thousands(a.round() as u64),
            thousands(b.round() as u64),
            b / a
        );
        chart.push((*name, a, b));
    }
    println!();

    println!("### Contention: optimistic compare-and-set, no retries");
    println!();
    println!(
        "An `i32` sum, which the store cannot add with `HINCRBY`: each save reads its shard, \
         folds in Rust and writes with a compare-and-set script; `max_attempts(1)`, so a lost \
         race is a failed write (`Error::Conflict`), the paper's Figure 6 without retries. Same \
         {CLIENTS} voters, 3 masters."
    );
    println!();
    eprintln!("redis: contention");
    let cas = [
        ("naive (1 key)", variant::<CasNaive>()),
        ("static (12 shards)", variant::<CasStatic>()),
    ];
    let contended = compare(&three, "cas", &cas, 1, rounds, length)?;
    println!("| variant | saves/s | failed writes |");
    println!("|---|---:|---:|");
    for ((name, _), slices) in cas.iter().zip(&contended) {
        let saves: u64 = slices.iter().map(|s| s.saves).sum();
        let failed: u64 = slices.iter().map(|s| s.failed).sum();
        println!(
            "| {name} | {} | {:.1}% |",
            thousands(median_rate(slices).round() as u64),
            100.0 * failed as f64 / (saves + failed).max(1) as f64
        );
    }
    println!();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/redis-cluster.svg");
    draw(&chart, &path)?;
    println!("Chart: `docs/redis-cluster.svg` (saves/s by variant, 1 vs 3 masters).");
    println!();
    drop((three, one));
    Ok(())
}

fn draw(rows: &[(&str, f64, f64)], path: &Path) -> Result<()> {
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let max = rows.iter().map(|r| r.1.max(r.2)).fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Voting on Redis Cluster, {}% of a core per master", quota()),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..(rows.len() as f64 - 0.5), 0.0..max * 1.15)?;
    chart
        .configure_mesh()
        .x_labels(rows.len())
        .x_label_formatter(&|x| {
            let i = x.round() as usize;
            rows.get(i).map_or(String::new(), |r| r.0.to_string())
        })
        .y_desc("saves/s")
        .draw()?;
    for (series, color, label) in [(1usize, RED, "1 master"), (2, BLUE, "3 masters")] {
        let offset = if series == 1 { -0.15 } else { 0.15 };
        let bars = rows.iter().enumerate().map(|(i, r)| {
            let v = if series == 1 { r.1 } else { r.2 };
            let x = i as f64 + offset;
            Rectangle::new([(x - 0.12, 0.0), (x + 0.12, v)], color.filled())
        });
        chart
            .draw_series(bars)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

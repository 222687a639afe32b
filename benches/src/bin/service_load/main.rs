//! `service-load` (issue 19 item 6): drives the voting service
//! (`examples/service`) with N concurrent HTTP clients on loopback, one
//! hot question voted on by all of them plus game score submissions, and
//! runs the same operations in-process on a
//! fresh store of the same kind, side by side; then prints one Markdown
//! table: requests/s, p50/p99 per operation, the HTTP ÷ in-process ratio
//! (in-process twice: the async API's calls from N tasks, as the routes
//! make them, and the sync API's from N threads),
//! the service's tokio `spawn` probe, and whether every vote and score was
//! counted exactly (the service's own check at shutdown, and a reload).
//!
//! ```text
//! cargo build --release --example service
//! cargo run --release -p autoshard-benches --bin service-load -- [--stores sqlite,postgres,redis]
//!     [--clients 8] [--requests 1000] [--seconds 60]
//! ```
//!
//! PostgreSQL: `AUTOSHARD_PG_URL` (default postgres://postgres@127.0.0.1:5432/test),
//! a schema of its own per run, dropped after. Redis Cluster:
//! `AUTOSHARD_REDIS_CLUSTER_URL`, else a cluster of its own (3 masters + 3
//! replicas on free loopback ports, `autoshard-test-servers`, stopped
//! after the run), a key prefix per side; scores only (entity boards are
//! unsupported there, so no votes). Bounded: each client stops after
//! `--requests` or `--seconds`, whichever comes first.

#[path = "../../../../examples/service/client.rs"]
mod client;
mod inproc;
#[path = "../../../../examples/service/model.rs"]
#[allow(dead_code)] // the service's half is not used here
mod model;
mod service;

use std::time::Duration;

/// What one side (HTTP or in-process) measured.
#[derive(Default)]
pub struct Side {
    pub votes: Vec<Duration>,
    pub scores: Vec<Duration>,
    pub elapsed: Duration,
    /// Votes acknowledged, and whether the store held exactly those after.
    pub votes_sent: u64,
    pub exact: bool,
    pub note: String,
}

impl Side {
    pub fn requests(&self) -> usize {
        self.votes.len() + self.scores.len()
    }

    pub fn per_sec(&self) -> f64 {
        self.requests() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// One client's latencies: votes, scores.
pub type Latencies = (Vec<Duration>, Vec<Duration>);

/// The workload, the same on every side.
#[derive(Clone, Copy)]
pub struct Load {
    pub clients: usize,
    pub requests: usize,
    pub limit: Duration,
    /// Whether there are votes (not on Redis Cluster).
    pub votes: bool,
}

impl Load {
    /// Client `c`'s request `i`: `None` votes on the hot question, else a
    /// game score `(player, score)`. Three votes to one score.
    pub fn op(&self, c: usize, i: usize) -> Option<(String, i64)> {
        if self.votes && i % 4 != 3 {
            return None;
        }
        let player = format!("p{c}-{}", i % 64);
        Some((player, ((c * 7919 + i * 104_729) % 1_000_000) as i64))
    }
}

pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let i = ((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1;
    samples[i]
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// A percentile of `samples`, or "—" when the side made no such request
/// (votes on Redis Cluster).
fn us_of(samples: &mut [Duration], p: f64) -> String {
    match samples.is_empty() {
        true => "—".into(),
        false => us(percentile(samples, p)),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

struct Options {
    stores: Vec<String>,
    load: Load,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        stores: vec!["sqlite".into(), "postgres".into(), "redis".into()],
        load: Load {
            clients: 8,
            requests: 1000,
            limit: Duration::from_secs(60),
            votes: true,
        },
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or(format!("{arg} needs a value"))?;
        let number = || {
            value
                .parse::<usize>()
                .map_err(|e| format!("{arg} {value}: {e}"))
        };
        match arg.as_str() {
            "--stores" => o.stores = value.split(',').map(str::to_owned).collect(),
            "--clients" => o.load.clients = number()?.clamp(1, 256),
            "--requests" => o.load.requests = number()?.clamp(1, 1_000_000),
            "--seconds" => o.load.limit = Duration::from_secs(number()?.clamp(1, 600) as u64),
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    Ok(o)
}

fn url_of(store: &str, dir: &std::path::Path, tag: &str) -> Result<String, String> {
    let unique = format!("{}_{}", std::process::id(), tag);
    match store {
        "sqlite" => Ok(format!(
            "sqlite:{}",
            dir.join(format!("{tag}.db")).display()
        )),
        "postgres" => {
            let base = std::env::var("AUTOSHARD_PG_URL")
                .unwrap_or("postgres://postgres@127.0.0.1:5432/test".into());
            let glue = if base.contains('?') { '&' } else { '?' };
            Ok(format!("{base}{glue}schema=svcload_{unique}"))
        }
        "redis" => {
            let base = autoshard_test_servers::redis_cluster_url();
            let glue = if base.contains('?') { '&' } else { '?' };
            Ok(format!("{base}{glue}prefix=svcload{unique}"))
        }
        _ => Err(format!("unknown store {store:?} (sqlite, postgres, redis)")),
    }
}

/// Drops the PostgreSQL schema a URL names (a run leaves nothing behind).
fn cleanup(url: &str) {
    let Some((base, schema)) = url.split_once("schema=") else {
        return;
    };
    if !url.starts_with("postgres") {
        return;
    }
    let base = base.trim_end_matches(['?', '&']);
    if let Ok(mut c) = postgres::Client::connect(base, postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
    }
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("service-load: {e}");
            std::process::exit(2);
        }
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let load_start = load_average();
    let date = String::from_utf8(
        std::process::Command::new("date")
            .args(["-u", "+%F %H:%M"])
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    let mut rows = Vec::new();
    let mut ok = true;
    for store in &o.stores {
        let load = Load {
            votes: store != "redis",
            ..o.load
        };
        let urls: Result<Vec<String>, String> = ["http", "async", "sync"]
            .iter()
            .map(|tag| url_of(store, dir.path(), tag))
            .collect();
        let (http_url, async_url, inproc_url) = match urls.as_deref() {
            Ok([h, a, i]) => (h.clone(), a.clone(), i.clone()),
            Ok(_) => unreachable!("three tags, three URLs"),
            Err(e) => {
                eprintln!("service-load: {e}");
                std::process::exit(2);
            }
        };
        eprintln!(
            "service-load: {store}: HTTP, {} clients × {} requests",
            load.clients, load.requests
        );
        let http = service::run(&http_url, load);
        eprintln!("service-load: {store}: in-process, the same async calls");
        let asynced = inproc::run_async(&async_url, load);
        eprintln!("service-load: {store}: in-process, the same sync calls");
        let inproc = inproc::run(&inproc_url, load);
        for url in [&http_url, &async_url, &inproc_url] {
            cleanup(url);
        }
        match (http, asynced, inproc) {
            (Ok((mut h, probe)), Ok(mut a), Ok(mut i)) => {
                ok &= h.exact && a.exact && i.exact;
                rows.push(row(store, &mut h, &mut a, &mut i, &probe));
            }
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                ok = false;
                rows.push(format!("| {store} | failed: {e} |"));
            }
        }
    }
    println!("## Service load (issue 19 item 6)");
    println!();
    println!("| | |");
    println!("|---|---|");
    println!("| command | `{command}` |");
    println!("| date (UTC) | {} |", date.trim());
    println!(
        "| load average at start / end | {load_start} / {} |",
        load_average()
    );
    println!(
        "| workload | {} clients, {} requests each (or {} s), 3 votes on one hot question to 1 game score |",
        o.load.clients,
        o.load.requests,
        o.load.limit.as_secs()
    );
    println!();
    println!("| store | side | requests | req/s | vote p50 | vote p99 | score p50 | score p99 | ÷ in-process sync | `spawn` probe p50 / p99 / max | counted exactly |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    if !ok {
        std::process::exit(1);
    }
}

fn row(store: &str, h: &mut Side, a: &mut Side, i: &mut Side, probe: &model::ProbeView) -> String {
    let line = |side: &str, s: &mut Side, ratio: &str, probe: &str| {
        format!(
            "| {store} | {side} | {} | {:.0} | {} | {} | {} | {} | {ratio} | {probe} | {}{} |",
            s.requests(),
            s.per_sec(),
            us_of(&mut s.votes, 0.5),
            us_of(&mut s.votes, 0.99),
            us_of(&mut s.scores, 0.5),
            us_of(&mut s.scores, 0.99),
            if s.exact { "yes" } else { "**NO**" },
            if s.note.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.note)
            },
        )
    };
    let ratio = |s: &Side| format!("{:.2}×", s.per_sec() / i.per_sec().max(1e-9));
    let http = format!(
        "**{}** (÷ async {:.2}×)",
        ratio(h),
        h.per_sec() / a.per_sec().max(1e-9)
    );
    let probe = format!(
        "{} / {} / {} µs ({} samples)",
        probe.p50_us, probe.p99_us, probe.max_us, probe.samples
    );
    let async_ratio = ratio(a);
    [
        line("HTTP (service)", h, &http, &probe),
        line("in-process, async API", a, &async_ratio, "—"),
        line("in-process, sync API", i, "1", "—"),
    ]
    .join("\n")
}

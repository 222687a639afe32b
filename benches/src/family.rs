//! Board families (issue 10, items 5 and 6): what ONE family submission
//! costs next to writing the same boards one by one and next to one board.
//!
//! The family has 3 windows (all-time, month, day) × (overall + 2 filter
//! dimensions, `age_group` and `weight_class`) = 9 member boards; every
//! measured submission carries one value of each dimension, so it writes
//! all 9 (plus the family's players board, which stores the values) in one
//! transaction. Compared, same players, scores and board shape:
//!
//! - `family`: `Family::submission(..).filter(..).filter(..).at(ts).submit()`;
//! - `9 boards`: `Ranking::submit` on 9 plain boards, 9 transactions;
//! - `1 board`: one `Ranking::submit` on one plain board;
//! - Redis (standalone, 127.0.0.1:6379, if it answers): the 9 `ZADD`s and
//!   the player's filter-values `HSET` in one `MULTI`/`EXEC`, and one
//!   `ZADD` alone.
//!
//! on SQLite (`synchronous = FULL`, the default, and `NORMAL`: the same
//! file through two handles), PostgreSQL (`AUTOSHARD_PG_URL`) and Redis
//! Cluster (`AUTOSHARD_REDIS_CLUSTER_URL`, under a prefix of this run; each
//! skipped with a message if unset). Every board (the 9 members, the 9 plain
//! boards, the single board, the 9 sorted sets) is pre-loaded with the same
//! players; the variants run interleaved, in rotated order, round by round,
//! so a noisy machine hits them alike and the ratios are what counts.
//! `AUTOSHARD_BENCH_FAMILY_PLAYERS` sets the load (default 100,000; 10,000
//! with `--quick`).

use crate::stats::{thousands, us, Rng, Samples};
use autoshard::ranking::{
    Family, FamilyConfig, Period, Ranking, RankingConfig, RankingStore, Window,
};
use autoshard::{Postgres, RedisCluster, Sqlite, Synchronous};
use std::error::Error;
use std::hint::black_box;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const FAMILY: &str = "famex-bench";
const SCHEMA: &str = "autoshard_bench_famex";
const WINDOWS: [Window; 3] = [Window::AllTime, Window::Month, Window::Day];
const AGE: (&str, &str) = ("age_group", "35-44");
const WEIGHT: (&str, &str) = ("weight_class", "light");
const SCORES: u32 = 1_000_000;
const LOAD_BATCH: usize = 10_000;

fn board_config() -> RankingConfig {
    RankingConfig::new(0..i64::from(SCORES))
}

fn family_config() -> FamilyConfig {
    let mut config = FamilyConfig::new(board_config())
        .filter(AGE.0, ["u35", AGE.1, "45-54"])
        .filter(WEIGHT.0, [WEIGHT.1, "heavy"]);
    for w in WINDOWS {
        config = config.window(w);
    }
    config
}

fn player(n: u32) -> String {
    format!("rider-{n:07}")
}

/// The boards one store's variants write.
struct Boards {
    family: Family,
    nine: Vec<Ranking>,
    one: Ranking,
}

impl Boards {
    fn open(db: &impl RankingStore) -> Result<Self> {
        Ok(Boards {
            family: Family::open(db, FAMILY)?,
            nine: (0..9)
                .map(|i| Ranking::open(db, &format!("famex-plain-{i}")))
                .collect::<autoshard::Result<_>>()?,
            one: Ranking::open(db, "famex-one")?,
        })
    }

    fn submit(&self, op: Op, who: &str, score: i64, ts: i64) -> Result<()> {
        match op {
            Op::Family => drop(black_box(
                self.family
                    .submission(who, score)
                    .filter(AGE.0, AGE.1)
                    .filter(WEIGHT.0, WEIGHT.1)
                    .at(ts)
                    .submit()?,
            )),
            Op::Nine => {
                for b in &self.nine {
                    black_box(b.submit(who, score)?);
                }
            }
            Op::One => drop(black_box(self.one.submit(who, score)?)),
        }
        Ok(())
    }
}

/// Creates (afresh) and loads the family, the 9 plain boards and the one.
fn create(db: &impl RankingStore, players: u32, ts: i64, rng: &mut Rng) -> Result<()> {
    Family::delete(db, FAMILY)?;
    for i in 0..9 {
        Ranking::delete(db, &format!("famex-plain-{i}"))?;
        Ranking::create(db, &format!("famex-plain-{i}"), board_config())?;
    }
    Ranking::delete(db, "famex-one")?;
    Ranking::create(db, "famex-one", board_config())?;
    let family = Family::create(db, FAMILY, family_config())?;
    // Creates the 9 members of the periods containing `ts`.
    family
        .submission(&player(0), 0)
        .filter(AGE.0, AGE.1)
        .filter(WEIGHT.0, WEIGHT.1)
        .at(ts)
        .submit()?;
    let boards = Boards::open(db)?;
    let mut all = boards.nine.clone();
    all.push(boards.one.clone());
    for w in WINDOWS {
        for f in [None, Some(AGE), Some(WEIGHT)] {
            all.push(
                family
                    .board(w, Period::At(ts), f)?
                    .ok_or("member missing")?,
            );
        }
    }
    let names: Vec<String> = (0..players).map(player).collect();
    for chunk in names.chunks(LOAD_BATCH) {
        let scores: Vec<(&str, i64)> = chunk
            .iter()
            .map(|n| (n.as_str(), i64::from(rng.below(SCORES))))
            .collect();
        for b in &all {
            b.set_scores(&scores)?;
        }
    }
    Ok(())
}

/// Deletes what [`create`] made.
fn drop_boards(db: &impl RankingStore) -> Result<()> {
    Family::delete(db, FAMILY)?;
    for i in 0..9 {
        Ranking::delete(db, &format!("famex-plain-{i}"))?;
    }
    Ranking::delete(db, "famex-one")?;
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Family,
    Nine,
    One,
}

const OPS: [Op; 3] = [Op::Family, Op::Nine, Op::One];

fn label(op: Op) -> &'static str {
    match op {
        Op::Family => "family: 1 submission, 9 members",
        Op::Nine => "9 plain boards: 9 × `submit`",
        Op::One => "1 plain board: 1 × `submit`",
    }
}

/// Redis: 9 sorted sets and a hash under a key prefix of this run.
struct Redis {
    conn: redis::Connection,
    prefix: String,
}

impl Redis {
    fn connect(players: u32, rng: &mut Rng) -> Option<Self> {
        let client = redis::Client::open("redis://127.0.0.1:6379/").ok()?;
        let conn = client
            .get_connection_with_timeout(std::time::Duration::from_secs(2))
            .map_err(|e| eprintln!("family: Redis on 6379 skipped: {e}"))
            .ok()?;
        let prefix = format!("autoshard-bench:famex:{}", std::process::id());
        let mut redis = Redis { conn, prefix };
        if let Err(e) = redis.load(players, rng) {
            eprintln!("family: Redis on 6379 skipped: {e}");
            redis.clean();
            return None;
        }
        Some(redis)
    }

    fn key(&self, i: usize) -> String {
        format!("{}:z{i}", self.prefix)
    }

    fn load(&mut self, players: u32, rng: &mut Rng) -> Result<()> {
        for first in (0..players).step_by(LOAD_BATCH) {
            let last = (first + LOAD_BATCH as u32).min(players);
            let scores: Vec<u32> = (first..last).map(|_| rng.below(SCORES)).collect();
            let mut pipe = redis::pipe();
            for i in 0..9 {
                let zadd = pipe.cmd("ZADD").arg(self.key(i));
                for (n, s) in (first..last).zip(&scores) {
                    zadd.arg(*s).arg(player(n));
                }
                pipe.ignore();
            }
            let hset = pipe.cmd("HSET").arg(format!("{}:players", self.prefix));
            for n in first..last {
                hset.arg(player(n)).arg("35-44|light");
            }
            pipe.ignore().query::<()>(&mut self.conn)?;
        }
        Ok(())
    }

    fn multi(&mut self, who: &str, score: i64) -> Result<()> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for i in 0..9 {
            pipe.cmd("ZADD")
                .arg(self.key(i))
                .arg(score)
                .arg(who)
                .ignore();
        }
        pipe.cmd("HSET")
            .arg(format!("{}:players", self.prefix))
            .arg(who)
            .arg("35-44|light")
            .ignore();
        pipe.query::<()>(&mut self.conn)?;
        Ok(())
    }

    fn one(&mut self, who: &str, score: i64) -> Result<()> {
        redis::cmd("ZADD")
            .arg(self.key(0))
            .arg(score)
            .arg(who)
            .query::<()>(&mut self.conn)?;
        Ok(())
    }

    fn clean(&mut self) {
        let mut del = redis::cmd("DEL");
        for i in 0..9 {
            del.arg(self.key(i));
        }
        del.arg(format!("{}:players", self.prefix));
        if let Err(e) = del.query::<()>(&mut self.conn) {
            eprintln!("family: could not delete Redis keys {}:*: {e}", self.prefix);
        }
    }
}

fn uptime() -> String {
    std::process::Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|e| format!("uptime failed: {e}"))
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let (mut players, rounds, ops) = if quick {
        (10_000, 2, 50)
    } else {
        (100_000, 5, 200)
    };
    // PostgreSQL loads ~4,000 rows/s on the 2-core machine (19 boards):
    // a smaller load keeps a run within minutes there.
    if let Ok(n) = std::env::var("AUTOSHARD_BENCH_FAMILY_PLAYERS") {
        players = n.parse()?;
    }
    let before = uptime();
    let ts = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let mut rng = Rng::new(0x5EED_F00D);
    let path = dir.join("family.db");
    let started = Instant::now();
    create(&Sqlite::open(&path)?, players, ts, &mut rng)?;
    eprintln!("family: SQLite loaded in {:?}", started.elapsed());
    let mut stores: Vec<(String, Boards)> = Vec::new();
    let full = Sqlite::builder(&path)
        .synchronous(Synchronous::Full)
        .open()?;
    stores.push(("SQLite FULL".into(), Boards::open(&full)?));
    let normal = Sqlite::builder(&path)
        .synchronous(Synchronous::Normal)
        .open()?;
    stores.push(("SQLite NORMAL".into(), Boards::open(&normal)?));
    let pg = match std::env::var("AUTOSHARD_PG_URL") {
        Ok(url) => Some(Postgres::builder(&url).schema(SCHEMA).open()?),
        Err(_) => {
            eprintln!("family: AUTOSHARD_PG_URL is unset: PostgreSQL skipped");
            None
        }
    };
    if let Some(pg) = &pg {
        let started = Instant::now();
        create(pg, players, ts, &mut rng)?;
        eprintln!("family: PostgreSQL loaded in {:?}", started.elapsed());
        stores.push(("PostgreSQL".into(), Boards::open(pg)?));
    }
    // Redis Cluster keeps a family's boards on one slot (one master).
    let cluster = match std::env::var("AUTOSHARD_REDIS_CLUSTER_URL") {
        Ok(url) => {
            let nodes = url
                .strip_prefix("redis-cluster://")
                .ok_or("AUTOSHARD_REDIS_CLUSTER_URL is not a redis-cluster:// URL")?;
            let nodes: Vec<&str> = nodes.split(',').collect();
            let prefix = format!("bench_famex_{}", std::process::id());
            Some(RedisCluster::builder(&nodes).prefix(&prefix).open()?)
        }
        Err(_) => {
            eprintln!("family: AUTOSHARD_REDIS_CLUSTER_URL is unset: Redis Cluster skipped");
            None
        }
    };
    if let Some(cluster) = &cluster {
        let started = Instant::now();
        create(cluster, players, ts, &mut rng)?;
        eprintln!("family: Redis Cluster loaded in {:?}", started.elapsed());
        stores.push(("Redis Cluster".into(), Boards::open(cluster)?));
    }
    let mut redis = Redis::connect(players, &mut rng);

    // Variant v: (store, op) for v < 3 × stores, then Redis MULTI, Redis one.
    let variants = stores.len() * OPS.len() + if redis.is_some() { 2 } else { 0 };
    let mut samples: Vec<Samples> = (0..variants).map(|_| Samples::default()).collect();
    for round in 0..rounds {
        eprintln!("family: round {round}");
        for i in 0..variants {
            let v = (i + round) % variants;
            for _ in 0..ops {
                let who = player(rng.below(players));
                let score = i64::from(rng.below(SCORES));
                let t = Instant::now();
                match (v / OPS.len(), &mut redis) {
                    (s, _) if s < stores.len() => {
                        stores[s].1.submit(OPS[v % OPS.len()], &who, score, ts)?
                    }
                    (_, Some(r)) if v == variants - 2 => r.multi(&who, score)?,
                    (_, Some(r)) => r.one(&who, score)?,
                    (_, None) => unreachable!("no Redis variant without Redis"),
                }
                samples[v].push(t.elapsed());
            }
        }
    }
    if let Some(r) = &mut redis {
        r.clean();
    }
    if let Some(pg) = &pg {
        drop_boards(pg)?;
    }
    if let Some(cluster) = &cluster {
        drop_boards(cluster)?;
    }
    let after = uptime();
    report(&stores, &samples, redis.is_some(), players, rounds, ops);
    println!("`uptime` before: `{before}`; after: `{after}`.");
    println!();
    Ok(())
}

fn report(
    stores: &[(String, Boards)],
    samples: &[Samples],
    redis: bool,
    players: u32,
    rounds: usize,
    ops: usize,
) {
    let n = thousands(players.into());
    println!("### Board family: one submission to 9 members ({n} players per board)");
    println!();
    println!(
        "A family of 3 windows (all-time, month, day) × (overall + `age_group` + \
         `weight_class`) = 9 member boards, each pre-loaded with the same {n} players \
         (scores 0..1,000,000, `Policy::Replace`, default branching and shards); 9 plain boards \
         and 1 plain board of the same shape and players. Random player and score per call; \
         variants interleaved, {rounds} rounds of {ops} calls each, order rotated. The family's \
         players board (filter values) holds only the players submitted so far, not {n}."
    );
    println!();
    println!("| store | call | ops | p50 | p99 | mean |");
    println!("|---|---|---:|---:|---:|---:|");
    let row = |store: &str, call: &str, s: &Samples| {
        println!(
            "| {store} | {call} | {} | {} | {} | {} |",
            s.len(),
            us(s.percentile(50.0)),
            us(s.percentile(99.0)),
            us(s.mean()),
        );
    };
    for (s, (name, _)) in stores.iter().enumerate() {
        for (o, op) in OPS.iter().enumerate() {
            row(name, label(*op), &samples[s * OPS.len() + o]);
        }
    }
    if redis {
        let at = samples.len() - 2;
        row(
            "Redis 6379",
            "9 × `ZADD` + `HSET` in `MULTI`/`EXEC`",
            &samples[at],
        );
        row("Redis 6379", "1 × `ZADD`", &samples[at + 1]);
    }
    println!();
    println!("| store | family ÷ 1 board (p50) | family ÷ 1 board (mean) | family ÷ 9 boards (p50) | goal ≤ 3× one board |");
    println!("|---|---:|---:|---:|---|");
    let ratio = |a: &Samples, b: &Samples, p: Option<f64>| match p {
        Some(p) => a.percentile(p) / b.percentile(p),
        None => a.mean() / b.mean(),
    };
    for (s, (name, _)) in stores.iter().enumerate() {
        let [f, nine, one] = [0, 1, 2].map(|o| &samples[s * OPS.len() + o]);
        let r = ratio(f, one, Some(50.0));
        println!(
            "| {name} | {r:.2}× | {:.2}× | {:.2}× | {} |",
            ratio(f, one, None),
            ratio(f, nine, Some(50.0)),
            if r <= 3.0 { "met" } else { "not met" }
        );
    }
    if redis {
        let at = samples.len() - 2;
        println!(
            "| Redis 6379 (MULTI ÷ 1 ZADD) | {:.2}× | {:.2}× | | |",
            ratio(&samples[at], &samples[at + 1], Some(50.0)),
            ratio(&samples[at], &samples[at + 1], None),
        );
    }
    println!();
}

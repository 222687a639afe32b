//! What a ranked field costs a save on Redis Cluster, where the board
//! write cannot be in the save's transaction: it is checked before the
//! save's pieces and committed after them under an operation id reserved
//! for it (`stores/redis/ranked.rs`). Side by side, interleaved rounds, one
//! client: the plain save, the ranked save, and the plain save followed by
//! `set_score` on the board (what an application writes without entity
//! boards, not exactly once across a crash). Runs when
//! `AUTOSHARD_REDIS_CLUSTER_URL` is set, under a key prefix of this run,
//! removed at the end.

use crate::entity_board::RankedQuestion;
use crate::model::Question;
use crate::stats::{median, us, Samples};
use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{Pending, RedisCluster, Store};
use std::error::Error;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const ID: u64 = 42;

enum Variant {
    Plain(Question),
    Ranked(RankedQuestion),
    Separate(Question, Ranking),
}

impl Variant {
    fn name(&self) -> &'static str {
        match self {
            Variant::Plain(_) => "`vote_up(); save()`",
            Variant::Ranked(_) => {
                "`vote_up(); save()`, votes ranked (board write after the pieces)"
            }
            Variant::Separate(..) => "`vote_up(); save()`, then `set_score(id, 1)` on the board",
        }
    }

    fn vote(&mut self, db: &RedisCluster) -> Result<()> {
        match self {
            Variant::Plain(q) => {
                q.vote_up();
                db.save(q)?;
            }
            Variant::Ranked(q) => {
                q.vote_up();
                db.save(q)?;
            }
            Variant::Separate(q, board) => {
                q.vote_up();
                db.save(q)?;
                board.set_score(&ID.to_string(), 1)?;
            }
        }
        Ok(())
    }

    fn run(&mut self, db: &RedisCluster, ops: usize, samples: &mut Samples) -> Result<f64> {
        let start = Instant::now();
        for _ in 0..ops {
            let t = Instant::now();
            self.vote(db)?;
            samples.push(t.elapsed());
        }
        Ok(start.elapsed().as_nanos() as f64 / ops as f64)
    }
}

/// One handle per variant, each under its own prefix (the board names
/// collide otherwise).
fn open(nodes: &[&str], prefix: &str, variant: usize) -> Result<(RedisCluster, Variant)> {
    let db = RedisCluster::builder(nodes)
        .prefix(format!("{prefix}_{variant}"))
        .open()?;
    let config = RankingConfig::new(0..1_000_000_000).policy(Policy::Increment);
    let board = Ranking::create(&db, "top-questions", config)?;
    let v = match variant {
        0 => {
            db.insert(&Question::new(ID))?;
            Variant::Plain(db.load::<Question>(&ID)?.ok_or("inserted")?)
        }
        1 => {
            db.insert(&RankedQuestion {
                id: ID,
                question: "How do you plan to improve public education?".into(),
                author: "moderator".into(),
                votes: 0,
                views: 0,
                pending: Pending::default(),
            })?;
            Variant::Ranked(db.load::<RankedQuestion>(&ID)?.ok_or("inserted")?)
        }
        _ => {
            db.insert(&Question::new(ID))?;
            board.set_score(&ID.to_string(), 0)?;
            Variant::Separate(db.load::<Question>(&ID)?.ok_or("inserted")?, board)
        }
    };
    Ok((db, v))
}

/// Removes every key under `prefix` from each node that holds some.
fn clean(nodes: &[&str], prefix: &str) {
    for node in nodes {
        let Ok(mut conn) =
            redis::Client::open(format!("redis://{node}")).and_then(|c| c.get_connection())
        else {
            continue;
        };
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}_*"))
            .query(&mut conn)
            .unwrap_or_default();
        for key in keys {
            let _ = redis::cmd("UNLINK").arg(&key).query::<i64>(&mut conn);
        }
    }
}

pub fn run(url: &str, quick: bool) -> Result<()> {
    let nodes: Vec<&str> = url
        .strip_prefix("redis-cluster://")
        .ok_or("AUTOSHARD_REDIS_CLUSTER_URL is not a redis-cluster:// URL")?
        .split('?')
        .next()
        .unwrap_or_default()
        .split(',')
        .collect();
    let prefix = format!("bench_eb_{}", std::process::id());
    let outcome = measure(&nodes, &prefix, quick);
    clean(&nodes, &prefix);
    outcome
}

fn measure(nodes: &[&str], prefix: &str, quick: bool) -> Result<()> {
    println!("### Redis Cluster");
    println!();
    println!(
        "One op = add one vote to question 42 (10 static shards) and save, one client; \
         each variant under its own key prefix on the same cluster ({}), interleaved rounds, \
         each warmed up first.",
        nodes.join(",")
    );
    println!();
    let (rounds, ops) = if quick { (3, 200) } else { (10, 1_000) };
    let mut variants = Vec::new();
    for v in 0..3 {
        variants.push(open(nodes, prefix, v)?);
    }
    for (db, v) in &mut variants {
        v.run(db, ops / 2, &mut Samples::default())?;
    }
    let mut samples = [Samples::default(), Samples::default(), Samples::default()];
    let (mut ranked, mut separate) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut means = [0.0; 3];
        for i in 0..3 {
            let v = (i + round) % 3;
            let (db, variant) = &mut variants[v];
            means[v] = variant.run(db, ops, &mut samples[v])?;
        }
        ranked.push(means[1] / means[0]);
        separate.push(means[2] / means[0]);
    }
    // Every vote on the board: the ranked entity's total and its entry.
    let (db, _) = &variants[1];
    let total = db.load::<RankedQuestion>(&ID)?.ok_or("gone")?.votes;
    let held = Ranking::open(db, "top-questions")?.score(&ID.to_string())?;
    let expected = (ops / 2 + rounds * ops) as i64;
    if (total, held) != (expected, Some(expected)) {
        return Err(format!("ranked: total {total}, board {held:?}, expected {expected}").into());
    }
    println!("| variant | ops | mean | p50 | p99 |");
    println!("|---|---:|---:|---:|---:|");
    for ((_, v), s) in variants.iter().zip(&samples) {
        println!(
            "| {} | {} | {} | {} | {} |",
            v.name(),
            s.len(),
            us(s.mean()),
            us(s.percentile(50.0)),
            us(s.percentile(99.0))
        );
    }
    println!();
    println!(
        "**ranked ÷ plain save = {:.2}×**, save + separate `set_score` ÷ plain save = {:.2}× \
         (medians of {rounds} rounds); the ranked entity's total and board entry checked \
         afterwards.",
        median(&ranked),
        median(&separate)
    );
    println!();
    Ok(())
}

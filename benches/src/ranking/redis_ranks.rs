//! The board's rank queries next to Redis `ZREVRANK` on a sorted set of
//! the same players in the local `redis-server`, after checking that both
//! agree up to ties.

use super::{player, Result, Sizes};
use crate::stats::{median, thousands, us, Rng, Samples};
use autoshard::ranking::{Ranking, Tie};
use std::time::Instant;

pub(super) fn redis_ranks(
    client: &redis::Client,
    key: &str,
    board: &Ranking,
    scores: &[i64],
    sizes: &Sizes,
) -> Result<()> {
    let n = scores.len();
    let mut conn = client.get_connection()?;
    redis::cmd("DEL").arg(key).query::<()>(&mut conn)?;
    let start = Instant::now();
    for first in (0..n).step_by(10_000) {
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(key);
        for (i, &s) in scores.iter().enumerate().skip(first).take(10_000) {
            zadd.arg(s).arg(player(i));
        }
        zadd.query::<()>(&mut conn)?;
    }
    let loaded = start.elapsed();
    let card: u64 = redis::cmd("ZCARD").arg(key).query(&mut conn)?;
    if card != n as u64 {
        return Err(format!("Redis holds {card} members, expected {n}").into());
    }
    let mut rng = Rng::new(0xBEEF_0000_1111_2222);
    // Redis breaks ties by member name, so its rank falls among the tied.
    for _ in 0..100 {
        let i = rng.below(n as u32) as usize;
        let r: u64 = redis::cmd("ZREVRANK")
            .arg(key)
            .arg(player(i))
            .query(&mut conn)?;
        let standard = board.rank(&player(i), Tie::Standard)?.ok_or("missing")?;
        let tied = scores.iter().filter(|&&s| s == scores[i]).count() as u64;
        if !(standard..standard + tied).contains(&(r + 1)) {
            return Err(format!("ZREVRANK {r} + 1 outside {standard}..{}", standard + tied).into());
        }
    }
    let labels = [
        "`board.rank(player, Tie::Ordinal)`",
        "`board.rank(player, Tie::Standard)`",
        "Redis `ZREVRANK key player` round trip",
    ];
    let mut samples: Vec<Samples> = labels.iter().map(|_| Samples::default()).collect();
    let mut means = vec![Vec::new(); labels.len()];
    for round in 0..=sizes.rounds {
        eprintln!("ranking: Redis ranks, round {round}");
        for i in 0..labels.len() {
            let v = (i + round) % labels.len();
            let mut s = Samples::default();
            let start = Instant::now();
            for _ in 0..sizes.queries {
                let who = player(rng.below(n as u32) as usize);
                let t = Instant::now();
                match v {
                    0 => drop(board.rank(&who, Tie::Ordinal)?.ok_or("missing")?),
                    1 => drop(board.rank(&who, Tie::Standard)?.ok_or("missing")?),
                    _ => drop(
                        redis::cmd("ZREVRANK")
                            .arg(key)
                            .arg(&who)
                            .query::<Option<u64>>(&mut conn)?
                            .ok_or("missing in Redis")?,
                    ),
                }
                s.push(t.elapsed());
            }
            // Round 0 warms up.
            if round > 0 {
                means[v].push(start.elapsed().as_nanos() as f64 / sizes.queries as f64);
                samples[v].append(&mut s);
            }
        }
    }
    println!("### Rank queries next to Redis");
    println!();
    println!(
        "The same {} players `ZADD`ed into one sorted set of the local `redis-server` \
         (loaded in {:.1} s, 10,000 members per `ZADD`), queried over one connection from \
         one thread; our queries on the SQLite board. Random players, interleaved, {} \
         rounds after a warm-up round. Redis's rank was checked to fall among the \
         players tied with ours on 100 players first (it breaks ties by member name).",
        thousands(n as u64),
        loaded.as_secs_f64(),
        sizes.rounds
    );
    println!();
    println!("| query | ops | p50 | p99 | mean |");
    println!("|---|---:|---:|---:|---:|");
    for (i, label) in labels.iter().enumerate() {
        println!(
            "| {label} | {} | {} | {} | {} |",
            samples[i].len(),
            us(samples[i].percentile(50.0)),
            us(samples[i].percentile(99.0)),
            us(samples[i].mean()),
        );
    }
    let ratio = samples[2].percentile(50.0) / samples[0].percentile(50.0);
    let mean_ratios: Vec<f64> = means[2].iter().zip(&means[0]).map(|(r, o)| r / o).collect();
    println!();
    println!(
        "**`ZREVRANK` round trip ÷ our ordinal rank = {ratio:.2}× at p50** (mean, median of \
         rounds: {:.2}×): {}.",
        median(&mean_ratios),
        if ratio > 1.0 {
            "ours is faster"
        } else {
            "Redis is faster"
        }
    );
    println!();
    Ok(())
}

//! Rank queries on the board (`rank_of_score`, `rank` under each tie
//! rule) against an indexed `COUNT(*)` on a plain table of the same
//! players, interleaved in rounds, with the goals they are held to.

use super::{met, player, Result, Sizes};
use crate::stats::{median, thousands, us, Rng, Samples};
use autoshard::ranking::{Ranking, Tie};
use rusqlite::Connection;
use std::time::Instant;

#[derive(Clone, Copy)]
enum Query {
    RankOfMedian,
    Player(Tie),
    Count,
}

impl Query {
    const ALL: [Query; 5] = [
        Query::RankOfMedian,
        Query::Player(Tie::Standard),
        Query::Player(Tie::Dense),
        Query::Player(Tie::Ordinal),
        Query::Count,
    ];

    fn label(self) -> &'static str {
        match self {
            Query::RankOfMedian => "`board.rank_of_score(median)`",
            Query::Player(Tie::Standard) => "`board.rank(player, Tie::Standard)`, random players",
            Query::Player(Tie::Dense) => "`board.rank(player, Tie::Dense)`, random players",
            Query::Player(Tie::Ordinal) => "`board.rank(player, Tie::Ordinal)`, random players",
            Query::Count => "`SELECT count(*) FROM players WHERE score > median` (indexed)",
        }
    }
}

pub(super) fn rank_queries(
    board: &Ranking,
    plain: &Connection,
    median_score: i64,
    sizes: &Sizes,
) -> Result<()> {
    let n = sizes.players;
    let mut count = plain.prepare("SELECT count(*) FROM players WHERE score > ?1")?;
    let above: u64 = count.query_row([median_score], |r| r.get::<_, i64>(0))? as u64;
    let tree = board.rank_of_score(median_score)?;
    if tree != above + 1 {
        return Err(format!(
            "rank_of_score({median_score}) = {tree}, COUNT(*) says {}",
            above + 1
        )
        .into());
    }
    let mut rng = Rng::new(0xC0FF_EE00_1234_5678);
    let mut run = |query: Query, ops: usize, samples: &mut Samples| -> Result<f64> {
        let start = Instant::now();
        for _ in 0..ops {
            let who = player(rng.below(n as u32) as usize);
            let t = Instant::now();
            match query {
                Query::RankOfMedian => {
                    std::hint::black_box(board.rank_of_score(median_score)?);
                }
                Query::Player(tie) => {
                    board.rank(&who, tie)?.ok_or("a loaded player is missing")?;
                }
                Query::Count => {
                    std::hint::black_box(count.query_row([median_score], |r| r.get::<_, i64>(0))?);
                }
            }
            samples.push(t.elapsed());
        }
        Ok(start.elapsed().as_nanos() as f64 / ops as f64)
    };
    let ops = |q: Query| match q {
        Query::Count => sizes.counts,
        _ => sizes.queries,
    };
    for q in Query::ALL {
        run(q, ops(q) / 4 + 1, &mut Samples::default())?;
    }
    let k = Query::ALL.len();
    let mut samples: Vec<Samples> = (0..k).map(|_| Samples::default()).collect();
    let mut means = vec![Vec::new(); k];
    for round in 0..sizes.rounds {
        eprintln!("ranking: rank queries, round {round}");
        for i in 0..k {
            let v = (i + round) % k;
            means[v].push(run(Query::ALL[v], ops(Query::ALL[v]), &mut samples[v])?);
        }
    }
    println!("### Rank queries");
    println!();
    println!(
        "One query = one call on a warm handle (a fresh read transaction each). Variants run \
         interleaved, {} rounds, order rotated; `rank_of_score(median)` was checked against \
         `1 + COUNT(*)` first ({}).",
        sizes.rounds,
        thousands(tree)
    );
    println!();
    println!("| query | ops | p50 | p99 | mean |");
    println!("|---|---:|---:|---:|---:|");
    for (i, q) in Query::ALL.iter().enumerate() {
        println!(
            "| {} | {} | {} | {} | {} |",
            q.label(),
            samples[i].len(),
            us(samples[i].percentile(50.0)),
            us(samples[i].percentile(99.0)),
            us(samples[i].mean()),
        );
    }
    let count_i = k - 1;
    let ratios: Vec<f64> = means[count_i]
        .iter()
        .zip(&means[0])
        .map(|(c, t)| c / t)
        .collect();
    let p50 = samples[0].percentile(50.0);
    let p50_ratio = samples[count_i].percentile(50.0) / p50;
    println!();
    println!(
        "**`COUNT(*)` ÷ `rank_of_score` = {:.0}× at p50** (mean, median of rounds: {:.0}×); \
         goal ≥ 400×: **{}**. Rank p50 {}; goal ≤ 20 µs: **{}**.",
        p50_ratio,
        median(&ratios),
        met(p50_ratio >= 400.0),
        us(p50),
        met(p50 <= 20_000.0),
    );
    println!();
    Ok(())
}

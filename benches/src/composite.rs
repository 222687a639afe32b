//! Composite scores (issue 10, item 3): what seed 001's trophies / retries
//! / time tuple costs next to one score, on one SQLite file. The tuple is
//! one encoded integer over a range of 8.64 * 10^14 (depth 8 at branching
//! 100) where trophies alone are 0..10,000 (depth 2), so the board of one
//! score over the encoded range is measured too: it separates what the
//! deeper tree costs from what encoding and decoding cost.

use crate::stats::{thousands, us, Rng, Samples};
use autoshard::ranking::Update;
use autoshard::ranking::{Dim, Ranking, RankingConfig};
use autoshard::{Sqlite, Synchronous};
use std::error::Error;
use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const LOAD_BATCH: usize = 10_000;
const TROPHIES: u32 = 10_000;
const RETRIES: u32 = 1_000;
const MILLIS: u32 = 86_400_000;

/// The three boards: trophies only, one score over the encoded range, and
/// the tuple.
struct Boards {
    narrow: Ranking,
    wide: Ranking,
    tuple: Ranking,
}

#[derive(Clone, Copy)]
enum Op {
    SetNarrow,
    SetWide,
    SetDims,
    RankNarrow,
    RankWide,
    RankDims,
    TopWide,
    TopDims,
}

impl Op {
    const ALL: [Op; 8] = [
        Op::SetNarrow,
        Op::SetWide,
        Op::SetDims,
        Op::RankNarrow,
        Op::RankWide,
        Op::RankDims,
        Op::TopWide,
        Op::TopDims,
    ];

    fn label(self) -> &'static str {
        match self {
            Op::SetNarrow => "`set_score`, trophies only (0..10,000, depth 2)",
            Op::SetWide => "`set_score`, one score over the encoded range (depth 8)",
            Op::SetDims => "`write(Update::dims)`, trophies / retries / time (depth 8)",
            Op::RankNarrow => "`rank_of_score`, trophies only",
            Op::RankWide => "`rank_of_score`, one score over the encoded range",
            Op::RankDims => "`rank_of_dims`, the tuple",
            Op::TopWide => "`top(25)`, one score over the encoded range",
            Op::TopDims => "`top(25)` + `decode` of each entry, the tuple",
        }
    }
}

fn player(n: u32) -> String {
    format!("player-{n:07}")
}

fn tuple(rng: &mut Rng) -> [i64; 3] {
    [TROPHIES, RETRIES, MILLIS].map(|w| i64::from(rng.below(w)))
}

fn load(boards: &Boards, players: u32, rng: &mut Rng) -> Result<()> {
    let names: Vec<String> = (0..players).map(player).collect();
    for chunk in names.chunks(LOAD_BATCH) {
        let tuples: Vec<(&str, [i64; 3])> =
            chunk.iter().map(|n| (n.as_str(), tuple(rng))).collect();
        let narrow: Vec<(&str, i64)> = tuples.iter().map(|(n, t)| (*n, t[0])).collect();
        let wide: Vec<(&str, i64)> = tuples
            .iter()
            .map(|(n, t)| Ok((*n, boards.tuple.encode(t)?)))
            .collect::<autoshard::Result<_>>()?;
        boards.narrow.set_scores(&narrow)?;
        boards.wide.set_scores(&wide)?;
        boards.tuple.set_dims_batch(&tuples)?;
    }
    Ok(())
}

fn one(boards: &Boards, op: Op, who: &str, rng: &mut Rng) -> Result<()> {
    let t = tuple(rng);
    match op {
        Op::SetNarrow => boards.narrow.set_score(who, t[0])?,
        Op::SetWide => boards.wide.set_score(who, boards.tuple.encode(&t)?)?,
        Op::SetDims => boards.tuple.write(Update::dims(who, &t))?,
        Op::RankNarrow => drop(black_box(boards.narrow.rank_of_score(t[0])?)),
        Op::RankWide => drop(black_box(
            boards.wide.rank_of_score(boards.tuple.encode(&t)?)?,
        )),
        Op::RankDims => drop(black_box(boards.tuple.rank_of_dims(&t)?)),
        Op::TopWide => drop(black_box(boards.wide.top(25)?)),
        Op::TopDims => {
            for e in boards.tuple.top(25)? {
                black_box(boards.tuple.decode(e.score)?);
            }
        }
    }
    Ok(())
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let (players, rounds, ops) = if quick {
        (20_000, 2, 300)
    } else {
        (100_000, 5, 1_000)
    };
    let db = Sqlite::builder(dir.join("composite.db"))
        .synchronous(Synchronous::Normal)
        .open()?;
    let dims = [
        Dim::higher(0..i64::from(TROPHIES)),
        Dim::lower(0..i64::from(RETRIES)),
        Dim::lower(0..i64::from(MILLIS)),
    ];
    let tuple = Ranking::create(&db, "tuple", RankingConfig::dimensions(dims).node_shards(4))?;
    let wide_range = tuple.config().range();
    let boards = Boards {
        narrow: Ranking::create(
            &db,
            "narrow",
            RankingConfig::new(0..i64::from(TROPHIES)).node_shards(4),
        )?,
        wide: Ranking::create(
            &db,
            "wide",
            RankingConfig::new(wide_range.clone()).node_shards(4),
        )?,
        tuple,
    };
    let mut rng = Rng::new(0x5EED_0003);
    let started = Instant::now();
    load(&boards, players, &mut rng)?;
    eprintln!(
        "composite: loaded 3 x {players} players in {:?}",
        started.elapsed()
    );

    let mut samples: Vec<Samples> = Op::ALL.iter().map(|_| Samples::default()).collect();
    for round in 0..rounds {
        eprintln!("composite: round {round}");
        for i in 0..Op::ALL.len() {
            let v = (i + round) % Op::ALL.len();
            for _ in 0..ops {
                let who = player(rng.below(players));
                let t = Instant::now();
                one(&boards, Op::ALL[v], &who, &mut rng)?;
                samples[v].push(t.elapsed());
            }
        }
    }
    println!(
        "### Composite scores ({} players)",
        thousands(players.into())
    );
    println!();
    println!(
        "Three boards in one SQLite file (`synchronous = NORMAL`, 4 shards, branching 100), {} \
         players each: trophies only (0..10,000); seed 001's tuple (trophies higher-better \
         0..10,000, retries lower-better 0..1,000, time lower-better 0..86,400,000 ms), encoded \
         over {wide_range:?}; and one score over that same range. Random players and tuples; \
         variants interleaved, {rounds} rounds of {ops} calls each, order rotated.",
        thousands(players.into())
    );
    println!();
    println!("| call | ops | p50 | p99 | mean |");
    println!("|---|---:|---:|---:|---:|");
    for (op, s) in Op::ALL.iter().zip(&samples) {
        println!(
            "| {} | {} | {} | {} | {} |",
            op.label(),
            s.len(),
            us(s.percentile(50.0)),
            us(s.percentile(99.0)),
            us(s.mean()),
        );
    }
    let ratio = |a: usize, b: usize| samples[a].percentile(50.0) / samples[b].percentile(50.0);
    println!();
    println!(
        "At p50: `write(Update::dims)` ÷ `set_score` over the same range = {:.2}× and ÷ trophies only = \
         {:.2}×; `rank_of_dims` ÷ `rank_of_score` over the same range = {:.2}× and ÷ trophies \
         only = {:.2}×; `top(25)` + decode ÷ `top(25)` = {:.2}×.",
        ratio(2, 1),
        ratio(2, 0),
        ratio(5, 4),
        ratio(5, 3),
        ratio(7, 6),
    );
    println!();
    Ok(())
}

//! Update policies and entry data (issue 10): what `submit` (a write that
//! reports old and new rank) and entry data cost next to a plain
//! `set_score` and `top`, on one SQLite file.

use crate::stats::{thousands, us, Rng, Samples};
use autoshard::ranking::Update;
use autoshard::ranking::{Policy, Ranking, RankingConfig, ScoreOrder};
use autoshard::{Sqlite, Synchronous};
use std::error::Error;
use std::path::Path;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

const RANGE: std::ops::Range<i64> = 0..1_000_000;
const LOAD_BATCH: usize = 10_000;

#[derive(Clone, Copy)]
enum Op {
    SetScore,
    Submit,
    SubmitWith,
    Top,
    TopWithData,
}

impl Op {
    const ALL: [Op; 5] = [
        Op::SetScore,
        Op::Submit,
        Op::SubmitWith,
        Op::Top,
        Op::TopWithData,
    ];

    fn label(self) -> &'static str {
        match self {
            Op::SetScore => "`set_score`, `Replace` board",
            Op::Submit => "`submit` (old/new score and rank), `Replace` board",
            Op::SubmitWith => "`submit_update` with 16 bytes of data, `Best` lower-is-better board",
            Op::Top => "`top(25)`, board without entry data",
            Op::TopWithData => "`top(25)`, board with entry data",
        }
    }
}

fn player(n: u32) -> String {
    format!("player-{n:07}")
}

fn load(board: &Ranking, players: u32, rng: &mut Rng, data: bool) -> Result<()> {
    let names: Vec<String> = (0..players).map(player).collect();
    for chunk in names.chunks(LOAD_BATCH) {
        let batch: Vec<(&str, i64)> = chunk
            .iter()
            .map(|n| (n.as_str(), i64::from(rng.below(RANGE.end as u32))))
            .collect();
        board.set_scores(&batch)?;
    }
    if data {
        // Data for one player in ten (the rest have none).
        for n in (0..players).step_by(10) {
            board.submit_update(
                Update::score(&player(n), i64::from(rng.below(1_000)))
                    .with_data(b"effort-0000000000"),
            )?;
        }
    }
    Ok(())
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    let (players, rounds, ops) = if quick {
        (20_000, 2, 300)
    } else {
        (200_000, 5, 2_000)
    };
    let db = Sqlite::builder(dir.join("policies.db"))
        .synchronous(Synchronous::Normal)
        .open()?;
    let plain = Ranking::create(&db, "plain", RankingConfig::new(RANGE).node_shards(4))?;
    let config = RankingConfig::new(RANGE)
        .node_shards(4)
        .policy(Policy::Best)
        .order(ScoreOrder::LowerIsBetter)
        .entry_data(32);
    let tagged = Ranking::create(&db, "tagged", config)?;
    let mut rng = Rng::new(0x5EED_0010);
    let started = Instant::now();
    load(&plain, players, &mut rng, false)?;
    load(&tagged, players, &mut rng, true)?;
    eprintln!(
        "policies: loaded 2 x {players} players in {:?}",
        started.elapsed()
    );

    let mut samples: Vec<Samples> = Op::ALL.iter().map(|_| Samples::default()).collect();
    for round in 0..rounds {
        eprintln!("policies: round {round}");
        for i in 0..Op::ALL.len() {
            let v = (i + round) % Op::ALL.len();
            for _ in 0..ops {
                let who = player(rng.below(players));
                let score = i64::from(rng.below(RANGE.end as u32));
                let t = Instant::now();
                match Op::ALL[v] {
                    Op::SetScore => plain.set_score(&who, score)?,
                    Op::Submit => drop(plain.submit(&who, score)?),
                    Op::SubmitWith => drop(tagged.submit_update(
                        Update::score(&who, score).with_data(b"effort-123456789"),
                    )?),
                    Op::Top => drop(std::hint::black_box(plain.top(25)?)),
                    Op::TopWithData => drop(std::hint::black_box(tagged.top(25)?)),
                }
                samples[v].push(t.elapsed());
            }
        }
    }
    println!(
        "### Policies, `submit` and entry data ({} players)",
        thousands(players.into())
    );
    println!();
    println!(
        "Two boards in one SQLite file (`synchronous = NORMAL`, 4 shards, scores 0..1,000,000), \
         {} players each, the second `Best`/lower-is-better with entry data on one player in \
         ten. Random players; variants interleaved, {rounds} rounds of {ops} calls each, order \
         rotated.",
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
        "`submit` ÷ `set_score` = {:.2}× at p50 (two tree descents for the ranks); `top(25)` \
         with entry data ÷ without = {:.2}× at p50 (one more statement).",
        ratio(1, 0),
        ratio(4, 3),
    );
    println!();
    Ok(())
}

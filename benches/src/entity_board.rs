//! What a ranked field costs a save: `vote_up(); save()` of the mapper
//! benchmark's question (one static shard delta) against the same save of
//! a question whose `votes` feed a board (`#[shard(ranked = ..)]`), which
//! also opens the board and adds the delta to it in the save's
//! transaction. Each variant has its own file; they run interleaved.
//!
//! Instruction counts, which do not depend on the machine's load:
//!
//! ```sh
//! CARGO_PROFILE_RELEASE_DEBUG=1 cargo build --release -p autoshard-benches
//! valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!   target/release/autoshard-benches entity-board --quick
//! callgrind_annotate --inclusive=yes cg.out | grep -E 'Save<.*>::vote'
//! ```

use crate::model::Question;
use crate::stats::{median, us, Samples};
use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{shard_method, Pending, Shardable, Sqlite, Store, Synchronous};
use std::error::Error;
use std::path::Path;
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const ID: u64 = 42;

/// [`Question`] with its votes ranked on the board `top-questions`.
#[derive(Shardable, Debug)]
pub struct RankedQuestion {
    #[shard(id)]
    pub id: u64,
    pub question: String,
    pub author: String,
    #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum, ranked = "top-questions")]
    pub votes: i64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum)]
    pub views: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl RankedQuestion {
    #[shard_method]
    pub fn vote_up(&mut self) {
        self.votes += 1;
    }
}

/// `Save<MODE>`: the plain save.
const PLAIN: u8 = 0;
/// The save of the ranked question.
const RANKED: u8 = 1;
/// The plain save, then `set_score` on an `Increment` board in a
/// transaction of its own: what an application writes without entity
/// boards (and which is not exactly once: a crash between the two loses
/// the board's vote, a retried `set_score` counts it twice).
const SEPARATE: u8 = 2;

/// One variant; `MODE` is a parameter so callgrind reports them apart.
struct Save<const MODE: u8> {
    db: Sqlite,
    plain: Option<Question>,
    ranked: Option<RankedQuestion>,
    board: Option<Ranking>,
}

impl<const MODE: u8> Save<MODE> {
    fn open(path: &Path) -> Result<Self> {
        let db = Sqlite::builder(path)
            .synchronous(Synchronous::Normal)
            .open()?;
        let (mut plain, mut ranked) = (None, None);
        let config = RankingConfig::new(0..1_000_000_000).policy(Policy::Increment);
        let board = Some(Ranking::create(&db, "top-questions", config)?);
        if MODE == RANKED {
            db.insert(&RankedQuestion {
                id: ID,
                question: "How do you plan to improve public education?".into(),
                author: "moderator".into(),
                votes: 0,
                views: 0,
                pending: Pending::default(),
            })?;
            ranked = db.load::<RankedQuestion>(&ID)?;
        } else {
            db.insert(&Question::new(ID))?;
            plain = db.load::<Question>(&ID)?;
            if MODE == SEPARATE {
                board
                    .as_ref()
                    .expect("created")
                    .set_score(&ID.to_string(), 0)?;
            }
        }
        Ok(Save {
            db,
            plain,
            ranked,
            board,
        })
    }

    fn name(&self) -> &'static str {
        match MODE {
            PLAIN => "`vote_up(); save()`",
            RANKED => "`vote_up(); save()`, votes ranked (board in the save's transaction)",
            _ => "`vote_up(); save()`, then `set_score(id, 1)` on the board (2 transactions)",
        }
    }

    #[inline(never)]
    fn vote(&mut self) -> Result<()> {
        match (&mut self.plain, &mut self.ranked) {
            (Some(q), _) => {
                q.vote_up();
                self.db.save(q)?;
                if MODE == SEPARATE {
                    let board = self.board.as_ref().expect("created");
                    board.set_score(&ID.to_string(), 1)?;
                }
            }
            (_, Some(q)) => {
                q.vote_up();
                self.db.save(q)?;
            }
            _ => unreachable!("one of the two is set"),
        }
        Ok(())
    }

    fn run(&mut self, ops: usize, samples: &mut Samples) -> Result<f64> {
        let start = Instant::now();
        for _ in 0..ops {
            let t = Instant::now();
            self.vote()?;
            samples.push(t.elapsed());
        }
        Ok(start.elapsed().as_nanos() as f64 / ops as f64)
    }

    /// The stored total, and for the ranked one the board's entry, which
    /// must agree.
    fn total(&self) -> Result<i64> {
        let total = match MODE {
            RANKED => self.db.load::<RankedQuestion>(&ID)?.ok_or("gone")?.votes,
            _ => self.db.load::<Question>(&ID)?.ok_or("gone")?.votes,
        };
        if MODE == PLAIN {
            return Ok(total);
        }
        let board = Ranking::open(&self.db, "top-questions")?.score(&ID.to_string())?;
        if board != Some(total) {
            return Err(format!("board {board:?} != total {total}").into());
        }
        Ok(total)
    }
}

pub fn run(dir: &Path, quick: bool) -> Result<()> {
    println!("## Entity board: what a ranked field costs a save");
    println!();
    println!(
        "One op = add one vote to question 42 (10 static shards) and save, `synchronous = \
         NORMAL`, WAL; the ranked variant also adds the vote to its board (range 0..10^9, \
         default branching and shards, one player) in the same transaction. Interleaved rounds, each variant \
         warmed up first."
    );
    println!();
    let (rounds, ops) = if quick { (5, 2_000) } else { (20, 10_000) };
    let mut plain = Save::<PLAIN>::open(&dir.join("entity-board-plain.db"))?;
    let mut ranked = Save::<RANKED>::open(&dir.join("entity-board-ranked.db"))?;
    let mut separate = Save::<SEPARATE>::open(&dir.join("entity-board-separate.db"))?;
    let warmup = ops / 2;
    plain.run(warmup, &mut Samples::default())?;
    ranked.run(warmup, &mut Samples::default())?;
    separate.run(warmup, &mut Samples::default())?;
    let mut samples = [Samples::default(), Samples::default(), Samples::default()];
    let (mut ranked_ratios, mut separate_ratios) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut means = [0.0; 3];
        for i in 0..3 {
            let v = (i + round) % 3;
            means[v] = match v {
                0 => plain.run(ops, &mut samples[0])?,
                1 => ranked.run(ops, &mut samples[1])?,
                _ => separate.run(ops, &mut samples[2])?,
            };
        }
        ranked_ratios.push(means[1] / means[0]);
        separate_ratios.push(means[2] / means[0]);
    }
    let expected = (warmup + rounds * ops) as i64;
    for total in [plain.total()?, ranked.total()?, separate.total()?] {
        if total != expected {
            return Err(format!("stored {total} votes, expected {expected}").into());
        }
    }
    println!("| variant | ops | mean | p50 | p99 |");
    println!("|---|---:|---:|---:|---:|");
    let names = [plain.name(), ranked.name(), separate.name()];
    for (name, s) in names.into_iter().zip(&samples) {
        println!(
            "| {name} | {} | {} | {} | {} |",
            s.len(),
            us(s.mean()),
            us(s.percentile(50.0)),
            us(s.percentile(99.0))
        );
    }
    println!();
    println!(
        "**ranked ÷ plain save = {:.2}×**, save + separate `set_score` ÷ plain save = {:.2}× \
         (medians of {rounds} rounds); every vote checked in the stored total and on the \
         board afterwards.",
        median(&ranked_ratios),
        median(&separate_ratios)
    );
    println!();
    match std::env::var("AUTOSHARD_REDIS_CLUSTER_URL") {
        Ok(url) => crate::entity_board_redis::run(&url, quick)?,
        Err(_) => {
            eprintln!("entity-board: AUTOSHARD_REDIS_CLUSTER_URL is unset: Redis Cluster skipped")
        }
    }
    Ok(())
}

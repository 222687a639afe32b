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
    fn vote_up(&mut self) {
        self.votes += 1;
    }
}

/// One variant; `RANKED` is a parameter so callgrind reports the two apart.
struct Save<const RANKED: bool> {
    db: Sqlite,
    plain: Option<Question>,
    ranked: Option<RankedQuestion>,
}

impl<const RANKED: bool> Save<RANKED> {
    fn open(path: &Path) -> Result<Self> {
        let db = Sqlite::builder(path)
            .synchronous(Synchronous::Normal)
            .open()?;
        let (mut plain, mut ranked) = (None, None);
        if RANKED {
            let config = RankingConfig::new(0..1_000_000_000).policy(Policy::Increment);
            Ranking::create(&db, "top-questions", config)?;
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
        }
        Ok(Save { db, plain, ranked })
    }

    fn name(&self) -> &'static str {
        match RANKED {
            false => "`vote_up(); save()`",
            true => "`vote_up(); save()`, votes ranked",
        }
    }

    #[inline(never)]
    fn vote(&mut self) -> Result<()> {
        match (&mut self.plain, &mut self.ranked) {
            (Some(q), _) => {
                q.vote_up();
                self.db.save(q)?;
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
        if !RANKED {
            return Ok(self.db.load::<Question>(&ID)?.ok_or("gone")?.votes);
        }
        let total = self.db.load::<RankedQuestion>(&ID)?.ok_or("gone")?.votes;
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
    let mut plain = Save::<false>::open(&dir.join("entity-board-plain.db"))?;
    let mut ranked = Save::<true>::open(&dir.join("entity-board-ranked.db"))?;
    let warmup = ops / 2;
    plain.run(warmup, &mut Samples::default())?;
    ranked.run(warmup, &mut Samples::default())?;
    let (mut plain_samples, mut ranked_samples) = (Samples::default(), Samples::default());
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let (p, r) = if round % 2 == 0 {
            let p = plain.run(ops, &mut plain_samples)?;
            (p, ranked.run(ops, &mut ranked_samples)?)
        } else {
            let r = ranked.run(ops, &mut ranked_samples)?;
            (plain.run(ops, &mut plain_samples)?, r)
        };
        ratios.push(r / p);
    }
    let expected = (warmup + rounds * ops) as i64;
    for total in [plain.total()?, ranked.total()?] {
        if total != expected {
            return Err(format!("stored {total} votes, expected {expected}").into());
        }
    }
    println!("| variant | ops | mean | p50 | p99 |");
    println!("|---|---:|---:|---:|---:|");
    for (name, s) in [
        (plain.name(), &plain_samples),
        (ranked.name(), &ranked_samples),
    ] {
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
        "**ranked ÷ plain save = {:.2}×** (median of {rounds} rounds); every vote checked in \
         the stored total and on the board afterwards.",
        median(&ratios)
    );
    println!();
    Ok(())
}

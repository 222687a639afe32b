//! Two leaderboards: a game's and a cycling app's.
//!
//! ```text
//! cargo run --release --example leaderboard -- [players] [database path]
//! cargo run --release --example leaderboard -- strava [riders] [database path]
//! ```
//!
//! **Game** (the default): 1,000,000 players on a file in a temporary
//! directory. The players are loaded with big `set_scores` batches
//! (progress on stderr), then producer threads `enqueue` new scores for a
//! few seconds while one worker drains the queue, and finally the
//! leaderboard answers its queries with timings.
//!
//! **Strava** (first argument `strava`; `strava.rs`): segments whose boards
//! keep each rider's best elapsed time (lower is better) with the effort
//! that set it, this month / this year / all time, overall and by age group
//! and weight class, as board families; 1,000 riders by default. It prints
//! the KOM, this month's top 10 of an age group, a rider's rank among the
//! riders they follow, and what a new personal record changes.

use autoshard::ranking::{Entry, Ranking, RankingConfig, Tie};
use autoshard::{Error, Sqlite};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod strava;

const SCORES: std::ops::Range<i64> = 0..1_000_000;
const LOAD_BATCH: usize = 20_000;
const PRODUCERS: usize = 4;
/// How long the producers send scores before the queue is flushed.
const PLAY: Duration = Duration::from_secs(3);

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("strava") {
        args.next();
        return strava::run(args);
    }
    let players: usize = match args.next() {
        Some(n) => n.replace(['_', ','], "").parse()?,
        None => 1_000_000,
    };
    // Held until the end, so the temporary database outlives the queries.
    let temp = tempfile::tempdir()?;
    let path = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| temp.path().join("leaderboard.db"));
    let started = Instant::now();

    let db = Sqlite::open(&path)?;
    let config = RankingConfig::new(SCORES)
        .branching(100)
        .node_shards(8)
        .queues(4);
    let board = match Ranking::create(&db, "season-1", config) {
        Ok(board) => board,
        Err(Error::RankingExists { .. }) => Ranking::open(&db, "season-1")?,
        Err(e) => return Err(e.into()),
    };
    println!("database: {}", path.display());

    if board.len()? < players as u64 {
        load(&board, players)?;
    } else {
        println!("{} players already on the board", board.len()?);
    }
    play(&board, players)?;
    queries(&board, players)?;
    println!("\ntotal {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn player_name(n: usize) -> String {
    format!("player-{n:07}")
}

/// Scores from a fixed generator, so runs are comparable.
fn load(board: &Ranking, players: usize) -> Result<()> {
    let mut rng = SmallRng::seed_from_u64(1);
    let start = Instant::now();
    let mut names = Vec::with_capacity(LOAD_BATCH);
    for first in (0..players).step_by(LOAD_BATCH) {
        names.clear();
        names.extend((first..players.min(first + LOAD_BATCH)).map(player_name));
        let batch: Vec<(&str, i64)> = names
            .iter()
            .map(|n| (n.as_str(), rng.random_range(SCORES)))
            .collect();
        board.set_scores(&batch)?;
        progress("players", first + batch.len(), players, start.elapsed());
    }
    eprintln!();
    println!(
        "loaded {players} players in {:.1} s ({:.0} players/s, {} per set_scores call)",
        start.elapsed().as_secs_f64(),
        players as f64 / start.elapsed().as_secs_f64(),
        LOAD_BATCH
    );
    Ok(())
}

fn progress(what: &str, done: usize, total: usize, elapsed: Duration) {
    const WIDTH: usize = 40;
    let filled = done * WIDTH / total.max(1);
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-9);
    eprint!(
        "\rloading [{}{}] {:>3}% {done}/{total} {what}, {rate:.0}/s ",
        "#".repeat(filled),
        ".".repeat(WIDTH - filled),
        done * 100 / total.max(1),
    );
    let _ = std::io::stderr().flush();
}

/// Producer threads send new scores through the queue for a few seconds;
/// one worker applies them in batches.
fn play(board: &Ranking, players: usize) -> Result<()> {
    let worker = board.worker().spawn()?;
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let updates = std::thread::scope(|s| -> Result<usize> {
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let stop = &stop;
                s.spawn(move || -> autoshard::Result<usize> {
                    let mut rng = SmallRng::seed_from_u64(100 + p as u64);
                    let mut sent = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let player = player_name(rng.random_range(..players));
                        // Returns once the update is committed to the queue.
                        board.enqueue(&player, rng.random_range(SCORES))?;
                        sent += 1;
                    }
                    Ok(sent)
                })
            })
            .collect();
        std::thread::sleep(PLAY);
        stop.store(true, Ordering::Relaxed);
        let mut sent = 0;
        for producer in producers {
            sent += producer.join().expect("producer panicked")?;
        }
        Ok(sent)
    })?;
    let acknowledged = start.elapsed();
    board.flush()?;
    let applied = start.elapsed();
    let stats = worker.stop()?;
    println!(
        "{updates} updates from {PRODUCERS} threads in {:.1} s, each durable when `enqueue` \
         returned; all applied after {:.2} s ({:.0} updates/s; {} worker transactions, \
         {:.0} updates each)",
        acknowledged.as_secs_f64(),
        applied.as_secs_f64(),
        updates as f64 / applied.as_secs_f64(),
        stats.batches,
        stats.updates as f64 / stats.batches.max(1) as f64,
    );
    Ok(())
}

/// Runs `f`, printing how long it took.
fn timed<T>(what: &str, f: impl FnOnce() -> autoshard::Result<T>) -> Result<T> {
    let start = Instant::now();
    let value = f()?;
    println!("\n{what}  [{:.1} µs]", start.elapsed().as_secs_f64() * 1e6);
    Ok(value)
}

fn print_entries(entries: &[Entry], me: Option<&str>) {
    println!(
        "  {:>8} {:>6} {:>8}  {:<15} score",
        "position", "rank", "dense", "player"
    );
    for e in entries {
        let marker = if Some(e.player.as_str()) == me {
            "  <-"
        } else {
            ""
        };
        println!(
            "  {:>8} {:>6} {:>8}  {:<15} {}{marker}",
            e.position, e.rank, e.dense, e.player, e.score
        );
    }
}

fn queries(board: &Ranking, players: usize) -> Result<()> {
    let len = timed("len()", || board.len())?;
    println!("  {len} players");
    let top = timed("top(10)", || board.top(10))?;
    print_entries(&top, None);
    let page = timed("page(150, 175): who is ranked 150 through 175?", || {
        board.page(150, 175)
    })?;
    print_entries(&page, None);

    // A player in the middle of the field, where ties are common.
    let me = player_name(players / 2);
    let score = timed(&format!("score({me:?})"), || board.score(&me))?;
    println!("  {score:?}");
    for tie in [Tie::Standard, Tie::Dense, Tie::Ordinal] {
        let rank = timed(&format!("rank({me:?}, Tie::{tie:?})"), || {
            board.rank(&me, tie)
        })?;
        println!("  {rank:?}");
    }
    if let Some(score) = score {
        let rank = timed(&format!("rank_of_score({score})"), || {
            board.rank_of_score(score)
        })?;
        println!("  {rank}: 1 + players with a higher score");
    }
    let near = timed(&format!("around({me:?}, 5): who is near me?"), || {
        board.around(&me, 5)
    })?;
    print_entries(&near, Some(&me));
    let at = timed("score_at_rank(150)", || board.score_at_rank(150))?;
    println!("  {at:?}");
    Ok(())
}

//! "Top questions by votes" from a leaderboard: `votes` is declared
//! `ranked = "top-questions"`, so every insert and save also adds its
//! delta to that board, in the same SQLite transaction. The top list is a
//! few reads of the board's tree instead of a scan of every question, and
//! it is exact: the board is checked against every loaded total.

use super::checks::load_all;
use super::format::{thousands, verdict};
use super::{Result, QUESTIONS};
use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::Sqlite;

/// The board's name, as the field declares it.
pub const BOARD: &str = "top-questions";

/// Creates the board, empty, before the first question is inserted: every
/// insert then adds the question's seeded votes to it.
pub fn create(db: &Sqlite) -> Result<Ranking> {
    let config = RankingConfig::new(0..1_000_000_000).policy(Policy::Increment);
    Ok(Ranking::create(db, BOARD, config)?)
}

/// Prints the board's top 4 and checks every question's entry against its
/// loaded total; whether they all agree.
pub fn show_top(db: &Sqlite) -> Result<bool> {
    let board = Ranking::open(db, BOARD)?;
    println!();
    println!("Top questions from the {BOARD:?} board (fed by every save, in its transaction)");
    for entry in board.top(4)? {
        let (author, text, _) = QUESTIONS[entry.player.parse::<usize>()? - 1];
        println!(
            "  {:>7} votes  #{:<2} {text} ({author})  rank {}",
            thousands(entry.score as u64),
            entry.player,
            entry.rank
        );
    }
    let questions = load_all(db)?;
    let mut ok = board.len()? == questions.len() as u64;
    for q in &questions {
        ok &= board.score(&q.id.to_string())? == Some(q.votes);
    }
    ok &= board.check_integrity().is_ok();
    println!(
        "  board == loaded totals for all {} questions  {}",
        questions.len(),
        verdict(ok)
    );
    Ok(ok)
}

//! The AutoShard paper's scenario: a Google Moderator style voting tool on
//! one SQLite file.
//!
//! Sixteen questions, a crowd of voters (threads, each with its own `Sqlite`
//! handle, as separate application servers would have), and one very
//! popular question. Every request loads a question, counts a view, votes it
//! up and saves: one transaction that folds the vote into one of 10 static
//! shard rows and appends one dynamic shard row for the view. A compactor
//! runs in the background all along (`db.compactor::<Question>()`), folding
//! the view rows as they pile up while holding the writer for at most a
//! quarter of the time. Afterwards the totals are checked exactly, the top
//! questions are found with one query (`db.query::<Question>()`, votes
//! summed over their shards in SQL) and again from the "top-questions"
//! leaderboard that every save feeds in its own transaction
//! (`#[shard(ranked = ..)]`, checked against every total), the shard rows
//! are shown, and the compactor's work is checked too: it catches up, and
//! it merged exactly one row per acknowledged save.
//!
//! `run` below tells the story in that order. The voters are in
//! `voters.rs`; the checks of what they left in `checks.rs` (totals, the
//! query, shard rows), `board.rs` (the leaderboard) and `compaction.rs`;
//! the command line in `options.rs`.
//!
//! ```text
//! cargo run --release --example voting
//! cargo run --release --example voting -- --voters 16 --seconds 5 --db moderator.db
//! cargo run --release --example voting -- --help
//! ```

use autoshard::{shard_fold, shard_method, Pending, Shardable, Sqlite, Store};
use checks::{check_totals, show_shards, show_top_questions};
use compaction::background_compaction;
use format::thousands;
use options::{parse_args, Options};
use std::error::Error;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use voters::vote;

type Result<T, E = Box<dyn Error + Send + Sync>> = std::result::Result<T, E>;

mod board;
mod checks;
mod compaction;
mod format;
mod options;
mod voters;

#[derive(Shardable, Debug)]
struct Question {
    #[shard(id)]
    id: u64,
    question: String,
    author: String,
    /// Static property sharding: every save folds its delta into one of
    /// ten shard rows picked at random. The total also feeds the
    /// "top-questions" leaderboard (`board.rs`).
    #[shard(neutral = 0, shards = 10, ranked = "top-questions")]
    votes: i64,
    /// Dynamic property sharding: every save appends a row, and the
    /// compaction job folds them later.
    #[shard(neutral = 0)]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    #[shard_method]
    fn vote_up(&mut self) {
        self.votes += 1;
    }

    #[shard_method]
    fn view(&mut self) {
        self.views += 1;
    }

    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }

    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
}

/// (author, question, votes it already has): question 1 is the hot one.
#[rustfmt::skip]
const QUESTIONS: [(&str, &str, i64); 16] = [
    ("Phil R",   "How do you plan to improve public education?",                       76),
    ("Maria G",  "What will you do to make health care affordable for families?",      41),
    ("Dan K",    "How will you bring troops home safely and responsibly?",             38),
    ("Aisha M",  "What is your plan to reduce our dependence on foreign oil?",         35),
    ("Tom B",    "Will you support a balanced budget amendment?",                      22),
    ("Lena S",   "How will you protect Social Security for the next generation?",      30),
    ("Jorge P",  "What would you do about the rising cost of college tuition?",        27),
    ("Kim T",    "How will you create jobs in manufacturing towns?",                   25),
    ("Sam W",    "What is your position on net neutrality?",                           19),
    ("Priya N",  "How will you address climate change without hurting the economy?",   33),
    ("Greg L",   "Would you reform the tax code, and how?",                            18),
    ("Hannah F", "What will you do about the mortgage crisis?",                        29),
    ("Omar Z",   "How do you plan to fix our immigration system?",                     24),
    ("Beth C",   "Will you make government data open to the public?",                  12),
    ("Victor D", "How will you support veterans when they come home?",                 21),
    ("Yuki A",   "What is your plan for broadband in rural areas?",                     9),
];

const HOT: u64 = 1;
const HOT_SHARDS: u32 = 10;

fn main() -> ExitCode {
    let outcome = parse_args().and_then(|options| run(&options));
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Returns whether every check passed.
fn run(options: &Options) -> Result<bool> {
    // Kept alive until the end of `run`: the temporary database dies with it.
    let temp = tempfile::tempdir()?;
    let path = match &options.db {
        Some(path) => {
            remove_database(path)?;
            path.clone()
        }
        None => temp.path().join("moderator.db"),
    };

    println!("autoshard voting demo: the AutoShard paper's Google Moderator scenario");
    println!();
    let kept = if options.db.is_some() {
        "kept"
    } else {
        "temporary, removed at exit; --db PATH keeps it"
    };
    println!("  database   {} ({kept})", path.display());
    let synchronous = format!("{:?}", options.synchronous).to_uppercase();
    println!("             WAL, synchronous = {synchronous}");
    println!("  questions  16; votes: static sharding, shards = 10; views: dynamic sharding");
    let until = match options.votes {
        Some(n) => format!("until {} votes are acknowledged", thousands(n)),
        None => format!("for {} s", options.seconds),
    };
    println!(
        "  voters     {} threads, one Sqlite handle each, {until}; {:.0}% of votes on question {HOT}",
        options.voters,
        options.hot * 100.0
    );
    println!();

    let db = Sqlite::builder(&path)
        .synchronous(options.synchronous)
        .open()?;
    board::create(&db)?;
    for (i, (author, text, votes)) in QUESTIONS.iter().enumerate() {
        db.insert(&Question {
            id: i as u64 + 1,
            question: (*text).into(),
            author: (*author).into(),
            votes: *votes,
            views: 0,
            pending: Pending::default(),
        })?;
    }

    // The compaction job, in the background for the whole run, on a handle
    // of its own: a pass every 200 ms, transactions of about 1,000 rows, and
    // never more than a quarter of the time holding the file's write lock.
    let compactor = Sqlite::builder(&path)
        .synchronous(options.synchronous)
        .open()?
        .compactor::<Question>()
        .interval(Duration::from_millis(200))
        .batch_rows(1_000)
        .max_writer_share(0.25)
        .spawn()?;
    println!(
        "  compactor  in the background: a pass every 200 ms, batches of 1,000 rows, \
         at most 25% of the time holding the writer"
    );
    println!();

    let tally = vote(&path, options, &compactor)?;
    let checks_before = check_totals(
        &db,
        &tally,
        "Total check (every question loaded through the mapper)",
    )?;
    show_top_questions(&db)?;
    let board_ok = board::show_top(&db)?;
    let shards_ok = show_shards(&db, &path)? && board_ok;
    let checks_after = background_compaction(&db, &path, compactor, &tally)?;

    println!();
    let all_ok = checks_before && shards_ok && checks_after;
    if all_ok {
        println!("All checks passed: every acknowledged vote and view was counted exactly once.");
    } else {
        println!("MISMATCH: the stored totals disagree with the acknowledged saves.");
    }
    Ok(all_ok)
}

fn remove_database(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}

// `cargo test` runs this (see `autoshard::testing`).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_obeys_the_fold_laws() {
        let laws = autoshard::testing::laws::<Question>()
            .values("votes", -1_000_000i64..1_000_000)
            .values("views", 0i64..1_000_000);
        laws.check_folds();
        let q = Question {
            id: 1,
            question: QUESTIONS[0].1.into(),
            author: QUESTIONS[0].0.into(),
            votes: 0,
            views: 0,
            pending: Pending::default(),
        };
        laws.check_shard_method(&q, Question::vote_up);
        laws.check_shard_method(&q, Question::view);
    }
}

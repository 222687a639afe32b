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
//! (`#[shard(ranked = ..)]`, `voting/board.rs`, checked against every
//! total), the shard rows are shown, and the
//! compactor's work is checked too: it catches up, and it merged exactly
//! one row per acknowledged save.
//!
//! ```text
//! cargo run --release --example voting
//! cargo run --release --example voting -- --voters 16 --seconds 5 --db moderator.db
//! cargo run --release --example voting -- --help
//! ```

use autoshard::{
    shard_fold, shard_method, CompactorHandle, Pending, Shardable, Sqlite, Store, Synchronous,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::error::Error;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

type Result<T, E = Box<dyn Error + Send + Sync>> = std::result::Result<T, E>;

#[path = "voting/board.rs"]
mod board;

#[derive(Shardable, Debug)]
struct Question {
    #[shard(id)]
    id: u64,
    question: String,
    author: String,
    /// Static property sharding: every save folds its delta into one of
    /// ten shard rows picked at random. The total also feeds the
    /// "top-questions" leaderboard (`voting/board.rs`).
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

struct Options {
    voters: usize,
    seconds: f64,
    votes: Option<u64>,
    hot: f64,
    db: Option<PathBuf>,
    synchronous: Synchronous,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            voters: 8,
            seconds: 10.0,
            votes: None,
            hot: 0.5,
            db: None,
            synchronous: Synchronous::Full,
        }
    }
}

const USAGE: &str = "\
usage: cargo run --release --example voting -- [options]

  --voters N      voter threads, each with its own Sqlite handle (default 8)
  --seconds S     how long to vote (default 10)
  --votes N       stop after N acknowledged votes instead
  --hot P         share of votes that go to question 1, 0 to 1 (default 0.5)
  --db PATH       database file to use and keep (default: a temporary file)
  --sync MODE     PRAGMA synchronous: full (default), normal or off";

fn parse_args() -> Result<Options> {
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n\n{USAGE}"))?;
        match flag.as_str() {
            "--voters" => options.voters = value.parse::<usize>()?.max(1),
            "--seconds" => options.seconds = value.parse()?,
            "--votes" => options.votes = Some(value.parse()?),
            "--hot" => options.hot = value.parse::<f64>()?.clamp(0.0, 1.0),
            "--db" => options.db = Some(value.into()),
            "--sync" => {
                options.synchronous = match value.as_str() {
                    "full" => Synchronous::Full,
                    "normal" => Synchronous::Normal,
                    "off" => Synchronous::Off,
                    _ => {
                        return Err(
                            format!("--sync expects full, normal or off, not {value:?}").into()
                        )
                    }
                }
            }
            _ => return Err(format!("unknown option {flag}\n\n{USAGE}").into()),
        }
    }
    Ok(options)
}

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
        .spawn();
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

/// What the voters saw acknowledged.
#[derive(Default)]
struct Tally {
    /// Acknowledged saves per question (index 0 is question 1); each one
    /// carried one vote and one view.
    per_question: [u64; 16],
    /// Save latencies, sorted after the run.
    latencies: Vec<Duration>,
    /// Saves whose transaction the store retried internally.
    retried_inside: u64,
    /// `Busy` errors the voters retried themselves.
    retried_by_caller: u64,
    elapsed: Duration,
}

impl Tally {
    fn total(&self) -> u64 {
        self.per_question.iter().sum()
    }

    fn merge(&mut self, other: Tally) {
        for (mine, theirs) in self.per_question.iter_mut().zip(other.per_question) {
            *mine += theirs;
        }
        self.latencies.extend(other.latencies);
        self.retried_inside += other.retried_inside;
        self.retried_by_caller += other.retried_by_caller;
    }

    fn percentile(&self, p: f64) -> Duration {
        let last = self.latencies.len().saturating_sub(1);
        let index = ((last as f64) * p).round() as usize;
        self.latencies.get(index).copied().unwrap_or_default()
    }
}

fn vote(path: &Path, options: &Options, compactor: &CompactorHandle) -> Result<Tally> {
    let stop = AtomicBool::new(false);
    let acknowledged = AtomicU64::new(0);
    // Votes not yet claimed by a voter, when the run is bounded by a count.
    let budget = AtomicU64::new(options.votes.unwrap_or(u64::MAX));
    let live = std::io::stdout().is_terminal();
    let start = Instant::now();
    let mut tally = thread::scope(|scope| -> Result<Tally> {
        let voters: Vec<_> = (0..options.voters)
            .map(|seed| {
                let (stop, acknowledged, budget) = (&stop, &acknowledged, &budget);
                scope.spawn(move || voter(path, options, seed as u64, stop, acknowledged, budget))
            })
            .collect();
        let deadline = options
            .votes
            .is_none()
            .then(|| Duration::from_secs_f64(options.seconds));
        while !voters.iter().all(|v| v.is_finished()) {
            let elapsed = start.elapsed();
            if deadline.is_some_and(|d| elapsed >= d) {
                stop.store(true, Ordering::Relaxed);
            }
            if live {
                let done = acknowledged.load(Ordering::Relaxed);
                let fraction = match (deadline, options.votes) {
                    (Some(d), _) => elapsed.as_secs_f64() / d.as_secs_f64(),
                    (None, Some(n)) => done as f64 / n.max(1) as f64,
                    (None, None) => 0.0,
                };
                print!(
                    "\r  voting     {} {:>8} votes  {:>7} votes/s  {:>8} view rows compacted ",
                    bar(fraction, 24),
                    thousands(done),
                    thousands((done as f64 / elapsed.as_secs_f64().max(1e-3)).round() as u64),
                    thousands(compactor.stats().rows_merged),
                );
                std::io::stdout().flush()?;
            }
            thread::sleep(Duration::from_millis(100));
        }
        if live {
            print!("\r{:110}\r", "");
        }
        let mut total = Tally::default();
        for voter in voters {
            total.merge(voter.join().expect("a voter thread panicked")?);
        }
        Ok(total)
    })?;
    tally.elapsed = start.elapsed();
    tally.latencies.sort_unstable();

    let votes = tally.total();
    let seconds = tally.elapsed.as_secs_f64();
    println!(
        "Voting: {} votes acknowledged in {seconds:.1} s = {} votes/s",
        thousands(votes),
        thousands((votes as f64 / seconds).round() as u64)
    );
    println!(
        "  save latency  p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(tally.percentile(0.50)),
        ms(tally.percentile(0.99)),
        ms(tally.latencies.last().copied().unwrap_or_default()),
    );
    println!(
        "  contention    {} saves retried inside the store, {} Busy errors retried by voters",
        thousands(tally.retried_inside),
        thousands(tally.retried_by_caller)
    );
    Ok(tally)
}

fn voter(
    path: &Path,
    options: &Options,
    seed: u64,
    stop: &AtomicBool,
    acknowledged: &AtomicU64,
    budget: &AtomicU64,
) -> Result<Tally> {
    let db = Sqlite::builder(path)
        .synchronous(options.synchronous)
        .open()?;
    let mut rng = SmallRng::seed_from_u64(0x5eed ^ seed);
    let mut tally = Tally::default();
    while !stop.load(Ordering::Relaxed) {
        let claimed =
            budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if claimed.is_err() {
            break;
        }
        let id = if rng.random::<f64>() < options.hot {
            HOT
        } else {
            rng.random_range(2..=16)
        };
        let started = Instant::now();
        let mut question: Question = db.load(&id)?.ok_or("a seeded question is missing")?;
        question.view();
        question.vote_up();
        // A failed save keeps its pending deltas, so saving the same object
        // again is the whole retry protocol.
        let saved = loop {
            match db.save(&mut question) {
                Ok(saved) => break saved,
                Err(e) if e.is_retryable() => tally.retried_by_caller += 1,
                Err(e) => return Err(e.into()),
            }
        };
        tally.latencies.push(started.elapsed());
        tally.retried_inside += u64::from(saved.attempts > 1);
        tally.per_question[id as usize - 1] += 1;
        acknowledged.fetch_add(1, Ordering::Relaxed);
    }
    Ok(tally)
}

fn load_all(db: &Sqlite) -> Result<Vec<Question>> {
    (1..=16)
        .map(|id| {
            Ok(db
                .load::<Question>(&id)?
                .ok_or("a seeded question is missing")?)
        })
        .collect()
}

/// Loaded votes minus the seeded ones, and loaded views, against the saves
/// the voters saw acknowledged: per question and in total, exactly.
fn check_totals(db: &Sqlite, tally: &Tally, title: &str) -> Result<bool> {
    let questions = load_all(db)?;
    println!();
    println!("{title}");
    let (mut votes_ok, mut views_ok) = (true, true);
    for (q, acked) in questions.iter().zip(tally.per_question) {
        let new_votes = q.votes - QUESTIONS[q.id as usize - 1].2;
        votes_ok &= new_votes == acked as i64;
        views_ok &= q.views == acked as i64;
        if new_votes != acked as i64 || q.views != acked as i64 {
            println!(
                "  question {}: {new_votes} new votes and {} views stored, {acked} acknowledged  MISMATCH",
                q.id, q.views
            );
        }
    }
    let seeded: i64 = QUESTIONS.iter().map(|q| q.2).sum();
    let stored: i64 = questions.iter().map(|q| q.votes).sum();
    let views: i64 = questions.iter().map(|q| q.views).sum();
    let acked = tally.total() as i64;
    votes_ok &= stored - seeded == acked;
    views_ok &= views == acked;
    println!(
        "  votes  {} stored - {} seeded = {} = {} acknowledged  {}",
        thousands(stored as u64),
        thousands(seeded as u64),
        thousands((stored - seeded) as u64),
        thousands(acked as u64),
        verdict(votes_ok)
    );
    println!(
        "  views  {} stored = {} acknowledged  {}",
        thousands(views as u64),
        thousands(acked as u64),
        verdict(views_ok)
    );
    Ok(votes_ok && views_ok)
}

/// "Top questions by votes" as one query: SQLite sums each question's ten
/// vote shards in SQL, in one snapshot, and returns the loaded entities.
fn show_top_questions(db: &Sqlite) -> Result<()> {
    let top = db
        .query::<Question>()
        .filter(|q| q.votes.ge(50))
        .order_by(|q| q.votes.desc())
        .limit(4)
        .run()?;
    println!();
    println!("Top questions (db.query: votes >= 50, most voted first, limit 4)");
    for q in &top {
        println!(
            "  {:>7} votes  #{:<2} {} ({})",
            thousands(q.votes as u64),
            q.id,
            q.question,
            q.author
        );
    }
    // The same answer the long way: load all sixteen and sort in Rust.
    let mut all = load_all(db)?;
    all.retain(|q| q.votes >= 50);
    all.sort_by_key(|q| (std::cmp::Reverse(q.votes), q.id));
    let ids = |qs: &[Question]| qs.iter().map(|q| q.id).collect::<Vec<_>>();
    if ids(&top) != ids(&all[..all.len().min(4)]) {
        return Err("the query disagrees with loading every question".into());
    }
    Ok(())
}

/// The shard rows themselves, read with plain SQL from the tables that
/// `docs/design.md` describes. Returns whether they add up to what `load`
/// folded.
fn show_shards(db: &Sqlite, path: &Path) -> Result<bool> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let shards: Vec<(i64, i64)> = conn
        .prepare(
            "SELECT shard, value FROM as_shard_question \
             WHERE entity = ?1 AND field = 'votes' ORDER BY shard",
        )?
        .query_map([HOT], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let seeded = QUESTIONS[HOT as usize - 1].2;
    let widest = shards.iter().map(|s| s.1).max().unwrap_or(1).max(1);
    println!();
    println!(
        "Shard spread of question {HOT}'s votes (static, shards = {HOT_SHARDS}; shard 0 started with the {seeded} seeded votes)"
    );
    for (shard, value) in &shards {
        let width = (*value as f64 / widest as f64 * 40.0).round() as usize;
        println!(
            "  shard {shard:>2}  {:>7}  {}",
            thousands(*value as u64),
            "█".repeat(width)
        );
    }
    let sum: i64 = shards.iter().map(|s| s.1).sum();
    let loaded = db
        .load::<Question>(&HOT)?
        .ok_or("a seeded question is missing")?
        .votes;
    let rows = db.shard_count::<Question>(&HOT, "votes")?;
    let ok = sum == loaded && rows == u64::from(HOT_SHARDS);
    println!(
        "  {rows} rows, summing to {} = {} votes loaded  {}",
        thousands(sum as u64),
        thousands(loaded as u64),
        verdict(ok)
    );
    Ok(ok)
}

fn count_rows(conn: &rusqlite::Connection, field: &str) -> Result<u64> {
    let n: i64 = conn.query_row(
        "SELECT count(*) FROM as_shard_question WHERE field = ?1",
        [field],
        |row| row.get(0),
    )?;
    Ok(n as u64)
}

/// The compactor ran alongside the voters: lets it catch up with the rows
/// they left, stops it, and checks its work: every question down to one
/// `views` row, one row merged per acknowledged save (each appended one),
/// and no total moved.
fn background_compaction(
    db: &Sqlite,
    path: &Path,
    compactor: CompactorHandle,
    tally: &Tally,
) -> Result<bool> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let during = compactor.stats();
    // What an operator sees: the store's own count of rows waiting for
    // compaction (checked against the raw rows; the compactor is still
    // running, so they are read in that order and may only shrink).
    let stats = db.stats::<Question>()?;
    let pending = stats.field("views").map_or(0, |f| f.pending);
    let raw_after = count_rows(&conn, "views")?.saturating_sub(16);
    let stats_ok = raw_after <= pending && stats.field("votes").is_some_and(|f| f.pending == 0);
    println!();
    println!("Background compaction (dynamic shards: one views row appended per save)");
    println!(
        "  during the run   {} passes, {} rows merged",
        thousands(during.passes),
        thousands(during.rows_merged),
    );
    // How far the compactor lags: the oldest waiting row's age.
    let oldest = match stats.oldest_pending() {
        Some(age) => format!("oldest {:.1} s", age.as_secs_f64()),
        None => "none waiting".to_owned(),
    };
    println!(
        "  db.stats()       {} questions; votes {} rows, {} pending; views {} rows, {} pending, \
         {oldest}  {}",
        stats.entities,
        thousands(stats.field("votes").map_or(0, |f| f.rows)),
        thousands(stats.field("votes").map_or(0, |f| f.pending)),
        thousands(stats.field("views").map_or(0, |f| f.rows)),
        thousands(pending),
        verdict(stats_ok)
    );
    let live = std::io::stdout().is_terminal();
    let started = Instant::now();
    loop {
        let waiting = count_rows(&conn, "views")?.saturating_sub(16);
        if live {
            print!(
                "\r  catching up      {:>8} rows waiting ",
                thousands(waiting)
            );
            std::io::stdout().flush()?;
        }
        if waiting == 0 || compactor.is_finished() {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            println!();
            println!("  the compactor did not catch up in 60 s  MISMATCH");
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    if live {
        print!("\r{:60}\r", "");
    }
    let stats = compactor.stop()?;
    println!(
        "  caught up in     {:.0} ms after voting ended",
        ms(started.elapsed())
    );
    println!(
        "  compactor        {} passes, {} batches, {} rows merged",
        thousands(stats.passes),
        thousands(stats.batches),
        thousands(stats.rows_merged)
    );
    println!(
        "  writer held      {:.1}% of {:.1} s (cap 25%): {:.0} ms in all, longest batch {:.2} ms; \
         {:.0} ms paused for the cap",
        100.0 * stats.writer_share(),
        stats.elapsed.as_secs_f64(),
        ms(stats.writer_time),
        ms(stats.longest_batch),
        ms(stats.throttled)
    );

    let mut views_rows = 0;
    let mut votes_rows = 0;
    for id in 1..=16u64 {
        views_rows += db.shard_count::<Question>(&id, "views")?;
        votes_rows += db.shard_count::<Question>(&id, "votes")?;
    }
    println!(
        "  after: views {} rows (1 per question), votes {} rows (10 per question)",
        thousands(views_rows),
        thousands(votes_rows)
    );
    let after = db.stats::<Question>()?;
    println!(
        "  db.stats()       {} rows pending compaction",
        thousands(after.pending())
    );
    let merged_ok = stats.rows_merged == tally.total()
        && views_rows == 16
        && votes_rows == 160
        && after.pending() == 0
        && stats_ok;
    println!(
        "  rows merged {} = {} views rows appended by acknowledged saves  {}",
        thousands(stats.rows_merged),
        thousands(tally.total()),
        verdict(merged_ok)
    );
    let totals_ok = check_totals(db, tally, "Total check after compaction")?;
    Ok(merged_ok && totals_ok)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "OK"
    } else {
        "MISMATCH"
    }
}

fn bar(fraction: f64, width: usize) -> String {
    let filled = ((fraction.clamp(0.0, 1.0)) * width as f64).round() as usize;
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
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

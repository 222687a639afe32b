//! Strava-like segment leaderboards (seed 002): on each segment only a
//! rider's best elapsed time counts, lower is better, and the entry keeps
//! the effort that set it; the boards are this month / this year / all time,
//! overall and by age group and by weight class. One board family per
//! segment: every effort is one submission that updates its 9 boards (3
//! windows × overall, age group, weight class) in one transaction, so the
//! boards never drift apart from each other.

use super::{progress, Result};
use autoshard::ranking::{
    Family, FamilyConfig, Period, Policy, Ranking, RankingConfig, ScoreOrder, Window,
};
use autoshard::{Sqlite, Synchronous};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const SEGMENTS: [&str; 3] = ["hawk-hill", "old-la-honda", "kings-mountain"];
const AGE_GROUPS: [&str; 5] = ["u25", "25-34", "35-44", "45-54", "55+"];
const WEIGHT_CLASSES: [&str; 3] = ["light", "medium", "heavy"];
/// Efforts per rider and segment, spread over the last `DAYS` days.
const EFFORTS: usize = 2;
const DAYS: i64 = 120;
/// How many riders a rider follows.
const FOLLOWS: usize = 150;

/// A rider's fixed traits, from their number, so every run agrees.
struct Rider {
    name: String,
    age_group: &'static str,
    weight_class: &'static str,
    /// Their typical time on a segment of 600 s for the fastest, in seconds.
    pace: i64,
}

fn rider(n: usize) -> Rider {
    let mut rng = SmallRng::seed_from_u64(n as u64);
    Rider {
        name: format!("rider-{n:05}"),
        age_group: AGE_GROUPS[rng.random_range(..AGE_GROUPS.len())],
        weight_class: WEIGHT_CLASSES[rng.random_range(..WEIGHT_CLASSES.len())],
        pace: rng.random_range(600..1_500),
    }
}

fn segment_config() -> FamilyConfig {
    let board = RankingConfig::new(1..86_400)
        .policy(Policy::Best)
        .order(ScoreOrder::LowerIsBetter)
        .entry_data(16);
    FamilyConfig::new(board)
        .window(Window::AllTime)
        .window(Window::Year)
        .window(Window::Month)
        .filter("age_group", AGE_GROUPS)
        .filter("weight_class", WEIGHT_CLASSES)
}

/// `strava [riders] [database path]`.
pub fn run(mut args: impl Iterator<Item = String>) -> Result<()> {
    let riders: usize = match args.next() {
        Some(n) => n.replace(['_', ','], "").parse()?,
        None => 1_000,
    };
    let temp = tempfile::tempdir()?;
    let path = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| temp.path().join("strava.db"));
    let started = Instant::now();
    // A demo's efforts need not survive a power cut: `NORMAL` skips the
    // fsync per submission that would make the load 2-3× slower here.
    let db = Sqlite::builder(&path)
        .synchronous(Synchronous::Normal)
        .open()?;
    println!("database: {}", path.display());
    let segments = SEGMENTS
        .iter()
        .map(|s| Family::open_or_create(&db, s, segment_config()))
        .collect::<autoshard::Result<Vec<_>>>()?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    load(&segments, riders, now)?;

    let hill = &segments[0];
    println!("\nsegment {}", hill.name());
    kom(hill)?;
    month_top(hill, "35-44")?;
    let me = rider(riders / 3);
    following(hill, &me, riders)?;
    new_record(hill, &me, now)?;
    println!("\ntotal {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Every rider rides every segment `EFFORTS` times, at random moments of
/// the last `DAYS` days; each effort is one family submission.
fn load(segments: &[Family], riders: usize, now: i64) -> Result<()> {
    let mut rng = SmallRng::seed_from_u64(2);
    let total = riders * segments.len() * EFFORTS;
    let start = Instant::now();
    let mut done = 0;
    for n in 0..riders {
        let r = rider(n);
        for (s, segment) in segments.iter().enumerate() {
            for e in 0..EFFORTS {
                let secs = r.pace + rng.random_range(0..r.pace / 5);
                let at = now - rng.random_range(0..DAYS * 86_400);
                let effort = format!("e{n}-{s}-{e}");
                segment
                    .submission(&r.name, secs)
                    .filter("age_group", r.age_group)
                    .filter("weight_class", r.weight_class)
                    .at(at)
                    .data(effort.as_bytes())
                    .submit()?;
                done += 1;
            }
        }
        if n % 50 == 49 || n + 1 == riders {
            progress("efforts", done, total, start.elapsed());
        }
    }
    eprintln!();
    println!(
        "loaded {total} efforts of {riders} riders on {} segments in {:.1} s \
         (one submission = 9 boards in one transaction)",
        segments.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn board(segment: &Family, window: Window, filter: Option<(&str, &str)>) -> Result<Ranking> {
    Ok(segment
        .board(window, Period::Current, filter)?
        .ok_or("no effort in this period yet")?)
}

fn time(secs: i64) -> String {
    format!("{}:{:02}", secs / 60, secs % 60)
}

fn effort(data: &Option<Vec<u8>>) -> String {
    data.as_deref()
        .map(|d| String::from_utf8_lossy(d).into_owned())
        .unwrap_or_default()
}

fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn kom(segment: &Family) -> Result<()> {
    let all_time = board(segment, Window::AllTime, None)?;
    if let Some(k) = all_time.top(1)?.first() {
        println!(
            "  KOM (all-time best of {} riders): {} in {} (effort {})",
            all_time.len()?,
            k.player,
            time(k.score),
            effort(&k.data)
        );
    }
    Ok(())
}

fn month_top(segment: &Family, age_group: &str) -> Result<()> {
    let month = board(segment, Window::Month, Some(("age_group", age_group)))?;
    println!(
        "\n  this month, age group {age_group} ({} riders), top 10:",
        month.len()?
    );
    for e in month.top(10)? {
        println!(
            "  {:>4}  {:<12} {:>6}  {}",
            e.rank,
            e.player,
            time(e.score),
            effort(&e.data)
        );
    }
    Ok(())
}

/// `me` follows `FOLLOWS` riders: their rank among them, from the all-time
/// board's stored times, with no board of their own.
fn following(segment: &Family, me: &Rider, riders: usize) -> Result<()> {
    let mut rng = SmallRng::seed_from_u64(3);
    let mut names: Vec<String> = (0..FOLLOWS.min(riders))
        .map(|_| rider(rng.random_range(..riders)).name)
        .collect();
    names.push(me.name.clone());
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let all_time = board(segment, Window::AllTime, None)?;
    let among = all_time.among(&names)?;
    let mine = among.iter().find(|e| e.player == me.name);
    if let Some(e) = mine {
        println!(
            "\n  {} is {} among the {} riders they follow and themself (all time, {})",
            me.name,
            ordinal(e.rank),
            among.len(),
            time(e.score)
        );
    }
    Ok(())
}

/// `me` rides the segment today, faster than ever: what changes.
fn new_record(segment: &Family, me: &Rider, now: i64) -> Result<()> {
    let all_time = board(segment, Window::AllTime, None)?;
    let Some(best) = all_time.score(&me.name)? else {
        return Ok(());
    };
    let secs = (best * 9 / 10).max(1);
    let effort = "e-today";
    let done = segment
        .submission(&me.name, secs)
        .filter("age_group", me.age_group)
        .filter("weight_class", me.weight_class)
        .at(now)
        .data(effort.as_bytes())
        .submit()?;
    println!(
        "\n  {} rides {} today in {} (was {}): new personal record",
        me.name,
        segment.name(),
        time(secs),
        time(best)
    );
    let windows = [
        (Window::AllTime, None, "all time"),
        (Window::Year, None, "this year"),
        (Window::Month, None, "this month"),
        (
            Window::Month,
            Some(("age_group", me.age_group)),
            "this month, their age group",
        ),
    ];
    for (window, filter, what) in windows {
        if let Some(s) = done.get(window, filter) {
            match s.old_rank {
                Some(old) if s.new_best => println!(
                    "    {what}: you moved from {} to {}",
                    ordinal(old),
                    ordinal(s.new_rank)
                ),
                Some(_) => println!("    {what}: still {}", ordinal(s.new_rank)),
                None => println!("    {what}: new entry at {}", ordinal(s.new_rank)),
            }
        }
    }
    Ok(())
}

//! What the store holds after the voting, read back three ways: every
//! question loaded through the mapper (against the [`Tally`]), the top
//! questions as one `db.query` (against loading them all), and the hot
//! question's raw shard rows (against what `load` folded).

use super::format::{thousands, verdict};
use super::voters::Tally;
use super::{Question, Result, HOT, HOT_SHARDS, QUESTIONS};
use autoshard::{Sqlite, Store};
use std::path::Path;

pub(super) fn load_all(db: &Sqlite) -> Result<Vec<Question>> {
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
pub(super) fn check_totals(db: &Sqlite, tally: &Tally, title: &str) -> Result<bool> {
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
pub(super) fn show_top_questions(db: &Sqlite) -> Result<()> {
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
/// `docs/design/sharding.md` describes. Returns whether they add up to what `load`
/// folded.
pub(super) fn show_shards(db: &Sqlite, path: &Path) -> Result<bool> {
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

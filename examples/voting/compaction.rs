//! The background compactor's side of the run: what `db.stats()` and the
//! compactor report, letting it catch up once the voters stop, and checking
//! that it merged exactly one `views` row per acknowledged save.

use super::checks::check_totals;
use super::format::{ms, thousands, verdict};
use super::voters::Tally;
use super::{Question, Result};
use autoshard::{CompactorHandle, Sqlite, Store};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

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
pub(super) fn background_compaction(
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

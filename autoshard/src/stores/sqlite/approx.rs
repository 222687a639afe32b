//! Approximate boards on SQLite: the snapshot pointer and bucket tables
//! (the protocol is the seam's, `seam/approx.rs`).
//!
//! - `autoshard_rank_approx (board, buckets, current, total, next)`: one
//!   row per approximate board, written with the board row by
//!   `create_board`, so a board is approximate from its first commit. A
//!   board without a row here is exact (every board made before this
//!   table existed). `current` is the published snapshot (`NULL` before
//!   the first), `next` the next number a refresh reserves.
//! - `autoshard_rank_approx_buckets (board, snapshot, i, ...)`: the rows of
//!   published and unpublished snapshots; readers only ever select the
//!   `current` one, in the transaction that read `current`.

use super::Sqlite;
use crate::error::{Error, Result};
use crate::seam::{signed, unsigned};
use crate::seam::{ApproxStore, BoardSpec, Bucket, ScoreSink, StoredSnapshot};
use rusqlite::{params, OptionalExtension, Transaction};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS autoshard_rank_approx (
    board INTEGER PRIMARY KEY,
    buckets INTEGER NOT NULL,
    exact_top INTEGER NOT NULL DEFAULT 0,
    current INTEGER,
    total INTEGER NOT NULL DEFAULT 0,
    next INTEGER NOT NULL DEFAULT 1
) STRICT;
CREATE TABLE IF NOT EXISTS autoshard_rank_approx_buckets (
    board INTEGER NOT NULL,
    snapshot INTEGER NOT NULL,
    i INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    lo INTEGER NOT NULL,
    count INTEGER NOT NULL,
    at_hi INTEGER NOT NULL,
    at_lo INTEGER NOT NULL,
    PRIMARY KEY (board, snapshot, i)
) STRICT, WITHOUT ROWID;
";

/// Makes board `board` approximate as `spec` says, in the transaction that
/// creates it.
pub(super) fn init(tx: &Transaction<'_>, board: i64, spec: &BoardSpec) -> Result<()> {
    tx.execute_batch(SCHEMA)?;
    tx.prepare_cached(
        "INSERT INTO autoshard_rank_approx (board, buckets, exact_top) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![board, spec.buckets, spec.exact_top])?;
    Ok(())
}

/// Board `board`'s `(buckets, exact top)`; buckets 0 for an exact board.
pub(super) fn mode(tx: &Transaction<'_>, board: i64) -> Result<(u32, u32)> {
    let exists = tx
        .prepare_cached(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'autoshard_rank_approx'",
        )?
        .exists([])?;
    if !exists {
        return Ok((0, 0));
    }
    let row = tx
        .prepare_cached("SELECT buckets, exact_top FROM autoshard_rank_approx WHERE board = ?1")?
        .query_row([board], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
        .optional()?;
    // Out of range becomes a count the ranking layer refuses as corrupt.
    let count = |v: i64| u32::try_from(v).unwrap_or(u32::MAX);
    Ok(row.map_or((0, 0), |(b, t)| (count(b), count(t))))
}

/// Deletes board `board`'s pointer row and snapshots, in the transaction
/// that deletes the board (a snapshot is a few thousand rows at most).
pub(super) fn purge(tx: &Transaction<'_>, board: i64) -> Result<()> {
    if mode(tx, board)?.0 > 0 {
        for table in ["autoshard_rank_approx_buckets", "autoshard_rank_approx"] {
            tx.prepare_cached(&format!("DELETE FROM {table} WHERE board = ?1"))?
                .execute([board])?;
        }
    }
    Ok(())
}

fn current(tx: &Transaction<'_>, board: i64) -> Result<Option<(i64, u64)>> {
    let row = tx
        .prepare_cached("SELECT current, total FROM autoshard_rank_approx WHERE board = ?1")?
        .query_row([board], |r| {
            Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, i64>(1)?))
        })
        .optional()?;
    match row {
        Some((Some(id), total)) => Ok(Some((id, unsigned(total, "snapshot total")?))),
        _ => Ok(None),
    }
}

impl ApproxStore for Sqlite {
    fn approx_current(&self, board: i64) -> Result<Option<i64>> {
        self.read(|tx| Ok(current(tx, board)?.map(|(id, _)| id)))
    }

    fn approx_snapshot(&self, board: i64) -> Result<Option<StoredSnapshot>> {
        self.read(|tx| {
            let Some((id, total)) = current(tx, board)? else {
                return Ok(None);
            };
            let mut stmt = tx.prepare_cached(
                "SELECT hi, lo, count, at_hi, at_lo FROM autoshard_rank_approx_buckets \
                 WHERE board = ?1 AND snapshot = ?2 ORDER BY i",
            )?;
            let mut rows = stmt.query(params![board, id])?;
            let mut buckets = Vec::new();
            while let Some(r) = rows.next()? {
                buckets.push(Bucket {
                    hi: r.get(0)?,
                    lo: r.get(1)?,
                    count: unsigned(r.get(2)?, "bucket count")?,
                    at_hi: unsigned(r.get(3)?, "bucket count at hi")?,
                    at_lo: unsigned(r.get(4)?, "bucket count at lo")?,
                });
            }
            Ok(Some(StoredSnapshot { id, total, buckets }))
        })
    }

    fn approx_scores(&self, board: i64, sink: &mut dyn ScoreSink) -> Result<()> {
        self.read(|tx| {
            let total: i64 = tx
                .prepare_cached("SELECT count(*) FROM autoshard_rank_players WHERE board = ?1")?
                .query_row([board], |r| r.get(0))?;
            sink.total(unsigned(total, "player count")?)?;
            // Runs off the ranking-order index, best first, without a sort.
            let mut stmt = tx.prepare_cached(
                "SELECT score, count(*) FROM autoshard_rank_players WHERE board = ?1 \
                 GROUP BY score ORDER BY score DESC",
            )?;
            let mut rows = stmt.query([board])?;
            while let Some(r) = rows.next()? {
                sink.run(r.get(0)?, unsigned(r.get(1)?, "run count")?)?;
            }
            Ok(())
        })
    }

    fn approx_begin(&self, board: i64) -> Result<i64> {
        let (id, _) = self.write(|tx| {
            let next: i64 = tx
                .prepare_cached(
                    "UPDATE autoshard_rank_approx SET next = next + 1 WHERE board = ?1 \
                     RETURNING next - 1",
                )?
                .query_row([board], |r| r.get(0))?;
            Ok(next)
        })?;
        Ok(id)
    }

    fn approx_put(&self, board: i64, snapshot: i64, first: u32, buckets: &[Bucket]) -> Result<()> {
        self.write(|tx| {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO autoshard_rank_approx_buckets \
                 (board, snapshot, i, hi, lo, count, at_hi, at_lo) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT (board, snapshot, i) DO UPDATE SET hi = excluded.hi, \
                 lo = excluded.lo, count = excluded.count, at_hi = excluded.at_hi, \
                 at_lo = excluded.at_lo",
            )?;
            for (i, b) in (first..).zip(buckets) {
                stmt.execute(params![
                    board,
                    snapshot,
                    i,
                    b.hi,
                    b.lo,
                    signed(b.count),
                    signed(b.at_hi),
                    signed(b.at_lo)
                ])?;
            }
            Ok(())
        })
        .map(drop)
    }

    fn approx_publish(&self, board: i64, snapshot: i64, total: u64, buckets: u32) -> Result<bool> {
        let (flipped, _) = self.write(|tx| {
            // Overtaken: a later refresh published and deleted this
            // snapshot's rows (all or some, as `approx_put` may have written
            // more since), so the count below would report corruption that
            // is not there (issue 21). Its rows are garbage now.
            if current(tx, board)?.is_some_and(|(id, _)| id > snapshot) {
                tx.prepare_cached(
                    "DELETE FROM autoshard_rank_approx_buckets WHERE board = ?1 AND snapshot = ?2",
                )?
                .execute(params![board, snapshot])?;
                return Ok(false);
            }
            let (rows, counted): (i64, i64) = tx
                .prepare_cached(
                    "SELECT count(*), coalesce(sum(count), 0) FROM autoshard_rank_approx_buckets \
                     WHERE board = ?1 AND snapshot = ?2",
                )?
                .query_row(params![board, snapshot], |r| Ok((r.get(0)?, r.get(1)?)))?;
            if rows != i64::from(buckets) || counted != signed(total) {
                return Err(Error::Corrupt {
                    kind: "ranking",
                    id: format!("board {board}"),
                    field: format!("snapshot {snapshot}"),
                    reason: format!(
                        "{rows} bucket rows counting {counted} players, not {buckets} counting {total}"
                    ),
                });
            }
            tx.prepare_cached(
                "UPDATE autoshard_rank_approx SET current = ?2, total = ?3 WHERE board = ?1",
            )?
            .execute(params![board, snapshot, signed(total)])?;
            tx.prepare_cached(
                "DELETE FROM autoshard_rank_approx_buckets WHERE board = ?1 AND snapshot < ?2",
            )?
            .execute(params![board, snapshot])?;
            Ok(true)
        })?;
        Ok(flipped)
    }

    fn approx_len(&self, board: i64) -> Result<u64> {
        self.read(|tx| {
            let n: i64 = tx
                .prepare_cached("SELECT count(*) FROM autoshard_rank_players WHERE board = ?1")?
                .query_row([board], |r| r.get(0))?;
            unsigned(n, "player count")
        })
    }

    fn approx_page(&self, board: i64, skip: u64, limit: u64) -> Result<Vec<(String, i64)>> {
        self.read(|tx| {
            let mut stmt = tx.prepare_cached(
                "SELECT player, score FROM autoshard_rank_players WHERE board = ?1 \
                 ORDER BY score DESC, arrival, player LIMIT ?3 OFFSET ?2",
            )?;
            let mut rows = stmt.query(params![board, signed(skip), signed(limit)])?;
            let mut out = Vec::new();
            while let Some(r) = rows.next()? {
                out.push((r.get(0)?, r.get(1)?));
            }
            Ok(out)
        })
    }
}

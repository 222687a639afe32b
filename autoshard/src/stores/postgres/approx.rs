//! Approximate boards on PostgreSQL: the snapshot pointer and bucket
//! tables, as on SQLite (`stores/sqlite/approx.rs` describes them; the
//! protocol is the seam's, `seam/approx.rs`).

use super::tx::Tx;
use super::Postgres;
use crate::error::{Error, Result};
use crate::seam::{signed, unsigned};
use crate::seam::{ApproxStore, BoardSpec, Bucket, ScoreSink, StoredSnapshot};

/// The statements, for one schema.
struct Sql {
    pointer: String,
    buckets: String,
    players: String,
}

impl Sql {
    fn new(db: &Postgres) -> Self {
        let schema = db.quoted_schema();
        Sql {
            pointer: format!("{schema}.autoshard_rank_approx"),
            buckets: format!("{schema}.autoshard_rank_approx_buckets"),
            players: format!("{schema}.autoshard_rank_players"),
        }
    }

    fn create(&self) -> String {
        let Sql {
            pointer, buckets, ..
        } = self;
        format!(
            "CREATE TABLE IF NOT EXISTS {pointer} (
                 board bigint PRIMARY KEY,
                 buckets integer NOT NULL,
                 exact_top integer NOT NULL DEFAULT 0,
                 current bigint,
                 total bigint NOT NULL DEFAULT 0,
                 next bigint NOT NULL DEFAULT 1
             );
             CREATE TABLE IF NOT EXISTS {buckets} (
                 board bigint NOT NULL,
                 snapshot bigint NOT NULL,
                 i integer NOT NULL,
                 hi bigint NOT NULL,
                 lo bigint NOT NULL,
                 count bigint NOT NULL,
                 at_hi bigint NOT NULL,
                 at_lo bigint NOT NULL,
                 PRIMARY KEY (board, snapshot, i)
             )"
        )
    }
}

fn exists(tx: &mut Tx<'_>, table: &str) -> Result<bool> {
    let row = tx.query_opt("SELECT to_regclass($1)::text", &[&table])?;
    Ok(row.and_then(|r| r.get::<_, Option<String>>(0)).is_some())
}

/// Makes board `board` approximate as `spec` says, in the transaction that
/// creates it.
pub(super) fn init(db: &Postgres, tx: &mut Tx<'_>, board: i64, spec: &BoardSpec) -> Result<()> {
    let sql = Sql::new(db);
    if !exists(tx, &sql.buckets)? {
        tx.batch(&format!("{}; {}", db.ddl_lock(), sql.create()))?;
    }
    let small = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    tx.execute(
        &format!(
            "INSERT INTO {} (board, buckets, exact_top) VALUES ($1, $2, $3)",
            sql.pointer
        ),
        &[&board, &small(spec.buckets), &small(spec.exact_top)],
    )?;
    Ok(())
}

/// Board `board`'s `(buckets, exact top)`; buckets 0 for an exact board.
pub(super) fn mode(db: &Postgres, tx: &mut Tx<'_>, board: i64) -> Result<(u32, u32)> {
    let sql = Sql::new(db);
    if !exists(tx, &sql.pointer)? {
        return Ok((0, 0));
    }
    let row = tx.query_opt(
        &format!(
            "SELECT buckets, exact_top FROM {} WHERE board = $1",
            sql.pointer
        ),
        &[&board],
    )?;
    // Out of range becomes a count the ranking layer refuses as corrupt.
    let count = |v: i32| u32::try_from(v).unwrap_or(u32::MAX);
    Ok(row.map_or((0, 0), |r| (count(r.get(0)), count(r.get(1)))))
}

/// Deletes board `board`'s pointer row and snapshots, in the transaction
/// that deletes the board.
pub(super) fn purge(db: &Postgres, tx: &mut Tx<'_>, board: i64) -> Result<()> {
    let sql = Sql::new(db);
    if exists(tx, &sql.pointer)? {
        for table in [&sql.buckets, &sql.pointer] {
            tx.execute(&format!("DELETE FROM {table} WHERE board = $1"), &[&board])?;
        }
    }
    Ok(())
}

fn current(tx: &mut Tx<'_>, sql: &Sql, board: i64) -> Result<Option<(i64, u64)>> {
    let row = tx.query_opt(
        &format!(
            "SELECT current, total FROM {} WHERE board = $1",
            sql.pointer
        ),
        &[&board],
    )?;
    match row.map(|r| (r.get::<_, Option<i64>>(0), r.get::<_, i64>(1))) {
        Some((Some(id), total)) => Ok(Some((id, unsigned(total, "snapshot total")?))),
        _ => Ok(None),
    }
}

impl ApproxStore for Postgres {
    fn approx_current(&self, board: i64) -> Result<Option<i64>> {
        let sql = Sql::new(self);
        self.read(|tx| Ok(current(tx, &sql, board)?.map(|(id, _)| id)))
    }

    fn approx_snapshot(&self, board: i64) -> Result<Option<StoredSnapshot>> {
        let sql = Sql::new(self);
        let select = format!(
            "SELECT hi, lo, count, at_hi, at_lo FROM {} WHERE board = $1 AND snapshot = $2 \
             ORDER BY i",
            sql.buckets
        );
        self.read_snapshot(|tx| {
            let Some((id, total)) = current(tx, &sql, board)? else {
                return Ok(None);
            };
            let mut buckets = Vec::new();
            for r in tx.query(&select, &[&board, &id])? {
                buckets.push(Bucket {
                    hi: r.get(0),
                    lo: r.get(1),
                    count: unsigned(r.get(2), "bucket count")?,
                    at_hi: unsigned(r.get(3), "bucket count at hi")?,
                    at_lo: unsigned(r.get(4), "bucket count at lo")?,
                });
            }
            Ok(Some(StoredSnapshot { id, total, buckets }))
        })
    }

    fn approx_scores(&self, board: i64, sink: &mut dyn ScoreSink) -> Result<()> {
        let sql = Sql::new(self);
        let count = format!("SELECT count(*) FROM {} WHERE board = $1", sql.players);
        // One statement per batch of runs, in one snapshot: a board of ten
        // million players never has to fit in one result.
        let runs = format!(
            "SELECT score, count(*)::bigint FROM {} WHERE board = $1 AND score < $2 \
             GROUP BY score ORDER BY score DESC LIMIT 100000",
            sql.players
        );
        self.read_snapshot(|tx| {
            let total: i64 = tx.query_one(&count, &[&board])?.get(0);
            sink.total(unsigned(total, "player count")?)?;
            // Tree scores are below the board's `max`, so below `i64::MAX`.
            let mut below = i64::MAX;
            loop {
                let rows = tx.query(&runs, &[&board, &below])?;
                for r in &rows {
                    below = r.get(0);
                    sink.run(below, unsigned(r.get(1), "run count")?)?;
                }
                if rows.len() < 100_000 {
                    return Ok(());
                }
            }
        })
    }

    fn approx_begin(&self, board: i64) -> Result<i64> {
        let sql = Sql::new(self);
        let update = format!(
            "UPDATE {} SET next = next + 1 WHERE board = $1 RETURNING next - 1",
            sql.pointer
        );
        let (id, _) = self.write(|tx| Ok(tx.query_one(&update, &[&board])?.get::<_, i64>(0)))?;
        Ok(id)
    }

    fn approx_put(&self, board: i64, snapshot: i64, first: u32, buckets: &[Bucket]) -> Result<()> {
        let sql = Sql::new(self);
        // One statement for the chunk: arrays unnested into rows.
        let insert = format!(
            "INSERT INTO {} (board, snapshot, i, hi, lo, count, at_hi, at_lo) \
             SELECT $1, $2, * FROM unnest($3::integer[], $4::bigint[], $5::bigint[], \
             $6::bigint[], $7::bigint[], $8::bigint[]) \
             ON CONFLICT (board, snapshot, i) DO UPDATE SET hi = excluded.hi, lo = excluded.lo, \
             count = excluded.count, at_hi = excluded.at_hi, at_lo = excluded.at_lo",
            sql.buckets
        );
        let first = i32::try_from(first).unwrap_or(i32::MAX);
        let i: Vec<i32> = (first..).take(buckets.len()).collect();
        let hi: Vec<i64> = buckets.iter().map(|b| b.hi).collect();
        let lo: Vec<i64> = buckets.iter().map(|b| b.lo).collect();
        let count: Vec<i64> = buckets.iter().map(|b| signed(b.count)).collect();
        let at_hi: Vec<i64> = buckets.iter().map(|b| signed(b.at_hi)).collect();
        let at_lo: Vec<i64> = buckets.iter().map(|b| signed(b.at_lo)).collect();
        self.write(|tx| {
            tx.execute(
                &insert,
                &[&board, &snapshot, &i, &hi, &lo, &count, &at_hi, &at_lo],
            )?;
            Ok(())
        })
        .map(drop)
    }

    fn approx_publish(&self, board: i64, snapshot: i64, total: u64, buckets: u32) -> Result<bool> {
        let sql = Sql::new(self);
        let check = format!(
            "SELECT count(*), coalesce(sum(count), 0)::bigint FROM {} \
             WHERE board = $1 AND snapshot = $2",
            sql.buckets
        );
        // The row lock orders concurrent publishes: the later one sees the
        // earlier one's `current`.
        let lock = format!("SELECT 1 FROM {} WHERE board = $1 FOR UPDATE", sql.pointer);
        let flip = format!(
            "UPDATE {} SET current = $2, total = $3 WHERE board = $1",
            sql.pointer
        );
        let delete = format!(
            "DELETE FROM {} WHERE board = $1 AND snapshot < $2",
            sql.buckets
        );
        let discard = format!(
            "DELETE FROM {} WHERE board = $1 AND snapshot = $2",
            sql.buckets
        );
        let (flipped, _) = self.write_read_committed(|tx| {
            tx.query_opt(&lock, &[&board])?;
            // Overtaken: a later refresh published and deleted this
            // snapshot's rows (all or some), so the count below would report
            // corruption that is not there (issue 21). Its rows are garbage.
            if current(tx, &sql, board)?.is_some_and(|(id, _)| id > snapshot) {
                tx.execute(&discard, &[&board, &snapshot])?;
                return Ok(false);
            }
            let row = tx.query_one(&check, &[&board, &snapshot])?;
            let (rows, counted): (i64, i64) = (row.get(0), row.get(1));
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
            tx.execute(&flip, &[&board, &snapshot, &signed(total)])?;
            tx.execute(&delete, &[&board, &snapshot])?;
            Ok(true)
        })?;
        Ok(flipped)
    }

    fn approx_len(&self, board: i64) -> Result<u64> {
        let sql = Sql::new(self);
        let count = format!("SELECT count(*) FROM {} WHERE board = $1", sql.players);
        self.read(|tx| unsigned(tx.query_one(&count, &[&board])?.get(0), "player count"))
    }

    fn approx_page(&self, board: i64, skip: u64, limit: u64) -> Result<Vec<(String, i64)>> {
        let sql = Sql::new(self);
        let page = format!(
            "SELECT player, score FROM {} WHERE board = $1 \
             ORDER BY score DESC, arrival, player LIMIT $3 OFFSET $2",
            sql.players
        );
        self.read(|tx| {
            let rows = tx.query(&page, &[&board, &signed(skip), &signed(limit)])?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }
}

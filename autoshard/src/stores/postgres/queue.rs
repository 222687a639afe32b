//! The queue's tables and statements on PostgreSQL.
//!
//! The tables are SQLite's, in the store's schema (all in one database
//! here: the queue's tables are its own storage, as SQLite's queue file is
//! there). An enqueue writes only the queue's tables and takes no advisory
//! lock, so it never waits for a worker's apply, whose locks (the board's,
//! exclusive for a big batch) are on the board's keys. Unlike SQLite,
//! writers run at once here, so the queue orders them itself:
//!
//! - **Sequence numbers.** A group commit upserts its shards' rows of
//!   `autoshard_rank_queue_heads` (in shard order, so two commits never
//!   wait for each other in a cycle) and numbers its updates from there. The
//!   row stays locked until the commit, so the next commit of that shard
//!   numbers after it and becomes visible after it: a shard's rows appear in
//!   sequence order, with no later row visible before an earlier one.
//! - **Workers.** A batch takes each queue shard it reads with
//!   `pg_try_advisory_xact_lock` and skips a shard another worker holds, so
//!   one shard is drained by one transaction at a time, oldest first (row
//!   locks with `SKIP LOCKED` would let a second worker apply a player's
//!   later rows before the first commits the earlier ones). After the lock,
//!   at `READ COMMITTED`, it sees the previous holder's delete. It applies
//!   the rows through the same code as direct writes (the tree's own
//!   advisory locks, in their canonical order; the try-locks never wait, so
//!   they cannot close a deadlock cycle), reading only rows above the
//!   shard's applied-through mark (`autoshard_rank_applied`, read after the
//!   lock) and moving the mark before `COMMIT`: applied and marked together,
//!   or neither. The rows are deleted after the commit, in a transaction of
//!   their own, which locks only them. A transaction rolled back by a
//!   conflict (40001, 40P01) or a lost connection is run again whole.

use super::{Postgres, Tx};
use crate::error::Result;
use crate::hash::{fnv, FNV_OFFSET};
use crate::seam::{queue_shards, Board, DeadLetter, QueuedRow, QueuedUpdate, NOTHING_APPLIED};

/// Every queue statement, with the schema's table names filled in.
pub(super) struct QueueSql {
    probe: String,
    /// The queue table, whose `data` column came later than the tables.
    queue_table: String,
    create: String,
    append: String,
    queued: String,
    marks: String,
    behind_any: String,
    behind_count: String,
    try_lock: String,
    applied: String,
    set_applied: String,
    select: String,
    delete: String,
    dead_letter: String,
    dead_letters: String,
    dead_letter_count: String,
    oldest: String,
    delete_dead_letter: String,
    /// Seeds the shard lock keys: advisory locks are per database, queues
    /// per schema.
    seed: u64,
}

impl QueueSql {
    pub(super) fn new(schema: &str) -> Self {
        let queue = format!("{schema}.autoshard_rank_queue");
        let heads = format!("{schema}.autoshard_rank_queue_heads");
        let dead = format!("{schema}.autoshard_rank_dead_letters");
        let applied = format!("{schema}.autoshard_rank_applied");
        let boards = format!("{schema}.autoshard_rank_boards");
        // A row not applied yet: above its shard's applied-through mark.
        let unapplied = format!(
            "r.seq > coalesce((SELECT a.seq FROM {applied} a \
             WHERE a.board = r.board AND a.queue = r.queue), {NOTHING_APPLIED})"
        );
        QueueSql {
            // The table created last: a schema that has it has them all.
            probe: applied.clone(),
            queue_table: queue.clone(),
            create: format!(
                "CREATE TABLE IF NOT EXISTS {queue} (
                     board bigint NOT NULL,
                     queue integer NOT NULL,
                     seq bigint NOT NULL,
                     player text COLLATE \"C\" NOT NULL,
                     score bigint,
                     PRIMARY KEY (board, queue, seq)
                 );
                 ALTER TABLE {queue} ADD COLUMN IF NOT EXISTS data bytea;
                 ALTER TABLE {queue} ADD COLUMN IF NOT EXISTS enqueued_at timestamptz;
                 ALTER TABLE {queue} ALTER COLUMN enqueued_at SET DEFAULT now();
                 CREATE TABLE IF NOT EXISTS {heads} (
                     board bigint NOT NULL,
                     queue integer NOT NULL,
                     next bigint NOT NULL,
                     PRIMARY KEY (board, queue)
                 );
                 CREATE TABLE IF NOT EXISTS {dead} (
                     id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                     board bigint NOT NULL,
                     queue integer NOT NULL,
                     seq bigint NOT NULL,
                     player text COLLATE \"C\" NOT NULL,
                     score bigint,
                     reason text NOT NULL
                 );
                 CREATE INDEX IF NOT EXISTS autoshard_rank_dead_letters_board
                     ON {dead} (board, id);
                 CREATE TABLE IF NOT EXISTS {applied} (
                     board bigint NOT NULL,
                     queue integer NOT NULL,
                     seq bigint NOT NULL,
                     PRIMARY KEY (board, queue)
                 );"
            ),
            // One statement per shard, whatever the number of updates: the
            // head's upsert numbers them, the insert takes the numbers. The
            // board row's key-share lock (which no board transaction
            // conflicts with, only a delete) makes it insert nothing once
            // the board is deleted, and a delete wait for it to commit.
            append: format!(
                "WITH b AS (SELECT 1 FROM {boards} WHERE id = $1 FOR KEY SHARE), \
                 h AS ( \
                     INSERT INTO {heads} AS h (board, queue, next) \
                     SELECT $1::int8, $2::int4, $3::int8 FROM b \
                     ON CONFLICT (board, queue) DO UPDATE SET next = h.next + EXCLUDED.next \
                     RETURNING h.next - $3 AS first) \
                 INSERT INTO {queue} (board, queue, seq, player, score, data) \
                 SELECT $1, $2, h.first + t.n - 1, t.p, t.s, ($6::bytea[])[t.n] \
                 FROM h, unnest($4::text[], $5::int8[]) WITH ORDINALITY AS t(p, s, n)"
            ),
            queued: format!("SELECT count(*) FROM {queue} r WHERE r.board = $1 AND {unapplied}"),
            marks: format!("SELECT queue, next FROM {heads} WHERE board = $1"),
            behind_any: format!(
                "SELECT EXISTS (SELECT 1 FROM unnest($2::int4[], $3::int8[]) AS m(q, mark) \
                 JOIN {queue} r ON r.board = $1 AND r.queue = m.q AND r.seq < m.mark \
                 WHERE {unapplied})"
            ),
            behind_count: format!(
                "SELECT count(*) FROM unnest($2::int4[], $3::int8[]) AS m(q, mark) \
                 JOIN {queue} r ON r.board = $1 AND r.queue = m.q AND r.seq < m.mark \
                 WHERE {unapplied}"
            ),
            try_lock: "SELECT pg_try_advisory_xact_lock($1)".into(),
            applied: format!("SELECT seq FROM {applied} WHERE board = $1 AND queue = $2"),
            set_applied: format!(
                "INSERT INTO {applied} (board, queue, seq) VALUES ($1, $2, $3) \
                 ON CONFLICT (board, queue) DO UPDATE SET seq = EXCLUDED.seq"
            ),
            select: format!(
                "SELECT seq, player, score, data FROM {queue} \
                 WHERE board = $1 AND queue = $2 AND seq > $3 ORDER BY seq LIMIT $4"
            ),
            delete: format!("DELETE FROM {queue} WHERE board = $1 AND queue = $2 AND seq <= $3"),
            dead_letter: format!(
                "INSERT INTO {dead} (board, queue, seq, player, score, reason) \
                 VALUES ($1, $2, $3, $4, $5, $6)"
            ),
            dead_letters: format!(
                "SELECT id, queue, seq, player, score, reason FROM {dead} \
                 WHERE board = $1 ORDER BY id"
            ),
            dead_letter_count: format!("SELECT count(*) FROM {dead} WHERE board = $1"),
            // Per shard the first row above its mark (an index seek), the
            // oldest of those, aged by the server's clock.
            oldest: format!(
                "SELECT extract(epoch FROM clock_timestamp() - min(x.t))::float8 \
                 FROM {heads} h \
                 LEFT JOIN {applied} a ON a.board = h.board AND a.queue = h.queue \
                 CROSS JOIN LATERAL (SELECT r.enqueued_at AS t FROM {queue} r \
                     WHERE r.board = h.board AND r.queue = h.queue \
                     AND r.seq > coalesce(a.seq, {NOTHING_APPLIED}) \
                     AND r.enqueued_at IS NOT NULL ORDER BY r.seq LIMIT 1) x \
                 WHERE h.board = $1"
            ),
            delete_dead_letter: format!("DELETE FROM {dead} WHERE board = $1 AND id = $2"),
            seed: fnv(FNV_OFFSET, schema.as_bytes()),
        }
    }

    /// The advisory lock key of queue shard `queue` of board `board`.
    pub(super) fn shard_key(&self, board: i64, queue: u32) -> i64 {
        let hash = fnv(fnv(self.seed, b"queue"), &board.to_le_bytes());
        fnv(hash, &queue.to_le_bytes()) as i64
    }
}

fn small(value: u32) -> i32 {
    i32::try_from(value).expect("validated small counts")
}

/// Creates the queue tables if needed. Handles do not share queue state
/// by database (`None`): two handles may name one database differently, and
/// a shared state writes every handle's updates through one of them. Only
/// group-commit sharing between handles is lost; the database orders every
/// commit anyway.
pub(super) fn prepare(db: &Postgres, sql: &QueueSql) -> Result<Option<String>> {
    db.write_read_committed(|tx| {
        // Every table, and the queue's newest column, `enqueued_at` (a
        // schema made before gets it, and `data`, from the `ALTER`s in
        // `create`; its rows keep no time, new rows get the default).
        let ready: bool = tx
            .query_one(
                "SELECT to_regclass($1) IS NOT NULL AND EXISTS (SELECT 1 FROM pg_attribute \
                 WHERE attrelid = to_regclass($2) AND attname = 'enqueued_at' \
                 AND NOT attisdropped)",
                &[&sql.probe, &sql.queue_table],
            )?
            .try_get(0)?;
        if !ready {
            tx.batch(&format!("{}; {}", db.ddl_lock(), sql.create))?;
        }
        Ok(())
    })?;
    Ok(None)
}

/// One transaction appending `items` to their queue shards, each shard's
/// items numbered in order from the shard's head.
///
/// [`Error::RankingNotFound`] once the board is deleted (the statement then
/// inserts nothing: see `QueueSql::append`).
pub(super) fn append(
    db: &Postgres,
    sql: &QueueSql,
    board: Board<'_>,
    items: &[QueuedUpdate],
) -> Result<()> {
    let (named, board) = (board, board.id);
    db.write_read_committed(|tx| {
        for queue in queue_shards(items) {
            let mine = || items.iter().filter(|i| i.queue == queue);
            let players: Vec<&str> = mine().map(|i| i.player.as_str()).collect();
            let scores: Vec<Option<i64>> = mine().map(|i| i.score).collect();
            let data: Vec<Option<&[u8]>> = mine().map(|i| i.data.as_deref()).collect();
            let n = players.len() as i64;
            let appended = tx.execute(
                &sql.append,
                &[&board, &small(queue), &n, &players, &scores, &data],
            )?;
            if appended == 0 {
                return Err(named.not_found());
            }
        }
        Ok(())
    })?;
    Ok(())
}

pub(super) fn queued(db: &Postgres, sql: &QueueSql, board: i64) -> Result<u64> {
    db.read(|tx| {
        let n: i64 = tx
            .query_opt(&sql.queued, &[&board])?
            .expect("count returns a row")
            .try_get(0)?;
        Ok(n as u64)
    })
}

pub(super) fn marks(db: &Postgres, sql: &QueueSql, board: i64) -> Result<Vec<(u32, i64)>> {
    db.read(|tx| {
        let rows = tx.query(&sql.marks, &[&board])?;
        rows.iter()
            .map(|r| {
                let queue: i32 = r.try_get(0)?;
                Ok((u32::try_from(queue).unwrap_or(u32::MAX), r.try_get(1)?))
            })
            .collect()
    })
}

pub(super) fn below(
    db: &Postgres,
    sql: &QueueSql,
    board: i64,
    marks: &[(u32, i64)],
    count: bool,
) -> Result<u64> {
    let queues: Vec<i32> = marks.iter().map(|&(q, _)| small(q)).collect();
    let seqs: Vec<i64> = marks.iter().map(|&(_, m)| m).collect();
    let params: [&(dyn ::postgres::types::ToSql + Sync); 3] = [&board, &queues, &seqs];
    db.read(|tx| {
        let n = if count {
            let row = tx.query_opt(&sql.behind_count, &params)?;
            row.expect("count returns a row").try_get::<_, i64>(0)? as u64
        } else {
            let row = tx.query_opt(&sql.behind_any, &params)?;
            u64::from(row.expect("exists returns a row").try_get::<_, bool>(0)?)
        };
        Ok(n)
    })
}

/// Takes queue shard `queue` for this transaction if no other holds it.
pub(super) fn try_lock(tx: &mut Tx<'_>, sql: &QueueSql, key: i64) -> Result<bool> {
    let row = tx.query_opt(&sql.try_lock, &[&key])?;
    Ok(row.expect("a function call returns a row").try_get(0)?)
}

/// Appends up to `limit` of shard `queue`'s oldest rows to `out`; a NULL
/// player (a hand edit that dropped the constraint) is marked unreadable.
pub(super) fn take(
    tx: &mut Tx<'_>,
    sql: &QueueSql,
    board: i64,
    (queue, after): (u32, i64),
    limit: usize,
    out: &mut Vec<QueuedRow>,
) -> Result<()> {
    let rows = tx.query(
        &sql.select,
        &[&board, &small(queue), &after, &(limit as i64)],
    )?;
    for row in &rows {
        let player: Option<String> = row.try_get(1)?;
        out.push(QueuedRow {
            seq: row.try_get(0)?,
            unreadable: player.is_none().then(|| "the player is NULL".to_owned()),
            player: player.unwrap_or_default(),
            score: row.try_get(2)?,
            data: row.try_get(3)?,
        });
    }
    Ok(())
}

/// Queue shard `queue`'s applied-through mark, in the board transaction
/// (after the shard's lock: at `READ COMMITTED` it sees the last holder's).
pub(super) fn applied(tx: &mut Tx<'_>, sql: &QueueSql, board: i64, queue: u32) -> Result<i64> {
    let row = tx.query_opt(&sql.applied, &[&board, &small(queue)])?;
    Ok(match row {
        Some(row) => row.try_get(0)?,
        None => NOTHING_APPLIED,
    })
}

pub(super) fn set_applied(
    tx: &mut Tx<'_>,
    sql: &QueueSql,
    board: i64,
    queue: u32,
    seq: i64,
) -> Result<()> {
    tx.execute(&sql.set_applied, &[&board, &small(queue), &seq])?;
    Ok(())
}

/// One transaction deleting each shard's updates up to its sequence number
/// in `through`: row locks on those rows only, which no enqueue takes.
pub(super) fn delete(
    db: &Postgres,
    sql: &QueueSql,
    board: i64,
    through: &[(u32, i64)],
) -> Result<()> {
    db.write_read_committed(|tx| {
        for &(queue, seq) in through {
            tx.execute(&sql.delete, &[&board, &small(queue), &seq])?;
        }
        Ok(())
    })?;
    Ok(())
}

/// Stores a row a worker cannot apply in the board's dead letters.
pub(super) fn dead_letter(
    tx: &mut Tx<'_>,
    sql: &QueueSql,
    board: i64,
    (queue, seq): (u32, i64),
    player: &str,
    score: Option<i64>,
    reason: &str,
) -> Result<()> {
    let params: [&(dyn ::postgres::types::ToSql + Sync); 6] =
        [&board, &small(queue), &seq, &player, &score, &reason];
    tx.execute(&sql.dead_letter, &params)?;
    Ok(())
}

pub(super) fn dead_letters(db: &Postgres, sql: &QueueSql, board: i64) -> Result<Vec<DeadLetter>> {
    db.read(|tx| {
        let rows = tx.query(&sql.dead_letters, &[&board])?;
        rows.iter()
            .map(|r| {
                let queue: i32 = r.try_get(1)?;
                Ok(DeadLetter {
                    id: r.try_get(0)?,
                    queue: u32::try_from(queue).unwrap_or(u32::MAX),
                    seq: r.try_get(2)?,
                    player: r.try_get(3)?,
                    score: r.try_get(4)?,
                    reason: r.try_get(5)?,
                })
            })
            .collect()
    })
}

pub(super) fn dead_letter_count(db: &Postgres, sql: &QueueSql, board: i64) -> Result<u64> {
    db.read(|tx| {
        let n: i64 = tx
            .query_one(&sql.dead_letter_count, &[&board])?
            .try_get(0)?;
        Ok(n as u64)
    })
}

pub(super) fn oldest_age(
    db: &Postgres,
    sql: &QueueSql,
    board: i64,
) -> Result<Option<std::time::Duration>> {
    db.read(|tx| {
        let secs: Option<f64> = tx.query_one(&sql.oldest, &[&board])?.try_get(0)?;
        Ok(secs.map(|s| std::time::Duration::from_secs_f64(s.max(0.0))))
    })
}

pub(super) fn delete_dead_letter(
    db: &Postgres,
    sql: &QueueSql,
    board: i64,
    id: i64,
) -> Result<bool> {
    let (deleted, _) =
        db.write_read_committed(|tx| Ok(tx.execute(&sql.delete_dead_letter, &[&board, &id])? > 0))?;
    Ok(deleted)
}

//! Approximate boards on Redis Cluster: the snapshot pointer and buckets
//! (the protocol is the seam's, `seam/approx.rs`).
//!
//! An approximate board keeps the players and the ranking order of a board
//! (`:p`, `:o`) and no tree; its snapshots live in one more hash of the
//! board's slot, `:x`: `current` (the published snapshot), `total` and
//! `buckets` (its player and bucket counts), `next` (the last number
//! reserved) and one field `<snapshot>:<i>` = `hi:lo:count:at_hi:at_lo`
//! per bucket row, published or not. Each operation is one script on that
//! slot, so atomic; every script first checks the board's version for the
//! delete's tombstone, so nothing is written under a deleted board's keys
//! (ids are never reused, so nothing would read them, but nothing would
//! delete them either).

use super::board_codec::{array, ascending, bytes};
use super::boards::BoardKeys;
use super::RedisCluster;
use crate::error::{Error, Result};
use crate::seam::{
    signed, unsigned, ApproxStore, Board, BoardStore, Bucket, ScoreSink, Storage, StoredSnapshot,
};
use redis::{Script, Value};
use std::sync::OnceLock;

/// The prelude of every script here: `GONE` for a deleted board.
/// `KEYS[1]` is the board's version, `KEYS[2]` its `:x` hash.
const ALIVE: &str = r#"
if redis.call('GET', KEYS[1]) == 'deleted' then return 'GONE' end
"#;

fn script(cell: &'static OnceLock<Script>, body: &str) -> &'static Script {
    cell.get_or_init(|| Script::new(&format!("{ALIVE}{body}")))
}

/// The published snapshot: `{current, total, row...}`, or `{}` before the
/// first publish.
fn snapshot_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
local head = redis.call('HMGET', KEYS[2], 'current', 'total', 'buckets')
if not head[1] then return {} end
local out = {head[1], head[2]}
for i = 0, tonumber(head[3]) - 1 do
  out[#out + 1] = redis.call('HGET', KEYS[2], head[1] .. ':' .. i) or ''
end
return out
"#,
    )
}

fn begin_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(&S, "return redis.call('HINCRBY', KEYS[2], 'next', 1)\n")
}

/// `ARGV` field, value pairs.
fn put_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        "redis.call('HSET', KEYS[2], unpack(ARGV))\nreturn 'OK'\n",
    )
}

/// `ARGV` = snapshot, total, buckets: `0` if a later snapshot is published
/// (this one's rows deleted), `{rows, counted}` if the rows do not add up
/// (nothing changed), else `1`: published, earlier snapshots' rows deleted.
fn publish_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
local snap, total, buckets = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local current = tonumber(redis.call('HGET', KEYS[2], 'current') or '0')
local rows, counted, mine, older = 0, 0, {}, {}
for _, field in ipairs(redis.call('HKEYS', KEYS[2])) do
  local n = tonumber(string.match(field, '^(%d+):'))
  if n == snap then
    mine[#mine + 1] = field
    rows = rows + 1
    counted = counted + tonumber(string.match(redis.call('HGET', KEYS[2], field), '^[^:]*:[^:]*:(%d+)'))
  elseif n and n < snap then
    older[#older + 1] = field
  end
end
if current > snap then
  if #mine > 0 then redis.call('HDEL', KEYS[2], unpack(mine)) end
  return 0
end
if rows ~= buckets or string.format('%.0f', counted) ~= total then
  return {rows, string.format('%.0f', counted)}
end
redis.call('HSET', KEYS[2], 'current', snap, 'total', total, 'buckets', buckets)
if #older > 0 then redis.call('HDEL', KEYS[2], unpack(older)) end
return 1
"#,
    )
}

/// `ZRANGE` of the ranking order by index: `ARGV` = first, last.
fn page_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        "return redis.call('ZRANGE', KEYS[2], ARGV[1], ARGV[2])\n",
    )
}

fn encode(b: &Bucket) -> String {
    format!("{}:{}:{}:{}:{}", b.hi, b.lo, b.count, b.at_hi, b.at_lo)
}

fn decode(row: &[u8]) -> Option<Bucket> {
    let text = std::str::from_utf8(row).ok()?;
    let mut parts = text.split(':');
    let mut next = || parts.next();
    let bucket = Bucket {
        hi: next()?.parse().ok()?,
        lo: next()?.parse().ok()?,
        count: next()?.parse().ok()?,
        at_hi: next()?.parse().ok()?,
        at_lo: next()?.parse().ok()?,
    };
    next().is_none().then_some(bucket)
}

impl RedisCluster {
    /// Runs `script` on board `board`'s slot with `KEYS` = its version and
    /// `key` (`:x` unless said otherwise).
    fn approx_call(
        &self,
        board: i64,
        script: &Script,
        key: Option<String>,
        args: &[Vec<u8>],
    ) -> Result<Value> {
        let keys = BoardKeys::new(self.prefix(), board);
        let mut invocation = script.prepare_invoke();
        invocation
            .key(keys.version())
            .key(key.unwrap_or_else(|| keys.approx()));
        for arg in args {
            invocation.arg(arg.as_slice());
        }
        let mut conn = self.checkout()?;
        let reply: Value = self.with_conn(&mut conn, |c| invocation.invoke(c))?;
        match &reply {
            Value::SimpleString(s) if s == "GONE" => Err(gone(board)),
            Value::BulkString(s) if s == b"GONE" => Err(gone(board)),
            _ => Ok(reply),
        }
    }
}

fn gone(board: i64) -> Error {
    crate::seam::not_found(&format!("(board id {board})"))
}

fn corrupt(board: i64, field: &str, reason: String) -> Error {
    Error::Corrupt {
        kind: "ranking",
        id: format!("board {board}"),
        field: field.into(),
        reason,
    }
}

fn number(value: Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(n),
        other => std::str::from_utf8(&bytes(other)?).ok()?.parse().ok(),
    }
}

impl ApproxStore for RedisCluster {
    fn approx_current(&self, board: i64) -> Result<Option<i64>> {
        let mut conn = self.checkout()?;
        let key = BoardKeys::new(self.prefix(), board).approx();
        let current: Option<i64> = self.with_conn(&mut conn, |c| {
            redis::cmd("HGET").arg(&key).arg("current").query(c)
        })?;
        Ok(current)
    }

    fn approx_snapshot(&self, board: i64) -> Result<Option<StoredSnapshot>> {
        let mut reply = array(self.approx_call(board, snapshot_script(), None, &[])?).into_iter();
        let Some(id) = reply.next() else {
            return Ok(None);
        };
        let id = number(id).ok_or_else(|| corrupt(board, "snapshot", "unreadable".into()))?;
        let total = reply.next().and_then(number).unwrap_or(-1);
        let total = unsigned(total, "snapshot total")?;
        let buckets = reply
            .enumerate()
            .map(|(i, row)| {
                let row = bytes(row).unwrap_or_default();
                decode(&row).ok_or_else(|| {
                    let shown = String::from_utf8_lossy(&row);
                    corrupt(
                        board,
                        &format!("snapshot {id}"),
                        format!("row {i}: {shown:?}"),
                    )
                })
            })
            .collect::<Result<_>>()?;
        Ok(Some(StoredSnapshot { id, total, buckets }))
    }

    fn approx_scores(&self, board: i64, sink: &mut dyn ScoreSink) -> Result<()> {
        // One read transaction of the board: its players as of one version.
        let mut scores = Vec::new();
        let name = format!("(board id {board})");
        self.read_board(
            Board {
                name: &name,
                id: board,
            },
            &mut |st: &dyn Storage| {
                scores.clear();
                st.scan_players(&mut |score, _| {
                    scores.push(score);
                    Ok(())
                })
            },
        )?;
        scores.sort_unstable_by(|a, b| b.cmp(a));
        sink.total(scores.len() as u64)?;
        for run in scores.chunk_by(|a, b| a == b) {
            sink.run(run[0], run.len() as u64)?;
        }
        Ok(())
    }

    fn approx_begin(&self, board: i64) -> Result<i64> {
        number(self.approx_call(board, begin_script(), None, &[])?)
            .ok_or_else(|| corrupt(board, "snapshot numbers", "unreadable".into()))
    }

    fn approx_put(&self, board: i64, snapshot: i64, first: u32, buckets: &[Bucket]) -> Result<()> {
        if buckets.is_empty() {
            return Ok(());
        }
        let args: Vec<Vec<u8>> = (first..)
            .zip(buckets)
            .flat_map(|(i, b)| [format!("{snapshot}:{i}"), encode(b)])
            .map(String::into_bytes)
            .collect();
        self.approx_call(board, put_script(), None, &args).map(drop)
    }

    fn approx_publish(&self, board: i64, snapshot: i64, total: u64, buckets: u32) -> Result<bool> {
        let args = [
            snapshot.to_string().into_bytes(),
            signed(total).to_string().into_bytes(),
            buckets.to_string().into_bytes(),
        ];
        match self.approx_call(board, publish_script(), None, &args)? {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            other => {
                let found: Vec<String> = array(other)
                    .into_iter()
                    .map(|v| number(v).map_or_else(|| "?".into(), |n| n.to_string()))
                    .collect();
                Err(corrupt(
                    board,
                    &format!("snapshot {snapshot}"),
                    format!(
                        "{} bucket rows counting {} players, not {buckets} counting {total}",
                        found.first().map_or("?", String::as_str),
                        found.get(1).map_or("?", String::as_str),
                    ),
                ))
            }
        }
    }

    fn approx_len(&self, board: i64) -> Result<u64> {
        let key = BoardKeys::new(self.prefix(), board).order();
        let mut conn = self.checkout()?;
        let n: i64 = self.with_conn(&mut conn, |c| redis::cmd("ZCARD").arg(&key).query(c))?;
        unsigned(n, "player count")
    }

    fn approx_page(&self, board: i64, skip: u64, limit: u64) -> Result<Vec<(String, i64)>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let last = skip.saturating_add(limit - 1);
        let args = [signed(skip), signed(last)].map(|n| n.to_string().into_bytes());
        let order = BoardKeys::new(self.prefix(), board).order();
        let reply = self.approx_call(board, page_script(), Some(order), &args)?;
        array(reply)
            .into_iter()
            .map(|member| {
                let member = bytes(member).unwrap_or_default();
                let key = member.get(..8).and_then(|k| k.try_into().ok());
                match (key, member.get(16..)) {
                    (Some(key), Some(name)) => Ok((
                        String::from_utf8_lossy(name).into_owned(),
                        ascending(u64::from_be_bytes(key)),
                    )),
                    _ => Err(corrupt(
                        board,
                        "ranking order",
                        format!("member {member:?}"),
                    )),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_rows_round_trip() {
        let b = Bucket {
            hi: i64::MAX,
            lo: i64::MIN,
            count: 7,
            at_hi: 1,
            at_lo: 2,
        };
        assert_eq!(decode(encode(&b).as_bytes()), Some(b));
        for bad in ["", "1:2:3:4", "1:2:3:4:5:6", "1:2:x:4:5", "1:2:-3:4:5"] {
            assert_eq!(decode(bad.as_bytes()), None, "{bad}");
        }
    }
}

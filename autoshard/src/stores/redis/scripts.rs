//! The Lua scripts of the store: each is one *piece* of an operation, runs
//! atomically on one slot's master, and is applied at most once per
//! operation id.
//!
//! Every script gets `KEYS[1]` (the document or bucket it works on) and
//! `KEYS[2]` (the writer table of the same slot), and `ARGV[1..3]` = writer
//! id, sequence number and the writer table's retention in seconds. It
//! first checks the writer table: if this writer already applied this
//! sequence number (or a later one) there, the piece was applied by an
//! earlier attempt whose reply was lost, and it answers `DUP` without
//! doing anything. Otherwise it does its work and records the sequence
//! number in the same script, so "applied" and "recorded" are one atomic
//! step. An empty writer id turns the check off (the control run of the
//! exactly-once test).
//!
//! Replies are status words: `OK`, `DUP`, `GONE` (the document or bucket
//! does not exist, or belongs to another incarnation than the save's: the
//! entity is not stored, or not the one the object came from), `EXISTS` (insert of a taken
//! id), `NOTINT` and `OVERFLOW` (an integer add that must be folded in Rust
//! instead), `CONFLICT` (compare-and-set lost).

use redis::Script;
use std::sync::OnceLock;

/// The prelude every script starts with: the exactly-once check and mark.
/// A mark is `seq:unix time`, or `seq:outcome:unix time` when the script
/// marks with its reply (`mark(reply)`): a resend of that very piece then
/// answers the first send's reply instead of `DUP`, so a caller learns
/// what was applied also after a lost reply (`native_write`'s count of
/// players found). When a slot's table holds more than 1,024 writers,
/// marks older than the retention are dropped (a writer is one pooled
/// connection, so this only grows with connections ever opened).
const PRELUDE: &str = r#"
local wkey, writer, seq, keep = KEYS[2], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if writer ~= '' then
  local last = redis.call('HGET', wkey, writer)
  if last and tonumber(string.match(last, '^(%d+)')) >= seq then
    local at, outcome = string.match(last, '^(%d+):([^:]+):%d+$')
    if outcome and tonumber(at) == seq then return outcome end
    return 'DUP'
  end
end
local function mark(outcome)
  if writer == '' then return end
  local now = tonumber(redis.call('TIME')[1])
  local value = ARGV[2] .. ':' .. now
  if outcome then value = ARGV[2] .. ':' .. outcome .. ':' .. now end
  -- Only a new writer can take the table past the bound: an update of
  -- a mark needs no count.
  if redis.call('HSET', wkey, writer, value) == 1 and redis.call('HLEN', wkey) > 1024 then
    local all = redis.call('HGETALL', wkey)
    for i = 1, #all, 2 do
      local t = tonumber(string.match(all[i + 1], ':(%d+)$'))
      if t and t < now - keep then redis.call('HDEL', wkey, all[i]) end
    end
  end
end
-- An entity board's intent (`ranked.rs`): a piece that writes a ranked
-- field's row records, in the same script, the board write it owes in
-- `KEYS[3]` (its slot's intent table), field `ARGV[i]`, value `ARGV[i + 1]`.
local function intend(i)
  if KEYS[3] then redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
end
"#;

pub(super) fn script(cell: &'static OnceLock<Script>, body: &str) -> &'static Script {
    script_of(cell, &[body])
}

/// A script of the prelude and `parts`, joined only the first time: the
/// accessors run on every call.
pub(super) fn script_of(cell: &'static OnceLock<Script>, parts: &[&str]) -> &'static Script {
    cell.get_or_init(|| Script::new(&format!("{PRELUDE}{}", parts.concat())))
}

/// Insert's document: `ARGV[4]` the JSON, `ARGV[5]` the incarnation.
pub(crate) fn insert_document() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 'EXISTS' end
redis.call('HSET', KEYS[1], 'doc', ARGV[4], 'inc', ARGV[5])
mark()
return 'OK'
"#,
    )
}

/// Insert's bucket: replaces whatever an earlier incarnation left with `~`
/// = `ARGV[4]`; `ARGV[5]` intents (`intend`) follow as field, value pairs,
/// then the rows (field, value pairs).
pub(crate) fn insert_bucket() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], '~', ARGV[4])
local rows = 6 + 2 * tonumber(ARGV[5])
for i = 6, rows - 1, 2 do intend(i) end
for i = rows, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
mark()
return 'OK'
"#,
    )
}

/// Save's document: `ARGV[4]` the JSON, `ARGV[5]` the incarnation the
/// save belongs to (empty: any); `GONE` if the entity is not stored or is
/// another incarnation.
pub(crate) fn write_document() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'GONE' end
if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], 'inc') ~= ARGV[5] then return 'GONE' end
redis.call('HSET', KEYS[1], 'doc', ARGV[4])
mark()
return 'OK'
"#,
    )
}

/// A static save of a sum: `HINCRBY` row `ARGV[4]` by `ARGV[5]` (a missing
/// row counts as 0). `NOTINT` if the row holds something else, `OVERFLOW`
/// if the sum leaves `i64` (Redis refuses it and writes nothing). `ARGV[6]`
/// is the save's incarnation: `GONE` if the bucket belongs to another
/// (empty: any). `ARGV[7..8]`: the row's board intent, with `KEYS[3]`.
pub(crate) fn add() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'GONE' end
if ARGV[6] ~= '' and redis.call('HGET', KEYS[1], '~') ~= ARGV[6] then return 'GONE' end
local cur = redis.call('HGET', KEYS[1], ARGV[4])
if cur and not string.match(cur, '^-?%d+$') then return 'NOTINT' end
local r = redis.pcall('HINCRBY', KEYS[1], ARGV[4], ARGV[5])
if type(r) == 'table' and r.err then return 'OVERFLOW' end
intend(7)
mark()
return 'OK'
"#,
    )
}

/// Compare-and-set of row `ARGV[4]`: if it holds `ARGV[6]` (or is absent
/// and `ARGV[5]` is `0`), write `ARGV[7]`; otherwise `CONFLICT`. `ARGV[8]`
/// is the save's incarnation, and `ARGV[9..10]` the board intent, as for
/// [`add`].
pub(crate) fn compare_and_set() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'GONE' end
if ARGV[8] ~= '' and redis.call('HGET', KEYS[1], '~') ~= ARGV[8] then return 'GONE' end
local cur = redis.call('HGET', KEYS[1], ARGV[4])
if ARGV[5] == '0' then
  if cur then return 'CONFLICT' end
elseif cur ~= ARGV[6] then
  return 'CONFLICT'
end
redis.call('HSET', KEYS[1], ARGV[4], ARGV[7])
intend(9)
mark()
return 'OK'
"#,
    )
}

/// A dynamic save: appends `ARGV[5]` as a new row of field `ARGV[4]` in
/// bucket `ARGV[6]`, numbered `2^20 + 16 * t + bucket` where `t` is the
/// server's clock in microseconds since 2025, raised past the bucket's last
/// number if the clock did not move: rows of one bucket are numbered in
/// order, rows of sequential saves in any buckets too (the nodes share a
/// clock), and all of them lie above every static shard (at most 10,000).
/// Lua's numbers are doubles: exact up to 2^53, which this stays below
/// until about 2042. `ARGV[7]` is the save's incarnation and `ARGV[8..9]`
/// the board intent, as for [`add`].
pub(crate) fn append() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
if redis.call('EXISTS', KEYS[1]) == 0 then return 'GONE' end
if ARGV[7] ~= '' and redis.call('HGET', KEYS[1], '~') ~= ARGV[7] then return 'GONE' end
local t = redis.call('TIME')
local us = (tonumber(t[1]) - 1735689600) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('HGET', KEYS[1], '~seq') or '0')
if us <= last then us = last + 1 end
redis.call('HSET', KEYS[1], '~seq', string.format('%.0f', us))
local n = string.format('%.0f', 1048576 + us * 16 + tonumber(ARGV[6]))
redis.call('HSET', KEYS[1], 'r:' .. ARGV[4] .. ':' .. n, ARGV[5])
intend(8)
mark()
return 'OK'
"#,
    )
}

/// One compaction step in one bucket of incarnation `ARGV[4]`: rows
/// `ARGV[6..]` (field, expected value pairs) must still hold what the scan
/// read; then they are deleted, and the target row `ARGV[5]` gets the value
/// after them (`ARGV[#ARGV]`, compare-and-set on the target's read value,
/// the pair just before it: `0` and `` if it was absent). Otherwise
/// `CONFLICT`, and nothing changes.
pub(crate) fn compact() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
if redis.call('HGET', KEYS[1], '~') ~= ARGV[4] then return 'GONE' end
local n = #ARGV
local target, present, expected, value = ARGV[5], ARGV[n - 2], ARGV[n - 1], ARGV[n]
local cur = redis.call('HGET', KEYS[1], target)
if present == '0' then
  if cur then return 'CONFLICT' end
elseif cur ~= expected then
  return 'CONFLICT'
end
for i = 6, n - 3, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) ~= ARGV[i + 1] then return 'CONFLICT' end
end
for i = 6, n - 3, 2 do
  redis.call('HDEL', KEYS[1], ARGV[i])
end
redis.call('HSET', KEYS[1], target, value)
mark()
return 'OK'
"#,
    )
}

// ---------------------------------------------------------------- boards
//
// A board's keys share one hash tag, so each script below runs on the
// board's one slot (`boards.rs`). `KEYS[1]` of a board transaction's
// scripts is the board's *version*: a token that every committed write
// transaction replaces with its own operation id, never reused (so a
// version that a failover rolled back is not mistaken for a later one).

/// Registers a board: `KEYS[1]` the registry, `ARGV[4]` the name, `ARGV[5]`
/// its record (`id|min|max|branching|shards|queues`); `EXISTS` if the name
/// is taken.
pub(crate) fn create_board() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script(
        &S,
        r#"
if redis.call('HEXISTS', KEYS[1], ARGV[4]) == 1 then return 'EXISTS' end
redis.call('HSET', KEYS[1], ARGV[4], ARGV[5])
mark()
return 'OK'
"#,
    )
}

/// One read of a board transaction, and the version it read at (a
/// native board's reads: `native_scripts.rs`): `KEYS[2]`
/// is the key read, `ARGV[1]` the version every earlier read of the
/// transaction saw (empty before the first), `ARGV[2]` the command,
/// `ARGV[3..]` its arguments. `{'STALE'}` if a write transaction committed
/// since the transaction's first read; else `{'OK', version, reply}`.
/// Reads are not pieces: they change nothing, so a resend is harmless.
///
/// `HMGET` is sent in chunks (Lua's `unpack` has a limit); `XCOUNT` is
/// `XRANGE` counted on the server.
pub(crate) fn board_read() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| {
        Script::new(
            r#"
local v = redis.call('GET', KEYS[1]) or '0'
if ARGV[1] ~= '' and v ~= ARGV[1] then return {'STALE'} end
local op, key, r = ARGV[2], KEYS[2], nil
if op == 'HMGET' then
  r = {}
  for i = 3, #ARGV, 1000 do
    local part = redis.call('HMGET', key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
    for j = 1, #part do r[#r + 1] = part[j] end
  end
elseif op == 'XCOUNT' then
  r = #redis.call('XRANGE', key, ARGV[3], ARGV[4])
else
  r = redis.call(op, key, unpack(ARGV, 3))
end
return {'OK', v, r}
"#,
        )
    })
}

/// The types of a board's keys, by their place in `KEYS` of
/// [`board_commit`] and [`append_queue`]: checked before anything is
/// written, because a script that fails on a command half-way keeps the
/// writes it made before (Redis does not roll scripts back).
pub(super) const BOARD_TYPES: &str = r#"
local function check_types(types)
  for i = 3, #KEYS do
    local want = types[i] or 'stream'
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'none' and t ~= want then
      return redis.error_reply('autoshard: board key ' .. KEYS[i] .. ' is a ' .. t .. ', not a ' .. want)
    end
  end
end
"#;

/// Commits a write transaction on one or more boards of one slot, all or
/// nothing. `KEYS[1]` is the first board's version; every other key is
/// named by its index in `KEYS`. `ARGV[4]` is the new version,
/// `ARGV[5]` one type letter per key from `KEYS[3]` on (`h` hash, `z`
/// sorted set, `s` string, `x` stream), `ARGV[6]` the number of boards `n`
/// and then `n` triples: the index of the board's version key, the version
/// its reads saw (empty: none) and whether it was written (`1`). If any
/// board's version moved, `CONFLICT` and nothing written; then every key
/// is checked to be of its type (a foreign key under the prefix fails the
/// commit before anything is written); then the writes that follow
/// apply; then every written board's version becomes the new one.
///
/// A write is an opcode, a key's index in `KEYS` and its arguments: `H`
/// field value (`HSET`), `h` field (`HDEL`), `Z` member (`ZADD` at 0), `z`
/// member (`ZREM`), `X` id (`XTRIM MINID`), `D` counter-index payload (a
/// dead letter under the counter's next value); `C`, a count and that many
/// key indexes unlinks those keys (a reset); `M` base player score-key
/// old-row floor moves a player of a native board (`board_tx/native.rs`)
/// whose data keys (`BoardKeys::data`) are `KEYS[base + 1 ..]`: out of the
/// order (and their old score's multiplicity, and the distinct scores when
/// it was the last) if `old-row` (16 bytes; `?`: the row an earlier move of
/// this commit wrote, read here) is not empty; then to `score-key` (8
/// bytes) with the board's next arrival, at least `floor` (a tree of a
/// split board: board-wide arrivals, `ranking/trees/arrival.rs`), or, if
/// it is empty, out of the players and their entry data.
pub(crate) fn board_commit() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script_of(
        &S,
        &[
            super::native_scripts::MOVES,
            r#"
local n = tonumber(ARGV[6])
for b = 0, n - 1 do
  local at, seen = 7 + 3 * b, ARGV[8 + 3 * b]
  if seen ~= '' and (redis.call('GET', KEYS[tonumber(ARGV[at])]) or '0') ~= seen then return 'CONFLICT' end
end
local types = {h = 'hash', z = 'zset', s = 'string', x = 'stream'}
for k = 3, #KEYS do
  local want = types[string.sub(ARGV[5], k - 2, k - 2)]
  local t = redis.call('TYPE', KEYS[k])['ok']
  if t ~= 'none' and t ~= want then
    return redis.error_reply('autoshard: board key ' .. KEYS[k] .. ' is a ' .. t .. ', not a ' .. tostring(want))
  end
end
-- Moves wait here, per board, until another write or the end: applied
-- together (`apply_moves`), in their order, before anything after them.
local pending, boards, waiting = {}, {}, false
local function flush()
  if not waiting then return end
  for d, moves in pairs(pending) do apply_moves(boards[d], moves) end
  pending, waiting = {}, false
end
local i = 7 + 3 * n
while i <= #ARGV do
  local op, k = ARGV[i], KEYS[tonumber(ARGV[i + 1])]
  if op ~= 'M' then flush() end
  if op == 'H' then redis.call('HSET', k, ARGV[i + 2], ARGV[i + 3]); i = i + 4
  elseif op == 'h' then redis.call('HDEL', k, ARGV[i + 2]); i = i + 3
  elseif op == 'Z' then redis.call('ZADD', k, 0, ARGV[i + 2]); i = i + 3
  elseif op == 'z' then redis.call('ZREM', k, ARGV[i + 2]); i = i + 3
  elseif op == 'X' then redis.call('XTRIM', k, 'MINID', ARGV[i + 2]); i = i + 3
  elseif op == 'D' then
    local id = redis.call('INCR', KEYS[tonumber(ARGV[i + 2])])
    redis.call('HSET', k, id, ARGV[i + 3]); i = i + 4
  elseif op == 'C' then
    local c = tonumber(ARGV[i + 1])
    for j = 2, c + 1 do redis.call('UNLINK', KEYS[tonumber(ARGV[i + j])]) end
    i = i + c + 2
  elseif op == 'M' then
    local d = tonumber(ARGV[i + 1])
    if not boards[d] then
      boards[d] = {players = KEYS[d + 3], order = KEYS[d + 4], data = KEYS[d + 7],
        distinct = KEYS[d + 8], counts = KEYS[d + 9], arrivals = KEYS[d + 10]}
    end
    local new, old = ARGV[i + 3], ARGV[i + 4]
    if new == '' then new = false end
    if old == '' then old = false end
    pending[d] = pending[d] or {}
    table.insert(pending[d], {ARGV[i + 2], new, old, tonumber(ARGV[i + 5])})
    waiting = true
    i = i + 6
  else
    return redis.error_reply('autoshard: unknown board write ' .. tostring(op))
  end
end
flush()
for b = 0, n - 1 do
  if ARGV[9 + 3 * b] == '1' then redis.call('SET', KEYS[tonumber(ARGV[7 + 3 * b])], ARGV[4]) end
end
mark()
return 'OK'
"#,
        ],
    )
}

/// Appends updates to queue shards in one step: `KEYS[1]` the board's
/// queue heads (shard -> next sequence number), `KEYS[3]` the board's
/// version (`GONE`, nothing written, once a delete set it to
/// [`DELETED`](super::lifecycle::DELETED): the delete's script and this one
/// are atomic on the same slot, so an append is either deleted with the
/// board or refused), `KEYS[4..]` the shards'
/// streams in the order of the groups in `ARGV[4..]`: shard, count `n`,
/// then `n` (player, score, data) triples, an empty score for a removal,
/// empty data for none (else a `v` before the data). Entry ids
/// are `<seq>-1`, so `XRANGE` gives a shard in sequence order; field `t`
/// is the server's time in ms (for the age of the oldest queued update,
/// [`queue_oldest`]: the ids, being sequence numbers, carry none). The board's
/// version is not touched: an append commutes with every transaction (it
/// only adds rows past the head, which no transaction has read).
pub(crate) fn append_queue() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script_of(
        &S,
        &[
            BOARD_TYPES,
            r#"
local bad = check_types({[3] = 'string'})
if bad then return bad end
if redis.call('GET', KEYS[3]) == '"#,
            super::lifecycle::DELETED,
            r#"' then return 'GONE' end
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('autoshard: queue heads ' .. KEYS[1] .. ' is a ' .. t)
end
local now = redis.call('TIME')
local t = now[1] .. string.format('%03d', math.floor(tonumber(now[2]) / 1000))
local i, k = 4, 4
while i <= #ARGV do
  local n = tonumber(ARGV[i + 1])
  local first = redis.call('HINCRBY', KEYS[1], ARGV[i], n) - n
  for j = 0, n - 1 do
    local p, s, d = ARGV[i + 2 + 3 * j], ARGV[i + 3 + 3 * j], ARGV[i + 4 + 3 * j]
    local id = string.format('%.0f-1', first + j)
    local fields = {'p', p, 't', t}
    if s ~= '' then fields[#fields + 1] = 's'; fields[#fields + 1] = s end
    if d ~= '' then fields[#fields + 1] = 'd'; fields[#fields + 1] = string.sub(d, 2) end
    redis.call('XADD', KEYS[k], id, unpack(fields))
  end
  i, k = i + 2 + 3 * n, k + 1
end
mark()
return 'OK'
"#,
        ],
    )
}

/// How long the oldest first entry of the streams `KEYS` (the queue
/// shards, trimmed as they are applied, so a first entry is the shard's
/// oldest not applied) has waited, in ms by the server's clock; -1 when
/// none is queued or none carries a time (`t`, see [`append_queue`]).
pub(crate) fn queue_oldest() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| {
        Script::new(
            r#"
local oldest = nil
for i = 1, #KEYS do
  local rows = redis.call('XRANGE', KEYS[i], '-', '+', 'COUNT', 1)
  if #rows > 0 then
    local fields = rows[1][2]
    for j = 1, #fields, 2 do
      if fields[j] == 't' then
        local t = tonumber(fields[j + 1])
        if t and (oldest == nil or t < oldest) then oldest = t end
      end
    end
  end
end
if oldest == nil then return -1 end
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
return math.max(ms - oldest, 0)
"#,
        )
    })
}

/// Queued updates in the streams `KEYS`: all of them with `ARGV[1]` = `all`;
/// else those with ids up to `ARGV[1 + i]` in `KEYS[i]` (empty: none), and
/// with `ARGV[1]` = `any` only whether there is one (0 or 1).
pub(crate) fn queue_count() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| {
        Script::new(
            r#"
local n = 0
for i = 1, #KEYS do
  if ARGV[1] == 'all' then
    n = n + redis.call('XLEN', KEYS[i])
  elseif ARGV[i + 1] ~= '' then
    local limit = ARGV[1] == 'any' and 1 or nil
    local rows
    if limit then
      rows = redis.call('XRANGE', KEYS[i], '-', ARGV[i + 1], 'COUNT', 1)
    else
      rows = redis.call('XRANGE', KEYS[i], '-', ARGV[i + 1])
    end
    n = n + #rows
    if limit and n > 0 then return 1 end
  end
end
return n
"#,
        )
    })
}

//! The Lua scripts of a board stored natively (`board_tx/native.rs`):
//! its reads, each one script, and a direct write whole in one script. The
//! write is a piece (`scripts.rs`): it starts with the exactly-once prelude.

use super::scripts::{script_of, BOARD_TYPES};
use redis::Script;
use std::sync::OnceLock;

/// One read of a native board (`board_tx/native.rs`), version-checked as
/// `scripts::board_read` is: `KEYS[2..4]` the ranking order, the distinct scores
/// and the players, `ARGV[2]` the operation:
///
/// - `ABOVE key distinct`: `{players before key, distinct scores before
///   key (0 unless distinct is 1)}`, `key` a score's 8 bytes;
/// - `ABOVES key...`: the players before each key (a score's 8 bytes, or
///   a row's 16: the players ahead of that score and arrival);
/// - `ROW player`: the player's row (16 bytes), nil if absent;
/// - `COUNTS player row distinct key...`: `{place, counts, distinct}`,
///   `place` `1` if the player's row is `row`, `0` if they are absent,
///   `-1` if they hold another row, `counts` the players before each key,
///   and with `distinct` `1` every distinct score key before `row`'s score
///   (else none), concatenated in one string (a list of thousands costs
///   the server and the client a value each): a split board's rank, each
///   tree asked once (`ranking/trees/native.rs`);
/// - `FROM n distinct start key...`: `{counts, members, distinct}`: the
///   players before each key, the first `n` members from `start` (a
///   16-byte row) on, and with `distinct` `1` every distinct score key
///   before `start`'s score, concatenated (else none): a split board's
///   page, each tree read once (`ranking/trees/native.rs`);
/// - `AT rank...`: `{size, members}`, the order's size and its members
///   at each 0-based rank (none past the end): the pivots a split
///   board's look starts from (`ranking/trees/native.rs`);
/// - `DISTINCT bound after limit`: up to `limit` distinct score keys
///   before `bound`, from after `after` (empty: from the first);
/// - `RANK player kind`: nil if absent, else the players before them
///   (`s`: with a better score; `o`: in ranking order) or the distinct
///   better scores (`d`);
/// - `RANGE start stop` (0-based, inclusive): `{start, above, distinct
///   above, members}`, the counts of the first member's score;
/// - `AROUND player k`: as `RANGE` over the player's `k` neighbours either
///   side, `{}` if absent;
/// - `BETWEEN hi below limit`: `{n, page}` for the `n` players with a
///   score key from `hi`'s to before `below`'s (to the end if `below` is
///   empty), `page` as `RANGE` over the first `limit` of them (`{}` for
///   none): a score range, counted and listed in one call (control: with
///   the page one member too long, `EVERY_READ` failed on Redis, `k = 1:
///   between(3..=3, 2)` listing 3);
/// - `LEN`: the order's size; `ALL`: `{players hash, order, multiplicities
///   hash}` for the integrity check.
pub(crate) fn native_read() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| {
        Script::new(
            r#"
local v = redis.call('GET', KEYS[1]) or '0'
if ARGV[1] ~= '' and v ~= ARGV[1] then return {'STALE'} end
local op, o, s, p = ARGV[2], KEYS[2], KEYS[3], KEYS[4]
local function counts(pre)
  return redis.call('ZLEXCOUNT', o, '-', '(' .. pre), redis.call('ZLEXCOUNT', s, '-', '(' .. pre)
end
local function range(start, stop)
  local ms = redis.call('ZRANGE', o, start, stop)
  if #ms == 0 then return {start, 0, 0, ms} end
  local above, distinct = counts(string.sub(ms[1], 1, 8))
  return {start, above, distinct, ms}
end
local r
if op == 'ABOVE' then
  local above = redis.call('ZLEXCOUNT', o, '-', '(' .. ARGV[3])
  local distinct = 0
  if ARGV[4] == '1' then distinct = redis.call('ZLEXCOUNT', s, '-', '(' .. ARGV[3]) end
  r = {above, distinct}
elseif op == 'ABOVES' then
  r = {}
  for i = 3, #ARGV do r[#r + 1] = redis.call('ZLEXCOUNT', o, '-', '(' .. ARGV[i]) end
elseif op == 'AROUND' then
  local row = redis.call('HGET', p, ARGV[3])
  if not row then
    r = {}
  else
    local ahead = redis.call('ZRANK', o, row .. ARGV[3])
    if not ahead then return redis.error_reply('autoshard: player ' .. ARGV[3] .. ' is not in the ranking order') end
    local k = tonumber(ARGV[4])
    r = range(math.max(0, ahead - k), ahead + k)
  end
elseif op == 'RANK' then
  local row = redis.call('HGET', p, ARGV[3])
  if row then
    local kind = ARGV[4]
    if kind == 's' then
      r = redis.call('ZLEXCOUNT', o, '-', '(' .. string.sub(row, 1, 8))
    elseif kind == 'd' then
      r = redis.call('ZLEXCOUNT', s, '-', '(' .. string.sub(row, 1, 8))
    else
      r = redis.call('ZRANK', o, row .. ARGV[3])
    end
  end
elseif op == 'RANGE' then
  r = range(tonumber(ARGV[3]), ARGV[4])
elseif op == 'BETWEEN' then
  local above = redis.call('ZLEXCOUNT', o, '-', '(' .. ARGV[3])
  local upto
  if ARGV[4] == '' then upto = redis.call('ZCARD', o) else upto = redis.call('ZLEXCOUNT', o, '-', '(' .. ARGV[4]) end
  local n = math.max(0, upto - above)
  local k = math.min(n, tonumber(ARGV[5]))
  local page = {}
  if k > 0 then page = range(above, above + k - 1) end
  r = {n, page}
elseif op == 'ROW' then
  r = redis.call('HGET', p, ARGV[3])
elseif op == 'COUNTS' then
  local row = redis.call('HGET', p, ARGV[3])
  local place = 0
  if row == ARGV[4] then place = 1 elseif row then place = -1 end
  local counts = {}
  for i = 6, #ARGV do counts[#counts + 1] = redis.call('ZLEXCOUNT', o, '-', '(' .. ARGV[i]) end
  local distinct = ''
  if ARGV[5] == '1' then distinct = table.concat(redis.call('ZRANGEBYLEX', s, '-', '(' .. string.sub(ARGV[4], 1, 8))) end
  r = {place, counts, distinct}
elseif op == 'FROM' then
  local counts = {}
  for i = 6, #ARGV do counts[#counts + 1] = redis.call('ZLEXCOUNT', o, '-', '(' .. ARGV[i]) end
  local members = redis.call('ZRANGEBYLEX', o, '[' .. ARGV[5], '+', 'LIMIT', 0, tonumber(ARGV[3]))
  local distinct = ''
  if ARGV[4] == '1' then distinct = table.concat(redis.call('ZRANGEBYLEX', s, '-', '(' .. string.sub(ARGV[5], 1, 8))) end
  r = {counts, members, distinct}
elseif op == 'AT' then
  local ms = {}
  for i = 3, #ARGV do
    local m = redis.call('ZRANGE', o, ARGV[i], ARGV[i])[1]
    if m then ms[#ms + 1] = m end
  end
  r = {redis.call('ZCARD', o), ms}
elseif op == 'DISTINCT' then
  local from = '-'
  if ARGV[4] ~= '' then from = '(' .. ARGV[4] end
  r = redis.call('ZRANGEBYLEX', s, from, '(' .. ARGV[3], 'LIMIT', 0, tonumber(ARGV[5]))
elseif op == 'LEN' then
  r = redis.call('ZCARD', o)
elseif op == 'ALL' then
  r = {redis.call('HGETALL', p), redis.call('ZRANGE', o, 0, -1), redis.call('HGETALL', KEYS[5])}
else
  return redis.error_reply('autoshard: unknown native read ' .. tostring(op))
end
return {'OK', v, r}
"#,
        )
    })
}

/// Moves of a native board's players, applied together: a function
/// `apply_moves(k, moves)` of the scripts that write native boards
/// ([`native_write`], `scripts::board_commit`). `k` names the board's
/// keys (`order`, `players`, `data`, `distinct`, `counts`, `arrivals`);
/// `moves` lists `{player, new, old, floor}` in the order they happen:
/// `new` the 8-byte score key (`false`: off the board, with the player's
/// entry data), `old` the 16-byte row they leave (`false`: none; `'?'`:
/// whatever an earlier move of these left, else the stored row), `floor`
/// the lowest arrival the new row may take (`0`: the board's counter
/// decides; a tree of a split board passes board-wide numbers,
/// `ranking/trees/arrival.rs`).
///
/// The outcome is the moves' one by one, in order: each new row takes
/// the board's next arrival (at least its floor), a score's multiplicity
/// counts its players and the distinct scores hold the scores counted
/// above zero. Two or more moves take not ~10 calls each but one per key
/// and kind, a few in all whatever their number (variadic, in chunks
/// within Lua's `unpack` limit): each call's dispatch costs the master
/// about as much as the command does (BENCHMARKS.md, "Redis-native
/// boards"). A single move (`set_score`) goes call by call, which costs
/// it less than the tables of the batched form.
pub(super) const MOVES: &str = r#"
local function be8(n)
  local b = {}
  for j = 8, 1, -1 do b[j] = n % 256; n = math.floor(n / 256) end
  return string.char(unpack(b))
end
-- One command over `list` from `key`, `step` elements per call (even
-- for pairs).
local function chunked(cmd, key, list, step)
  for s = 1, #list, step do
    redis.call(cmd, key, unpack(list, s, math.min(s + step - 1, #list)))
  end
end
-- One move, call by call: for a single move the batched form's tables
-- cost the master more than the calls they save (~5 µs a `set_score`).
local function move_one(k, player, new, old, floor)
  if old == '?' then old = redis.call('HGET', k.players, player) or false end
  if old then
    redis.call('ZREM', k.order, old .. player)
    local pre = string.sub(old, 1, 8)
    if redis.call('HINCRBY', k.counts, pre, -1) <= 0 then
      redis.call('HDEL', k.counts, pre)
      redis.call('ZREM', k.distinct, pre)
    end
  end
  if new then
    local arrival = redis.call('INCR', k.arrivals)
    if floor > arrival then
      redis.call('SET', k.arrivals, string.format('%.0f', floor))
      arrival = floor
    end
    local row = new .. be8(arrival)
    redis.call('ZADD', k.order, 0, row .. player)
    redis.call('HSET', k.players, player, row)
    if redis.call('HINCRBY', k.counts, new, 1) == 1 then redis.call('ZADD', k.distinct, 0, new) end
  else
    redis.call('HDEL', k.players, player)
    redis.call('HDEL', k.data, player)
  end
end
local function apply_moves(k, moves)
  if #moves == 0 then return end
  if #moves == 1 then
    local m = moves[1]
    return move_one(k, m[1], m[2], m[3], m[4])
  end
  local fresh, floored = 0, false
  for _, m in ipairs(moves) do
    if m[2] then
      fresh = fresh + 1
      if m[4] > 0 then floored = true end
    end
  end
  -- Without floors the arrivals are the counter's next `fresh` numbers.
  local counter = 0
  if fresh > 0 then
    if floored then
      counter = tonumber(redis.call('GET', k.arrivals) or '0')
    else
      counter = redis.call('INCRBY', k.arrivals, fresh) - fresh
    end
  end
  local added, removed, rows, dropped, deltas = {}, {}, {}, {}, {}
  for _, m in ipairs(moves) do
    local player, new, old, floor = m[1], m[2], m[3], m[4]
    if old == '?' then
      old = rows[player]
      if old == nil then old = redis.call('HGET', k.players, player) or false end
    end
    if old then
      local member = old .. player
      -- A row this call added is taken back, not removed.
      if added[member] then added[member] = nil else removed[#removed + 1] = member end
      local pre = string.sub(old, 1, 8)
      deltas[pre] = (deltas[pre] or 0) - 1
    end
    if new then
      local arrival = counter + 1
      if floor > arrival then arrival = floor end
      counter = arrival
      local row = new .. be8(arrival)
      added[row .. player] = true
      rows[player] = row
      deltas[new] = (deltas[new] or 0) + 1
    else
      rows[player] = false
      dropped[#dropped + 1] = player
    end
  end
  if floored and fresh > 0 then redis.call('SET', k.arrivals, string.format('%.0f', counter)) end
  chunked('ZREM', k.order, removed, 1000)
  local members, sets, unset = {}, {}, {}
  for member in pairs(added) do members[#members + 1] = 0; members[#members + 1] = member end
  chunked('ZADD', k.order, members, 1000)
  for player, row in pairs(rows) do
    if row then sets[#sets + 1] = player; sets[#sets + 1] = row else unset[#unset + 1] = player end
  end
  chunked('HSET', k.players, sets, 1000)
  chunked('HDEL', k.players, unset, 1000)
  chunked('HDEL', k.data, dropped, 1000)
  local pres = {}
  for pre, d in pairs(deltas) do
    if d ~= 0 then pres[#pres + 1] = pre end
  end
  local counts, gone, first, last = {}, {}, {}, {}
  for s = 1, #pres, 1000 do
    local had = redis.call('HMGET', k.counts, unpack(pres, s, math.min(s + 999, #pres)))
    for j, before in ipairs(had) do
      local pre = pres[s + j - 1]
      before = tonumber(before) or 0
      local after = before + deltas[pre]
      if after > 0 then
        counts[#counts + 1] = pre; counts[#counts + 1] = after
        if before <= 0 then first[#first + 1] = 0; first[#first + 1] = pre end
      else
        gone[#gone + 1] = pre
        if before > 0 then last[#last + 1] = pre end
      end
    end
  end
  chunked('HSET', k.counts, counts, 1000)
  chunked('HDEL', k.counts, gone, 1000)
  chunked('ZREM', k.distinct, last, 1000)
  chunked('ZADD', k.distinct, first, 1000)
end
"#;

/// One submission to a native board: a function `submit_one(k, policy,
/// player, key, d, floor)` of the scripts that submit ([`native_write`],
/// [`native_together`]), after [`MOVES`]: `k` the board's keys as
/// `apply_moves` names them, `key` the submitted score's 8-byte key, `d`
/// the entry data (empty: none, else a `v` and the data) and `floor` the
/// arrival floor, as one update of [`native_write`]'s batch; it moves the
/// player as a batch of that one update does and answers the report
/// `before after above_before above_after`: the player's score keys before
/// (`-`: not on the board) and after, in hex, and the players better than
/// each, counted before the move and after it (`-` with no score before).
pub(super) const SUBMIT_ONE: &str = r#"
local function less(a, b)
  for j = 1, 8 do
    local x, y = string.byte(a, j), string.byte(b, j)
    if x ~= y then return x < y end
  end
  return false
end
local function above(k, key)
  return string.format('%.0f', redis.call('ZLEXCOUNT', k.order, '-', '(' .. key))
end
local function hex(key)
  return (string.gsub(key, '.', function(c) return string.format('%02x', string.byte(c)) end))
end
local function be4(n)
  return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end
local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
-- The key the increment `inc` moves `key` to (`false`: a player not on
-- the board, who starts at the increment's own key), `false` if that
-- leaves the range. Exact: the key's two 32-bit halves in doubles.
local function incremented(key, inc)
  if not key then
    if #inc < 33 then return false end
    return string.sub(inc, 26, 33)
  end
  local hi, lo = u32(key, 1), u32(key, 5)
  local dh, dl = u32(inc, 2), u32(inc, 6)
  if string.sub(inc, 1, 1) == '+' then hi, lo = hi + dh, lo + dl else hi, lo = hi - dh, lo - dl end
  if lo >= 4294967296 then lo, hi = lo - 4294967296, hi + 1 elseif lo < 0 then lo, hi = lo + 4294967296, hi - 1 end
  if hi < 0 or hi >= 4294967296 then return false end
  local out = be4(hi) .. be4(lo)
  if less(out, string.sub(inc, 10, 17)) or less(string.sub(inc, 18, 25), out) then return false end
  return out
end
-- The score key `policy` takes a player at `before` (`false`: not on the
-- board) to with `key`; `false` for an increment out of the range.
local function next_key(policy, before, key)
  if policy == 'increment' then return incremented(before, key) end
  if before and ((policy == 'best' and not less(key, before)) or (policy == 'worst' and less(key, before))) then
    return before
  end
  return key
end
-- Whether an update's data is stored: always under `replace` and
-- `increment`, under `best` and `worst` only when the score changed.
local function takes_data(policy, before, after)
  return policy == 'replace' or policy == 'increment' or before ~= after
end
local function submit_one(k, policy, player, key, d, floor)
  local row = redis.call('HGET', k.players, player) or false
  local before = row and string.sub(row, 1, 8)
  local after = next_key(policy, before, key)
  if not after then return false, before end
  local was_above = '-'
  if before then was_above = above(k, before) end
  if before ~= after then apply_moves(k, {{player, after, row, floor}}) end
  if d ~= '' and takes_data(policy, before, after) then redis.call('HSET', k.data, player, string.sub(d, 2)) end
  return table.concat({before and hex(before) or '-', hex(after), was_above, above(k, after)}, ' ')
end
"#;

/// A direct write to a native board (`board_tx/native.rs`), whole in one
/// script: `KEYS[1]` the board's version, `KEYS[3..8]` its ranking order,
/// players, entry data, distinct scores, multiplicities and arrival
/// counter; `ARGV[4]` the new version (the operation id), `ARGV[5]` the
/// policy (`replace`, `best`, `worst` or `increment`),
/// `ARGV[6]` `1` for a submission's report (below), else empty,
/// `ARGV[7..]` (player, value, data, floor) quadruples: the score's
/// 8-byte key (empty: a removal; under `increment` the increment as
/// `native_writes::value_arg` encodes it, added to the key's two 32-bit
/// halves, exact in Lua's doubles, and checked against the range), data
/// empty for none, else a `v` before
/// it, and the lowest arrival the player may take if this update is their
/// last change (`0`: the board's counter decides; a tree of a split board
/// passes board-wide numbers, `ranking/trees/arrival.rs`). The
/// batch is applied by its net effect as `ranking/apply/` applies one:
/// values in order under the policy, each player moved once to where their
/// last change left them, in the order of those changes, and not at all
/// if that is where they were ([`MOVES`]). Answers `APPLIED n`, `n` the
/// batch's players that were on the board before it (a resend of an
/// applied piece answers the same, from the writer's mark); `GONE` if the
/// board was deleted; `REFUSED i key` if the `i`-th update (1-based) is an
/// increment that takes its player out of the range, `key` their score key
/// then in hex (`-`: not on the board): nothing written, the version put
/// back. A submission (one update, a score) with its report
/// answers `SUBMITTED` and [`SUBMIT_ONE`]'s report instead, so that
/// `submit` and both its ranks are one round trip (the mark keeps this
/// reply too).
///
/// Every server call counts here (this is `set_score`): no `TYPE` check
/// of the keys (only a write behind the store's back gives one a wrong
/// type, and then Redis refuses the first call on it, `WRONGTYPE`), the
/// version set and the tombstone read in one `SET ... GET`, the distinct
/// scores touched only when a score's count crosses zero.
pub(crate) fn native_write() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script_of(
        &S,
        &[
            MOVES,
            SUBMIT_ONE,
            r#"
-- One call both checks for a deleted board and sets the new version;
-- the tombstone goes back before anything else is written.
local was_version = redis.call('SET', KEYS[1], ARGV[4], 'GET')
if was_version == 'deleted' then
  redis.call('SET', KEYS[1], 'deleted')
  return 'GONE'
end
local k = {order = KEYS[3], players = KEYS[4], data = KEYS[5], distinct = KEYS[6], counts = KEYS[7], arrivals = KEYS[8]}
local policy = ARGV[5]
-- An increment out of the range: nothing written, the version put back.
local function refuse(n, key)
  if was_version then redis.call('SET', KEYS[1], was_version) else redis.call('DEL', KEYS[1]) end
  return 'REFUSED ' .. n .. ' ' .. (key and hex(key) or '-')
end
if ARGV[6] == '1' then
  local report, was = submit_one(k, policy, ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10]))
  if not report then return refuse(1, was) end
  local reply = 'SUBMITTED ' .. report
  mark(reply)
  return reply
end
local stored, cur, last, data, final, floors, n, found = {}, {}, {}, {}, {}, {}, 0, 0
for i = 7, #ARGV, 4 do
  n = n + 1
  local player, key, d = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if stored[player] == nil then
    stored[player] = redis.call('HGET', k.players, player) or false
    if stored[player] then found = found + 1 end
    cur[player] = stored[player] and string.sub(stored[player], 1, 8) or false
  end
  local before, after = cur[player], false
  if key ~= '' then
    after = next_key(policy, before, key)
    if not after then return refuse(n, before) end
  end
  if before ~= after then cur[player] = after; last[player] = n; floors[player] = tonumber(ARGV[i + 3]) end
  if not after then
    data[player] = false
  elseif d ~= '' and takes_data(policy, before, after) then
    data[player] = string.sub(d, 2)
  end
  final[player] = key ~= '' and after
end
local order = {}
for player, at in pairs(last) do order[#order + 1] = {at, player} end
table.sort(order, function(a, b) return a[1] < b[1] end)
local moves = {}
for _, at in ipairs(order) do
  local player = at[2]
  local old, new = stored[player], cur[player]
  if not (old and new and string.sub(old, 1, 8) == new) and (old or new) then
    moves[#moves + 1] = {player, new, old, floors[player]}
  end
end
apply_moves(k, moves)
for player, d in pairs(data) do
  if final[player] then
    if d then redis.call('HSET', k.data, player, d) else redis.call('HDEL', k.data, player) end
  end
end
local reply = 'APPLIED ' .. found
-- Kept in the mark: a resend after a lost reply answers the same.
mark(reply)
return reply
"#,
        ],
    )
}

/// One submission to several native boards of one slot, whole in one
/// script (a family's: `ranking/family/one_step.rs`): `KEYS[1]` the first
/// board's version, then from `KEYS[3]` on seven keys a board (its
/// version and the keys [`native_write`] takes, in that order);
/// `ARGV[4]` the new version (the operation id), then from `ARGV[5]` on
/// five arguments a board: policy, player, score key, data, floor, as
/// [`SUBMIT_ONE`] takes them.
///
/// The first board is the guard: where its player has entry data other
/// than the guard's, the script writes nothing and answers `MOVED` (a
/// family's player whose filter values changed, whose boards to leave the
/// caller's transaction finds); where they have none it is written, where
/// they have the same it is not. Every other board is submitted to, its
/// version set; the answer is `TOGETHER` and their reports, `;` between
/// them, kept in the writer's mark. `GONE` if any board was deleted, and
/// `REFUSED i key` (as [`native_write`]'s, `i` counting the boards after
/// the guard) if an increment takes its player out of the range on any
/// board: nothing written.
pub(crate) fn native_together() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script_of(
        &S,
        &[
            MOVES,
            SUBMIT_ONE,
            r#"
local n = (#KEYS - 2) / 7
local function board(b)
  local i = 3 + (b - 1) * 7
  return {version = KEYS[i], order = KEYS[i + 1], players = KEYS[i + 2], data = KEYS[i + 3],
          distinct = KEYS[i + 4], counts = KEYS[i + 5], arrivals = KEYS[i + 6]}
end
local function step(b)
  local i = 5 + (b - 1) * 5
  return ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4])
end
-- Nothing is written before every board is known to be there.
for b = 1, n do
  if redis.call('GET', board(b).version) == 'deleted' then return 'GONE' end
end
local guard = board(1)
local policy, player, key, d, floor = step(1)
local have = redis.call('HGET', guard.data, player)
if have and have ~= string.sub(d, 2) then return 'MOVED' end
-- An increment out of the range on any board leaves every board unwritten.
for b = 2, n do
  local k, policy, player, key = board(b), step(b)
  if policy == 'increment' then
    local row = redis.call('HGET', k.players, player)
    local before = row and string.sub(row, 1, 8)
    if not incremented(before, key) then return 'REFUSED ' .. (b - 1) .. ' ' .. (before and hex(before) or '-') end
  end
end
if not have then
  redis.call('SET', guard.version, ARGV[4])
  submit_one(guard, policy, player, key, d, floor)
end
local reports = {}
for b = 2, n do
  local k = board(b)
  redis.call('SET', k.version, ARGV[4])
  -- Refused increments were found above.
  reports[#reports + 1] = submit_one(k, step(b)) or error('autoshard: an increment refused late')
end
local reply = 'TOGETHER ' .. table.concat(reports, ';')
mark(reply)
return reply
"#,
        ],
    )
}

/// One trim batch of a native board (`ranking/trim.rs`), whole in one
/// script, so that no other writer can slip between its find and its
/// removal and nothing is retried: keys as [`native_write`], `ARGV[4]` the
/// new version (the operation id), `ARGV[5]` the pick and `ARGV[6..8]` its
/// bounds, either `B`, the first score key of the range, the exclusive lex
/// bound after its last (`+`: to the end) and the batch's size (the first
/// members of the range, `ZRANGEBYLEX ... LIMIT`), or `R` and the 0-based
/// ranks `start stop` (`ZRANGE`: the players below the first `start`).
/// Removes those players as a removal of `native_write` does (order,
/// players, entry data, their scores' multiplicities and, at zero, the
/// distinct scores) and answers `TRIMMED n`; `GONE` if the board was
/// deleted.
pub(crate) fn native_trim() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    script_of(
        &S,
        &[
            BOARD_TYPES,
            r#"
if redis.call('GET', KEYS[1]) == 'deleted' then return 'GONE' end
local bad = check_types({[3] = 'zset', [4] = 'hash', [5] = 'hash', [6] = 'zset', [7] = 'hash', [8] = 'string'})
if bad then return bad end
local o, p, e, s, m = KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local ms
if ARGV[5] == 'B' then
  ms = redis.call('ZRANGEBYLEX', o, '[' .. ARGV[6], ARGV[7], 'LIMIT', 0, tonumber(ARGV[8]))
else
  ms = redis.call('ZRANGE', o, ARGV[6], ARGV[7])
end
-- Nothing written: no new version, and a resend may run again.
if #ms == 0 then return 'TRIMMED 0' end
local players, per = {}, {}
for i, member in ipairs(ms) do
  players[i] = string.sub(member, 17)
  local pre = string.sub(member, 1, 8)
  per[pre] = (per[pre] or 0) + 1
end
-- At most one batch (`TRIM_BATCH`) of arguments: within `unpack`'s limit.
redis.call('ZREM', o, unpack(ms))
redis.call('HDEL', p, unpack(players))
redis.call('HDEL', e, unpack(players))
for pre, k in pairs(per) do
  if redis.call('HINCRBY', m, pre, -k) <= 0 then
    redis.call('HDEL', m, pre)
    redis.call('ZREM', s, pre)
  end
end
redis.call('SET', KEYS[1], ARGV[4])
mark()
return 'TRIMMED ' .. #ms
"#,
        ],
    )
}

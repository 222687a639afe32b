//! A board stored natively on Redis: no count tree, the board's own sorted
//! sets answer every query (`seam::NativeBoard`).
//!
//! The ranking order `:o` holds one member per player, `desc(score) ‖
//! arrival ‖ name` (8 + 8 bytes, then the name), all at score 0, so that
//! byte order is ranking order: better scores first, then who reached the
//! score first. A player's row in `:p` is the first 16 bytes of their
//! member. ZSET scores are doubles, board scores full `i64`s: hence the
//! lex encoding. So the ordinal rank is `ZRANK`, the standard rank a
//! `ZLEXCOUNT` to the score's first member, the dense rank a `ZLEXCOUNT`
//! over `:s`, the distinct scores (each kept while `:m` counts a player at
//! it). Arrivals come from the board's counter `:c`: a player who moves
//! gets the next, so one who reached a score first stays ahead, and one
//! who submits the score they hold does not move at all (the ranking
//! layer's plan drops that move).
//!
//! Writes are buffered as [`Write::Move`]s and applied by the
//! transaction's one commit script (`scripts::board_commit`, opcode `M`),
//! which also draws the arrivals; reads are one `native_scripts::native_read`
//! call each, checked against the transaction's version like every read.

use super::{BoardTx, Hash, Write, DISTINCT, ORDER};
use crate::error::{Error, Result};
use crate::seam::{Member, NativeBoard, NativeEntry, NativeRead, Placed, RankKind, Storage};
use crate::stores::redis::board_codec::{array, ascending, bytes, descending, pairs};
use crate::stores::redis::native_scripts;
use redis::Value;
use std::collections::HashMap;

/// A player's row: the score key and the arrival, big-endian.
pub(super) fn row(score: i64, arrival: u64) -> Vec<u8> {
    let mut row = descending(score).to_be_bytes().to_vec();
    row.extend_from_slice(&arrival.to_be_bytes());
    row
}

/// A row's `(score, arrival)`; `None` unless it is 16 bytes.
pub(super) fn parse_row(row: &[u8]) -> Option<(i64, u64)> {
    let key = u64::from_be_bytes(row.get(..8)?.try_into().ok()?);
    let arrival = u64::from_be_bytes(row.get(8..16)?.try_into().ok()?);
    (row.len() == 16).then_some((ascending(key), arrival))
}

fn number(value: Option<Value>) -> Option<u64> {
    match value? {
        Value::Int(n) => u64::try_from(n).ok(),
        other => String::from_utf8(bytes(other)?).ok()?.parse().ok(),
    }
}

impl BoardTx<'_> {
    fn native_read(&self, op: &str, args: &[&[u8]]) -> Result<Value> {
        if self.peeking.get() {
            return self.native_peek(op, args);
        }
        let keys = [
            self.data[ORDER].as_str(),
            self.data[DISTINCT].as_str(),
            self.data[Hash::Players as usize].as_str(),
            self.data[DISTINCT + 1].as_str(),
        ];
        self.read_with(native_scripts::native_read(), &keys, op, args)
    }

    fn native_peek(&self, op: &str, args: &[&[u8]]) -> Result<Value> {
        let keys = [
            self.data[ORDER].as_str(),
            self.data[DISTINCT].as_str(),
            self.data[Hash::Players as usize].as_str(),
            self.data[DISTINCT + 1].as_str(),
        ];
        self.peek_with(native_scripts::native_read(), &keys, op, args)
    }

    /// The players before each of `keys` (rows, or scores' 8 bytes), in
    /// one read.
    fn before_keys(&self, keys: &[Vec<u8>]) -> Result<Vec<u64>> {
        let args: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let reply = self.native_read("ABOVES", &args)?;
        self.counts(Some(reply), keys.len())
    }

    /// A reply's list of `n` counts.
    fn counts(&self, reply: Option<Value>, n: usize) -> Result<Vec<u64>> {
        let counts: Vec<u64> = reply
            .map(array)
            .unwrap_or_default()
            .into_iter()
            .map(|n| number(Some(n)))
            .collect::<Option<_>>()
            .ok_or_else(|| self.bad_reply("counts"))?;
        match counts.len() == n {
            true => Ok(counts),
            false => Err(self.bad_reply("counts")),
        }
    }

    /// A reply's score keys, concatenated in one string, as tree scores.
    fn score_keys(&self, reply: Option<Value>) -> Result<Vec<i64>> {
        let keys = reply.and_then(bytes).unwrap_or_default();
        if !keys.len().is_multiple_of(8) {
            return Err(self.bad_reply("distinct scores"));
        }
        Ok(keys
            .chunks_exact(8)
            .map(|key| ascending(u64::from_be_bytes(key.try_into().expect("8 bytes"))))
            .collect())
    }

    /// A reply's list of members, as `(tree score, arrival, player)`.
    fn members(&self, reply: Option<Value>) -> Result<Vec<Member>> {
        let mut members = Vec::new();
        for member in reply.map(array).unwrap_or_default() {
            let member = bytes(member).ok_or_else(|| self.bad_reply("member"))?;
            let (score, arrival) = parse_row(member.get(..16).unwrap_or_default())
                .ok_or_else(|| self.bad_reply("member"))?;
            let player = String::from_utf8(member[16..].to_vec()).map_err(|_| {
                self.corrupt("ranking order".into(), "a player that is not UTF-8".into())
            })?;
            members.push((score, arrival, player));
        }
        Ok(members)
    }

    fn bad_reply(&self, what: &str) -> Error {
        self.corrupt("ranking order".into(), format!("unreadable {what} reply"))
    }

    /// `{start, above, distinct above, members}` as entries.
    fn entries(&self, reply: Value) -> Result<Vec<NativeEntry>> {
        let mut reply = array(reply).into_iter();
        let (Some(start), Some(above), Some(distinct)) = (
            number(reply.next()),
            number(reply.next()),
            number(reply.next()),
        ) else {
            return Err(self.bad_reply("range"));
        };
        let members = reply.next().map(array).unwrap_or_default();
        let mut out: Vec<NativeEntry> = Vec::with_capacity(members.len());
        let (mut rank, mut dense) = (above + 1, distinct + 1);
        for (i, member) in members.into_iter().filter_map(bytes).enumerate() {
            let position = start + i as u64 + 1;
            let (score, arrival) = parse_row(member.get(..16).unwrap_or_default())
                .ok_or_else(|| self.bad_reply("member"))?;
            if let Some(last) = out.last()
                && last.score != score
            {
                (rank, dense) = (position, dense + 1);
            }
            let player = String::from_utf8(member[16..].to_vec()).map_err(|_| {
                self.corrupt("ranking order".into(), "a player that is not UTF-8".into())
            })?;
            out.push(NativeEntry {
                player,
                score,
                rank,
                dense,
                position,
                arrival,
            });
        }
        Ok(out)
    }
}

/// The keys of `places`: a row, or a score's 8 bytes for a place with no
/// arrival.
fn place_keys(places: &[(i64, Option<u64>)]) -> Vec<Vec<u8>> {
    places
        .iter()
        .map(|&(s, a)| match a {
            Some(a) => row(s, a),
            None => descending(s).to_be_bytes().to_vec(),
        })
        .collect()
}

/// The arrival a player moved in this transaction reads with: the
/// commit draws the real one, the next of the board's counter.
const PENDING: u64 = i64::MAX as u64;

// Lua's numbers are doubles: every count and position handed to a script
// stays below 2^53.
const LUA_EXACT: u64 = 1 << 52;

impl NativeBoard for BoardTx<'_> {
    fn place(
        &self,
        player: &str,
        from: Option<(i64, u64)>,
        to: Option<i64>,
        floor: u64,
    ) -> Result<()> {
        let field = player.as_bytes().to_vec();
        // A player moved before in this transaction has a row only the
        // commit knows (it draws the arrival): it reads it there.
        let first = self.moved.borrow_mut().insert(field.clone());
        self.writes.borrow_mut().push(Write::Move {
            player: field.clone(),
            to: to.map_or_else(Vec::new, |s| descending(s).to_be_bytes().to_vec()),
            from: first.then(|| from.map_or_else(Vec::new, |(s, a)| row(s, a))),
            floor,
        });
        // A later read of the player in this transaction (a family worker
        // applies several submissions in one) sees the new score. Its
        // arrival is drawn by the commit; until then it reads as after
        // every arrival so far, which is where the commit puts it.
        let mut known = self.known.borrow_mut();
        known.insert((Hash::Players, field.clone()), to.map(|s| row(s, PENDING)));
        if to.is_none() {
            known.insert((Hash::Data, field), None);
        }
        Ok(())
    }

    fn above_each(&self, scores: &[i64]) -> Result<Vec<u64>> {
        let places: Vec<(i64, Option<u64>)> = scores.iter().map(|&s| (s, None)).collect();
        self.before_keys(&place_keys(&places))
    }

    fn above(&self, score: i64, distinct: bool) -> Result<(u64, u64)> {
        let key = descending(score).to_be_bytes();
        let flag: &[u8] = if distinct { b"1" } else { b"0" };
        let mut reply = array(self.native_read("ABOVE", &[&key, flag])?).into_iter();
        match (number(reply.next()), number(reply.next())) {
            (Some(above), Some(distinct)) => Ok((above, distinct)),
            _ => Err(self.bad_reply("count")),
        }
    }

    fn before_each(&self, places: &[(i64, u64)]) -> Result<Vec<u64>> {
        let places: Vec<(i64, Option<u64>)> = places.iter().map(|&(s, a)| (s, Some(a))).collect();
        self.before_keys(&place_keys(&places))
    }

    fn peeking(&self, on: bool) {
        self.peeking.set(on);
        if let (false, Some((ahead, me))) = (on, self.ahead) {
            ahead.forget_peeks(me);
        }
    }

    fn read_from(
        &self,
        start: (i64, u64),
        n: u64,
        places: &[(i64, Option<u64>)],
        distinct: bool,
    ) -> Result<NativeRead> {
        let keys = place_keys(places);
        let (start, n) = (row(start.0, start.1), n.min(LUA_EXACT).to_string());
        let flag: &[u8] = if distinct { b"1" } else { b"0" };
        let mut args: Vec<&[u8]> = vec![n.as_bytes(), flag, &start];
        args.extend(keys.iter().map(Vec::as_slice));
        let mut reply = array(self.native_read("FROM", &args)?).into_iter();
        let counts = self.counts(reply.next(), places.len())?;
        let members = self.members(reply.next())?;
        let distinct = self.score_keys(reply.next())?;
        Ok(NativeRead {
            counts,
            members,
            distinct,
        })
    }

    fn members_at(&self, ranks: &[u64]) -> Result<(u64, Vec<Member>)> {
        let ranks: Vec<String> = ranks
            .iter()
            .map(|r| r.min(&LUA_EXACT).to_string())
            .collect();
        let args: Vec<&[u8]> = ranks.iter().map(String::as_bytes).collect();
        let mut reply = array(self.native_read("AT", &args)?).into_iter();
        let size = number(reply.next()).ok_or_else(|| self.bad_reply("size"))?;
        Ok((size, self.members(reply.next())?))
    }

    fn peek_place(&self, player: &str) -> Result<Option<(i64, u64)>> {
        match self.native_peek("ROW", &[player.as_bytes()])? {
            Value::Nil => Ok(None),
            found => bytes(found)
                .as_deref()
                .and_then(parse_row)
                .map(Some)
                .ok_or_else(|| self.bad_reply("row")),
        }
    }

    fn counts_at(
        &self,
        player: &str,
        place: (i64, u64),
        places: &[(i64, Option<u64>)],
        distinct: bool,
    ) -> Result<(Placed, NativeRead)> {
        let at = row(place.0, place.1);
        let flag: &[u8] = if distinct { b"1" } else { b"0" };
        let keys = place_keys(places);
        let mut args: Vec<&[u8]> = vec![player.as_bytes(), &at, flag];
        args.extend(keys.iter().map(Vec::as_slice));
        let mut reply = array(self.native_read("COUNTS", &args)?).into_iter();
        let placed = match reply.next() {
            Some(Value::Int(1)) => Placed::There,
            Some(Value::Int(0)) => Placed::Absent,
            Some(Value::Int(-1)) => Placed::Elsewhere,
            _ => return Err(self.bad_reply("place")),
        };
        let counts = self.counts(reply.next(), places.len())?;
        let distinct = self.score_keys(reply.next())?;
        let read = NativeRead {
            counts,
            members: Vec::new(),
            distinct,
        };
        Ok((placed, read))
    }

    fn distinct_better(&self, score: i64, after: Option<i64>, limit: u64) -> Result<Vec<i64>> {
        let bound = descending(score).to_be_bytes();
        let after = after.map(|a| descending(a).to_be_bytes());
        let limit = limit.min(LUA_EXACT).to_string();
        let args: [&[u8]; 3] = [
            &bound,
            after.as_ref().map_or(&[][..], |a| &a[..]),
            limit.as_bytes(),
        ];
        array(self.native_read("DISTINCT", &args)?)
            .into_iter()
            .map(|key| {
                let key: [u8; 8] = bytes(key)?.try_into().ok()?;
                Some(ascending(u64::from_be_bytes(key)))
            })
            .collect::<Option<_>>()
            .ok_or_else(|| self.bad_reply("distinct scores"))
    }

    fn rank_of(&self, player: &str, kind: RankKind) -> Result<Option<u64>> {
        let kind: &[u8] = match kind {
            RankKind::Standard => b"s",
            RankKind::Dense => b"d",
            RankKind::Ordinal => b"o",
        };
        match self.native_read("RANK", &[player.as_bytes(), kind])? {
            Value::Nil => Ok(None),
            reply => number(Some(reply))
                .map(|n| Some(n + 1))
                .ok_or_else(|| self.bad_reply("rank")),
        }
    }

    fn range(&self, from: u64, to: u64) -> Result<Vec<NativeEntry>> {
        if from == 0 || from > to || from > LUA_EXACT {
            return Ok(Vec::new());
        }
        let (start, stop) = ((from - 1).to_string(), (to - 1).min(LUA_EXACT).to_string());
        let reply = self.native_read("RANGE", &[start.as_bytes(), stop.as_bytes()])?;
        self.entries(reply)
    }

    fn around(&self, player: &str, k: u64) -> Result<Vec<NativeEntry>> {
        let k = k.min(LUA_EXACT).to_string();
        let reply = self.native_read("AROUND", &[player.as_bytes(), k.as_bytes()])?;
        if array(reply.clone()).is_empty() {
            return Ok(Vec::new());
        }
        self.entries(reply)
    }

    fn between(&self, hi: i64, below: Option<i64>, limit: u64) -> Result<(u64, Vec<NativeEntry>)> {
        let hi = descending(hi).to_be_bytes();
        let below = below.map(|b| descending(b).to_be_bytes());
        let limit = limit.min(LUA_EXACT).to_string();
        let args: [&[u8]; 3] = [
            &hi,
            below.as_ref().map_or(&[][..], |b| &b[..]),
            limit.as_bytes(),
        ];
        let mut reply = array(self.native_read("BETWEEN", &args)?).into_iter();
        let n = number(reply.next()).ok_or_else(|| self.bad_reply("count"))?;
        let page = reply.next().map(array).unwrap_or_default();
        match page.is_empty() {
            true => Ok((n, Vec::new())),
            false => Ok((n, self.entries(Value::Array(page))?)),
        }
    }

    fn len(&self) -> Result<u64> {
        number(Some(self.native_read("LEN", &[])?)).ok_or_else(|| self.bad_reply("length"))
    }

    fn check(&self) -> Result<()> {
        let mut reply = array(self.native_read("ALL", &[])?).into_iter();
        let players = reply.next().map(pairs).unwrap_or_default();
        let order: Vec<Vec<u8>> = reply
            .next()
            .map(array)
            .unwrap_or_default()
            .into_iter()
            .filter_map(bytes)
            .collect();
        let counts = reply.next().map(pairs).unwrap_or_default();
        let mut expected: Vec<Vec<u8>> = Vec::with_capacity(players.len());
        let mut per_score: HashMap<Vec<u8>, i64> = HashMap::new();
        for (player, stored) in &players {
            if parse_row(stored).is_none() {
                return Err(self.corrupt(
                    format!("player {:?}", String::from_utf8_lossy(player)),
                    format!("unreadable row {stored:?}"),
                ));
            }
            expected.push([&stored[..], player].concat());
            *per_score.entry(stored[..8].to_vec()).or_default() += 1;
        }
        expected.sort_unstable();
        if expected != order {
            let missing = expected.iter().find(|m| !order.contains(m));
            let extra = order.iter().find(|m| !expected.contains(m));
            return Err(self.corrupt(
                "ranking order".into(),
                format!(
                    "{} members for {} players (first missing {missing:?}, first extra {extra:?})",
                    order.len(),
                    players.len()
                ),
            ));
        }
        let stored: HashMap<Vec<u8>, i64> = counts
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).parse().unwrap_or(-1)))
            .collect();
        if stored != per_score {
            return Err(self.corrupt(
                "players per score".into(),
                format!("{} scores counted, {} held", stored.len(), per_score.len()),
            ));
        }
        // The distinct scores are the counted ones: their count is the
        // dense rank after the last score.
        let last = order.last().map(|m| m[..8].to_vec());
        if let Some(last) = last {
            let (_, distinct) = self.above(
                ascending(u64::from_be_bytes(last[..8].try_into().expect("8 bytes"))),
                true,
            )?;
            if distinct + 1 != per_score.len() as u64 {
                return Err(self.corrupt(
                    "distinct scores".into(),
                    format!("{} before the last of {} scores", distinct, per_score.len()),
                ));
            }
        }
        Ok(())
    }
}

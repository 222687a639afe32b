//! The writes of a board stored natively that are one script each
//! (`native_scripts`): a direct write (`seam::BoardStore::write_native`),
//! a submission with the counts its ranks come from
//! (`seam::BoardStore::submit_native`), a submission to several boards of
//! one slot (`seam::BoardStore::submit_native_together`) and one trim
//! batch (`seam::BoardStore::trim_native`). Each is one piece, applied exactly
//! once, and replies with what it did: the trim finds its batch's players
//! in the ranking order and removes them in the same script, so a writer
//! committing meanwhile costs it nothing, where a batch through a write
//! transaction (reads, then an optimistic commit) is run again whole after
//! every commit of another writer.

use super::board_codec::{ascending, descending};
use super::boards::BoardKeys;
use super::{native_scripts, Piece, RedisCluster, Reply};
use crate::error::{Error, Result};
use crate::seam::{
    Board, NativeRefused, NativeStep, NativeSubmitted, NativeTogether, NativeTrim, NativeUpdate,
    NativeValue,
};

// Lua's numbers are doubles: ranks handed to the script stay below 2^53,
// and no board holds that many players.
const LUA_EXACT: u64 = 1 << 52;

impl RedisCluster {
    /// See `BoardStore::write_native`.
    pub(super) fn write_native_batch(
        &self,
        board: Board<'_>,
        policy: &str,
        updates: &[NativeUpdate<'_>],
    ) -> Result<Option<std::result::Result<u64, NativeRefused>>> {
        match self.native_write(board, policy, updates, false)? {
            None => Ok(None),
            Some(Reply::Applied(found)) => Ok(Some(Ok(found))),
            // Applied, by a send whose mark kept no reply (a script from
            // before `mark(reply)`): how many were found is not known.
            Some(Reply::Dup) => Ok(Some(Ok(0))),
            Some(Reply::Refused(refused)) => Ok(Some(Err(refused))),
            Some(other) => Err(unexpected(other, "a native write")),
        }
    }

    /// See `BoardStore::submit_native`.
    pub(super) fn submit_native_one(
        &self,
        board: Board<'_>,
        policy: &str,
        update: NativeUpdate<'_>,
    ) -> Result<Option<std::result::Result<NativeSubmitted, NativeRefused>>> {
        match self.native_write(board, policy, &[update], true)? {
            None => Ok(None),
            Some(Reply::Submitted(done)) => Ok(Some(Ok(done))),
            Some(Reply::Refused(refused)) => Ok(Some(Err(refused))),
            // No `Dup`: the script marks with its reply, which a resend
            // answers.
            Some(other) => Err(unexpected(other, "a native submission")),
        }
    }

    /// See `BoardStore::submit_native_together`.
    pub(super) fn submit_native_steps(
        &self,
        guard: NativeStep<'_>,
        steps: &[NativeStep<'_>],
    ) -> Result<Option<NativeTogether>> {
        if steps.is_empty() {
            return Ok(None);
        }
        let all: Vec<&NativeStep<'_>> = std::iter::once(&guard).chain(steps).collect();
        let mut keys = Vec::with_capacity(all.len());
        for step in &all {
            let (_, native) = self.board_spec(step.board.id)?;
            let board_keys = BoardKeys::new(self.prefix(), step.board.id);
            let alike = keys
                .first()
                .is_none_or(|k: &BoardKeys| k.slot == board_keys.slot);
            let known = matches!(step.policy, "replace" | "best" | "worst" | "increment");
            if !native || !alike || !known {
                return Ok(None);
            }
            keys.push(board_keys);
        }
        let mut more = Vec::with_capacity(7 * keys.len());
        for k in &keys {
            more.push(k.version());
            more.extend(native_keys(k));
        }
        let mut conn = self.checkout()?;
        let id = self.next_seq(&mut conn);
        let mut binary = vec![format!("{}:{}", id.0, id.1).into_bytes()];
        for step in &all {
            let (player, value, entry, floor) = step.update;
            binary.push(step.policy.as_bytes().to_vec());
            binary.push(player.as_bytes().to_vec());
            binary.push(value_arg(value));
            binary.push(entry.map_or_else(Vec::new, |d| [b"v", d].concat()));
            binary.push(floor.to_string().into_bytes());
        }
        let version = keys[0].version();
        let piece = Piece {
            script: native_scripts::native_together(),
            key: &version,
            slot: keys[0].slot,
            args: Vec::new(),
            binary,
            more_keys: &more,
        };
        match self.run(&mut conn, &piece, id)? {
            Reply::Together(reports) if reports.len() == steps.len() => {
                Ok(Some(NativeTogether::Submitted(reports)))
            }
            Reply::Moved => Ok(Some(NativeTogether::Guarded)),
            Reply::Refused(refused) => Ok(Some(NativeTogether::Refused(refused))),
            Reply::Gone => Ok(None),
            other => Err(unexpected(other, "a native submission to several boards")),
        }
    }

    /// `native_scripts::native_write` of `updates`, reporting a single
    /// update's counts with `report`; `None` where the board is not stored
    /// natively or the policy takes the transaction.
    fn native_write(
        &self,
        board: Board<'_>,
        policy: &str,
        updates: &[NativeUpdate<'_>],
        report: bool,
    ) -> Result<Option<Reply>> {
        let (_, native) = self.board_spec(board.id)?;
        if !native || !matches!(policy, "replace" | "best" | "worst" | "increment") {
            return Ok(None);
        }
        let keys = BoardKeys::new(self.prefix(), board.id);
        let more = native_keys(&keys);
        let mut conn = self.checkout()?;
        let id = self.next_seq(&mut conn);
        let mut binary = vec![
            format!("{}:{}", id.0, id.1).into_bytes(),
            policy.as_bytes().to_vec(),
            if report { b"1".to_vec() } else { Vec::new() },
        ];
        for &(player, value, entry, floor) in updates {
            binary.push(player.as_bytes().to_vec());
            binary.push(value_arg(value));
            binary.push(entry.map_or_else(Vec::new, |d| [b"v", d].concat()));
            binary.push(floor.to_string().into_bytes());
        }
        let version = keys.version();
        let piece = Piece {
            script: native_scripts::native_write(),
            key: &version,
            slot: keys.slot,
            args: Vec::new(),
            binary,
            more_keys: &more,
        };
        match self.run(&mut conn, &piece, id)? {
            Reply::Gone => Err(super::lifecycle::not_found(board.name)),
            reply => Ok(Some(reply)),
        }
    }

    /// See `BoardStore::trim_native`.
    pub(super) fn trim_native_batch(
        &self,
        board: Board<'_>,
        pick: NativeTrim,
        limit: u64,
    ) -> Result<Option<(u64, u64)>> {
        let (_, native) = self.board_spec(board.id)?;
        if !native {
            return Ok(None);
        }
        let limit = limit.clamp(1, LUA_EXACT);
        let bounds: [Vec<u8>; 3] = match pick {
            NativeTrim::Between { lo, hi } => {
                // Members start with their score's 8-byte key, better
                // scores first: the range is from `hi`'s key to before
                // the key after `lo`'s.
                let last = descending(lo);
                let end = match last.checked_add(1) {
                    Some(next) => [b"(", &next.to_be_bytes()[..]].concat(),
                    None => b"+".to_vec(),
                };
                let first = descending(hi).to_be_bytes().to_vec();
                [first, end, limit.to_string().into_bytes()]
            }
            NativeTrim::Below(n) if n >= LUA_EXACT => return Ok(Some((0, 0))),
            NativeTrim::Below(n) => {
                let stop = (n + limit - 1).to_string().into_bytes();
                [n.to_string().into_bytes(), stop, Vec::new()]
            }
        };
        let mode: &[u8] = match pick {
            NativeTrim::Between { .. } => b"B",
            NativeTrim::Below(_) => b"R",
        };
        let keys = BoardKeys::new(self.prefix(), board.id);
        let more = native_keys(&keys);
        let mut conn = self.checkout()?;
        let id = self.next_seq(&mut conn);
        let [a, b, c] = bounds;
        let binary = vec![
            format!("{}:{}", id.0, id.1).into_bytes(),
            mode.to_vec(),
            a,
            b,
            c,
        ];
        let version = keys.version();
        let piece = Piece {
            script: native_scripts::native_trim(),
            key: &version,
            slot: keys.slot,
            args: Vec::new(),
            binary,
            more_keys: &more,
        };
        match self.run(&mut conn, &piece, id)? {
            Reply::Trimmed(n) => Ok(Some((n, n))),
            // An earlier send removed an unknown number: look again.
            Reply::Dup => Ok(Some((limit, 0))),
            Reply::Gone => Err(super::lifecycle::not_found(board.name)),
            other => Err(unexpected(other, "a native trim")),
        }
    }
}

/// An update's value as the scripts take it (`native_scripts::native_write`):
/// empty for a removal, a score's 8-byte key, or an increment's 25 or 33
/// bytes: `+` or `-` (what it does to the key, which falls as the score
/// rises), its size, the keys of the range's best and worst scores, and
/// the key a player not on the board starts at (absent: out of range).
fn value_arg(value: NativeValue) -> Vec<u8> {
    let key = |tree: i64| descending(tree).to_be_bytes();
    match value {
        NativeValue::Remove => Vec::new(),
        NativeValue::Score(tree) => key(tree).to_vec(),
        NativeValue::Add { by, fresh, lo, hi } => {
            // `|by|` is at most 2^63: an `i64` increment's.
            let size = u64::try_from(by.unsigned_abs()).unwrap_or(u64::MAX);
            let mut arg = vec![if by > 0 { b'-' } else { b'+' }];
            arg.extend(size.to_be_bytes());
            arg.extend(key(hi));
            arg.extend(key(lo));
            if let Some(fresh) = fresh {
                arg.extend(key(fresh));
            }
            arg
        }
    }
}

/// `KEYS[3..8]` of the native writes: the board's ranking order, players,
/// entry data, distinct scores, multiplicities and arrival counter.
fn native_keys(keys: &BoardKeys) -> Vec<String> {
    let data = keys.data();
    [3, 2, 6, 7, 8, 9]
        .iter()
        .map(|&i| data[i].clone())
        .collect()
}

fn unexpected(reply: Reply, to: &str) -> Error {
    Error::SchemaMismatch {
        kind: "redis script".into(),
        reason: format!("unexpected reply {reply:?} to {to}"),
    }
}

/// A `REFUSED` reply's fields (`native_scripts::native_write`): the
/// 1-based index of the increment refused and the player's score key at
/// that point in hex (`-`: not on the board).
pub(super) fn parse_refused(fields: &str) -> Option<NativeRefused> {
    let (index, current) = fields.split_once(' ')?;
    let index = index.parse::<usize>().ok()?.checked_sub(1)?;
    let current = match current {
        "-" => None,
        hex if hex.len() == 16 => Some(ascending(u64::from_str_radix(hex, 16).ok()?)),
        _ => return None,
    };
    Some(NativeRefused { index, current })
}

/// A `SUBMITTED` reply's fields (`native_scripts::native_write`): the
/// score keys before (`-`: none) and after, in hex, and the players
/// better than each (`-`: none before).
pub(super) fn parse_submitted(fields: &str) -> Option<NativeSubmitted> {
    let key = |hex: &str| {
        let key = u64::from_str_radix(hex, 16)
            .ok()
            .filter(|_| hex.len() == 16);
        key.map(ascending)
    };
    let mut f = fields.split(' ');
    let (before, after, above_before, above_after) = (f.next()?, f.next()?, f.next()?, f.next()?);
    if f.next().is_some() {
        return None;
    }
    let (before, above_before) = match (before, above_before) {
        ("-", "-") => (None, None),
        (before, above) => (Some(key(before)?), Some(above.parse().ok()?)),
    };
    Some(NativeSubmitted {
        before,
        after: key(after)?,
        above_before,
        above_after: above_after.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new player whose increment alone is out of the range has no
    /// start key: an absent one, not a zeroed one (which the script would
    /// take for the best score: the first version did, and the policy
    /// suite's oracle caught it on Redis Cluster).
    #[test]
    fn an_increment_carries_its_start_key_only_in_range() {
        let out = value_arg(NativeValue::Add {
            by: 5,
            fresh: None,
            lo: 0,
            hi: 9,
        });
        assert_eq!((out.len(), out[0]), (25, b'-'));
        assert_eq!(&out[1..9], &5u64.to_be_bytes());
        assert_eq!(&out[9..17], &descending(9).to_be_bytes());
        assert_eq!(&out[17..25], &descending(0).to_be_bytes());
        let back = value_arg(NativeValue::Add {
            by: i128::from(i64::MIN),
            fresh: Some(3),
            lo: 0,
            hi: 9,
        });
        assert_eq!((back.len(), back[0]), (33, b'+'));
        assert_eq!(&back[1..9], &(1u64 << 63).to_be_bytes());
        assert_eq!(&back[25..], &descending(3).to_be_bytes());
    }

    #[test]
    fn a_submitted_report_parses_and_a_damaged_one_does_not() {
        let key = |score: i64| format!("{:016x}", descending(score));
        let new = format!("- {} - 4", key(-7));
        let done = parse_submitted(&new).unwrap();
        assert_eq!((done.before, done.after), (None, -7));
        assert_eq!((done.above_before, done.above_after), (None, 4));
        let moved = format!("{} {} 12 3", key(i64::MAX), key(i64::MIN));
        let done = parse_submitted(&moved).unwrap();
        assert_eq!((done.before, done.after), (Some(i64::MAX), i64::MIN));
        assert_eq!((done.above_before, done.above_after), (Some(12), 3));
        for bad in [
            format!("- {} 3 4", key(1)),
            format!("{} {} - 4", key(1), key(2)),
            format!("- {} - 4 5", key(1)),
            format!("- {} -", key(1)),
            "- 0a - 4".to_owned(),
            format!("- {} - x", key(1)),
        ] {
            assert_eq!(parse_submitted(&bad), None, "{bad}");
        }
    }
}

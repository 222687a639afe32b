//! The seam's [`Storage`] calls on a [`BoardTx`]: tree nodes, arrival
//! nodes and entry data as hash fields, players as hash fields plus members
//! of the ranking order's sorted set, the queue as streams, and the parsing
//! of what each of them holds.
//!
//! Range reads (`entries_*`, the scans, the queue) read the stored state:
//! the ranking's write path never lists players or scans after writing
//! (`ranking/apply/` reads player rows, leaves, arrival nodes and inner
//! shard rows, all point reads), which `debug_assert`s check.

use super::{BoardTx, Hash, Mode, Write, ORDER};
use crate::error::Result;
use crate::seam::{
    NodeRow, Part, QueuedRow, ScannedArrival, ScannedNode, Storage, NOTHING_APPLIED,
};
use crate::stores::redis::board_codec::{
    array, arrival_field, ascending, bound, bytes, count, dead_letter_json, descending, node_field,
    order_member, pairs, queued_row,
};

impl BoardTx<'_> {
    fn player_row(&self, player: &str, stored: Option<Vec<u8>>) -> Result<Option<(i64, u64)>> {
        let Some(stored) = stored else {
            return Ok(None);
        };
        if self.native.get() {
            return match super::native::parse_row(&stored) {
                Some(row) => Ok(Some(row)),
                None => Err(self.corrupt(
                    format!("player {player:?}"),
                    format!("unreadable row {stored:?}"),
                )),
            };
        }
        let text = String::from_utf8_lossy(&stored);
        let parsed = text
            .split_once(':')
            .and_then(|(s, a)| Some((s.parse().ok()?, a.parse().ok()?)));
        match parsed {
            Some(row) => Ok(Some(row)),
            None => Err(self.corrupt(
                format!("player {player:?}"),
                format!("unreadable row {text:?}"),
            )),
        }
    }

    /// Whether the transaction wrote player rows, which range reads of the
    /// ranking order would not see.
    fn wrote_players(&self) -> bool {
        self.writes
            .borrow()
            .iter()
            .any(|w| matches!(w, Write::Rank(_) | Write::Unrank(_)))
    }

    fn list(&self, min: &[u8], max: &[u8], limit: u64, out: &mut Vec<(String, i64)>) -> Result<()> {
        debug_assert!(!self.wrote_players(), "a listing after player writes");
        if limit == 0 {
            return Ok(());
        }
        let limit = count(limit);
        let args: [&[u8]; 5] = [min, max, b"LIMIT", b"0", &limit];
        let members = array(self.read(&self.data[ORDER], "ZRANGEBYLEX", &args)?);
        for member in members.into_iter().filter_map(bytes) {
            if member.len() < 16 {
                return Err(
                    self.corrupt("ranking order".into(), format!("short member {member:?}"))
                );
            }
            let score = ascending(u64::from_be_bytes(member[..8].try_into().expect("8 bytes")));
            let player = String::from_utf8(member[16..].to_vec()).map_err(|_| {
                self.corrupt("ranking order".into(), "a player that is not UTF-8".into())
            })?;
            out.push((player, score));
        }
        Ok(())
    }

    fn hash_all(&self, hash: Hash) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        debug_assert!(
            !self.writes.borrow().iter().any(|w| matches!(w,
                Write::Put(h, ..) | Write::Delete(h, _) if *h == hash)),
            "a scan after writes"
        );
        Ok(pairs(self.read(
            &self.data[hash as usize],
            "HGETALL",
            &[],
        )?))
    }

    fn numbers<const N: usize>(&self, what: &str, field: &[u8]) -> Result<[i64; N]> {
        let text = String::from_utf8_lossy(field);
        let parts: Vec<i64> = text.split(':').filter_map(|p| p.parse().ok()).collect();
        <[i64; N]>::try_from(parts)
            .map_err(|_| self.corrupt(what.into(), format!("unreadable field {text:?}")))
    }

    fn unsigned<T: TryFrom<i64>>(&self, value: i64, what: &str) -> Result<T> {
        T::try_from(value)
            .map_err(|_| self.corrupt(what.into(), format!("{value} is out of range")))
    }
}

impl Storage for BoardTx<'_> {
    // Writers of a board are serialized by the version: two that took the
    // same rows cannot both commit.
    fn claim_queue(&self, _queue: u32) -> Result<bool> {
        Ok(true)
    }

    // The stream only ever holds rows not yet applied: the commit that
    // applies a batch trims what it took (`set_applied_through`), so the
    // mark is implicit in the stream's head.
    fn applied_through(&self, _queue: u32) -> Result<i64> {
        Ok(NOTHING_APPLIED)
    }

    fn set_applied_through(&self, queue: u32, seq: i64) -> Result<()> {
        // Appends only add entries past the head, so what is below `seq`
        // now is what the commit deletes (no other transaction can commit
        // a delete in between: the version).
        let below = format!("{}-0", seq.saturating_add(1));
        self.writes.borrow_mut().push(Write::Trim(queue, below));
        Ok(())
    }

    fn take_queued(
        &self,
        queue: u32,
        after: i64,
        limit: usize,
        out: &mut Vec<QueuedRow>,
    ) -> Result<()> {
        let limit = count(limit as u64);
        let from = format!("{}-0", after.saturating_add(1).max(0));
        let args: [&[u8]; 4] = [from.as_bytes(), b"+", b"COUNT", &limit];
        let entries = array(self.read(&self.keys.queue(queue), "XRANGE", &args)?);
        for entry in entries {
            let row = queued_row(entry)
                .map_err(|reason| self.corrupt(format!("queue shard {queue}"), reason))?;
            out.push(row);
        }
        Ok(())
    }

    fn dead_letter(
        &self,
        queue: u32,
        seq: i64,
        player: &str,
        score: Option<i64>,
        reason: &str,
    ) -> Result<()> {
        let json = dead_letter_json(queue, seq, player, score, reason);
        self.writes.borrow_mut().push(Write::DeadLetter(json));
        Ok(())
    }

    fn path_rows(&self, path: &[(u32, u64, bool)], f: &mut NodeRow<'_>) -> Result<()> {
        let mut keys = Vec::new();
        for &(height, idx, with_b) in path {
            let parts: &[Part] = if with_b {
                &[Part::A, Part::B]
            } else {
                &[Part::A]
            };
            for &part in parts {
                for shard in 0..self.spec.shards {
                    keys.push((height, part, shard, node_field(height, idx, part, shard)));
                }
            }
        }
        let fields: Vec<Vec<u8>> = keys.iter().map(|k| k.3.clone()).collect();
        let values = self.fields(Hash::Nodes, &fields)?;
        for ((height, part, shard, _), value) in keys.into_iter().zip(values) {
            if let Some(v) = value {
                f(height, part, shard, &v)?;
            }
        }
        Ok(())
    }

    fn node_shard(
        &self,
        height: u32,
        idx: u64,
        shard: u32,
        f: &mut dyn FnMut(Part, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let fields = [
            node_field(height, idx, Part::A, shard),
            node_field(height, idx, Part::B, shard),
        ];
        let values = self.fields(Hash::Nodes, &fields)?;
        for (part, value) in [Part::A, Part::B].into_iter().zip(values) {
            if let Some(v) = value {
                f(part, &v)?;
            }
        }
        Ok(())
    }

    fn put_node_part(&self, height: u32, idx: u64, part: Part, shard: u32, v: &[u8]) -> Result<()> {
        self.put(Hash::Nodes, node_field(height, idx, part, shard), v);
        Ok(())
    }

    fn arrival_path(
        &self,
        score: i64,
        path: &[(u32, u64)],
        f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let fields: Vec<Vec<u8>> = path
            .iter()
            .map(|&(h, idx)| arrival_field(score, h, idx))
            .collect();
        let values = self.fields(Hash::Arrivals, &fields)?;
        for (&(height, _), value) in path.iter().zip(values) {
            if let Some(v) = value {
                f(height, &v)?;
            }
        }
        Ok(())
    }

    fn put_arrival_node(&self, score: i64, height: u32, idx: u64, v: &[u8]) -> Result<()> {
        self.put(Hash::Arrivals, arrival_field(score, height, idx), v);
        Ok(())
    }

    // The batch's player rows in one read: `apply.rs` reads each of them
    // next.
    fn lock_players(&self, players: &[&str]) -> Result<()> {
        let fields: Vec<Vec<u8>> = players.iter().map(|p| p.as_bytes().to_vec()).collect();
        self.fields(Hash::Players, &fields).map(drop)
    }

    fn player(&self, player: &str) -> Result<Option<(i64, u64)>> {
        let mut values = self.fields(Hash::Players, &[player.as_bytes().to_vec()])?;
        self.player_row(player, values.pop().flatten())
    }

    fn players(
        &self,
        players: &[&str],
        f: &mut dyn FnMut(&str, i64, u64) -> Result<()>,
    ) -> Result<()> {
        let fields: Vec<Vec<u8>> = players.iter().map(|p| p.as_bytes().to_vec()).collect();
        for (player, row) in players.iter().zip(self.fields(Hash::Players, &fields)?) {
            if let Some((score, arrival)) = self.player_row(player, row)? {
                f(player, score, arrival)?;
            }
        }
        Ok(())
    }

    fn put_player(&self, player: &str, score: i64, arrival: u64) -> Result<()> {
        if let Some((old, at)) = self.player(player)? {
            let member = order_member(player, old, at);
            self.writes.borrow_mut().push(Write::Unrank(member));
        }
        let row = format!("{score}:{arrival}");
        self.put(Hash::Players, player.as_bytes().to_vec(), row.as_bytes());
        let member = order_member(player, score, arrival);
        self.writes.borrow_mut().push(Write::Rank(member));
        Ok(())
    }

    fn delete_player(&self, player: &str) -> Result<()> {
        if let Some((old, at)) = self.player(player)? {
            let member = order_member(player, old, at);
            self.writes.borrow_mut().push(Write::Unrank(member));
            self.put(Hash::Players, player.as_bytes().to_vec(), &[]);
            if self.spec.entry_data > 0 {
                self.put(Hash::Data, player.as_bytes().to_vec(), &[]);
            }
        }
        Ok(())
    }

    // Not `put`: empty entry data is data (an empty string field), not a
    // delete.
    fn put_player_data(&self, player: &str, data: Option<&[u8]>) -> Result<()> {
        let field = player.as_bytes().to_vec();
        let write = match data {
            Some(data) => Write::Put(Hash::Data, field.clone(), data.to_vec()),
            None => Write::Delete(Hash::Data, field.clone()),
        };
        self.writes.borrow_mut().push(write);
        self.known
            .borrow_mut()
            .insert((Hash::Data, field), data.map(<[u8]>::to_vec));
        Ok(())
    }

    fn players_data(
        &self,
        players: &[&str],
        f: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let fields: Vec<Vec<u8>> = players.iter().map(|p| p.as_bytes().to_vec()).collect();
        for (player, data) in players.iter().zip(self.fields(Hash::Data, &fields)?) {
            if let Some(data) = data {
                f(player, &data)?;
            }
        }
        Ok(())
    }

    fn entries_at(
        &self,
        score: i64,
        arrival: u64,
        limit: u64,
        out: &mut Vec<(String, i64)>,
    ) -> Result<()> {
        let key = descending(score);
        let mut from = key.to_be_bytes().to_vec();
        from.extend_from_slice(&arrival.to_be_bytes());
        let to = match key.checked_add(1) {
            Some(next) => bound(false, &next.to_be_bytes()),
            None => b"+".to_vec(),
        };
        self.list(&bound(true, &from), &to, limit, out)
    }

    fn entries_below(&self, score: i64, limit: u64, out: &mut Vec<(String, i64)>) -> Result<()> {
        let Some(next) = descending(score).checked_add(1) else {
            return Ok(());
        };
        self.list(&bound(true, &next.to_be_bytes()), b"+", limit, out)
    }

    fn scan_players(&self, f: &mut dyn FnMut(i64, u64) -> Result<()>) -> Result<()> {
        for (player, row) in self.hash_all(Hash::Players)? {
            let player = String::from_utf8_lossy(&player).into_owned();
            if let Some((score, arrival)) = self.player_row(&player, Some(row))? {
                f(score, arrival)?;
            }
        }
        Ok(())
    }

    fn scan_nodes(&self, f: &mut ScannedNode<'_>) -> Result<()> {
        let mut rows = Vec::new();
        for (field, v) in self.hash_all(Hash::Nodes)? {
            let [h, idx, part, shard] = self.numbers("node", &field)?;
            let part = Part::from_stored(part)
                .ok_or_else(|| self.corrupt("node part".into(), format!("{part} is not 0 or 1")))?;
            let key = (
                self.unsigned::<u32>(h, "node height")?,
                self.unsigned::<u64>(idx, "node idx")?,
                part,
                self.unsigned::<u32>(shard, "node shard")?,
            );
            rows.push((key, v));
        }
        rows.sort_unstable_by_key(|r| r.0);
        for ((h, idx, part, shard), v) in rows {
            f((h, idx), part, shard, &v)?;
        }
        Ok(())
    }

    fn scan_arrival_nodes(&self, f: &mut ScannedArrival<'_>) -> Result<()> {
        let mut rows = Vec::new();
        for (field, v) in self.hash_all(Hash::Arrivals)? {
            let [score, h, idx] = self.numbers("arrival node", &field)?;
            let key = (
                score,
                self.unsigned::<u32>(h, "arrival node height")?,
                self.unsigned::<u64>(idx, "arrival node idx")?,
            );
            rows.push((key, v));
        }
        rows.sort_unstable_by_key(|r| r.0);
        for ((score, h, idx), v) in rows {
            f(score, h, idx, &v)?;
        }
        Ok(())
    }

    // The version check makes the reset atomic against every writer: one
    // that read before it finds the version moved and runs again, on the
    // empty board.
    fn clear(&self) -> Result<()> {
        debug_assert_eq!(self.mode, Mode::Write, "a read transaction writes");
        let mut writes = self.writes.borrow_mut();
        // Writes before the reset would be unlinked by it anyway.
        writes.clear();
        writes.push(Write::Clear);
        self.known.borrow_mut().clear();
        self.moved.borrow_mut().clear();
        self.cleared.set(true);
        Ok(())
    }

    fn board_name(&self) -> &str {
        self.name
    }

    fn native(&self) -> Option<&dyn crate::seam::NativeBoard> {
        self.native.get().then_some(self as _)
    }
}

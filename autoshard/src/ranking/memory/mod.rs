//! An in-memory [`Storage`]: the reference the SQL backends are held to,
//! and the store the ranking algorithms' unit tests run on.
//!
//! [`MemoryStorage`] keeps one board's rows (the tables of `stores/sqlite/boards/mod.rs`) in
//! ordered maps, and [`MemoryTx`] is a transaction on it with the SQL
//! backends' semantics: rows come back in the orders the trait promises, an
//! empty vector deletes its row, the player index is in ranking order
//! `(score DESC, arrival)` and, like SQLite's, not unique, and a write
//! transaction whose body fails is rolled back.
//!
//! It also holds callers to their side of the trait, which a SQL backend
//! cannot tell (a lock taken out of order only deadlocks under contention,
//! an untrimmed vector only wastes bytes). In a write transaction: players
//! are locked once, before any is read; then the leaves, once; a player,
//! leaf or arrival tree is only read or written once locked; inner shard
//! rows are read in `(height, idx, shard)` order and only written after
//! being read. A read transaction neither locks nor writes. Every vector
//! written is canonical (whole `i64`s, at most `B`, trailing zeros
//! trimmed), every position is below `2^63`, and (the promise of
//! `apply/`, not of the trait) no row is written twice in one
//! transaction. A broken promise panics, naming it: it is a bug in the
//! caller, not bad data.
//!
//! Unit tests only (`#[cfg(test)]` in `ranking/mod.rs`), so the test
//! harness lives here too: `compare.rs` compares any two storages, and
//! `harness.rs` has a brute-force oracle and a board that runs `Ranking`'s
//! queries over a memory storage.

mod compare;
pub(crate) mod conformance;
pub(crate) mod harness;
mod protocol;
pub(crate) mod ranges;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trim;

pub(crate) use self::compare::{assert_same, diff};
use self::protocol::{Mode, Protocol, Who};

use super::storage::{self, Storage};
use super::tree::Geometry;
use crate::error::Result;
use crate::seam::{
    DeadLetter, NodeRow, Part, QueuedRow, ScannedArrival, ScannedNode, NOTHING_APPLIED,
};
use std::cell::{Cell, Ref, RefCell, RefMut};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

/// Positions (`idx`, arrivals) are below this (see [`Storage`]).
const POSITIONS: u64 = 1 << 63;

fn position(what: &str, value: u64) -> u64 {
    assert!(value < POSITIONS, "{what} {value} is not below 2^63");
    value
}

fn limit(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// One board's rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tables {
    /// `player -> (score, arrival)`.
    players: BTreeMap<String, (i64, u64)>,
    /// The ranking-order index. Not unique on `(score, arrival)`: a batch
    /// may swap two players' places (see `stores/sqlite/boards/mod.rs`),
    /// so the player name completes the key.
    order: BTreeSet<(Reverse<i64>, u64, String)>,
    /// Entry data by player: the players table's `data` column.
    pub data: BTreeMap<String, Vec<u8>>,
    /// Score-tree rows by `(height, idx, part, shard)`.
    pub nodes: BTreeMap<(u32, u64, Part, u32), Vec<u8>>,
    /// Arrival-tree rows by `(score, height, idx)`.
    pub arrivals: BTreeMap<(i64, u32, u64), Vec<u8>>,
    /// Queued updates by `(queue shard, sequence)`: player and score
    /// (`None`: a removal).
    pub queue: BTreeMap<(u32, i64), (String, Option<i64>)>,
    /// Applied-through marks by queue shard. (The queue above lives in the
    /// queue's storage on a real store, outside the board's transactions:
    /// a worker only reads it here, and its delete is the caller's.)
    pub applied: BTreeMap<u32, i64>,
    /// Dead letters by id.
    pub dead_letters: BTreeMap<i64, DeadLetter>,
}

impl Tables {
    pub fn players(&self) -> &BTreeMap<String, (i64, u64)> {
        &self.players
    }

    /// Inserts or replaces a player row, index included; an existing row
    /// keeps its entry data.
    pub fn put_player(&mut self, player: &str, score: i64, arrival: u64) {
        if let Some((score, arrival)) = self.players.remove(player) {
            self.order
                .remove(&(Reverse(score), arrival, player.to_owned()));
        }
        self.players.insert(player.to_owned(), (score, arrival));
        self.order
            .insert((Reverse(score), arrival, player.to_owned()));
    }

    pub fn delete_player(&mut self, player: &str) {
        self.data.remove(player);
        if let Some((score, arrival)) = self.players.remove(player) {
            self.order
                .remove(&(Reverse(score), arrival, player.to_owned()));
        }
    }
}

/// One board in memory: the database a [`MemoryTx`] is a transaction on.
pub(crate) struct MemoryStorage {
    name: String,
    geometry: Geometry,
    tables: RefCell<Tables>,
    /// What write transactions answer to `Storage::writes_alone`.
    alone: Cell<bool>,
}

impl Clone for MemoryStorage {
    fn clone(&self) -> Self {
        MemoryStorage {
            name: self.name.clone(),
            geometry: self.geometry.clone(),
            tables: RefCell::new(self.tables.borrow().clone()),
            alone: self.alone.clone(),
        }
    }
}

impl MemoryStorage {
    /// An empty board. The geometry tells the lock checks which leaf a
    /// score's arrival tree belongs to.
    pub fn new(name: &str, geometry: Geometry) -> Self {
        MemoryStorage {
            name: name.into(),
            geometry,
            tables: RefCell::default(),
            alone: Cell::new(false),
        }
    }

    /// Whether the next write transactions hold the board alone (as a
    /// PostgreSQL batch that takes the board's lock exclusively does).
    pub fn set_alone(&self, alone: bool) {
        self.alone.set(alone);
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Runs `f` in a read transaction.
    pub fn read<R>(&self, f: impl FnOnce(&MemoryTx<'_>) -> Result<R>) -> Result<R> {
        f(&self.tx(Mode::Read))
    }

    /// Runs `f` in a write transaction held to the locking protocol;
    /// nothing it wrote survives if it fails.
    pub fn write<R>(&self, f: impl FnOnce(&MemoryTx<'_>) -> Result<R>) -> Result<R> {
        self.transaction(Mode::Write(Some(Protocol::default())), f)
    }

    /// A write transaction that may touch any row in any order: for tests of
    /// the storage itself.
    pub fn write_unchecked<R>(&self, f: impl FnOnce(&MemoryTx<'_>) -> Result<R>) -> Result<R> {
        self.transaction(Mode::Write(None), f)
    }

    fn transaction<R>(&self, mode: Mode, f: impl FnOnce(&MemoryTx<'_>) -> Result<R>) -> Result<R> {
        let before = self.tables.borrow().clone();
        let out = f(&self.tx(mode));
        if out.is_err() {
            *self.tables.borrow_mut() = before;
        }
        out
    }

    fn tx(&self, mode: Mode) -> MemoryTx<'_> {
        MemoryTx {
            storage: self,
            mode: RefCell::new(mode),
        }
    }

    pub fn tables(&self) -> Ref<'_, Tables> {
        self.tables.borrow()
    }

    /// The rows themselves, to damage by hand.
    pub fn tables_mut(&self) -> RefMut<'_, Tables> {
        self.tables.borrow_mut()
    }
}

/// One transaction on a [`MemoryStorage`].
pub(crate) struct MemoryTx<'a> {
    storage: &'a MemoryStorage,
    mode: RefCell<Mode>,
}

impl MemoryTx<'_> {
    fn tables(&self) -> Ref<'_, Tables> {
        self.storage.tables.borrow()
    }

    fn tables_mut(&self) -> RefMut<'_, Tables> {
        self.storage.tables.borrow_mut()
    }
}

impl Storage for MemoryTx<'_> {
    // One writer at a time: a shard is never held by another.
    fn claim_queue(&self, _queue: u32) -> Result<bool> {
        self.rule(Who::Writers, "claim_queue", |_| Ok(()));
        Ok(true)
    }

    fn applied_through(&self, queue: u32) -> Result<i64> {
        self.rule(Who::Writers, "applied_through", |_| Ok(()));
        Ok(self
            .tables()
            .applied
            .get(&queue)
            .copied()
            .unwrap_or(NOTHING_APPLIED))
    }

    fn set_applied_through(&self, queue: u32, seq: i64) -> Result<()> {
        self.rule(Who::Writers, "set_applied_through", |_| Ok(()));
        self.tables_mut().applied.insert(queue, seq);
        Ok(())
    }

    fn take_queued(
        &self,
        queue: u32,
        after: i64,
        limit: usize,
        out: &mut Vec<QueuedRow>,
    ) -> Result<()> {
        self.rule(Who::Writers, "take_queued", |_| Ok(()));
        let tables = self.tables();
        let shard = tables
            .queue
            .range((queue, after.saturating_add(1))..=(queue, i64::MAX));
        for (&(_, seq), (player, score)) in shard.take(limit) {
            out.push(QueuedRow {
                seq,
                player: player.clone(),
                score: *score,
                data: None,
                unreadable: None,
            });
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
        self.rule(Who::Writers, "dead_letter", |_| Ok(()));
        let mut tables = self.tables_mut();
        let id = tables
            .dead_letters
            .keys()
            .next_back()
            .map_or(1, |id| id + 1);
        let letter = DeadLetter {
            id,
            queue,
            seq,
            player: player.to_owned(),
            score,
            reason: reason.to_owned(),
        };
        tables.dead_letters.insert(id, letter);
        Ok(())
    }

    fn lock_players(&self, players: &[&str]) -> Result<()> {
        self.rule(Who::Writers, "lock_players", |p| {
            if p.players.is_some() || p.leaves.is_some() {
                return Err("players are locked once, before the leaves".into());
            }
            p.players = Some(players.iter().map(|&s| s.to_owned()).collect());
            Ok(())
        });
        Ok(())
    }

    fn writes_alone(&self) -> bool {
        self.storage.alone.get()
    }

    fn lock_leaves(&self, leaves: &[u64]) -> Result<()> {
        self.rule(Who::Writers, "lock_leaves", |p| {
            if p.players.is_none() || p.leaves.is_some() {
                return Err("leaves are locked once, after the players".into());
            }
            p.leaves = Some(leaves.iter().copied().collect());
            Ok(())
        });
        Ok(())
    }

    fn path_rows(&self, path: &[(u32, u64, bool)], f: &mut NodeRow<'_>) -> Result<()> {
        // Copied out first: a callback may call back into the storage.
        let rows: Vec<_> = {
            let t = self.tables();
            path.iter()
                .flat_map(|&(h, idx, with_b)| {
                    let last = if with_b { Part::B } else { Part::A };
                    let range = (h, position("idx", idx), Part::A, 0)..=(h, idx, last, u32::MAX);
                    t.nodes
                        .range(range)
                        .map(|(&(h, _, part, shard), v)| (h, part, shard, v.clone()))
                })
                .collect()
        };
        for (h, part, shard, v) in rows {
            f(h, part, shard, &v)?;
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
        position("idx", idx);
        self.rule(Who::Writers, "node_shard", |p| {
            if height == 1 {
                return p.leaf_locked(idx);
            }
            if p.leaves.is_none() {
                return Err("an inner shard row is read before the leaves are locked".into());
            }
            let key = (height, idx, shard);
            if p.shard_rows.last().is_some_and(|&last| last > key) {
                return Err(format!(
                    "inner shard row {key:?} read after {:?}",
                    p.shard_rows.last().expect("checked")
                ));
            }
            p.shard_rows.push(key);
            Ok(())
        });
        let rows: Vec<_> = {
            let t = self.tables();
            [Part::A, Part::B]
                .into_iter()
                .filter_map(|part| Some((part, t.nodes.get(&(height, idx, part, shard))?.clone())))
                .collect()
        };
        for (part, v) in rows {
            f(part, &v)?;
        }
        Ok(())
    }

    fn put_node_part(&self, height: u32, idx: u64, part: Part, shard: u32, v: &[u8]) -> Result<()> {
        let key = (height, position("idx", idx), part, shard);
        self.canonical(&format!("node row {key:?}"), v);
        self.rule(Who::Writers, "put_node_part", |p| {
            if height == 1 {
                p.leaf_locked(idx)?;
            } else if !p.shard_rows.contains(&(height, idx, shard)) {
                return Err(format!("inner shard row {key:?} written before it is read"));
            }
            p.written_once(format!("node row {key:?}"))
        });
        let mut t = self.tables_mut();
        if v.is_empty() {
            t.nodes.remove(&key);
        } else {
            t.nodes.insert(key, v.to_vec());
        }
        Ok(())
    }

    fn arrival_path(
        &self,
        score: i64,
        path: &[(u32, u64)],
        f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.rule(Who::Anyone, "arrival_path", |p| {
            p.leaf_locked(self.leaf_of(score)?)
        });
        let rows: Vec<_> = {
            let t = self.tables();
            path.iter()
                .filter_map(|&(h, idx)| {
                    let v = t.arrivals.get(&(score, h, position("idx", idx)))?;
                    Some((h, v.clone()))
                })
                .collect()
        };
        for (h, v) in rows {
            f(h, &v)?;
        }
        Ok(())
    }

    fn put_arrival_node(&self, score: i64, height: u32, idx: u64, v: &[u8]) -> Result<()> {
        let key = (score, height, position("idx", idx));
        self.canonical(&format!("arrival node {key:?}"), v);
        self.rule(Who::Writers, "put_arrival_node", |p| {
            p.leaf_locked(self.leaf_of(score)?)?;
            p.written_once(format!("arrival node {key:?}"))
        });
        let mut t = self.tables_mut();
        if v.is_empty() {
            t.arrivals.remove(&key);
        } else {
            t.arrivals.insert(key, v.to_vec());
        }
        Ok(())
    }

    fn player(&self, player: &str) -> Result<Option<(i64, u64)>> {
        self.rule(Who::Anyone, "player", |p| p.player_locked(player));
        Ok(self.tables().players.get(player).copied())
    }

    fn put_player(&self, player: &str, score: i64, arrival: u64) -> Result<()> {
        position("arrival", arrival);
        self.rule(Who::Writers, "put_player", |p| {
            p.player_locked(player)?;
            p.written_once(format!("player {player:?}"))
        });
        self.tables_mut().put_player(player, score, arrival);
        Ok(())
    }

    // The reference takes nothing to lock: it has one writer at a time.
    fn clear(&self) -> Result<()> {
        self.rule(Who::Writers, "clear", |_| Ok(()));
        let mut tables = self.tables_mut();
        let (queue, applied) = (
            std::mem::take(&mut tables.queue),
            std::mem::take(&mut tables.applied),
        );
        // The queue and the marks are not the tree's: a reset moves the
        // marks itself, and the queue lives outside the board's storage.
        *tables = Tables {
            queue,
            applied,
            ..Tables::default()
        };
        Ok(())
    }

    fn delete_player(&self, player: &str) -> Result<()> {
        self.rule(Who::Writers, "delete_player", |p| {
            p.player_locked(player)?;
            p.written_once(format!("player {player:?}"))
        });
        self.tables_mut().delete_player(player);
        Ok(())
    }

    fn put_player_data(&self, player: &str, data: Option<&[u8]>) -> Result<()> {
        self.rule(Who::Writers, "put_player_data", |p| {
            p.player_locked(player)?;
            p.written_once(format!("data of player {player:?}"))
        });
        let mut t = self.tables_mut();
        assert!(
            t.players.contains_key(player),
            "storage protocol: put_player_data: player {player:?} has no row"
        );
        match data {
            Some(data) => t.data.insert(player.to_owned(), data.to_vec()),
            None => t.data.remove(player),
        };
        Ok(())
    }

    fn players_data(
        &self,
        players: &[&str],
        f: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let found: Vec<_> = {
            let t = self.tables();
            players
                .iter()
                .filter_map(|&p| Some((p.to_owned(), t.data.get(p)?.clone())))
                .collect()
        };
        for (player, data) in found {
            f(&player, &data)?;
        }
        Ok(())
    }

    fn entries_at(
        &self,
        score: i64,
        arrival: u64,
        n: u64,
        out: &mut Vec<(String, i64)>,
    ) -> Result<()> {
        let t = self.tables();
        let from = (Reverse(score), position("arrival", arrival), String::new());
        let found = t.order.range(from..).take_while(|(s, ..)| s.0 == score);
        out.extend(found.take(limit(n)).map(|(_, _, p)| (p.clone(), score)));
        Ok(())
    }

    fn entries_below(&self, score: i64, n: u64, out: &mut Vec<(String, i64)>) -> Result<()> {
        let Some(below) = score.checked_sub(1) else {
            return Ok(());
        };
        let t = self.tables();
        let found = t.order.range((Reverse(below), 0, String::new())..);
        out.extend(found.take(limit(n)).map(|(s, _, p)| (p.clone(), s.0)));
        Ok(())
    }

    fn scan_players(&self, f: &mut dyn FnMut(i64, u64) -> Result<()>) -> Result<()> {
        // By name: unrelated to the ranking order, as "any order" allows.
        let rows: Vec<_> = self.tables().players.values().copied().collect();
        for (score, arrival) in rows {
            f(score, arrival)?;
        }
        Ok(())
    }

    fn scan_nodes(&self, f: &mut ScannedNode<'_>) -> Result<()> {
        let rows: Vec<_> = self.tables().nodes.clone().into_iter().collect();
        for ((h, idx, part, shard), v) in rows {
            f((h, idx), part, shard, &v)?;
        }
        Ok(())
    }

    fn scan_arrival_nodes(&self, f: &mut ScannedArrival<'_>) -> Result<()> {
        let rows: Vec<_> = self.tables().arrivals.clone().into_iter().collect();
        for ((score, h, idx), v) in rows {
            f(score, h, idx, &v)?;
        }
        Ok(())
    }

    fn board_name(&self) -> &str {
        &self.storage.name
    }
}

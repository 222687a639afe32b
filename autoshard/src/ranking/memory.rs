//! An in-memory [`Storage`]: the reference the SQL backends are held to,
//! and the store the ranking algorithms' unit tests run on.
//!
//! [`MemoryStorage`] keeps one board's rows (the tables of `sqlite.rs`) in
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
//! `apply.rs`, not of the trait) no row is written twice in one
//! transaction. A broken promise panics, naming it: it is a bug in the
//! caller, not bad data.
//!
//! Unit tests only (`#[cfg(test)]` in `mod.rs`), so the test harness lives
//! here too: [`contents`]/[`diff`]/[`assert_same`] compare any two
//! storages, and [`harness`] has a brute-force oracle and a board that runs
//! `Ranking`'s queries over a memory storage.

use super::storage::{self, NodeRow, Part, ScannedArrival, ScannedNode, Storage};
use super::tree::Geometry;
use crate::error::Result;
use std::cell::{Ref, RefCell, RefMut};
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
    /// may swap two players' places (see `sqlite.rs`), so the player name
    /// completes the key.
    order: BTreeSet<(Reverse<i64>, u64, String)>,
    /// Score-tree rows by `(height, idx, part, shard)`.
    pub nodes: BTreeMap<(u32, u64, Part, u32), Vec<u8>>,
    /// Arrival-tree rows by `(score, height, idx)`.
    pub arrivals: BTreeMap<(i64, u32, u64), Vec<u8>>,
}

impl Tables {
    pub fn players(&self) -> &BTreeMap<String, (i64, u64)> {
        &self.players
    }

    /// Inserts or replaces a player row, index included.
    pub fn put_player(&mut self, player: &str, score: i64, arrival: u64) {
        self.delete_player(player);
        self.players.insert(player.to_owned(), (score, arrival));
        self.order
            .insert((Reverse(score), arrival, player.to_owned()));
    }

    pub fn delete_player(&mut self, player: &str) {
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
}

impl Clone for MemoryStorage {
    fn clone(&self) -> Self {
        MemoryStorage {
            name: self.name.clone(),
            geometry: self.geometry.clone(),
            tables: RefCell::new(self.tables.borrow().clone()),
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
        }
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

enum Mode {
    Read,
    /// `None`: unchecked.
    Write(Option<Protocol>),
}

/// What a write transaction has announced and done so far.
#[derive(Default)]
struct Protocol {
    players: Option<BTreeSet<String>>,
    leaves: Option<BTreeSet<u64>>,
    /// Inner shard rows read through `node_shard`, in call order.
    shard_rows: Vec<(u32, u64, u32)>,
    written: BTreeSet<String>,
}

impl Protocol {
    fn player_locked(&self, player: &str) -> Result<(), String> {
        match &self.players {
            Some(locked) if locked.contains(player) => Ok(()),
            _ => Err(format!("player {player:?} is not locked")),
        }
    }

    fn leaf_locked(&self, idx: u64) -> Result<(), String> {
        match &self.leaves {
            Some(locked) if locked.contains(&idx) => Ok(()),
            _ => Err(format!("leaf {idx} is not locked")),
        }
    }

    fn written_once(&mut self, row: String) -> Result<(), String> {
        match self.written.insert(row.clone()) {
            true => Ok(()),
            false => Err(format!("{row} written twice")),
        }
    }
}

/// Whether a call belongs to writers only.
#[derive(PartialEq)]
enum Who {
    Anyone,
    Writers,
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

    /// Checks `call` against the transaction's protocol; panics on a
    /// violation.
    fn rule(&self, who: Who, call: &str, rule: impl FnOnce(&mut Protocol) -> Result<(), String>) {
        match &mut *self.mode.borrow_mut() {
            Mode::Read if who == Who::Writers => {
                panic!("storage protocol: {call} in a read transaction")
            }
            Mode::Read | Mode::Write(None) => {}
            Mode::Write(Some(protocol)) => {
                if let Err(why) = rule(protocol) {
                    panic!("storage protocol: {call}: {why}");
                }
            }
        }
    }

    /// The leaf whose lock covers `score`'s arrival tree.
    fn leaf_of(&self, score: i64) -> Result<u64, String> {
        let g = &self.storage.geometry;
        g.offset(score)
            .map(|offset| g.node(offset, 1))
            .ok_or_else(|| format!("score {score} is outside the board"))
    }

    fn canonical(&self, what: &str, v: &[u8]) {
        let trimmed = !v.ends_with(&[0; 8]);
        assert!(
            storage::well_formed(v, self.storage.geometry.b()) && trimmed,
            "storage protocol: {what}: {v:?} is not a canonical vector of at most B entries"
        );
    }
}

impl Storage for MemoryTx<'_> {
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

    fn delete_player(&self, player: &str) -> Result<()> {
        self.rule(Who::Writers, "delete_player", |p| {
            p.player_locked(player)?;
            p.written_once(format!("player {player:?}"))
        });
        self.tables_mut().delete_player(player);
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

// ------------------------------------------------------------- comparing

/// Everything a storage holds, as the trait shows it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Contents {
    /// Every player by name: listed in ranking order through `entries_at`
    /// and `entries_below`, then read back with `player`.
    pub players: BTreeMap<String, (i64, u64)>,
    /// `scan_players`, as a multiset.
    pub scanned: BTreeMap<(i64, u64), usize>,
    /// `scan_nodes`, by `(height, idx, part, shard)`.
    pub nodes: BTreeMap<(u32, u64, Part, u32), Vec<u8>>,
    /// `scan_arrival_nodes`, by `(score, height, idx)`.
    pub arrivals: BTreeMap<(i64, u32, u64), Vec<u8>>,
    /// Broken promises of the storage itself: a scan out of order, a
    /// listing that disagrees with `player` or with `scan_players`.
    pub problems: Vec<String>,
}

/// Reads everything `st` holds (in one transaction: `st`).
pub(crate) fn contents(st: &dyn Storage) -> Result<Contents> {
    let mut c = Contents::default();
    let mut listed = Vec::new();
    // Scores are below i64::MAX; the first call covers a corrupt row at it.
    st.entries_at(i64::MAX, 0, u64::MAX, &mut listed)?;
    st.entries_below(i64::MAX, u64::MAX, &mut listed)?;
    let mut previous: Option<(i64, u64)> = None;
    for (name, score) in listed {
        let Some(row) = st.player(&name)? else {
            c.problems
                .push(format!("{name:?} is listed but has no row"));
            continue;
        };
        if row.0 != score {
            c.problems.push(format!(
                "{name:?} is listed at {score}, its row says {row:?}"
            ));
        }
        if previous.is_some_and(|(s, a)| (Reverse(s), a) > (Reverse(row.0), row.1)) {
            c.problems
                .push(format!("{name:?} {row:?} is listed out of ranking order"));
        }
        previous = Some(row);
        if c.players.insert(name.clone(), row).is_some() {
            c.problems.push(format!("{name:?} is listed twice"));
        }
    }
    st.scan_players(&mut |score, arrival| {
        *c.scanned.entry((score, arrival)).or_default() += 1;
        Ok(())
    })?;
    let mut rows = BTreeMap::new();
    for &(score, arrival) in c.players.values() {
        *rows.entry((score, arrival)).or_default() += 1;
    }
    if rows != c.scanned {
        c.problems
            .push("scan_players disagrees with the listing".into());
    }
    st.scan_nodes(&mut |(h, idx), part, shard, v| {
        let key = (h, idx, part, shard);
        if c.nodes
            .last_key_value()
            .is_some_and(|(last, _)| *last >= key)
        {
            c.problems.push(format!("scan_nodes: {key:?} out of order"));
        }
        c.nodes.insert(key, v.to_vec());
        Ok(())
    })?;
    st.scan_arrival_nodes(&mut |score, h, idx, v| {
        let key = (score, h, idx);
        if c.arrivals
            .last_key_value()
            .is_some_and(|(last, _)| *last >= key)
        {
            c.problems
                .push(format!("scan_arrival_nodes: {key:?} out of order"));
        }
        c.arrivals.insert(key, v.to_vec());
        Ok(())
    })?;
    Ok(c)
}

/// A vector for a diff line: its entries, or its bytes if it has none.
fn show(v: &[u8]) -> String {
    if !v.len().is_multiple_of(8) {
        return format!("malformed {v:?}");
    }
    let entries: Vec<i64> = storage::entries(v).collect();
    let untrimmed = if v.ends_with(&[0; 8]) {
        " (untrimmed)"
    } else {
        ""
    };
    format!("{entries:?}{untrimmed}")
}

/// Diff lines for one table: `-` only left, `+` only right, `~` both and
/// different.
fn diff_rows<K: Ord + Debug, V: PartialEq>(
    table: &str,
    left: &BTreeMap<K, V>,
    right: &BTreeMap<K, V>,
    show: impl Fn(&V) -> String,
    out: &mut Vec<String>,
) {
    let keys: BTreeSet<&K> = left.keys().chain(right.keys()).collect();
    for key in keys {
        match (left.get(key), right.get(key)) {
            (Some(l), None) => out.push(format!("- {table} {key:?}: {}", show(l))),
            (None, Some(r)) => out.push(format!("+ {table} {key:?}: {}", show(r))),
            (Some(l), Some(r)) if l != r => {
                out.push(format!("~ {table} {key:?}: {} != {}", show(l), show(r)))
            }
            _ => {}
        }
    }
}

/// Compares everything two storages hold; `None` when equal, else a diff
/// naming each differing row (vectors compared byte for byte, so an
/// untrimmed encoding differs).
pub(crate) fn diff(left: &dyn Storage, right: &dyn Storage) -> Result<Option<String>> {
    let (l, r) = (contents(left)?, contents(right)?);
    let mut lines = Vec::new();
    for (side, c) in [("left", &l), ("right", &r)] {
        lines.extend(c.problems.iter().map(|p| format!("! {side}: {p}")));
    }
    diff_rows(
        "player",
        &l.players,
        &r.players,
        |p| format!("{p:?}"),
        &mut lines,
    );
    diff_rows(
        "scanned player",
        &l.scanned,
        &r.scanned,
        |n| format!("{n}x"),
        &mut lines,
    );
    diff_rows("node", &l.nodes, &r.nodes, |v| show(v), &mut lines);
    diff_rows(
        "arrival node",
        &l.arrivals,
        &r.arrivals,
        |v| show(v),
        &mut lines,
    );
    if lines.is_empty() {
        return Ok(None);
    }
    const SHOWN: usize = 40;
    let more = lines.len().saturating_sub(SHOWN);
    lines.truncate(SHOWN);
    if more > 0 {
        lines.push(format!("... and {more} more"));
    }
    Ok(Some(format!(
        "storages {:?} and {:?} differ (- left only, + right only, ~ left != right):\n{}",
        left.board_name(),
        right.board_name(),
        lines.join("\n")
    )))
}

/// Panics with the diff unless `left` and `right` hold the same rows.
#[track_caller]
pub(crate) fn assert_same(left: &dyn Storage, right: &dyn Storage) {
    if let Some(diff) = diff(left, right).expect("reading both storages") {
        panic!("{diff}");
    }
}

// ------------------------------------------------------------- harness

/// What the algorithms' tests share: a board on memory storage with
/// `Ranking`'s queries, a brute-force oracle, and proptest strategies.
pub(crate) mod harness {
    use super::super::query::{self, Want};
    use super::super::storage::Storage;
    use super::super::tree::Geometry;
    use super::super::{apply_updates, integrity, player_place, Entry, Tie};
    use super::{MemoryStorage, MemoryTx, Tables};
    use crate::error::Result;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::ops::Range;

    /// A board on a [`MemoryStorage`] with `Ranking`'s queries. Each runs,
    /// in one memory transaction, what the `Ranking` method runs in one SQL
    /// transaction; the few lines of `Ranking::rank` and `Ranking::around`
    /// that are not a call are repeated here (they live in methods of a type
    /// bound to a SQL backend).
    pub(crate) struct Board {
        pub st: MemoryStorage,
        pub shards: u32,
    }

    impl Board {
        pub fn new(range: Range<i64>, branching: u32, shards: u32) -> Self {
            let g = Geometry::new(range.start, range.end, branching).expect("a valid board");
            Board {
                st: MemoryStorage::new("memory", g),
                shards,
            }
        }

        pub fn g(&self) -> &Geometry {
            self.st.geometry()
        }

        /// `apply_updates` (what `set_scores`, `remove` and the queue
        /// worker run) in one checked write transaction, deltas to `shard`.
        pub fn apply(&self, shard: u32, updates: &[(&str, Option<i64>)]) -> Result<Vec<bool>> {
            assert!(shard < self.shards);
            self.st
                .write(|tx| apply_updates(tx, self.st.geometry(), shard, updates))
        }

        pub fn set_scores(&self, shard: u32, scores: &[(&str, i64)]) -> Result<()> {
            let updates: Vec<_> = scores.iter().map(|&(p, s)| (p, Some(s))).collect();
            self.apply(shard, &updates).map(drop)
        }

        pub fn set(&self, player: &str, score: i64) -> Result<()> {
            self.set_scores(0, &[(player, score)])
        }

        pub fn remove(&self, player: &str) -> Result<bool> {
            Ok(self.apply(0, &[(player, None)])?[0])
        }

        fn read<R>(&self, f: impl FnOnce(&MemoryTx<'_>, &Geometry) -> Result<R>) -> Result<R> {
            self.st.read(|tx| f(tx, self.st.geometry()))
        }

        pub fn rank_of_score(&self, score: i64) -> Result<u64> {
            let offset = self.g().checked_offset(score)?;
            self.read(|st, g| Ok(query::place_of(st, g, offset, Want::default())?.above + 1))
        }

        /// `Ranking::rank`.
        pub fn rank(&self, player: &str, tie: Tie) -> Result<Option<u64>> {
            self.read(|st, g| {
                let Some((score, arrival)) = st.player(player)? else {
                    return Ok(None);
                };
                let want = Want {
                    distinct: tie == Tie::Dense,
                    counter: tie == Tie::Ordinal,
                };
                let place = player_place(st, g, score, want)?;
                Ok(Some(match tie {
                    Tie::Standard => place.above + 1,
                    Tie::Dense => place.distinct_above + 1,
                    Tie::Ordinal => {
                        place.above
                            + query::arrived_before(st, g, score, place.counter, arrival)?
                            + 1
                    }
                }))
            })
        }

        pub fn score(&self, player: &str) -> Result<Option<i64>> {
            self.read(|st, _| Ok(st.player(player)?.map(|(score, _)| score)))
        }

        pub fn score_at_rank(&self, rank: u64) -> Result<Option<i64>> {
            self.read(|st, g| Ok(query::locate(st, g, rank)?.map(|l| l.score)))
        }

        /// `Ranking::page`, past its argument check (`1 <= from <= to`).
        pub fn page(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
            assert!(1 <= from && from <= to);
            self.read(|st, g| query::page(st, g, from, to))
        }

        pub fn top(&self, n: u64) -> Result<Vec<Entry>> {
            if n == 0 {
                return Ok(Vec::new());
            }
            self.page(1, n)
        }

        /// `Ranking::around`.
        pub fn around(&self, player: &str, k: u64) -> Result<Vec<Entry>> {
            self.read(|st, g| {
                let Some((score, arrival)) = st.player(player)? else {
                    return Ok(Vec::new());
                };
                let want = Want {
                    distinct: false,
                    counter: true,
                };
                let place = player_place(st, g, score, want)?;
                let position =
                    place.above + query::arrived_before(st, g, score, place.counter, arrival)? + 1;
                query::page(
                    st,
                    g,
                    position.saturating_sub(k).max(1),
                    position.saturating_add(k),
                )
            })
        }

        pub fn len(&self) -> Result<u64> {
            self.read(|st, g| query::len(st, g))
        }

        pub fn check_integrity(&self) -> Result<()> {
            self.read(|st, g| integrity::check(st, g, self.shards))
        }
    }

    /// Every player's score and the moment they reached it, compared the
    /// slow way: a sorted list.
    #[derive(Default, Clone, Debug)]
    pub(crate) struct Oracle {
        pub players: BTreeMap<String, (i64, u64)>,
        clock: u64,
    }

    impl Oracle {
        /// The players of a storage's table, arrivals as the order of
        /// reaching a score.
        pub fn of(players: &BTreeMap<String, (i64, u64)>) -> Self {
            Oracle {
                players: players.clone(),
                clock: players.values().map(|p| p.1 + 1).max().unwrap_or(0),
            }
        }

        pub fn set(&mut self, player: &str, score: i64) {
            if self.players.get(player).map(|p| p.0) != Some(score) {
                self.clock += 1;
                self.players.insert(player.into(), (score, self.clock));
            }
        }

        /// A batch by its net effect: each player ends at their last
        /// score, and players move in the order of their last change.
        pub fn batch(&mut self, updates: &[(&str, Option<i64>)]) -> Vec<bool> {
            let mut net: BTreeMap<&str, (usize, Option<i64>)> = BTreeMap::new();
            let mut had = Vec::new();
            for (i, &(player, score)) in updates.iter().enumerate() {
                let current = match net.get(player) {
                    Some(n) => n.1,
                    None => self.players.get(player).map(|p| p.0),
                };
                had.push(current.is_some());
                if current != score {
                    net.insert(player, (i, score));
                }
            }
            let mut moves: Vec<_> = net.into_iter().collect();
            moves.sort_by_key(|m| m.1 .0);
            for (player, (_, score)) in moves {
                match score {
                    Some(score) => self.set(player, score),
                    None => {
                        self.players.remove(player);
                    }
                }
            }
            had
        }

        /// Ranking order: score descending, then who reached it first.
        pub fn entries(&self) -> Vec<Entry> {
            let mut sorted: Vec<_> = self.players.iter().collect();
            sorted.sort_by_key(|(_, &(score, at))| (std::cmp::Reverse(score), at));
            let mut out: Vec<Entry> = Vec::new();
            for (i, (player, &(score, _))) in sorted.into_iter().enumerate() {
                let (rank, dense) = match out.last() {
                    Some(prev) if prev.score == score => (prev.rank, prev.dense),
                    Some(prev) => (i as u64 + 1, prev.dense + 1),
                    None => (1, 1),
                };
                out.push(Entry {
                    player: player.clone(),
                    score,
                    rank,
                    dense,
                    position: i as u64 + 1,
                });
            }
            out
        }

        pub fn rank_of_score(&self, score: i64) -> u64 {
            1 + self.players.values().filter(|p| p.0 > score).count() as u64
        }
    }

    /// Asserts that every query agrees with the oracle, and that the tree
    /// passes `check_integrity`.
    pub(crate) fn verify(
        board: &Board,
        oracle: &Oracle,
        probes: &[i64],
    ) -> Result<(), TestCaseError> {
        let entries = oracle.entries();
        let n = entries.len() as u64;
        prop_assert_eq!(board.len()?, n);
        for &score in probes {
            prop_assert_eq!(
                board.rank_of_score(score)?,
                oracle.rank_of_score(score),
                "rank_of_score({})",
                score
            );
        }
        for e in &entries {
            prop_assert_eq!(board.score(&e.player)?, Some(e.score));
            for (tie, want) in [
                (Tie::Standard, e.rank),
                (Tie::Dense, e.dense),
                (Tie::Ordinal, e.position),
            ] {
                prop_assert_eq!(board.rank(&e.player, tie)?, Some(want), "{:?} {:?}", tie, e);
            }
            prop_assert_eq!(board.score_at_rank(e.position)?, Some(e.score));
            for k in [0, 1, 3] {
                let at = e.position as usize - 1;
                let window = &entries[at.saturating_sub(k)..(at + k + 1).min(entries.len())];
                prop_assert_eq!(
                    &board.around(&e.player, k as u64)?,
                    window,
                    "around({}, {})",
                    e.player,
                    k
                );
            }
        }
        prop_assert_eq!(board.score_at_rank(0)?, None);
        prop_assert_eq!(board.score_at_rank(n + 1)?, None);
        prop_assert_eq!(board.score("nobody")?, None);
        prop_assert_eq!(board.rank("nobody", Tie::Ordinal)?, None);
        prop_assert!(board.around("nobody", 2)?.is_empty());
        prop_assert_eq!(&board.page(1, n.max(1) + 2)?, &entries);
        prop_assert_eq!(&board.page(1, u64::MAX)?, &entries);
        for t in [0, 1, 2, n / 2, n] {
            prop_assert_eq!(&board.top(t)?, &entries[..t.min(n) as usize]);
        }
        for from in 1..=n + 1 {
            for to in [from, from + 1, from + 4] {
                let want = &entries[(from - 1).min(n) as usize..to.min(n) as usize];
                prop_assert_eq!(&board.page(from, to)?, want, "page({}, {})", from, to);
            }
        }
        board.check_integrity()?;
        Ok(())
    }

    /// One write transaction: a batch of `(player, score index)` updates
    /// (`None` removes), deltas to shard `shard % shards`.
    #[derive(Debug, Clone)]
    pub(crate) struct Op {
        pub updates: Vec<(usize, Option<usize>)>,
        pub shard: u32,
    }

    /// Mostly single updates (what `set_score` and `remove` write), some
    /// batches, all among 12 players and 8 pool scores so that they tie.
    pub(crate) fn op() -> impl Strategy<Value = Op> {
        let update = (0..12usize, prop::option::weighted(0.8, 0..8usize));
        let updates = prop_oneof![
            3 => (0..12usize, 0..8usize).prop_map(|(p, s)| vec![(p, Some(s))]),
            1 => (0..12usize).prop_map(|p| vec![(p, None)]),
            2 => prop::collection::vec(update, 0..12),
        ];
        (updates, any::<u32>()).prop_map(|(updates, shard)| Op { updates, shard })
    }

    /// Score ranges from width 1 to the whole of `i64`, at both ends of it.
    pub(crate) fn range() -> impl Strategy<Value = Range<i64>> {
        prop_oneof![
            Just(0..1),
            (-50i64..50, 1i64..40).prop_map(|(min, w)| min..min + w),
            Just(i64::MIN..i64::MAX),
            (1i64..5000).prop_map(|w| i64::MIN..i64::MIN + w),
            (1i64..5000).prop_map(|w| i64::MAX - w..i64::MAX),
            (any::<i64>(), any::<i64>())
                .prop_filter_map("empty range", |(a, b)| (a < b).then_some(a..b)),
        ]
    }

    /// A board's shape: `(range, branching, shards, pool)`, the pool a few
    /// of its scores (so players tie), always including both ends.
    pub(crate) fn board_shape() -> impl Strategy<Value = (Range<i64>, u32, u32, Vec<i64>)> {
        let branching = prop_oneof![2u32..=4, 5u32..=30, 31u32..=1000];
        (range(), branching, 1u32..=4).prop_flat_map(|(range, b, shards)| {
            let width = range.end.wrapping_sub(range.start) as u64;
            prop::collection::vec(any::<u64>(), 8).prop_map(move |raw| {
                let mut pool: Vec<i64> = raw
                    .iter()
                    .map(|r| range.start.wrapping_add((r % width) as i64))
                    .collect();
                pool[0] = range.start;
                pool[1] = range.end - 1;
                (range.clone(), b, shards, pool)
            })
        })
    }

    /// Runs every query for every player (and some who are not there) and
    /// ignores the answers: on damaged rows each may fail, none may panic.
    pub(crate) fn exercise(board: &Board, probes: &[i64]) {
        let players: Vec<String> = board.st.tables().players().keys().cloned().collect();
        for p in players.iter().map(String::as_str).chain(["nobody"]) {
            for tie in [Tie::Standard, Tie::Dense, Tie::Ordinal] {
                let _ = board.rank(p, tie);
            }
            let _ = board.score(p);
            let _ = board.around(p, 2);
        }
        for &score in probes {
            let _ = board.rank_of_score(score);
        }
        let n = players.len() as u64;
        for rank in 0..n + 3 {
            let _ = board.score_at_rank(rank);
            let _ = board.page(rank.max(1), rank + 2);
        }
        let _ = board.top(u64::MAX);
        let _ = board.len();
    }

    /// One way to damage a board's rows, aimed at a row by index.
    #[derive(Debug, Clone)]
    pub(crate) enum Damage {
        /// Flips one bit of a score-tree (`tree: true`) or arrival row.
        Flip {
            tree: bool,
            row: usize,
            bit: usize,
        },
        Truncate {
            tree: bool,
            row: usize,
            len: usize,
        },
        Append {
            tree: bool,
            row: usize,
            bytes: Vec<u8>,
        },
        Delete {
            tree: bool,
            row: usize,
        },
        SetEntry {
            tree: bool,
            row: usize,
            i: usize,
            value: i64,
        },
        /// Copies a row to a key `(height, idx, shard)` or `(score, height,
        /// idx)` further on.
        Copy {
            tree: bool,
            row: usize,
            shift: (u32, u64, u32),
        },
        PlayerScore {
            player: usize,
            score: i64,
        },
        PlayerArrival {
            player: usize,
            arrival: u64,
        },
        PlayerDelete {
            player: usize,
        },
        PlayerAdd {
            score: i64,
            arrival: u64,
        },
    }

    pub(crate) fn damage() -> impl Strategy<Value = Damage> {
        let value = prop_oneof![-2i64..4, any::<i64>(), Just(i64::MAX), Just(i64::MIN)];
        let arrival = prop_oneof![0u64..10, 0u64..1 << 63];
        let score = prop_oneof![-5i64..50, any::<i64>()];
        let (t, r) = (any::<bool>(), any::<usize>());
        prop_oneof![
            (t, r, any::<usize>()).prop_map(|(tree, row, bit)| Damage::Flip { tree, row, bit }),
            (t, r, any::<usize>()).prop_map(|(tree, row, len)| Damage::Truncate { tree, row, len }),
            (t, r, prop::collection::vec(any::<u8>(), 1..10))
                .prop_map(|(tree, row, bytes)| Damage::Append { tree, row, bytes }),
            (t, r).prop_map(|(tree, row)| Damage::Delete { tree, row }),
            (t, r, 0..1001usize, value).prop_map(|(tree, row, i, value)| Damage::SetEntry {
                tree,
                row,
                i,
                value
            }),
            (t, r, (0..3u32, 0..3u64, 0..3u32)).prop_map(|(tree, row, shift)| Damage::Copy {
                tree,
                row,
                shift
            }),
            (r, score.clone()).prop_map(|(player, score)| Damage::PlayerScore { player, score }),
            (r, arrival.clone())
                .prop_map(|(player, arrival)| Damage::PlayerArrival { player, arrival }),
            r.prop_map(|player| Damage::PlayerDelete { player }),
            (score, arrival).prop_map(|(score, arrival)| Damage::PlayerAdd { score, arrival }),
        ]
    }

    /// The `n`-th key of `rows` (modulo their number).
    fn nth<K: Clone, V>(rows: &BTreeMap<K, V>, n: usize) -> Option<K> {
        rows.keys().nth(n.checked_rem(rows.len())?).cloned()
    }

    /// Edits the row at `key` in place (its bytes, `None` if absent);
    /// `Some(empty)` stores an empty row, as a damaged store might.
    fn edit_bytes<K: Ord>(rows: &mut BTreeMap<K, Vec<u8>>, key: K, f: impl FnOnce(&mut Vec<u8>)) {
        if let Some(v) = rows.get_mut(&key) {
            f(v);
        }
    }

    /// Applies `d` to the rows; whether it found something to damage.
    pub(crate) fn inflict(t: &mut Tables, d: &Damage) -> bool {
        use Damage::*;
        let players: Vec<String> = t.players().keys().cloned().collect();
        let player = |n: usize| players.get(n.checked_rem(players.len())?).cloned();
        macro_rules! on_row {
            ($tree:expr, $row:expr, |$v:ident| $body:expr) => {
                if $tree {
                    let Some(key) = nth(&t.nodes, $row) else {
                        return false;
                    };
                    edit_bytes(&mut t.nodes, key, |$v| $body);
                } else {
                    let Some(key) = nth(&t.arrivals, $row) else {
                        return false;
                    };
                    edit_bytes(&mut t.arrivals, key, |$v| $body);
                }
            };
        }
        match d.clone() {
            Flip { tree, row, bit } => on_row!(tree, row, |v| {
                let bit = bit % (8 * v.len()).max(1);
                if let Some(byte) = v.get_mut(bit / 8) {
                    *byte ^= 1 << (bit % 8);
                }
            }),
            Truncate { tree, row, len } => on_row!(tree, row, |v| v.truncate(len % v.len().max(1))),
            Append { tree, row, bytes } => on_row!(tree, row, |v| v.extend(&bytes)),
            SetEntry {
                tree,
                row,
                i,
                value,
            } => on_row!(tree, row, |v| {
                let i = i % (v.len() / 8 + 2);
                if v.len() < 8 * (i + 1) {
                    v.resize(8 * (i + 1), 0);
                }
                v[8 * i..8 * i + 8].copy_from_slice(&value.to_le_bytes());
            }),
            Delete { tree: true, row } => {
                let Some(key) = nth(&t.nodes, row) else {
                    return false;
                };
                t.nodes.remove(&key);
            }
            Delete { tree: false, row } => {
                let Some(key) = nth(&t.arrivals, row) else {
                    return false;
                };
                t.arrivals.remove(&key);
            }
            Copy {
                tree: true,
                row,
                shift: (dh, di, ds),
            } => {
                let Some(key) = nth(&t.nodes, row) else {
                    return false;
                };
                let v = t.nodes[&key].clone();
                let to = (key.0 + dh, (key.1 + di) % (1 << 63), key.2, key.3 + ds);
                t.nodes.insert(to, v);
            }
            Copy {
                tree: false,
                row,
                shift: (dh, di, ds),
            } => {
                let Some(key) = nth(&t.arrivals, row) else {
                    return false;
                };
                let v = t.arrivals[&key].clone();
                let to = (
                    key.0.wrapping_add(ds.into()),
                    key.1 + dh,
                    (key.2 + di) % (1 << 63),
                );
                t.arrivals.insert(to, v);
            }
            PlayerScore { player: n, score } => {
                let Some(p) = player(n) else { return false };
                let arrival = t.players()[&p].1;
                t.put_player(&p, score, arrival);
            }
            PlayerArrival { player: n, arrival } => {
                let Some(p) = player(n) else { return false };
                let score = t.players()[&p].0;
                t.put_player(&p, score, arrival);
            }
            PlayerDelete { player: n } => {
                let Some(p) = player(n) else { return false };
                t.delete_player(&p);
            }
            PlayerAdd { score, arrival } => t.put_player("intruder", score, arrival),
        }
        true
    }

    pub(crate) fn name(p: usize) -> String {
        format!("player-{p}")
    }

    impl Op {
        /// The players it names, in order.
        pub fn names(&self) -> Vec<String> {
            self.updates.iter().map(|&(p, _)| name(p)).collect()
        }

        /// The updates to apply: `names` are [`Op::names`].
        pub fn updates<'n>(
            &self,
            names: &'n [String],
            pool: &[i64],
        ) -> Vec<(&'n str, Option<i64>)> {
            let score = |s: Option<usize>| s.map(|s| pool[s % pool.len()]);
            let updates = self.updates.iter().zip(names);
            updates.map(|(&(_, s), n)| (n.as_str(), score(s))).collect()
        }
    }

    /// Applies `op` to the board and the oracle; both must agree on who
    /// was on the board.
    pub(crate) fn run(
        board: &Board,
        oracle: &mut Oracle,
        pool: &[i64],
        op: &Op,
    ) -> Result<(), TestCaseError> {
        let names = op.names();
        let updates = op.updates(&names, pool);
        let had = board.apply(op.shard % board.shards, &updates)?;
        prop_assert_eq!(had, oracle.batch(&updates));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::harness::Board;
    use super::*;
    use crate::error::Error;

    fn g(range: std::ops::Range<i64>, b: u32) -> Geometry {
        Geometry::new(range.start, range.end, b).unwrap()
    }

    fn enc(v: &[i64]) -> Vec<u8> {
        let mut out = Vec::new();
        storage::encode(v, &mut out);
        out
    }

    #[test]
    fn an_empty_vector_deletes_the_row() {
        let st = MemoryStorage::new("t", g(0..100, 10));
        st.write_unchecked(|tx| {
            tx.put_node_part(2, 0, Part::A, 3, &enc(&[1, 2]))?;
            tx.put_node_part(2, 0, Part::B, 3, &enc(&[1]))?;
            tx.put_arrival_node(7, 1, 0, &enc(&[0, 1]))?;
            tx.put_node_part(2, 0, Part::A, 3, &[])?;
            tx.put_arrival_node(7, 1, 0, &[])?;
            // Deleting what is not there is a no-op.
            tx.put_arrival_node(8, 1, 0, &[])?;
            tx.delete_player("nobody")
        })
        .unwrap();
        let t = st.tables();
        assert_eq!(t.nodes.keys().collect::<Vec<_>>(), [&(2, 0, Part::B, 3)]);
        assert!(t.arrivals.is_empty());
    }

    #[test]
    fn player_rows_keep_the_ranking_index() {
        let st = MemoryStorage::new("t", g(-10..10, 4));
        st.write_unchecked(|tx| {
            for (p, s, a) in [
                ("a", 5, 0),
                ("b", 5, 1),
                ("c", 5, 2),
                ("d", 3, 0),
                ("e", -10, 0),
            ] {
                tx.put_player(p, s, a)?;
            }
            tx.put_player("a", 5, 3)?; // a moves behind c
            tx.put_player("f", 9, 0)?;
            tx.delete_player("f")
        })
        .unwrap();
        st.read(|tx| {
            let mut out = Vec::new();
            tx.entries_at(5, 0, 10, &mut out)?;
            assert_eq!(out, [("b".into(), 5), ("c".into(), 5), ("a".into(), 5)]);
            out.clear();
            tx.entries_at(5, 2, 1, &mut out)?;
            assert_eq!(out, [("c".into(), 5)]);
            out.clear();
            tx.entries_at(4, 0, 10, &mut out)?;
            assert!(out.is_empty());
            tx.entries_below(6, 2, &mut out)?;
            assert_eq!(out, [("b".into(), 5), ("c".into(), 5)]);
            out.clear();
            tx.entries_below(5, u64::MAX, &mut out)?;
            assert_eq!(out, [("d".into(), 3), ("e".into(), -10)]);
            out.clear();
            tx.entries_below(-10, 10, &mut out)?;
            tx.entries_below(i64::MIN, 10, &mut out)?;
            tx.entries_at(5, 0, 0, &mut out)?;
            assert!(out.is_empty());
            assert_eq!(tx.player("a")?, Some((5, 3)));
            assert_eq!(tx.player("f")?, None);
            let mut scanned = Vec::new();
            tx.scan_players(&mut |s, a| {
                scanned.push((s, a));
                Ok(())
            })?;
            scanned.sort_unstable();
            assert_eq!(scanned, [(-10, 0), (3, 0), (5, 1), (5, 2), (5, 3)]);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn reads_come_in_the_promised_orders() {
        let st = MemoryStorage::new("t", g(0..1000, 10));
        st.write_unchecked(|tx| {
            // Written out of order on purpose.
            for (h, idx, part, shard) in
                [(2, 1, Part::B, 0), (1, 5, Part::A, 0), (2, 1, Part::A, 2)]
            {
                tx.put_node_part(h, idx, part, shard, &enc(&[1]))?;
            }
            tx.put_node_part(2, 1, Part::A, 0, &enc(&[2]))?;
            tx.put_node_part(3, 0, Part::A, 0, &enc(&[3]))?;
            for (score, h, idx) in [(9, 1, 0), (-1, 2, 0), (9, 1, 0), (-1, 1, 1), (9, 2, 0)] {
                tx.put_arrival_node(score, h, idx, &enc(&[4]))?;
            }
            Ok(())
        })
        .unwrap();
        st.read(|tx| {
            let mut seen = Vec::new();
            tx.scan_nodes(&mut |key, part, shard, _| {
                seen.push((key, part, shard));
                Ok(())
            })?;
            let want = [
                ((1, 5), Part::A, 0),
                ((2, 1), Part::A, 0),
                ((2, 1), Part::A, 2),
                ((2, 1), Part::B, 0),
                ((3, 0), Part::A, 0),
            ];
            assert_eq!(seen, want);
            let mut arrivals = Vec::new();
            tx.scan_arrival_nodes(&mut |score, h, idx, _| {
                arrivals.push((score, h, idx));
                Ok(())
            })?;
            assert_eq!(arrivals, [(-1, 1, 1), (-1, 2, 0), (9, 1, 0), (9, 2, 0)]);
            // A path: part A of every shard of each node, part B only where
            // asked, nothing for a node that is not stored.
            let mut rows = Vec::new();
            tx.path_rows(
                &[(3, 0, true), (2, 1, false), (2, 7, true)],
                &mut |h, part, shard, v| {
                    rows.push((h, part, shard, storage::get(v, 0)));
                    Ok(())
                },
            )?;
            assert_eq!(
                rows,
                [(3, Part::A, 0, 3), (2, Part::A, 0, 2), (2, Part::A, 2, 1)]
            );
            rows.clear();
            tx.path_rows(&[(2, 1, true)], &mut |h, part, shard, v| {
                rows.push((h, part, shard, storage::get(v, 0)));
                Ok(())
            })?;
            assert_eq!(rows.len(), 3);
            let mut heights = Vec::new();
            tx.arrival_path(9, &[(2, 0), (1, 0), (1, 1)], &mut |h, _| {
                heights.push(h);
                Ok(())
            })?;
            assert_eq!(heights, [2, 1]);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn a_failed_write_transaction_is_rolled_back() {
        let st = MemoryStorage::new("t", g(0..10, 2));
        st.write_unchecked(|tx| tx.put_player("a", 1, 0)).unwrap();
        let before = st.tables().clone();
        let err = st
            .write_unchecked(|tx| {
                tx.put_player("b", 2, 0)?;
                tx.put_node_part(1, 0, Part::A, 0, &enc(&[1]))?;
                Err::<(), _>(tx.corrupt("f".into(), "r".into()))
            })
            .unwrap_err();
        assert!(
            matches!(err, Error::Corrupt { ref id, .. } if id == "t"),
            "{err}"
        );
        assert_eq!(*st.tables(), before);
    }

    type Case = Box<dyn Fn(&MemoryTx<'_>) -> Result<()>>;

    fn case(f: impl Fn(&MemoryTx<'_>) -> Result<()> + 'static) -> Case {
        Box::new(f)
    }

    /// Runs `case` on a fresh board; its panic message, if it panicked.
    fn panics(write: bool, case: &Case) -> Option<String> {
        let st = MemoryStorage::new("t", g(0..100, 10));
        let run = std::panic::AssertUnwindSafe(|| match write {
            true => st.write(|tx| case(tx)),
            false => st.read(|tx| case(tx)),
        });
        let panic = std::panic::catch_unwind(run).err()?;
        Some(panic.downcast_ref::<String>().cloned().unwrap_or_default())
    }

    /// The checks of the callers' side: each case breaks one rule of the
    /// locking protocol or the encoding, and must panic saying so.
    #[test]
    fn broken_promises_panic() {
        let locked = |tx: &MemoryTx<'_>| {
            tx.lock_players(&[])?;
            tx.lock_leaves(&[0])
        };
        let cases = [
            (
                "player \"a\" is not locked",
                case(|tx| tx.player("a").map(drop)),
            ),
            (
                "locked once, after the players",
                case(|tx| tx.lock_leaves(&[0])),
            ),
            (
                "locked once, before the leaves",
                case(|tx| {
                    tx.lock_players(&["a"])?;
                    tx.lock_players(&["b"])
                }),
            ),
            (
                "leaf 1 is not locked",
                case(move |tx| {
                    locked(tx)?;
                    tx.node_shard(1, 1, 0, &mut |_, _| Ok(()))
                }),
            ),
            (
                "leaf 2 is not locked",
                case(move |tx| {
                    locked(tx)?;
                    tx.arrival_path(25, &[(1, 0)], &mut |_, _| Ok(()))
                }),
            ),
            (
                "read before the leaves are locked",
                case(|tx| tx.node_shard(2, 0, 0, &mut |_, _| Ok(()))),
            ),
            (
                "(2, 0, 3) read after (2, 1, 0)",
                case(move |tx| {
                    locked(tx)?;
                    tx.node_shard(2, 1, 0, &mut |_, _| Ok(()))?;
                    tx.node_shard(2, 0, 3, &mut |_, _| Ok(()))
                }),
            ),
            (
                "written before it is read",
                case(move |tx| {
                    locked(tx)?;
                    tx.node_shard(2, 0, 0, &mut |_, _| Ok(()))?;
                    tx.put_node_part(2, 0, Part::A, 1, &enc(&[1]))
                }),
            ),
            (
                "player \"a\" written twice",
                case(|tx| {
                    tx.lock_players(&["a"])?;
                    tx.put_player("a", 1, 0)?;
                    tx.delete_player("a")
                }),
            ),
            (
                "not a canonical vector",
                case(move |tx| {
                    locked(tx)?;
                    tx.put_node_part(1, 0, Part::A, 0, &[1; 12])
                }),
            ),
            (
                "not a canonical vector",
                case(move |tx| {
                    locked(tx)?;
                    let untrimmed = [enc(&[1]), vec![0; 8]].concat();
                    tx.put_node_part(1, 0, Part::A, 0, &untrimmed)
                }),
            ),
            (
                "not a canonical vector",
                case(move |tx| {
                    locked(tx)?;
                    tx.put_arrival_node(3, 1, 0, &enc(&[1; 11]))
                }),
            ),
            (
                "idx 9223372036854775808 is not below 2^63",
                case(|tx| tx.path_rows(&[(1, 1 << 63, false)], &mut |_, _, _, _| Ok(()))),
            ),
        ];
        for (want, case) in &cases {
            let message = panics(true, case).unwrap_or_else(|| panic!("no panic: {want}"));
            assert!(message.contains(want), "{message:?} does not say {want:?}");
        }
        // Readers neither write nor lock.
        for case in [
            case(|tx| tx.put_player("a", 1, 0)),
            case(|tx| tx.lock_players(&["a"])),
            case(|tx| tx.node_shard(1, 0, 0, &mut |_, _| Ok(()))),
        ] {
            let message = panics(false, &case).expect("a read transaction wrote or locked");
            assert!(message.contains("in a read transaction"), "{message}");
        }
        // The protocol followed: no panic.
        let followed = case(|tx| {
            tx.lock_players(&["a"])?;
            assert_eq!(tx.player("a")?, None);
            tx.lock_leaves(&[0])?;
            tx.node_shard(1, 0, 0, &mut |_, _| Ok(()))?;
            tx.arrival_path(5, &[(1, 0)], &mut |_, _| Ok(()))?;
            tx.node_shard(2, 0, 0, &mut |_, _| Ok(()))?;
            tx.put_node_part(2, 0, Part::A, 0, &enc(&[1]))?;
            tx.put_node_part(1, 0, Part::A, 0, &enc(&[0, 0, 0, 0, 0, 1]))?;
            tx.put_arrival_node(5, 1, 0, &enc(&[1]))?;
            tx.put_player("a", 5, 0)
        });
        assert_eq!(panics(true, &followed), None);
    }

    #[test]
    fn diff_is_empty_for_equal_storages_and_names_each_difference() {
        // Depth 4 over 0..81: the root's children are 0..27, 27..54, 54..81.
        let (left, right) = (Board::new(0..81, 3, 2), Board::new(0..81, 3, 2));
        for board in [&left, &right] {
            board
                .set_scores(1, &[("a", 5), ("b", 5), ("c", 40)])
                .unwrap();
            board.set_scores(1, &[("d", 80)]).unwrap();
        }
        left.st
            .read(|l| {
                right.st.read(|r| {
                    assert_eq!(diff(l, r)?, None);
                    assert_same(l, r);
                    Ok(())
                })
            })
            .unwrap();

        // Same players and scores, another history: b before a at 5, and
        // inner rows in shard 0 instead of 1.
        let other = Board::new(0..81, 3, 2);
        other
            .set_scores(0, &[("b", 5), ("a", 5), ("c", 40), ("d", 80)])
            .unwrap();
        let shown = left
            .st
            .read(|l| other.st.read(|r| diff(l, r)))
            .unwrap()
            .expect("the storages differ");
        for line in [
            "~ player \"a\": (5, 0) != (5, 1)",
            "~ player \"b\": (5, 1) != (5, 0)",
            "- node (4, 0, A, 1): [2, 1, 1]",
            "+ node (4, 0, A, 0): [2, 1, 1]",
        ] {
            assert!(shown.contains(line), "{line:?} missing from:\n{shown}");
        }
        assert!(!shown.contains("scanned player"), "{shown}");

        // A row only one side has, an untrimmed vector, a listing that
        // disagrees with the rows.
        let damaged = left.st.clone();
        {
            let mut t = damaged.tables_mut();
            t.arrivals.insert((42, 1, 0), enc(&[1]));
            t.nodes.insert(
                (1, 1, Part::A, 0),
                vec![2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            );
            t.players.insert("ghost".into(), (1, 0));
        }
        let shown = left
            .st
            .read(|l| damaged.read(|r| diff(l, r)))
            .unwrap()
            .expect("the storages differ");
        for line in [
            "+ arrival node (42, 1, 0): [1]",
            "(untrimmed)",
            "! right: scan_players disagrees with the listing",
            "+ scanned player (1, 0): 1x",
        ] {
            assert!(shown.contains(line), "{line:?} missing from:\n{shown}");
        }
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            left.st.read(|l| {
                damaged.read(|r| {
                    assert_same(l, r);
                    Ok(())
                })
            })
        }));
        assert!(panic.is_err(), "assert_same passed on different storages");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]

        /// The reference against SQLite: after the same batches, a SQLite
        /// board holds exactly the rows of the memory one (players by name,
        /// both trees byte for byte), and each storage's scans keep their
        /// promised orders. (This test names the SQLite backend's module: it
        /// moves with it.) Control, reverted: with the memory storage
        /// storing empty node vectors instead of deleting them, this failed
        /// with `+ node (1, 7, A, 0): []`.
        #[test]
        fn sqlite_holds_the_rows_memory_holds(
            (range, branching, shards, pool) in harness::board_shape(),
            ops in proptest::collection::vec(harness::op(), 1..15),
        ) {
            use super::super::sqlite::{create_board, SqliteTx};
            use super::super::{apply_updates, RankingConfig};
            let db = crate::sqlite::Sqlite::memory()?;
            let config = RankingConfig::new(range.clone()).branching(branching).shards(shards);
            let id = create_board(&db, "sqlite", &config)?;
            let board = Board::new(range, branching, shards);
            let mut oracle = harness::Oracle::default();
            for op in &ops {
                harness::run(&board, &mut oracle, &pool, op)?;
                let names = op.names();
                let updates = op.updates(&names, &pool);
                db.write(|tx| {
                    let st = SqliteTx::new(tx, id, "sqlite");
                    apply_updates(&st, board.g(), op.shard % shards, &updates)
                })?;
            }
            let shown = db.read(|tx| board.st.read(|m| diff(&SqliteTx::new(tx, id, "sqlite"), m)))?;
            proptest::prop_assert!(shown.is_none(), "{}", shown.unwrap_or_default());
        }
    }
}

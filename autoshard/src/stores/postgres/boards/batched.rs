//! A write batch in a bounded number of statements (issue 18, item 5).
//!
//! The apply announces what a batch will read once its locks are taken
//! ([`Storage::prefetch`](crate::seam::Storage::prefetch)): the players,
//! the leaves, the inner shard rows and the arrival trees of the scores it
//! touches. They are loaded in three statements, the batch's reads are
//! answered from [`Staged`], and its writes are held there too and sent in
//! ONE statement of writable CTEs ([`PgTx::flush_staged`]) at the end of the
//! batch. So a batch of 10,000 updates costs about as many round trips as
//! a batch of one, where it cost several per player and per node before.
//!
//! Why the loaded rows stay right for the whole transaction: the writer
//! holds the locks of everything it loaded (players, leaves and, through
//! them, the arrival trees of their scores; inner shard rows are locked
//! here, in one statement) or the board exclusively, until it ends. A read
//! of anything not loaded flushes the held writes first and then goes to
//! the server, so the staging is an optimisation, never a second truth.
//!
//! A batch that holds the board exclusively folds its inner nodes' shard
//! rows into one ([`Prefetch::fold`]): every shard row of those nodes is
//! loaded then, in the same statement, so the fold reads nothing more.
//!
//! Arrival trees are loaded whole for the touched scores: one statement
//! whatever their height, at the cost of reading every node of a score many
//! players tie at (about `players at the score / (B - 1)` rows).

use super::{small, PgTx};
use crate::error::Result;
use crate::seam::{Part, Prefetch};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Positions are below 2^63 by construction; see `Storage`.
fn int(position: u64) -> i64 {
    i64::try_from(position).expect("positions are below 2^63")
}

/// Rows a write batch loaded or wrote, and the writes not sent yet. A
/// missing row is known as an empty vector (or `None` for a player).
#[derive(Default)]
pub(super) struct Staged {
    players: HashMap<String, Option<(i64, u64)>>,
    /// `(height, idx, part, shard) -> vector`.
    nodes: HashMap<(u32, u64, Part, u32), Vec<u8>>,
    /// `(score, height, idx) -> vector`; complete for `scores`.
    arrivals: HashMap<(i64, u32, u64), Vec<u8>>,
    scores: HashSet<i64>,
    held: Held,
}

/// Writes not sent yet, each key once with its last value, in key order
/// (the order the one flush statement writes them in).
#[derive(Default)]
struct Held {
    players: BTreeMap<String, Option<(i64, u64)>>,
    nodes: BTreeMap<(u32, u64, Part, u32), Vec<u8>>,
    arrivals: BTreeMap<(i64, u32, u64), Vec<u8>>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.players.is_empty() && self.nodes.is_empty() && self.arrivals.is_empty()
    }
}

impl PgTx<'_, '_> {
    /// Loads what `rows` names and is not loaded yet (see the module docs).
    pub(super) fn prefetch_rows(&self, rows: &Prefetch<'_>) -> Result<()> {
        let inner = rows.inner.iter();
        self.lock(
            inner
                .map(|&(h, i)| self.node_key(h, i, rows.shard))
                .collect(),
        )?;
        let mut staged = self.staged.borrow_mut().take().unwrap_or_default();
        let loaded = self.load(rows, &mut staged);
        *self.staged.borrow_mut() = Some(staged);
        loaded
    }

    fn load(&self, rows: &Prefetch<'_>, staged: &mut Staged) -> Result<()> {
        let players: Vec<&str> = rows
            .players
            .iter()
            .copied()
            .filter(|p| !staged.players.contains_key(*p))
            .collect();
        if !players.is_empty() {
            for row in &self.query(self.loads()[0], &[&self.board, &players])? {
                let arrival = self.unsigned(row.try_get::<_, i64>(2)?, "player arrival")?;
                let place = Some((row.try_get(1)?, arrival));
                staged.players.entry(row.try_get(0)?).or_insert(place);
            }
            for p in players {
                staged.players.entry(p.to_owned()).or_insert(None);
            }
        }
        let leaves = rows.leaves.iter().map(|&idx| (1, idx, 0));
        // A folding batch reads every shard row of its inner nodes.
        let shards = if rows.fold > 1 {
            0..rows.fold
        } else {
            rows.shard..rows.shard + 1
        };
        let inner = rows
            .inner
            .iter()
            .flat_map(|&(h, idx)| shards.clone().map(move |s| (h, idx, s)));
        let nodes: Vec<(u32, u64, u32)> = leaves
            .chain(inner)
            .filter(|&(h, i, s)| !staged.nodes.contains_key(&(h, i, Part::A, s)))
            .collect();
        if !nodes.is_empty() {
            let heights: Vec<i32> = nodes.iter().map(|n| small(n.0)).collect();
            let idxs: Vec<i64> = nodes.iter().map(|n| int(n.1)).collect();
            let shards: Vec<i32> = nodes.iter().map(|n| small(n.2)).collect();
            let params: [&(dyn ::postgres::types::ToSql + Sync); 4] =
                [&self.board, &heights, &idxs, &shards];
            for row in &self.query(self.loads()[1], &params)? {
                let key = (
                    self.unsigned(row.try_get::<_, i32>(0)?, "node height")?,
                    self.unsigned(row.try_get::<_, i64>(1)?, "node idx")?,
                    self.part(row.try_get(2)?)?,
                    self.unsigned(row.try_get::<_, i32>(3)?, "node shard")?,
                );
                staged.nodes.entry(key).or_insert(row.try_get(4)?);
            }
            for (h, i, s) in nodes {
                for part in [Part::A, Part::B] {
                    staged.nodes.entry((h, i, part, s)).or_default();
                }
            }
        }
        let scores: Vec<i64> = rows
            .scores
            .iter()
            .copied()
            .filter(|s| !staged.scores.contains(s))
            .collect();
        if !scores.is_empty() {
            for row in &self.query(self.loads()[2], &[&self.board, &scores])? {
                let key = (
                    row.try_get(0)?,
                    self.unsigned(row.try_get::<_, i32>(1)?, "arrival node height")?,
                    self.unsigned(row.try_get::<_, i64>(2)?, "arrival node idx")?,
                );
                staged.arrivals.entry(key).or_insert(row.try_get(3)?);
            }
            staged.scores.extend(scores);
        }
        Ok(())
    }

    /// The statements loading a batch's players, tree rows and arrival
    /// rows. In a `REPEATABLE READ` transaction they lock what they read
    /// (`FOR KEY SHARE`): its reads see the snapshot of its first
    /// statement, taken before the board's advisory locks, and a row that
    /// another writer deleted since would otherwise be written back by
    /// this batch's upsert (an `INSERT … ON CONFLICT` finds no live
    /// conflict) with counts from before that delete. Locking a row deleted
    /// or updated since the snapshot fails the transaction with a
    /// serialization failure instead, and the save is retried; a row
    /// inserted since fails the upsert the same way.
    fn loads(&self) -> [&str; 3] {
        if self.repeatable {
            self.sql.locked_loads.each_ref().map(String::as_str)
        } else {
            [
                &self.sql.players,
                &self.sql.load_nodes,
                &self.sql.load_arrivals,
            ]
        }
    }

    /// The staged player row, if loaded: `Some(None)` for a known absence.
    pub(super) fn staged_player(&self, player: &str) -> Option<Option<(i64, u64)>> {
        let staged = self.staged.borrow();
        staged.as_ref()?.players.get(player).copied()
    }

    /// Calls `f` with the staged parts of a shard row; `false` if it is not
    /// loaded.
    pub(super) fn staged_node(
        &self,
        (height, idx, shard): (u32, u64, u32),
        f: &mut dyn FnMut(Part, &[u8]) -> Result<()>,
    ) -> Result<bool> {
        let staged = self.staged.borrow();
        let Some(staged) = staged.as_ref() else {
            return Ok(false);
        };
        let parts = [Part::A, Part::B].map(|p| staged.nodes.get(&(height, idx, p, shard)));
        let [Some(a), Some(b)] = parts else {
            return Ok(false);
        };
        for (part, v) in [(Part::A, a), (Part::B, b)] {
            if !v.is_empty() {
                f(part, v)?;
            }
        }
        Ok(true)
    }

    /// Calls `f(height, vector)` for the staged nodes of `path` in the
    /// arrival tree of `score`; `false` if that tree is not loaded.
    pub(super) fn staged_arrivals(
        &self,
        score: i64,
        path: &[(u32, u64)],
        f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<bool> {
        let staged = self.staged.borrow();
        let Some(staged) = staged.as_ref().filter(|s| s.scores.contains(&score)) else {
            return Ok(false);
        };
        for &(h, idx) in path {
            match staged.arrivals.get(&(score, h, idx)) {
                Some(v) if !v.is_empty() => f(h, v)?,
                _ => {}
            }
        }
        Ok(true)
    }

    /// Holds a player write if a batch is staged; `false` if not (then the
    /// caller writes it now).
    pub(super) fn hold_player(&self, player: &str, place: Option<(i64, u64)>) -> bool {
        let mut staged = self.staged.borrow_mut();
        let Some(staged) = staged.as_mut() else {
            return false;
        };
        staged.players.insert(player.to_owned(), place);
        staged.held.players.insert(player.to_owned(), place);
        true
    }

    /// Holds a shard-row write if a batch is staged (see
    /// [`hold_player`](Self::hold_player)).
    pub(super) fn hold_node(&self, key: (u32, u64, Part, u32), v: &[u8]) -> bool {
        let mut staged = self.staged.borrow_mut();
        let Some(staged) = staged.as_mut() else {
            return false;
        };
        staged.nodes.insert(key, v.to_vec());
        staged.held.nodes.insert(key, v.to_vec());
        true
    }

    /// Holds an arrival-node write if a batch is staged (see
    /// [`hold_player`](Self::hold_player)).
    pub(super) fn hold_arrival(&self, key: (i64, u32, u64), v: &[u8]) -> bool {
        let mut staged = self.staged.borrow_mut();
        let Some(staged) = staged.as_mut() else {
            return false;
        };
        staged.arrivals.insert(key, v.to_vec());
        staged.held.arrivals.insert(key, v.to_vec());
        true
    }

    /// Sends every held write in one statement; nothing if none is held.
    /// The loaded rows stay (they are still right: see the module docs).
    pub(super) fn flush_staged(&self) -> Result<()> {
        let held = {
            let mut staged = self.staged.borrow_mut();
            match staged.as_mut() {
                Some(s) if !s.held.is_empty() => std::mem::take(&mut s.held),
                _ => return Ok(()),
            }
        };
        let (mut up, mut gone) = (PlayerCols::default(), Vec::new());
        for (player, place) in &held.players {
            match *place {
                Some((score, arrival)) => {
                    up.names.push(player.as_str());
                    up.scores.push(score);
                    up.arrivals.push(int(arrival));
                }
                None => gone.push(player.as_str()),
            }
        }
        let (mut nodes_up, mut nodes_gone) = (NodeCols::default(), NodeCols::default());
        for (&(h, idx, part, shard), v) in &held.nodes {
            let cols = if v.is_empty() {
                &mut nodes_gone
            } else {
                &mut nodes_up
            };
            cols.heights.push(small(h));
            cols.idxs.push(int(idx));
            cols.parts.push(part as i16);
            cols.shards.push(small(shard));
            cols.vs.push(v.as_slice());
        }
        let (mut arr_up, mut arr_gone) = (ArrivalCols::default(), ArrivalCols::default());
        for (&(score, h, idx), v) in &held.arrivals {
            let cols = if v.is_empty() {
                &mut arr_gone
            } else {
                &mut arr_up
            };
            cols.scores.push(score);
            cols.heights.push(small(h));
            cols.idxs.push(int(idx));
            cols.vs.push(v.as_slice());
        }
        self.execute(
            &self.sql.flush,
            &[
                &self.board,
                &up.names,
                &up.scores,
                &up.arrivals,
                &gone,
                &nodes_up.heights,
                &nodes_up.idxs,
                &nodes_up.parts,
                &nodes_up.shards,
                &nodes_up.vs,
                &nodes_gone.heights,
                &nodes_gone.idxs,
                &nodes_gone.parts,
                &nodes_gone.shards,
                &arr_up.scores,
                &arr_up.heights,
                &arr_up.idxs,
                &arr_up.vs,
                &arr_gone.scores,
                &arr_gone.heights,
                &arr_gone.idxs,
            ],
        )
    }
}

#[derive(Default)]
struct PlayerCols<'a> {
    names: Vec<&'a str>,
    scores: Vec<i64>,
    arrivals: Vec<i64>,
}

#[derive(Default)]
struct NodeCols<'a> {
    heights: Vec<i32>,
    idxs: Vec<i64>,
    parts: Vec<i16>,
    shards: Vec<i32>,
    vs: Vec<&'a [u8]>,
}

#[derive(Default)]
struct ArrivalCols<'a> {
    scores: Vec<i64>,
    heights: Vec<i32>,
    idxs: Vec<i64>,
    vs: Vec<&'a [u8]>,
}

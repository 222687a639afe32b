//! The overlay a batch is applied in: every node a move touches is read
//! once, the moves are applied to it in order, and `flush.rs` writes it.
//!
//! What each kind of node needs:
//!
//! - inner score-tree nodes (height >= 2) only ever receive additive deltas,
//!   so the overlay keeps just the delta, and the flush folds it into one
//!   shard row (read-modify-write of that row only). Other writers may add
//!   to other shards meanwhile; readers sum them all.
//! - leaves (height 1) decide things from their exact values (did a score
//!   go from 0 to 1 players, which arrival number is next), so they live in
//!   shard 0 only and are read whole.
//! - arrival trees are exact as well and unsharded.
//!
//! Rows whose vectors become all zero are deleted, so an arrival tree whose
//! score empties disappears without a scan.

use super::super::storage::{self, Part, Storage};
use super::super::tree::{self, Geometry};
use super::FastMap as HashMap;
use crate::error::{Error, Result};

/// Where a player is: `(score, arrival)`.
type Place = Option<(i64, u64)>;

pub(super) struct PlayerState {
    pub(super) stored: Place,
    pub(super) now: Place,
}

pub(super) struct Leaf {
    /// Players per score.
    pub(super) a: Vec<i64>,
    /// Arrival counter per score: the next arrival number handed out.
    pub(super) b: Vec<i64>,
    pub(super) a_changed: bool,
    pub(super) b_changed: bool,
}

/// Additive change to an inner node: players (`a`) and distinct scores
/// (`b`) per child.
pub(super) struct Delta {
    pub(super) a: Vec<i64>,
    pub(super) b: Vec<i64>,
}

pub(super) struct ArrivalNode {
    pub(super) a: Vec<i64>,
    pub(super) changed: bool,
}

/// Updates applied to an overlay over one transaction.
pub(super) struct Batch<'a> {
    pub(super) st: &'a dyn Storage,
    pub(super) g: &'a Geometry,
    pub(super) shard: u32,
    pub(super) players: HashMap<String, PlayerState>,
    pub(super) leaves: HashMap<u64, Leaf>,
    pub(super) inner: HashMap<(u32, u64), Delta>,
    pub(super) arrivals: HashMap<(i64, u32, u64), ArrivalNode>,
    /// The lowest arrival number handed out (0: the score's counter alone
    /// decides). A tree of a board split into trees hands out board-wide
    /// arrival numbers (`ranking/trees/arrival.rs`), so that ties compare
    /// across trees.
    floor: i64,
    /// Above 1: shard rows `0..fold` of each changed inner node are folded
    /// into row `shard` ([`fold_shards`](Self::fold_shards)).
    pub(super) fold: u32,
}

impl<'a> Batch<'a> {
    /// A batch whose inner-node deltas go to shard row `shard`.
    pub fn new(st: &'a dyn Storage, g: &'a Geometry, shard: u32) -> Self {
        Batch {
            st,
            g,
            shard,
            players: HashMap::default(),
            leaves: HashMap::default(),
            inner: HashMap::default(),
            arrivals: HashMap::default(),
            floor: 0,
            fold: 0,
        }
    }

    /// Folds shard rows `0..shards` of every inner node the batch changes
    /// into its own shard row: only for a batch no other writer can add to
    /// those rows beside ([`Storage::writes_alone`]).
    pub fn fold_shards(&mut self, shards: u32) {
        self.fold = shards;
    }

    /// Hands out arrival numbers of at least `floor` (below `2^63`) from
    /// now on: an arrival takes the higher of the score's counter and
    /// `floor`, so the counter still orders arrivals at one score.
    pub fn arrivals_from(&mut self, floor: u64) {
        self.floor = i64::try_from(floor).unwrap_or(i64::MAX);
    }

    /// The player's score before this batch, loading it if needed.
    pub fn stored_score(&mut self, player: &str) -> Result<Option<i64>> {
        if let Some(state) = self.players.get(player) {
            return Ok(state.stored.map(|(s, _)| s));
        }
        let stored = self.st.player(player)?;
        self.players.insert(
            player.to_owned(),
            PlayerState {
                stored,
                now: stored,
            },
        );
        Ok(stored.map(|(s, _)| s))
    }

    /// Moves `player` to `score` (`None`: off the board); the caller has
    /// validated both. Setting the score a player already has changes
    /// nothing, not even their place among ties.
    pub fn update(&mut self, player: &str, score: Option<i64>) -> Result<()> {
        self.stored_score(player)?;
        let now = self.players[player].now;
        if now.map(|(s, _)| s) == score {
            return Ok(());
        }
        if let Some((old, arrival)) = now {
            self.leave(old, arrival)?;
        }
        let next = match score {
            Some(s) => Some((s, self.arrive(s)?)),
            None => None,
        };
        self.players.get_mut(player).expect("loaded above").now = next;
        Ok(())
    }

    fn corrupt(&self, field: String, reason: impl Into<String>) -> Error {
        self.st.corrupt(field, reason.into())
    }

    fn offset(&self, score: i64) -> Result<u64> {
        self.g.offset(score).ok_or_else(|| {
            self.corrupt(format!("player score {score}"), "outside the board's range")
        })
    }

    fn leaf(&mut self, idx: u64) -> Result<&mut Leaf> {
        if !self.leaves.contains_key(&idx) {
            let b = self.g.b();
            let mut leaf = Leaf {
                a: vec![0; b],
                b: vec![0; b],
                a_changed: false,
                b_changed: false,
            };
            let st = self.st;
            st.node_shard(1, idx, 0, &mut |part, v| {
                if !storage::well_formed(v, b) {
                    return Err(st.corrupt(format!("leaf {idx}"), "malformed vector".into()));
                }
                let into = match part {
                    Part::A => &mut leaf.a,
                    Part::B => &mut leaf.b,
                };
                storage::add_into(v, into).expect("zeros plus values");
                Ok(())
            })?;
            self.leaves.insert(idx, leaf);
        }
        Ok(self.leaves.get_mut(&idx).expect("inserted above"))
    }

    fn arrival_node(&mut self, score: i64, h: u32, idx: u64) -> Result<&mut ArrivalNode> {
        let key = (score, h, idx);
        if !self.arrivals.contains_key(&key) {
            let b = self.g.b();
            let mut node = ArrivalNode {
                a: vec![0; b],
                changed: false,
            };
            let st = self.st;
            st.arrival_path(score, &[(h, idx)], &mut |_, va| {
                if !storage::well_formed(va, b) {
                    return Err(st.corrupt(
                        format!("arrival node (score {score}, height {h}, idx {idx})"),
                        "malformed vector".into(),
                    ));
                }
                storage::add_into(va, &mut node.a).expect("zeros plus values");
                Ok(())
            })?;
            self.arrivals.insert(key, node);
        }
        Ok(self.arrivals.get_mut(&key).expect("inserted above"))
    }

    /// Adds `players` and `scores` to every inner node above `offset`.
    fn inner_delta(&mut self, offset: u64, players: i64, scores: i64) {
        let b = self.g.b();
        for h in 2..=self.g.depth() {
            let (idx, c) = (self.g.node(offset, h), self.g.child(offset, h));
            let delta = self.inner.entry((h, idx)).or_insert_with(|| Delta {
                a: vec![0; b],
                b: vec![0; b],
            });
            // Deltas within one batch stay within +-(batch length).
            delta.a[c] += players;
            delta.b[c] += scores;
        }
    }

    fn leave(&mut self, score: i64, arrival: u64) -> Result<()> {
        let offset = self.offset(score)?;
        let (idx, c) = (self.g.node(offset, 1), self.g.child(offset, 1));
        let leaf = self.leaf(idx)?;
        let (players, counter) = (leaf.a[c], leaf.b[c]);
        if players <= 0 || counter <= 0 || arrival >= counter as u64 {
            return Err(self.corrupt(
                format!("leaf {idx}"),
                format!("score {score} holds {players} players, counter {counter}, yet a player left it with arrival {arrival}"),
            ));
        }
        leaf.a[c] -= 1;
        leaf.a_changed = true;
        let emptied = leaf.a[c] == 0;
        if emptied {
            // Nobody holds the score any more: arrival numbers start over.
            leaf.b[c] = 0;
            leaf.b_changed = true;
        }
        let bf = self.g.branching();
        for h in 1..=tree::height_for(bf, counter as u64) {
            let slot = tree::child(bf, arrival, h);
            let node = self.arrival_node(score, h, tree::node(bf, arrival, h))?;
            if node.a[slot] <= 0 {
                return Err(self.corrupt(
                    format!("arrival tree of score {score}"),
                    format!("no player counted for arrival {arrival} at height {h}"),
                ));
            }
            node.a[slot] -= 1;
            node.changed = true;
        }
        self.inner_delta(offset, -1, -i64::from(emptied));
        Ok(())
    }

    fn arrive(&mut self, score: i64) -> Result<u64> {
        let offset = self.offset(score)?;
        let (idx, c) = (self.g.node(offset, 1), self.g.child(offset, 1));
        let floor = self.floor;
        let leaf = self.leaf(idx)?;
        let fresh = leaf.a[c] == 0;
        let counter = leaf.b[c];
        // A negative counter is damage, reported below as it is.
        let arrival = if counter >= 0 {
            counter.max(floor)
        } else {
            counter
        };
        let next = arrival.checked_add(1).filter(|_| arrival >= 0);
        let (Some(next), Some(players)) = (next, leaf.a[c].checked_add(1)) else {
            let held = leaf.a[c];
            return Err(self.corrupt(
                format!("leaf {idx}"),
                format!("score {score}: counter {arrival}, {held} players"),
            ));
        };
        leaf.a[c] = players;
        leaf.b[c] = next;
        leaf.a_changed = true;
        leaf.b_changed = true;
        let (arrival, next) = (arrival as u64, next as u64);
        let bf = self.g.branching();
        let (old_height, height) = (
            tree::height_for(bf, counter as u64),
            tree::height_for(bf, next),
        );
        let tree_name = || format!("arrival tree of score {score}");
        if height > old_height {
            // The arrival tree is full: a new root whose first child is the
            // old root.
            let old_root = &self.arrival_node(score, old_height, 0)?.a;
            let total = old_root.iter().map(|&n| i128::from(n)).sum::<i128>();
            let Some(total) = i64::try_from(total).ok().filter(|&t| t >= 0) else {
                return Err(self.corrupt(
                    tree_name(),
                    format!("its root (height {old_height}) counts {total} players"),
                ));
            };
            // A floor may grow the tree by several heights at once: every
            // new node on the way up holds the old root under child 0. An
            // empty tree has nothing to carry up.
            let grown = if total == 0 {
                height..=height
            } else {
                old_height + 1..=height
            };
            for h in grown {
                let root = self.arrival_node(score, h, 0)?;
                if root.a.iter().any(|&n| n != 0) {
                    return Err(self.corrupt(
                        tree_name(),
                        format!("a node above the root (height {h}) is not empty"),
                    ));
                }
                root.a[0] = total;
                root.changed = true;
            }
        }
        for h in 1..=height {
            let slot = tree::child(bf, arrival, h);
            let node = self.arrival_node(score, h, tree::node(bf, arrival, h))?;
            // A damaged row may hold anything: checked, so that it is
            // reported in release builds too instead of wrapping.
            let Some(n) = node.a[slot].checked_add(1) else {
                let held = node.a[slot];
                return Err(self.corrupt(
                    tree_name(),
                    format!("arrival count {held} at height {h} overflows"),
                ));
            };
            node.a[slot] = n;
            node.changed = true;
        }
        self.inner_delta(offset, 1, i64::from(fresh));
        Ok(arrival)
    }
}

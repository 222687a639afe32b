//! Applying score updates: a batch reads every node it touches once into an
//! in-memory overlay, applies the updates in order there, and writes each
//! changed node once at the end (job aggregation: a batch of 1,000 updates
//! near the same scores writes the root once, not 1,000 times).
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

use super::storage::{self, Part, Storage};
use super::tree::{self, Geometry};
use crate::error::{Error, Result};
use std::collections::HashMap;

/// Where a player is: `(score, arrival)`.
type Place = Option<(i64, u64)>;

struct PlayerState {
    stored: Place,
    now: Place,
}

struct Leaf {
    /// Players per score.
    a: Vec<i64>,
    /// Arrival counter per score: the next arrival number handed out.
    b: Vec<i64>,
    a_changed: bool,
    b_changed: bool,
}

/// Additive change to an inner node: players (`a`) and distinct scores
/// (`b`) per child.
struct Delta {
    a: Vec<i64>,
    b: Vec<i64>,
}

struct ArrivalNode {
    a: Vec<i64>,
    changed: bool,
}

/// Updates applied to an overlay over one transaction.
pub(crate) struct Batch<'a> {
    st: &'a dyn Storage,
    g: &'a Geometry,
    shard: u32,
    players: HashMap<String, PlayerState>,
    leaves: HashMap<u64, Leaf>,
    inner: HashMap<(u32, u64), Delta>,
    arrivals: HashMap<(i64, u32, u64), ArrivalNode>,
    /// The lowest arrival number handed out (0: the score's counter alone
    /// decides). A tree of a board split into trees hands out board-wide
    /// arrival numbers (`ranking/trees/arrival.rs`), so that ties compare
    /// across trees.
    floor: i64,
}

impl<'a> Batch<'a> {
    /// A batch whose inner-node deltas go to shard row `shard`.
    pub fn new(st: &'a dyn Storage, g: &'a Geometry, shard: u32) -> Self {
        Batch {
            st,
            g,
            shard,
            players: HashMap::new(),
            leaves: HashMap::new(),
            inner: HashMap::new(),
            arrivals: HashMap::new(),
            floor: 0,
        }
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

    /// Writes everything the batch changed: each row once.
    pub fn flush(self) -> Result<()> {
        let st = self.st;
        let mut buf = Vec::new();

        let mut players: Vec<_> = self
            .players
            .iter()
            .filter(|(_, p)| p.now != p.stored)
            .collect();
        players.sort_unstable_by(|x, y| x.0.cmp(y.0));
        for (name, state) in players {
            match state.now {
                Some((score, arrival)) => st.put_player(name, score, arrival)?,
                None => st.delete_player(name)?,
            }
        }

        let mut leaves: Vec<_> = self.leaves.iter().collect();
        leaves.sort_unstable_by_key(|(idx, _)| **idx);
        for (&idx, leaf) in leaves {
            for (changed, part, v) in [
                (leaf.a_changed, Part::A, &leaf.a),
                (leaf.b_changed, Part::B, &leaf.b),
            ] {
                if changed {
                    storage::encode(v, &mut buf);
                    st.put_node_part(1, idx, part, 0, &buf)?;
                }
            }
        }

        let mut inner: Vec<_> = self.inner.iter().collect();
        inner.sort_unstable_by_key(|(key, _)| **key);
        let b = self.g.b();
        let mut rows = [vec![0i64; b], vec![0i64; b]];
        for (&(h, idx), delta) in inner {
            let deltas = [&delta.a, &delta.b];
            let touched = deltas.map(|d| d.iter().any(|&x| x != 0));
            if touched == [false, false] {
                continue;
            }
            for (row, d) in rows.iter_mut().zip(deltas) {
                row.copy_from_slice(d);
            }
            st.node_shard(h, idx, self.shard, &mut |part, v| {
                let ok = storage::well_formed(v, b)
                    && storage::add_into(v, &mut rows[part as usize]).is_some();
                if ok {
                    Ok(())
                } else {
                    Err(st.corrupt(
                        format!(
                            "score-tree node (height {h}, idx {idx}) shard {}",
                            self.shard
                        ),
                        "malformed or overflowing vector".into(),
                    ))
                }
            })?;
            for part in [Part::A, Part::B] {
                if touched[part as usize] {
                    storage::encode(&rows[part as usize], &mut buf);
                    st.put_node_part(h, idx, part, self.shard, &buf)?;
                }
            }
        }

        let mut arrivals: Vec<_> = self.arrivals.iter().filter(|(_, n)| n.changed).collect();
        arrivals.sort_unstable_by_key(|(key, _)| **key);
        for (&(score, h, idx), node) in arrivals {
            storage::encode(&node.a, &mut buf);
            st.put_arrival_node(score, h, idx, &buf)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::memory::harness::{self, damage, inflict, Board, Oracle};
    use super::super::memory::Tables;
    use super::super::storage::{self, Part};
    use super::super::Tie;
    use crate::error::Error;
    use proptest::prelude::*;

    fn enc(v: &[i64]) -> Vec<u8> {
        let mut out = Vec::new();
        storage::encode(v, &mut out);
        out
    }

    fn order(board: &Board) -> Vec<(String, i64)> {
        let top = board.top(u64::MAX).unwrap();
        top.into_iter().map(|e| (e.player, e.score)).collect()
    }

    /// A re-applied batch changes nothing, not even the order among ties
    /// (not a byte of any row), and a player who leaves a score and comes
    /// back within one batch keeps their place: readers never saw them
    /// leave.
    #[test]
    fn a_batch_is_applied_by_its_net_effect() {
        let board = Board::new(0..1000, 10, 4);
        board.set_scores(0, &[("v", 5), ("x", 6)]).unwrap();
        let batch = [
            ("x", 5),
            ("y", 5),
            ("z", 900),
            ("x", 6),
            ("w", 5),
            ("v", 7),
            ("v", 5),
        ];
        board.set_scores(1, &batch).unwrap();
        let expected = [("z", 900), ("x", 6), ("v", 5), ("y", 5), ("w", 5)];
        assert_eq!(order(&board), expected.map(|(p, s)| (p.to_string(), s)));
        let rows = board.st.tables().clone();
        board.set_scores(2, &batch).unwrap();
        board.set_scores(3, &batch[3..]).unwrap();
        board.set_scores(0, &[("y", 5), ("z", 900)]).unwrap();
        assert_eq!(*board.st.tables(), rows);
        board.check_integrity().unwrap();
    }

    /// `apply_updates` says, per update, whether the player was on the
    /// board just before it (earlier updates of the batch included).
    #[test]
    fn each_update_says_whether_its_player_was_there() {
        let board = Board::new(0..10, 2, 1);
        board.set("a", 1).unwrap();
        let had = board
            .apply(
                0,
                &[
                    ("b", Some(1)),
                    ("b", None),
                    ("b", None),
                    ("a", None),
                    ("a", Some(2)),
                    ("c", None),
                ],
            )
            .unwrap();
        assert_eq!(had, [false, true, false, true, false, false]);
        assert_eq!(order(&board), [("a".to_string(), 2)]);
        assert!(board.remove("a").unwrap());
        assert!(!board.remove("a").unwrap());
    }

    /// Arrival trees grow a new root each time the counter passes a power
    /// of B, the same whether the players come one by one or in one batch.
    #[test]
    fn an_arrival_tree_grows_a_root_past_each_power() {
        let names: Vec<String> = (0..9).map(|i| format!("p{i}")).collect();
        let one_by_one = Board::new(0..4, 2, 1);
        for p in &names {
            one_by_one.set(p, 1).unwrap();
        }
        let batch = Board::new(0..4, 2, 1);
        let scores: Vec<_> = names.iter().map(|p| (p.as_str(), 1)).collect();
        batch.set_scores(0, &scores).unwrap();
        assert_eq!(*one_by_one.st.tables(), *batch.st.tables());

        // Arrivals 0..=8 in a binary tree of height 4 (2^3 < 9 <= 2^4).
        let arrivals: Vec<_> = batch
            .st
            .tables()
            .arrivals
            .iter()
            .map(|(&(score, h, idx), v)| (score, h, idx, storage::entries(v).collect::<Vec<_>>()))
            .collect();
        let expected = [
            (1, 1, 0, vec![1, 1]),
            (1, 1, 1, vec![1, 1]),
            (1, 1, 2, vec![1, 1]),
            (1, 1, 3, vec![1, 1]),
            (1, 1, 4, vec![1]),
            (1, 2, 0, vec![2, 2]),
            (1, 2, 1, vec![2, 2]),
            (1, 2, 2, vec![1]),
            (1, 3, 0, vec![4, 4]),
            (1, 3, 1, vec![1]),
            (1, 4, 0, vec![8, 1]),
        ];
        assert_eq!(arrivals, expected);

        // The first four leave: the tree keeps its height (the counter
        // stays at 9), the emptied nodes are deleted, ranks follow.
        for p in &names[..4] {
            assert!(batch.remove(p).unwrap());
        }
        assert_eq!(batch.rank("p4", Tie::Ordinal).unwrap(), Some(1));
        assert_eq!(batch.rank("p8", Tie::Ordinal).unwrap(), Some(5));
        let t = batch.st.tables();
        assert!(!t.arrivals.contains_key(&(1, 1, 0)) && !t.arrivals.contains_key(&(1, 2, 0)));
        assert_eq!(t.arrivals[&(1, 4, 0)], enc(&[4, 1]));
        assert_eq!(t.nodes[&(1, 0, Part::B, 0)], enc(&[0, 9]));
        drop(t);
        batch.check_integrity().unwrap();
    }

    /// Inner-node deltas go to the transaction's shard; leaves and arrival
    /// trees stay in shard 0; a node's shards may be negative, its sum not.
    #[test]
    fn inner_deltas_go_to_the_given_shard() {
        let board = Board::new(0..100, 10, 4);
        board.set_scores(3, &[("a", 5), ("b", 50)]).unwrap();
        let shards = |t: &Tables| -> Vec<(u32, u32)> {
            t.nodes.keys().map(|&(h, _, _, shard)| (h, shard)).collect()
        };
        assert_eq!(
            shards(&board.st.tables()),
            [(1, 0), (1, 0), (1, 0), (1, 0), (2, 3), (2, 3)]
        );
        board.apply(1, &[("a", Some(51))]).unwrap();
        let t = board.st.tables();
        assert_eq!(t.nodes[&(2, 0, Part::A, 3)], enc(&[1, 0, 0, 0, 0, 1]));
        assert_eq!(t.nodes[&(2, 0, Part::A, 1)], enc(&[-1, 0, 0, 0, 0, 1]));
        assert_eq!(t.nodes[&(2, 0, Part::B, 1)], enc(&[-1, 0, 0, 0, 0, 1]));
        drop(t);
        board.check_integrity().unwrap();
        // Moving back in shard 1 cancels its rows out: deleted, not stored
        // as zeros.
        board.apply(1, &[("a", Some(5))]).unwrap();
        let t = board.st.tables();
        assert!(!t.nodes.keys().any(|k| k.3 == 1), "{:?}", t.nodes);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever happened before, once everyone has left, no leaf, arrival
        /// node or player row is left and every inner node sums to zero; with
        /// one shard, not a single row is left (all-zero rows are deleted).
        #[test]
        fn everyone_leaving_leaves_no_rows(
            (range, branching, shards, pool) in harness::board_shape(),
            ops in prop::collection::vec(harness::op(), 1..15),
            shard in any::<u32>(),
        ) {
            let board = Board::new(range, branching, shards);
            let mut oracle = Oracle::default();
            for op in &ops {
                harness::run(&board, &mut oracle, &pool, op)?;
            }
            let everyone: Vec<_> = (0..12).map(|p| (p, None)).collect();
            harness::run(&board, &mut oracle, &pool, &harness::Op { updates: everyone, shard })?;
            let t = board.st.tables();
            prop_assert!(t.players().is_empty() && t.arrivals.is_empty());
            prop_assert!(t.nodes.keys().all(|k| k.0 > 1), "{:?}", t.nodes);
            let mut sums = std::collections::BTreeMap::<_, Vec<i64>>::new();
            for (&(h, idx, part, _), v) in &t.nodes {
                let sum = sums.entry((h, idx, part)).or_insert_with(|| vec![0; board.g().b()]);
                storage::add_into(v, sum).unwrap();
            }
            prop_assert!(sums.values().flatten().all(|&n| n == 0), "{:?}", sums);
            if shards == 1 {
                prop_assert!(t.nodes.is_empty(), "{:?}", t.nodes);
            }
        }

        /// A batch on damaged rows is refused as corruption (and writes
        /// nothing) or applied; it never panics. Until `arrive` checked its
        /// additions (see `an_arrival_count_of_i64_max_is_corruption`),
        /// arrival rows with entries near `i64::MAX` had to be left out here.
        #[test]
        fn a_batch_on_damaged_rows_fails_cleanly_or_applies(
            (range, branching, shards, pool) in harness::board_shape(),
            ops in prop::collection::vec(harness::op(), 1..10),
            damages in prop::collection::vec(damage(), 1..4),
            after in prop::collection::vec(harness::op(), 1..4),
        ) {
            let board = Board::new(range, branching, shards);
            let mut oracle = Oracle::default();
            for op in &ops {
                harness::run(&board, &mut oracle, &pool, op)?;
            }
            for d in &damages {
                inflict(&mut board.st.tables_mut(), d);
            }
            for op in &after {
                let names = op.names();
                let updates = op.updates(&names, &pool);
                let before = board.st.tables().clone();
                match board.apply(op.shard % shards, &updates) {
                    Ok(_) => {}
                    Err(Error::Corrupt { .. }) => prop_assert!(*board.st.tables() == before),
                    Err(other) => prop_assert!(false, "{}", other),
                }
            }
        }
    }

    /// Damage a batch trips over is reported, and the batch writes nothing.
    #[test]
    fn a_batch_on_damaged_rows_reports_it() {
        let board = Board::new(0..100, 10, 1);
        board
            .set_scores(0, &[("a", 5), ("b", 5), ("c", 50)])
            .unwrap();
        let pristine = board.st.tables().clone();
        // What the error says, the damage, a batch that trips over it.
        type Case = (
            &'static str,
            fn(&mut Tables),
            &'static [(&'static str, i64)],
        );
        let cases: [Case; 5] = [
            (
                "holds 0 players",
                |t| drop(t.nodes.remove(&(1, 0, Part::A, 0))),
                &[("a", 6)],
            ),
            (
                "no player counted for arrival 1",
                |t| {
                    t.arrivals.insert((5, 1, 0), enc(&[1]));
                },
                &[("b", 6)],
            ),
            (
                "outside the board's range",
                |t| t.put_player("a", 100, 0),
                &[("a", 6)],
            ),
            (
                "malformed vector",
                |t| {
                    t.nodes.get_mut(&(1, 5, Part::B, 0)).unwrap().pop();
                },
                &[("d", 51)],
            ),
            (
                "malformed or overflowing",
                |t| {
                    t.nodes.insert((2, 0, Part::A, 0), enc(&[i64::MAX]));
                },
                &[("d", 1)],
            ),
        ];
        for (reason, damage, batch) in cases {
            let mut t = pristine.clone();
            damage(&mut t);
            *board.st.tables_mut() = t.clone();
            match board.set_scores(0, batch) {
                Err(Error::Corrupt { reason: r, .. }) if r.contains(reason) => {}
                other => panic!("{other:?}: expected corruption saying {reason:?}"),
            }
            assert_eq!(*board.st.tables(), t, "{reason}: a refused batch wrote");
        }
    }

    /// Regression: `Batch::arrive` added to arrival counts unchecked, so
    /// an arrival row holding `i64::MAX` at the next slot panicked in debug
    /// builds ("attempt to add with overflow" at `node.a[slot] += 1`, which
    /// this test showed before the fix) and wrapped in release, storing
    /// `i64::MIN`, where every other count a batch reads is checked.
    #[test]
    fn an_arrival_count_of_i64_max_is_corruption() {
        let board = Board::new(0..100, 10, 1);
        board.set("a", 5).unwrap();
        board
            .st
            .tables_mut()
            .arrivals
            .insert((5, 1, 0), enc(&[1, i64::MAX]));
        let got = board.set("b", 5);
        assert!(matches!(got, Err(Error::Corrupt { .. })), "{got:?}");
    }

    /// The same when the tree grows: the new root's first child is the old
    /// root's total, which was summed unchecked (`.iter().sum()`: "attempt
    /// to add with overflow" before the fix).
    #[test]
    fn an_arrival_root_total_past_i64_max_is_corruption() {
        let board = Board::new(0..100, 10, 1);
        let ten: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
        let scores: Vec<_> = ten.iter().map(|p| (p.as_str(), 5)).collect();
        board.set_scores(0, &scores).unwrap();
        let mut damaged = vec![1; 10];
        damaged[0] = i64::MAX;
        board
            .st
            .tables_mut()
            .arrivals
            .insert((5, 1, 0), enc(&damaged));
        // Arrival 10 needs a root of height 2.
        let got = board.set("b", 5);
        assert!(matches!(got, Err(Error::Corrupt { .. })), "{got:?}");
    }
}

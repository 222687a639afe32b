//! What the algorithms' tests share: a board on memory storage with
//! `Ranking`'s queries, a brute-force oracle, and proptest strategies.
use super::super::policy::Rules;
use super::super::query::{self, Want};
use super::super::shape::{player_place, tree_rank};
use super::super::storage::Storage;
use super::super::tree::Geometry;
use super::super::{apply_updates, integrity, Entry, Tie};
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
        let steps = self.st.write(|tx| {
            apply_updates(
                tx,
                self.st.geometry(),
                Rules {
                    shards: self.shards,
                    ..Rules::default()
                },
                shard,
                updates,
                None,
            )
        })?;
        Ok(steps.iter().map(|s| s.before.is_some()).collect())
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
        self.read(|st, g| tree_rank(st, g, player, tie))
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
        sorted.sort_by_key(|&(_, &(score, at))| (std::cmp::Reverse(score), at));
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
                data: None,
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
pub(crate) fn verify(board: &Board, oracle: &Oracle, probes: &[i64]) -> Result<(), TestCaseError> {
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
    super::ranges::verify_ranges(board, oracle, probes)?;
    board.check_integrity()?;
    Ok(())
}

/// One write transaction: a batch of `(player, score index)` updates
/// (`None` removes), deltas to shard `shard % shards`.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    pub updates: Vec<(usize, Option<usize>)>,
    pub shard: u32,
    /// Applied holding the board alone: inner nodes' shard rows folded.
    pub alone: bool,
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
    (updates, any::<u32>(), any::<bool>()).prop_map(|(updates, shard, alone)| Op {
        updates,
        shard,
        alone,
    })
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
        ($tree:expr_2021, $row:expr_2021, |$v:ident| $body:expr_2021) => {
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
    pub fn updates<'n>(&self, names: &'n [String], pool: &[i64]) -> Vec<(&'n str, Option<i64>)> {
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
    board.st.set_alone(op.alone);
    let had = board.apply(op.shard % board.shards, &updates)?;
    board.st.set_alone(false);
    prop_assert_eq!(had, oracle.batch(&updates));
    Ok(())
}

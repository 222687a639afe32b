//! A queue worker's cache of the rows it applies to (issue 13, item 3).
//!
//! A worker is usually the only writer of its board, and each batch reads
//! the player rows, leaves, inner shard-0 rows and arrival nodes it is about
//! to change. [`CachedTx`] wraps the batch's [`Storage`] and answers those
//! reads from what earlier batches of this worker read or wrote, so an apply
//! reads only rows it has not seen.
//!
//! Why it is exact: every write transaction on the board moves the board's
//! write generation ([`Storage::bump_generation`], in the same transaction),
//! and the cache remembers the generation its own last commit left. A batch
//! that finds another value (another writer, in any process, committed in
//! between; or this worker's last commit is in doubt) starts from an empty
//! cache. What a batch reads and writes is staged, and only joins the cache
//! once the transaction committed: a rolled-back or retried batch leaves
//! nothing behind. Only stores whose writers are serialized (SQLite's one
//! write lock) return a generation: where writers run at once and a read
//! takes a row lock (PostgreSQL), skipping the read would skip the lock, so
//! there is no cache there.

use super::apply::FastMap as HashMap;
use super::storage::{Part, Storage};
use crate::error::{Error, Result};
use crate::seam::{NodeRow, QueuedRow, ScannedArrival, ScannedNode};
use std::cell::RefCell;

/// Cached player rows above this are dropped (the tree's rows are few next
/// to them: a million-player board has ~10,000 leaves at B = 100).
const MAX_PLAYERS: usize = 1 << 20;

/// Rows as a worker last saw them: a missing row as its empty value.
#[derive(Default)]
struct Rows {
    /// `(height, idx, shard) -> [part A, part B]`.
    nodes: HashMap<(u32, u64, u32), [Vec<u8>; 2]>,
    /// `(score, height, idx) -> vector`.
    arrivals: HashMap<(i64, u32, u64), Vec<u8>>,
    players: HashMap<String, Option<(i64, u64)>>,
}

impl Rows {
    fn absorb(&mut self, other: Rows) {
        self.nodes.extend(other.nodes);
        self.arrivals.extend(other.arrivals);
        self.players.extend(other.players);
    }
}

/// A worker's cache, kept across its batches.
#[derive(Default)]
pub(crate) struct NodeCache {
    rows: Rows,
    /// The board's write generation after this worker's last commit; `None`
    /// when unknown (nothing cached).
    generation: Option<u64>,
    /// Reads answered from the cache, and reads that went to the store, for
    /// `BoardWorkerStats`.
    pub hits: u64,
    pub misses: u64,
    /// The control's bug: use the cache whatever the generation says.
    #[cfg(test)]
    trust_stale: bool,
}

impl NodeCache {
    /// Forgets everything: after a failed batch, or when another writer
    /// wrote.
    pub fn clear(&mut self) {
        self.rows = Rows::default();
        self.generation = None;
    }
}

/// One batch's view through the cache. Made by [`CachedTx::begin`] in the
/// write transaction; [`commit`](CachedTx::commit) after that transaction
/// committed.
pub(crate) struct CachedTx<'a> {
    st: &'a dyn Storage,
    /// The cache, if it is valid for this transaction.
    cache: Option<&'a Rows>,
    staged: RefCell<Rows>,
    counts: RefCell<(u64, u64)>,
    /// The generation this transaction's commit leaves.
    after: u64,
}

/// What a batch leaves for the cache once its transaction committed.
pub(crate) struct Staged {
    rows: Rows,
    after: u64,
    counts: (u64, u64),
}

impl<'a> CachedTx<'a> {
    /// The batch's view, given the generation the transaction found
    /// (before its own bump); `None` if the store keeps none (then the
    /// batch runs on `st` alone). A cache another generation left is not
    /// read.
    pub fn begin(st: &'a dyn Storage, cache: &'a NodeCache, before: Option<u64>) -> Option<Self> {
        let before = before?;
        let valid = cache.generation == Some(before);
        #[cfg(test)]
        let valid = valid || cache.trust_stale;
        Some(CachedTx {
            st,
            cache: valid.then_some(&cache.rows),
            staged: RefCell::default(),
            counts: RefCell::default(),
            after: before + 1,
        })
    }

    /// What joins the cache if the transaction commits.
    pub fn finish(self) -> Staged {
        Staged {
            rows: self.staged.into_inner(),
            after: self.after,
            counts: self.counts.into_inner(),
        }
    }

    fn hit(&self, hit: bool) {
        let mut counts = self.counts.borrow_mut();
        if hit {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }
}

impl NodeCache {
    /// A committed batch's rows join the cache, or (a batch whose
    /// generation did not match) replace it.
    pub fn commit(&mut self, staged: Staged) {
        #[cfg(test)]
        let stale = !self.trust_stale && self.generation != Some(staged.after - 1);
        #[cfg(not(test))]
        let stale = self.generation != Some(staged.after - 1);
        if stale {
            self.rows = Rows::default();
        }
        self.rows.absorb(staged.rows);
        if self.rows.players.len() > MAX_PLAYERS {
            self.rows.players.clear();
        }
        self.generation = Some(staged.after);
        self.hits += staged.counts.0;
        self.misses += staged.counts.1;
    }
}

impl Storage for CachedTx<'_> {
    fn node_shard(
        &self,
        height: u32,
        idx: u64,
        shard: u32,
        f: &mut dyn FnMut(Part, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let key = (height, idx, shard);
        let known = {
            let staged = self.staged.borrow();
            staged
                .nodes
                .get(&key)
                .or_else(|| self.cache?.nodes.get(&key))
                .cloned()
        };
        self.hit(known.is_some());
        let parts = match known {
            Some(parts) => parts,
            None => {
                let mut parts = [Vec::new(), Vec::new()];
                self.st.node_shard(height, idx, shard, &mut |part, v| {
                    parts[part as usize] = v.to_vec();
                    Ok(())
                })?;
                parts
            }
        };
        for part in [Part::A, Part::B] {
            if !parts[part as usize].is_empty() {
                f(part, &parts[part as usize])?;
            }
        }
        self.staged.borrow_mut().nodes.insert(key, parts);
        Ok(())
    }

    fn put_node_part(&self, height: u32, idx: u64, part: Part, shard: u32, v: &[u8]) -> Result<()> {
        self.st.put_node_part(height, idx, part, shard, v)?;
        // Written rows were read first (`apply/` reads before it writes),
        // so the other part is known; a row that was not is forgotten.
        let key = (height, idx, shard);
        let mut staged = self.staged.borrow_mut();
        let cached = self.cache.and_then(|rows| rows.nodes.get(&key));
        if let Some(parts) = staged.nodes.get(&key).or(cached).cloned() {
            let entry = staged.nodes.entry(key).or_insert(parts);
            entry[part as usize] = v.to_vec();
        }
        Ok(())
    }

    fn arrival_path(
        &self,
        score: i64,
        path: &[(u32, u64)],
        f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<()> {
        for &(height, idx) in path {
            let key = (score, height, idx);
            let known = {
                let staged = self.staged.borrow();
                staged
                    .arrivals
                    .get(&key)
                    .or_else(|| self.cache?.arrivals.get(&key))
                    .cloned()
            };
            self.hit(known.is_some());
            let v = match known {
                Some(v) => v,
                None => {
                    let mut v = Vec::new();
                    self.st
                        .arrival_path(score, &[(height, idx)], &mut |_, got| {
                            v = got.to_vec();
                            Ok(())
                        })?;
                    v
                }
            };
            if !v.is_empty() {
                f(height, &v)?;
            }
            self.staged.borrow_mut().arrivals.insert(key, v);
        }
        Ok(())
    }

    fn put_arrival_node(&self, score: i64, height: u32, idx: u64, v: &[u8]) -> Result<()> {
        self.st.put_arrival_node(score, height, idx, v)?;
        let key = (score, height, idx);
        self.staged.borrow_mut().arrivals.insert(key, v.to_vec());
        Ok(())
    }

    fn player(&self, player: &str) -> Result<Option<(i64, u64)>> {
        let known = {
            let staged = self.staged.borrow();
            staged
                .players
                .get(player)
                .or_else(|| self.cache?.players.get(player))
                .copied()
        };
        self.hit(known.is_some());
        let place = match known {
            Some(place) => place,
            None => self.st.player(player)?,
        };
        self.staged
            .borrow_mut()
            .players
            .insert(player.to_owned(), place);
        Ok(place)
    }

    fn put_player(&self, player: &str, score: i64, arrival: u64) -> Result<()> {
        self.st.put_player(player, score, arrival)?;
        let place = Some((score, arrival));
        self.staged
            .borrow_mut()
            .players
            .insert(player.to_owned(), place);
        Ok(())
    }

    // Entry data is not cached: only boards that keep it read it, one
    // statement per page or submission.
    fn put_player_data(&self, player: &str, data: Option<&[u8]>) -> Result<()> {
        self.st.put_player_data(player, data)
    }

    fn players_data(
        &self,
        players: &[&str],
        f: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.st.players_data(players, f)
    }

    fn delete_player(&self, player: &str) -> Result<()> {
        self.st.delete_player(player)?;
        self.staged
            .borrow_mut()
            .players
            .insert(player.to_owned(), None);
        Ok(())
    }

    // A worker never clears; if one did, what it cached would be wrong.
    fn clear(&self) -> Result<()> {
        Err(crate::error::Error::InvalidRanking {
            reason: "a queue worker's cached transaction cannot clear its board".into(),
        })
    }

    // Everything else goes to the store as it is.

    fn claim_queue(&self, queue: u32) -> Result<bool> {
        self.st.claim_queue(queue)
    }

    fn applied_through(&self, queue: u32) -> Result<i64> {
        self.st.applied_through(queue)
    }

    fn set_applied_through(&self, queue: u32, seq: i64) -> Result<()> {
        self.st.set_applied_through(queue, seq)
    }

    fn take_queued(
        &self,
        queue: u32,
        after: i64,
        limit: usize,
        out: &mut Vec<QueuedRow>,
    ) -> Result<()> {
        self.st.take_queued(queue, after, limit, out)
    }

    fn dead_letter(
        &self,
        queue: u32,
        seq: i64,
        player: &str,
        score: Option<i64>,
        reason: &str,
    ) -> Result<()> {
        self.st.dead_letter(queue, seq, player, score, reason)
    }

    fn lock_players(&self, players: &[&str]) -> Result<()> {
        self.st.lock_players(players)
    }

    fn lock_leaves(&self, leaves: &[u64]) -> Result<()> {
        self.st.lock_leaves(leaves)
    }

    fn writes_alone(&self) -> bool {
        self.st.writes_alone()
    }

    fn path_rows(&self, path: &[(u32, u64, bool)], f: &mut NodeRow<'_>) -> Result<()> {
        self.st.path_rows(path, f)
    }

    fn entries_at(
        &self,
        score: i64,
        arrival: u64,
        limit: u64,
        out: &mut Vec<(String, i64)>,
    ) -> Result<()> {
        self.st.entries_at(score, arrival, limit, out)
    }

    fn entries_below(&self, score: i64, limit: u64, out: &mut Vec<(String, i64)>) -> Result<()> {
        self.st.entries_below(score, limit, out)
    }

    fn scan_players(&self, f: &mut dyn FnMut(i64, u64) -> Result<()>) -> Result<()> {
        self.st.scan_players(f)
    }

    fn scan_nodes(&self, f: &mut ScannedNode<'_>) -> Result<()> {
        self.st.scan_nodes(f)
    }

    fn scan_arrival_nodes(&self, f: &mut ScannedArrival<'_>) -> Result<()> {
        self.st.scan_arrival_nodes(f)
    }

    fn board_name(&self) -> &str {
        self.st.board_name()
    }

    fn corrupt(&self, field: String, reason: String) -> Error {
        self.st.corrupt(field, reason)
    }
}

#[cfg(test)]
mod tests {
    use super::NodeCache;
    use crate::hash::{fnv, FNV_OFFSET};
    use crate::ranking::queue::drain;
    use crate::ranking::{Ranking, RankingConfig};
    use crate::{Result, Sqlite};
    use std::collections::BTreeMap;

    /// Rounds of queued updates, each drained by one worker keeping one
    /// cache, with a direct write between every other round; returns the
    /// cache's hits and whether the board still equals the oracle and
    /// passes `check_integrity`.
    fn rounds(trust_stale: bool) -> Result<(u64, bool)> {
        let dir = tempfile::tempdir().unwrap();
        let db = Sqlite::open(dir.path().join("c.db"))?;
        let config = RankingConfig::new(0..64).branching(4).node_shards(2);
        let board = Ranking::create(&db, "b", config)?;
        let mut cache = NodeCache {
            trust_stale,
            ..NodeCache::default()
        };
        let mut oracle = BTreeMap::new();
        let mut seed = FNV_OFFSET;
        let mut next = |n: u64| {
            seed = fnv(seed, b"x");
            seed % n
        };
        let bound = crate::ranking::queue::Bound {
            updates: 1_000,
            bytes: usize::MAX,
        };
        for round in 0..40 {
            for _ in 0..15 {
                let (player, score) = (format!("p{}", next(25)), next(64) as i64);
                board.enqueue(&player, score)?;
                oracle.insert(player, score);
            }
            while drain::drain_batch(&board, (bound, 0, true, false), Some(&mut cache))?.taken > 0 {
            }
            if round % 2 == 1 {
                let (player, score) = (format!("p{}", next(25)), next(64) as i64);
                board.set_score(&player, score)?;
                oracle.insert(player, score);
            }
        }
        let mut exact = board.check_integrity().is_ok();
        for (player, score) in &oracle {
            exact &= board.score(player)? == Some(*score);
        }
        Ok((cache.hits, exact))
    }

    /// A worker's cache across batches answers reads (hits) and leaves the
    /// board exact although direct writes come between its batches: each
    /// moves the generation, and the worker drops what it cached. The
    /// control keeps using a cache the direct writes made stale and breaks
    /// the board (or its batches fail on the inconsistency they find).
    #[test]
    fn the_cache_answers_reads_and_is_dropped_after_another_writer() {
        let (hits, exact) = rounds(false).unwrap();
        assert!(hits > 0, "the cache was never used");
        assert!(exact, "the cached worker broke the board");
        let control = rounds(true);
        eprintln!("hits {hits}; control: {control:?}");
        assert!(
            !matches!(control, Ok((_, true))),
            "control: a stale cache went unnoticed"
        );
    }
}

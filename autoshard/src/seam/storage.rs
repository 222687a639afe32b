//! One open transaction on one board ([`Storage`]): the rows of the count
//! tree, the players and the queue as the ranking algorithms
//! (`ranking/{query,apply,integrity}.rs`) and the queue's drain read and
//! write them. [`BoardStore`](super::BoardStore) opens these; a store whose
//! board is ordered natively also hands out its
//! [`NativeBoard`](super::NativeBoard).

use super::boards::QueuedRow;
use crate::error::{Error, Result};

/// Which vector of a score-tree node a row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Part {
    /// Players per child.
    A = 0,
    /// Distinct scores per child (inner nodes) or arrival counters (leaves).
    B = 1,
}

impl Part {
    pub fn from_stored(value: i64) -> Option<Self> {
        match value {
            0 => Some(Part::A),
            1 => Some(Part::B),
            _ => None,
        }
    }
}

/// What a write batch will read, announced once its locks are taken
/// ([`Storage::prefetch`]): a store that pays a round trip per read loads
/// them all at once.
#[derive(Debug, Default)]
// Read by the PostgreSQL store only; a build without it still fills them.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) struct Prefetch<'a> {
    /// Player rows (already locked by [`Storage::lock_players`]).
    pub players: &'a [&'a str],
    /// Leaves (height 1, shard 0), already locked by
    /// [`Storage::lock_leaves`].
    pub leaves: &'a [u64],
    /// Inner nodes `(height, idx)` whose shard row `shard` the batch may
    /// add to; a locking store locks these rows too, as
    /// [`Storage::node_shard`] would.
    pub inner: &'a [(u32, u64)],
    pub shard: u32,
    /// Above 1: the batch folds shard rows `0..fold` of each of `inner`
    /// into row `shard` ([`Storage::writes_alone`]), so it reads them all.
    pub fold: u32,
    /// Scores whose arrival trees the batch may read (covered by their
    /// leaves' locks).
    pub scores: &'a [i64],
}

/// The rows of a read that descends one root-to-leaf path
/// ([`BoardStore::read_board_planned`](super::BoardStore::read_board_planned)):
/// the player's row, every shard row of the score tree's path to the
/// player's (tree) score or to `score` (part A, and part B of the leaf with
/// `counters`, of the inner nodes with `distinct`), and with `arrivals` the
/// nodes of the player's arrival path in that score's arrival tree. The
/// geometry comes with it, so a store can compute the path next to the
/// data: node `(h, (score - min) / B^h)` at heights `1..=depth`, arrival
/// node `(h, arrival / B^h)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadPlan<'a> {
    pub player: Option<&'a str>,
    /// A tree score whose path to read when there is no player.
    pub score: Option<i64>,
    pub arrivals: bool,
    /// Part B of the leaf: its arrival counters (an ordinal rank).
    pub counters: bool,
    /// Part B of the inner nodes: distinct scores (a dense rank).
    pub distinct: bool,
    pub min: i64,
    pub branching: u32,
    pub depth: u32,
}

/// Callback for one stored score-tree row: `(height, part, shard, vector)`.
pub(crate) type NodeRow<'f> = dyn FnMut(u32, Part, u32, &[u8]) -> Result<()> + 'f;

/// Callback for one row of a full score-tree scan: `((height, idx), part,
/// shard, vector)`.
pub(crate) type ScannedNode<'f> = dyn FnMut((u32, u64), Part, u32, &[u8]) -> Result<()> + 'f;

/// Callback for one row of a full arrival-tree scan: `(score, height, idx,
/// vector)`.
pub(crate) type ScannedArrival<'f> = dyn FnMut(i64, u32, u64, &[u8]) -> Result<()> + 'f;

/// One transaction on one board. Positions (`idx`, arrivals) are below
/// `2^63`, so every backend can store them as signed 64-bit integers. An
/// all-zero vector is never stored: writing an empty (encoded) vector
/// deletes the row.
///
/// Writers read a player row, leaves (shard 0) and arrival nodes and then
/// decide from their exact values, so two write transactions must not
/// interleave on them: SQLite has one writer at a time anyway; a backend
/// with row locks must lock what a write transaction reads (`FOR UPDATE`)
/// or serialize writers per board. Inner shard rows only receive deltas.
///
/// A write transaction announces what it will read, in this order, so a
/// locking backend can lock in one canonical order (no deadlocks): all its
/// players ([`lock_players`](Storage::lock_players)) before reading any of
/// them, then every leaf it will change ([`lock_leaves`](Storage::lock_leaves);
/// a leaf's lock also covers the arrival trees of its scores), then inner
/// shard rows one at a time in `(height, idx)` order through
/// [`node_shard`](Storage::node_shard).
pub(crate) trait Storage {
    /// Takes queue shard `queue` for this (write) transaction, so no other
    /// transaction drains it meanwhile; `false` if another one holds it. A
    /// store whose writers are serialized anyway always succeeds. Called
    /// before [`applied_through`](Storage::applied_through), which must then
    /// see the previous holder's commit.
    fn claim_queue(&self, queue: u32) -> Result<bool>;

    /// The board's applied-through mark of queue shard `queue`: the highest
    /// sequence number applied (or set aside) so far,
    /// [`NOTHING_APPLIED`](super::NOTHING_APPLIED) if none. Stored in the
    /// board's storage, so it commits with the
    /// apply.
    fn applied_through(&self, queue: u32) -> Result<i64>;

    /// Moves queue shard `queue`'s applied-through mark to `seq`, in this
    /// transaction.
    fn set_applied_through(&self, queue: u32, seq: i64) -> Result<()>;

    /// Appends up to `limit` of the oldest rows of queue shard `queue` with
    /// a sequence number above `after` to `out`, in sequence order, read
    /// from the queue's storage (which may be another database than this
    /// transaction's: it need not be part of it, the mark is). A row the
    /// store cannot read as an update is passed on with
    /// [`QueuedRow::unreadable`] set, not refused: the worker moves it aside
    /// ([`dead_letter`](Storage::dead_letter)).
    fn take_queued(
        &self,
        queue: u32,
        after: i64,
        limit: usize,
        out: &mut Vec<QueuedRow>,
    ) -> Result<()>;

    /// Stores a queued row that cannot be applied in the board's dead
    /// letters (in the board's storage, created with the queue), with why;
    /// the worker moves the shard's applied-through mark past it in the
    /// same transaction.
    fn dead_letter(
        &self,
        queue: u32,
        seq: i64,
        player: &str,
        score: Option<i64>,
        reason: &str,
    ) -> Result<()>;

    /// Moves the board's write generation, which every write transaction
    /// moves first thing, and returns the value it had: a queue worker that
    /// finds the value its own last commit left knows nobody else wrote
    /// since, and may use what it cached (`ranking/cache.rs`). `None` (the
    /// default) keeps no generation, and no worker caches. A store returns
    /// one only if its writers are serialized, since a cached read skips
    /// the store's read (and any lock a read takes).
    fn bump_generation(&self) -> Result<Option<u64>> {
        Ok(None)
    }

    /// Whether no other transaction can write this board until this one
    /// ends (PostgreSQL: the board's lock is held exclusively). Asked once
    /// the write's locks are taken; a batch that writes alone folds every
    /// shard row of each inner node it changes into one, so readers sum
    /// fewer rows (`ranking/apply/flush.rs`). `false` (the default) leaves
    /// other shards alone: other writers may be adding to them.
    fn writes_alone(&self) -> bool {
        false
    }

    /// The board's native operations, if the store keeps this board in
    /// structures of its own instead of the count tree
    /// ([`NativeBoard`](super::NativeBoard)); `None` (the default): the
    /// ranking layer reads and writes the tree's rows through this trait.
    fn native(&self) -> Option<&dyn super::NativeBoard> {
        None
    }

    /// Rows a write batch is about to read, once their locks are taken:
    /// a store may load them in one round trip, answer the batch's reads of
    /// them from memory and hold its writes back until
    /// [`flush_writes`](Storage::flush_writes). Only a hint: a read of a row
    /// not loaded goes to the store as usual (after the held writes). The
    /// default loads nothing.
    fn prefetch(&self, _rows: &Prefetch<'_>) -> Result<()> {
        Ok(())
    }

    /// Sends the writes held back since [`prefetch`](Storage::prefetch), in
    /// as few statements as the store can; the apply calls it at the end of
    /// every batch. The default has nothing held.
    fn flush_writes(&self) -> Result<()> {
        Ok(())
    }

    /// Before a write transaction reads these players' rows: a locking
    /// backend locks them (present or not) until commit.
    fn lock_players(&self, _players: &[&str]) -> Result<()> {
        Ok(())
    }

    /// Before a write transaction reads these leaves (score-tree nodes at
    /// height 1) and the arrival trees of their scores: a locking backend
    /// locks them (present or not) until commit.
    fn lock_leaves(&self, _leaves: &[u64]) -> Result<()> {
        Ok(())
    }

    /// Calls `f` for every shard row of part A of each node `(height, idx,
    /// with_b)` in `path`, and of part B too where `with_b`; in one round
    /// trip where the backend can (a root-to-leaf path is known up front).
    fn path_rows(&self, path: &[(u32, u64, bool)], f: &mut NodeRow<'_>) -> Result<()>;

    /// Calls `f(part, vector)` for the rows of shard `shard` of node
    /// `(height, idx)`. Only write transactions call it; backends that lock
    /// rows lock this shard row (present or not) until commit.
    fn node_shard(
        &self,
        height: u32,
        idx: u64,
        shard: u32,
        f: &mut dyn FnMut(Part, &[u8]) -> Result<()>,
    ) -> Result<()>;

    /// Replaces one shard row of one part; an empty vector deletes it.
    fn put_node_part(&self, height: u32, idx: u64, part: Part, shard: u32, v: &[u8]) -> Result<()>;

    /// Calls `f(height, vector)` for each existing arrival-tree node
    /// `(score, height, idx)` with `(height, idx)` in `path`.
    fn arrival_path(
        &self,
        score: i64,
        path: &[(u32, u64)],
        f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<()>;

    /// Replaces one arrival-tree node; an empty vector deletes it.
    fn put_arrival_node(&self, score: i64, height: u32, idx: u64, v: &[u8]) -> Result<()>;

    /// The player's `(score, arrival)`.
    fn player(&self, player: &str) -> Result<Option<(i64, u64)>>;

    /// Calls `f(player, score, arrival)` for each of `players` (distinct)
    /// that has a row, in any order; in one round trip where the backend
    /// can. The default reads them one by one.
    fn players(
        &self,
        players: &[&str],
        f: &mut dyn FnMut(&str, i64, u64) -> Result<()>,
    ) -> Result<()> {
        for &player in players {
            if let Some((score, arrival)) = self.player(player)? {
                f(player, score, arrival)?;
            }
        }
        Ok(())
    }

    /// Inserts or replaces the player's row.
    fn put_player(&self, player: &str, score: i64, arrival: u64) -> Result<()>;

    /// Deletes the player's row (no-op if absent), entry data included.
    fn delete_player(&self, player: &str) -> Result<()>;

    /// Replaces the entry data of the player's row (`None`: none), which
    /// exists (written by [`put_player`](Storage::put_player) in this
    /// transaction or before). Only boards with entry data call it.
    fn put_player_data(&self, player: &str, data: Option<&[u8]>) -> Result<()>;

    /// Calls `f(player, data)` for each of `players` that has entry data,
    /// in any order; in one round trip where the backend can. Only boards
    /// with entry data call it.
    fn players_data(
        &self,
        players: &[&str],
        f: &mut dyn FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()>;

    /// Appends up to `limit` players at `score` with arrival `>= arrival`,
    /// by arrival, as `(player, score)`.
    fn entries_at(
        &self,
        score: i64,
        arrival: u64,
        limit: u64,
        out: &mut Vec<(String, i64)>,
    ) -> Result<()>;

    /// Appends up to `limit` players with a score below `score`, in ranking
    /// order (score descending, then arrival).
    fn entries_below(&self, score: i64, limit: u64, out: &mut Vec<(String, i64)>) -> Result<()>;

    /// Calls `f(score, arrival)` for every player, in any order.
    fn scan_players(&self, f: &mut dyn FnMut(i64, u64) -> Result<()>) -> Result<()>;

    /// Calls `f` for every score-tree row, ordered by `(height, idx, part,
    /// shard)`; `idx` is passed with the height as `(height, idx)`.
    fn scan_nodes(&self, f: &mut ScannedNode<'_>) -> Result<()>;

    /// Calls `f(score, height, idx, vector)` for every arrival-tree node,
    /// ordered by `(score, height, idx)`.
    fn scan_arrival_nodes(&self, f: &mut ScannedArrival<'_>) -> Result<()>;

    /// Deletes every score-tree row, arrival-tree node and player (entry
    /// data included) of the board, and its dead letters, in this write
    /// transaction: what a reset empties. A locking backend first takes the
    /// whole board for itself.
    fn clear(&self) -> Result<()>;

    /// The board's name, for error messages.
    fn board_name(&self) -> &str;

    /// A [`Error::Corrupt`] about this board.
    fn corrupt(&self, field: String, reason: String) -> Error {
        Error::Corrupt {
            kind: "ranking",
            id: self.board_name().to_owned(),
            field,
            reason,
        }
    }
}

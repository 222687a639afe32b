//! The board half of the seam: what a store implements for ranking boards.
//!
//! A [`Storage`] is one open transaction on one board. The ranking
//! algorithms (`ranking/{query,apply,integrity}.rs`) and the queue's drain
//! only ever talk to this trait, so a new store implements these methods,
//! [`BoardStore`], and nothing else. `ranking::memory` is the reference
//! implementation a store's storage is checked against.

use crate::error::{Error, Result};

/// A board's shape as stored: the public `RankingConfig` without its
/// validation, which the ranking layer does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoardSpec {
    pub min: i64,
    pub max: i64,
    pub branching: u32,
    pub shards: u32,
    pub queues: u32,
    /// The update policy's stored name (`replace`, `best`, `worst`,
    /// `increment`); a board stored before policies existed is `replace`.
    pub policy: String,
    /// The score order's stored name (`higher_is_better`,
    /// `lower_is_better`); a board stored before orders existed is
    /// `higher_is_better`.
    pub order: String,
    /// Most bytes of entry data per player; 0 (every board stored before
    /// entry data existed) keeps none, and such a board never reads or
    /// writes the players' `data` column, which its table may lack.
    pub entry_data: u32,
    /// A composite board's dimensions (`ranking/composite/codec.rs` reads and
    /// writes the text); empty for a single-dimension board, which every
    /// board stored before composite scores existed is.
    pub dims: String,
    /// Buckets of an approximate board (`ranking/approx/`); 0 for an exact
    /// board (every board stored before approximate boards existed). A
    /// store keeps it out of the board table, with the board's snapshot
    /// pointer ([`ApproxStore`](super::ApproxStore)).
    pub buckets: u32,
    /// Players an approximate board ranks exactly at the top of each
    /// snapshot (0: none); kept with `buckets`.
    pub exact_top: u32,
}

/// The stored names of a board made before policies and orders existed.
pub(crate) const DEFAULT_POLICY: &str = "replace";
/// See [`DEFAULT_POLICY`].
pub(crate) const DEFAULT_ORDER: &str = "higher_is_better";

/// A board as a transaction names it: its row id and, for error messages,
/// its name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Board<'a> {
    pub id: i64,
    pub name: &'a str,
}

/// Ends the name of a board and starts the part a hidden board of it
/// stores: tree `t` of a split board is `<board>\u{1f}<t>`
/// (`ranking/trees`). No name a caller gives holds it (control
/// characters are refused).
pub(crate) const PART_SEPARATOR: char = '\u{1f}';

impl Board<'_> {
    /// The error a transaction of a deleted board meets.
    pub(crate) fn not_found(&self) -> Error {
        not_found(self.name)
    }
}

/// [`Error::RankingNotFound`] for board `name`, naming the board the caller
/// named: a tree of a split board gives its board's name, not its own
/// hidden one (issue 21).
pub(crate) fn not_found(name: &str) -> Error {
    let shown = name.split(PART_SEPARATOR).next().unwrap_or(name);
    Error::RankingNotFound { name: shown.into() }
}

/// An update waiting in a queue shard: a new absolute score, or a removal
/// (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueuedUpdate {
    pub queue: u32,
    pub player: String,
    pub score: Option<i64>,
    /// Entry data to store with the score (`Ranking::enqueue_update`);
    /// `None` leaves the player's data as it is.
    pub data: Option<Vec<u8>>,
}

/// A row of a queue shard as a worker took it: an update, or what could be
/// read of a row that is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueuedRow {
    pub seq: i64,
    pub player: String,
    pub score: Option<i64>,
    /// The entry data queued with it, if any.
    pub data: Option<Vec<u8>>,
    /// Why the store could not read the row as an update (a player that is
    /// not text, or not UTF-8; a score that is not an integer); `player`
    /// and `score` then hold what could be read, for the dead letter.
    pub unreadable: Option<String>,
}

/// A queued update that a worker could not apply and moved aside, into the
/// board's dead letters, so that the rest of its queue shard drains: an
/// increment whose sum would leave the board's range (on a
/// [`Policy::Increment`](crate::ranking::Policy::Increment) board, where
/// `enqueue` cannot know the sum), or a row written behind the library's
/// back (a hand edit, or damage to the database) whose player name is
/// invalid, whose score is outside the board's range, or that the store
/// could not read at all; `enqueue` refuses everything else a worker would
/// refuse. Listed by
/// [`Ranking::dead_letters`](crate::ranking::Ranking::dead_letters).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct DeadLetter {
    /// Its id among the dead letters, for
    /// [`Ranking::delete_dead_letter`](crate::ranking::Ranking::delete_dead_letter).
    pub id: i64,
    /// The queue shard it was taken from.
    pub queue: u32,
    /// Its sequence number in that shard.
    pub seq: i64,
    /// The player, as far as it could be read (invalid UTF-8 replaced by
    /// U+FFFD, an unreadable value as empty).
    pub player: String,
    /// The score (on an `Increment` board, the delta); `None` for a queued
    /// removal or a score that could not be read (`reason` says which).
    pub score: Option<i64>,
    /// Why it could not be applied: what [`Error::Corrupt`] said about a
    /// damaged row, or [`Error::ScoreOutOfRange`] about an increment.
    pub reason: String,
}

/// The applied-through mark of a queue shard that has applied nothing:
/// sequence numbers start at 0.
pub(crate) const NOTHING_APPLIED: i64 = -1;

/// The queue shards `items` go to, ascending: the order an append takes
/// them in (so two appends never wait for each other in a cycle).
pub(crate) fn queue_shards(items: &[QueuedUpdate]) -> Vec<u32> {
    let mut shards: Vec<u32> = items.iter().map(|i| i.queue).collect();
    shards.sort_unstable();
    shards.dedup();
    shards
}

/// An update [`BoardStore::write_native`] applies: the player, the tree
/// score (`None`: a removal) and entry data (`None`: none).
pub(crate) type NativeUpdate<'a> = (&'a str, Option<i64>, Option<&'a [u8]>);

/// The players one trim batch ([`BoardStore::trim_native`]) removes, in
/// tree scores (better is higher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NativeTrim {
    /// Tree scores in `lo..=hi`.
    Between { lo: i64, hi: i64 },
    /// Ordinal ranks after the first `n`.
    Below(u64),
}

/// The board operations a store implements. Every transaction is on one
/// board and is retried whole as the store's concurrency demands, so `f`
/// may run more than once; only the last run's effects commit.
pub(crate) trait BoardStore: Send + Sync {
    /// Creates board `name`, empty; its id. [`Error::RankingExists`] if the
    /// name is taken.
    fn create_board(&self, name: &str, spec: &BoardSpec) -> Result<i64>;

    /// Board `name`'s id and stored shape; `None` if there is none.
    fn open_board(&self, name: &str) -> Result<Option<(i64, BoardSpec)>>;

    /// Runs `f` in one read transaction: every read sees one snapshot.
    /// [`Error::RankingNotFound`] if the board was deleted (its id no longer
    /// names a board called `board.name`); so does `write_board`.
    fn read_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()>;

    /// Runs `f` in read transactions on every board of `boards`, all open
    /// at once, passing one [`Storage`] per board in the same order: each
    /// board is read at one point in time. The default nests
    /// [`read_board`](BoardStore::read_board), one transaction (and, on a
    /// pooled store, one connection) per board; a store whose boards share
    /// a database reads them all in ONE snapshot on one connection, so a
    /// merged read of a split board works with any pool size.
    fn read_boards(
        &self,
        boards: &[Board<'_>],
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        nest_reads(self, boards, &[], f)
    }

    /// [`read_board`](BoardStore::read_board) for a read whose rows are
    /// known up front (`plan`): a store that pays a round trip per statement
    /// may load them in ONE statement (one snapshot, no transaction) and run
    /// `f` over them; should `f` ask for a row the plan did not name, it
    /// runs `f` again in a read transaction. The default is that
    /// transaction.
    fn read_board_planned(
        &self,
        board: Board<'_>,
        _plan: &ReadPlan<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        self.read_board(board, f)
    }

    /// Runs `f` in one write transaction, committed if it returns `Ok`.
    fn write_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()>;

    /// Runs `f` in ONE write transaction on every board of `boards`
    /// (distinct), passing one [`Storage`] per board in the same order;
    /// committed if `f` returns `Ok`, so a reader of any of them sees all of
    /// `f`'s writes or none. [`Error::RankingNotFound`] if any board was
    /// deleted. A locking store takes every board's own lock first, in one
    /// canonical order, before any other lock (so two multi-board writers
    /// never wait for each other in a cycle); `f` then writes the boards in
    /// the order given, which callers keep canonical too (ascending id).
    /// [`Error::Unsupported`] on a store that cannot (Redis Cluster, for
    /// boards on different slots: a family creates its boards on one).
    /// Used by board families (`ranking/family/`).
    fn write_boards(
        &self,
        boards: &[Board<'_>],
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()>;

    /// [`write_boards`](Self::write_boards) where every board takes the
    /// same player's update (a family submission), so each is likely to
    /// make the reads the others make: a store may send a read for all of
    /// them at once (Redis Cluster does, `board_tx::Ahead`).
    fn write_boards_alike(
        &self,
        boards: &[Board<'_>],
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        self.write_boards(boards, f)
    }

    /// Creates the queue's storage if needed: the queue tables, in storage
    /// of their own where the store has such a thing (on SQLite a file next
    /// to the board's), and the board-side tables a worker writes in the
    /// board's transactions (applied-through marks, dead letters). Returns a
    /// name under which handles of this process that reach the same database
    /// share their queue state (group commits), or `None` if the store
    /// cannot tell two handles' databases apart with certainty.
    fn prepare_queue(&self) -> Result<Option<String>>;

    /// One transaction in the queue's storage appending `items` to their
    /// queue shards, each shard's items numbered in order from the shard's
    /// head (the first update of a shard is 0): a shard's sequence numbers
    /// never go back, also when it runs empty. It takes no lock a board
    /// transaction holds, so it never waits for a worker's apply.
    ///
    /// [`Error::RankingNotFound`] (naming `board.name`) if the board was
    /// deleted, decided in the append's own transaction or script, so that a
    /// delete either comes after the append (and deletes its rows with the
    /// board's) or makes it fail: an acknowledged update is never left
    /// behind for a board that is gone.
    ///
    /// [`Error::RankingNotFound`]: crate::Error::RankingNotFound
    fn append_queue(&self, board: Board<'_>, items: &[QueuedUpdate]) -> Result<()>;

    /// Queued updates not applied yet: above their shard's applied-through
    /// mark ([`Storage::applied_through`]). The marks are read before the
    /// queue, so an update applied meanwhile may still count, never the
    /// reverse.
    fn queued(&self, board: i64) -> Result<u64>;

    /// Whether a board's backlog is each queue shard's head
    /// ([`queue_marks`](BoardStore::queue_marks)) minus its applied-through
    /// mark ([`Storage::applied_through`]), which `StoreMetrics` reads in a
    /// few statements of one row per shard. `false` where the marks do not
    /// tell it and [`queued`](BoardStore::queued) is as cheap (Redis
    /// Cluster: streams trimmed as they are applied, counted by `XLEN`).
    fn backlog_from_marks(&self) -> bool {
        true
    }

    /// `(queue shard, next sequence number)`: every update committed so far
    /// is below its shard's mark.
    fn queue_marks(&self, board: i64) -> Result<Vec<(u32, i64)>>;

    /// Updates below the marks and not applied yet (as
    /// [`queued`](BoardStore::queued) tells them); with `count` false, only
    /// whether there is any (0 or 1).
    fn queued_below(&self, board: i64, marks: &[(u32, i64)], count: bool) -> Result<u64>;

    /// One transaction in the queue's storage deleting each shard's rows up
    /// to its sequence number in `through`: rows a committed board
    /// transaction marked applied. Deleting them again, or late, is
    /// harmless; not deleting them only costs space until a later delete.
    ///
    /// The default is for a store without queues (its `prepare_queue`
    /// fails first).
    fn delete_queued(&self, _board: i64, _through: &[(u32, i64)]) -> Result<()> {
        Err(Error::InvalidRanking {
            reason: "this store has no ranking queue".into(),
        })
    }

    /// The board's dead letters, by id (see [`Storage::dead_letter`]).
    fn dead_letters(&self, board: i64) -> Result<Vec<DeadLetter>>;

    /// Deletes dead letter `id` of the board; whether there was one.
    fn delete_dead_letter(&self, board: i64, id: i64) -> Result<bool>;

    /// How many dead letters the board keeps: one count, not a read of
    /// each (`StoreMetrics`).
    fn dead_letter_count(&self, board: i64) -> Result<u64>;

    /// How long the board's oldest update not applied yet has been queued,
    /// by the store's clock: each queue shard's first row above its
    /// applied-through mark that carries an enqueue time (one index seek
    /// per shard; rows of a version before the stamp carry none), the
    /// oldest of those; `None` when there is none. On Redis Cluster each
    /// stream's first entry (the streams are trimmed as they are applied).
    fn oldest_queued_age(&self, board: i64) -> Result<Option<std::time::Duration>>;

    /// The store holding tree `tree` of the boards split into trees
    /// (`ranking/trees`), where the store keeps trees apart: on SQLite a
    /// file of its own per tree, so each tree has its own write lock. `None`
    /// (the default): in this store, under the tree's own board name.
    fn tree_store(&self, _tree: u32) -> Result<Option<std::sync::Arc<dyn BoardStore>>> {
        Ok(None)
    }

    /// Applies `updates` (valid players; tree scores in range, `None`: a
    /// removal) to a board the store orders natively in one step, under
    /// the policy whose stored name is `policy`, by their net effect as
    /// `ranking/apply/` applies a batch, with each update's entry data
    /// (`None`: none) under the same rules as `apply::store_entry_data`;
    /// `Some(n)`, `n` how many of the batch's players were on the board
    /// before it (a removal's answer). `Ok(None)`: the store does not do
    /// this for this board or policy (the default), and the caller takes a
    /// write transaction instead.
    fn write_native(
        &self,
        _board: Board<'_>,
        _policy: &str,
        _updates: &[NativeUpdate<'_>],
    ) -> Result<Option<u64>> {
        Ok(None)
    }

    /// One trim batch (`ranking/trim.rs`) on a board the store orders
    /// natively, in one step: removes the first `limit` players `pick`
    /// names in ranking order, with their entry data, as a removal through
    /// `write_native` would; `(found, removed)`. A resend whose first send
    /// was applied (the exactly-once check) cannot tell how many that
    /// removed and answers `(limit, 0)`, so the trim runs another batch.
    /// `Ok(None)`: the store does not do this for this board (the
    /// default), and the caller takes a write transaction instead.
    fn trim_native(
        &self,
        _board: Board<'_>,
        _pick: NativeTrim,
        _limit: u64,
    ) -> Result<Option<(u64, u64)>> {
        Ok(None)
    }

    /// The names of the boards, sorted.
    fn list_boards(&self) -> Result<Vec<String>>;

    /// Deletes board `name`: its row, tree rows, players (entry data
    /// included), queued updates, applied-through marks, dead letters and
    /// write generation; whether there was one. Takes no lock another
    /// board's writer waits for. A board id is never given to another
    /// board afterwards, so whatever a crash leaves under it (queued rows
    /// whose delete did not commit) is never read, and a handle of the
    /// deleted board finds its id gone ([`BoardStore::read_board`] and
    /// [`BoardStore::write_board`] fail with [`Error::RankingNotFound`]).
    fn delete_board(&self, name: &str) -> Result<bool>;

    /// The store's snapshot operations for approximate boards; the default
    /// is for a store without them, which also refuses to create an
    /// approximate board.
    fn approx(&self) -> Result<&dyn super::ApproxStore> {
        Err(Error::Unsupported {
            store: "this",
            operation: "an approximate board",
        })
    }
}

/// [`BoardStore::read_boards`] by nesting: `held` are the storages of the
/// boards opened so far.
fn nest_reads<S: BoardStore + ?Sized>(
    store: &S,
    boards: &[Board<'_>],
    held: &[&dyn Storage],
    f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
) -> Result<()> {
    let Some((&first, rest)) = boards.split_first() else {
        return f(held);
    };
    store.read_board(first, &mut |st| {
        let mut more: Vec<&dyn Storage> = held.to_vec();
        more.push(st);
        nest_reads(store, rest, &more, f)
    })
}

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
    /// Scores whose arrival trees the batch may read (covered by their
    /// leaves' locks).
    pub scores: &'a [i64],
}

/// The rows of a read that descends one root-to-leaf path
/// ([`BoardStore::read_board_planned`]): the player's row, every shard row
/// (both parts) of the score tree's path to the player's (tree) score or to
/// `score`, and with `arrivals` the nodes of the player's arrival path in
/// that score's arrival tree. The geometry comes with it, so a store can
/// compute the path next to the data: node `(h, (score - min) / B^h)` at
/// heights `1..=depth`, arrival node `(h, arrival / B^h)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadPlan<'a> {
    pub player: Option<&'a str>,
    /// A tree score whose path to read when there is no player.
    pub score: Option<i64>,
    pub arrivals: bool,
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
    /// sequence number applied (or set aside) so far, [`NOTHING_APPLIED`]
    /// if none. Stored in the board's storage, so it commits with the
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

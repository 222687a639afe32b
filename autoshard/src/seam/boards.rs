//! The board half of the seam: what a store implements for ranking boards.
//!
//! A [`Storage`] (`storage.rs`) is one open transaction on one board. The ranking
//! algorithms (`ranking/{query,apply,integrity}.rs`) and the queue's drain
//! only ever talk to this trait, so a new store implements these methods,
//! [`BoardStore`], and nothing else. `ranking::memory` is the reference
//! implementation a store's storage is checked against.

use super::storage::{ReadPlan, Storage};
use super::BoardSpec;
use crate::error::{Error, Result};

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

/// An update [`BoardStore::write_native`] applies: the player, the value,
/// entry data (`None`: none) and the lowest arrival the player takes if
/// this is their last change in the batch (0: the board's own counter
/// decides; a tree of a split board hands out board-wide numbers,
/// `ranking/trees/arrival.rs`).
pub(crate) type NativeUpdate<'a> = (&'a str, NativeValue, Option<&'a [u8]>, u64);

/// What one [`NativeUpdate`] does to its player, in tree scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NativeValue {
    /// Takes them off the board, with their entry data.
    Remove,
    /// Puts them at this tree score, under the board's policy.
    Score(i64),
    /// An increment: moves their tree score by `by`, which must stay within
    /// `lo..=hi` (the board's range, in tree scores); a player not on the
    /// board starts at `fresh` (`None`: the increment alone is out of the
    /// range). The ranking layer works out what the increment is in tree
    /// scores (its sign flips on a board where lower is better).
    Add {
        by: i128,
        fresh: Option<i64>,
        lo: i64,
        hi: i64,
    },
}

/// An update a store applying a batch natively refused, and nothing of the
/// batch was written: the increment at `index` takes its player, whose
/// tree score was `current` at that point (`None`: not on the board), out
/// of the board's range. The ranking layer reports it as the transaction
/// would ([`Error::ScoreOutOfRange`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NativeRefused {
    pub index: usize,
    pub current: Option<i64>,
}

/// What one submission to a natively ordered board did
/// ([`BoardStore::submit_native`]), in tree scores (better is higher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NativeSubmitted {
    /// The player's tree score before, `None` if they were not on the board.
    pub before: Option<i64>,
    /// Their tree score after, under the policy.
    pub after: i64,
    /// The players strictly better than `before`, counted before the write.
    pub above_before: Option<u64>,
    /// The players strictly better than `after`, counted after it.
    pub above_after: u64,
}

/// One board's update of [`BoardStore::submit_native_together`]: the board,
/// the stored name of its policy and the update.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NativeStep<'a> {
    pub board: Board<'a>,
    pub policy: &'a str,
    pub update: NativeUpdate<'a>,
}

/// What [`BoardStore::submit_native_together`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NativeTogether {
    /// Every step applied: each one's report, in order.
    Submitted(Vec<NativeSubmitted>),
    /// The guard's player has other entry data on its board: nothing was
    /// written.
    Guarded,
    /// An increment of `steps` takes its player out of its board's range
    /// (`index` counts the steps): nothing was written.
    Refused(NativeRefused),
}

/// The players one trim batch ([`BoardStore::trim_native`]) removes, in
/// tree scores (better is higher).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NativeTrim {
    /// Tree scores in `lo..=hi`.
    Between { lo: i64, hi: i64 },
    /// Ordinal ranks after the first `n`.
    Below(u64),
}

/// Where a new board goes, for a store that places boards (Redis
/// Cluster: on which slot, so on which master); a store that keeps every
/// board in one database ignores it. The ranking layer says what a board
/// is for, so that no store reads it from the board's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement<'a> {
    /// A board of its own: anywhere.
    Anywhere,
    /// Tree `t` of the `k` trees of board `board` (`ranking/trees/`): the
    /// trees of one board go to different places, evenly spread, so that
    /// their writes do.
    Tree { board: &'a str, t: u32, k: u32 },
    /// Beside the board of id `id`: written in one transaction with it (a
    /// family's boards and its registry board, `ranking/family/`).
    With(i64),
}

/// The board operations a store implements. Every transaction is on one
/// board and is retried whole as the store's concurrency demands, so `f`
/// may run more than once; only the last run's effects commit.
pub(crate) trait BoardStore: Send + Sync {
    /// Creates board `name`, empty, where `placement` says; its id.
    /// [`Error::RankingExists`] if the name is taken.
    fn create_board(&self, name: &str, spec: &BoardSpec, placement: Placement<'_>) -> Result<i64>;

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
    /// `Some(Ok(n))`, `n` how many of the batch's players were on the board
    /// before it (a removal's answer); `Some(Err(_))` for an increment
    /// whose sum leaves the range, nothing written. `Ok(None)`: the store
    /// does not do this for this board or policy (the default), and the
    /// caller takes a write transaction instead.
    fn write_native(
        &self,
        _board: Board<'_>,
        _policy: &str,
        _updates: &[NativeUpdate<'_>],
    ) -> Result<Option<std::result::Result<u64, NativeRefused>>> {
        Ok(None)
    }

    /// One submission (`update`, a score, not a removal) to a board the
    /// store orders natively, in one step, as `write_native` applies it,
    /// with the counts the submission's reported ranks come from, taken in
    /// the same step. `Ok(None)`: as
    /// `write_native`'s, and the caller takes a write transaction.
    fn submit_native(
        &self,
        _board: Board<'_>,
        _policy: &str,
        _update: NativeUpdate<'_>,
    ) -> Result<Option<std::result::Result<NativeSubmitted, NativeRefused>>> {
        Ok(None)
    }

    /// One update of each of several boards the store orders natively, in
    /// one step: first `guard`, written only where its player has no entry
    /// data on its board yet, and which stops the step unwritten
    /// ([`NativeTogether::Guarded`]) where they have other data than the
    /// guard's; then each of `steps` (a score, not a removal) as
    /// `submit_native` applies it, with its report, none of them if an
    /// increment of one is out of its range. `Ok(None)`: the store
    /// does not do this for these boards (not ordered natively, not in one
    /// place, a policy it does not apply) or one of them was deleted;
    /// nothing was written, and the caller takes a write transaction.
    fn submit_native_together(
        &self,
        _guard: NativeStep<'_>,
        _steps: &[NativeStep<'_>],
    ) -> Result<Option<NativeTogether>> {
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

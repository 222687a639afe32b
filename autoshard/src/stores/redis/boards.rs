//! Ranking boards on Redis Cluster: where a board's keys live, its
//! transactions, and its queue.
//!
//! A board is one tree whose writers decide from exact values (a player's
//! row, leaves, arrival nodes), so a write transaction must be atomic and
//! serializable against the board's other writers. Redis Cluster only has
//! that within one slot, so **every key of a board shares one hash tag**:
//! the board lives on one master, as a board lives in one SQLite file.
//! Boards spread over masters; one board's nodes do not.
//!
//! Transactions are optimistic ([`board_tx`](super::board_tx)): every read
//! is a script that also checks the board's *version*, so all reads of a
//! transaction come from one state of the board (a snapshot), and a write
//! transaction buffers its writes and commits them with one script, a
//! piece with an operation id like an entity's, that applies them only if
//! the version is still the one its reads saw and then replaces it. A
//! transaction that finds the version moved is run again whole (the seam
//! allows that). `docs/design/store-redis.md` ("Ranking boards on Redis Cluster") says
//! why not `WATCH`/`MULTI`, and what a failover can do to a board.
//!
//! Keys, with `P` the prefix, `{t}` the board's tag and `id` its id:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `P:{..}:boards` | hash | the registry: name -> `id|min|max|branching|shards|queues` (then `|policy|order|entry_data`, and a composite board's `|dims`) |
//! | `P:{t}:rk<id>:v` | string | the version: the operation id of the last commit |
//! | `P:{t}:rk<id>:n` | hash | score-tree rows: `height:idx:part:shard` -> vector |
//! | `P:{t}:rk<id>:a` | hash | arrival-tree rows: `score:height:idx` -> vector |
//! | `P:{t}:rk<id>:p` | hash | players: name -> `score:arrival` |
//! | `P:{t}:rk<id>:o` | sorted set | the ranking order: members `desc(score) ‖ arrival ‖ name`, all at 0 |
//! | `P:{t}:rk<id>:s` | sorted set | a native board's distinct scores: members `desc(score)`, all at 0 |
//! | `P:{t}:rk<id>:m` | hash | a native board's players per score: `desc(score)` -> count |
//! | `P:{t}:rk<id>:c` | string | a native board's arrival counter |
//! | `P:{t}:rk<id>:x` | hash | an approximate board's snapshots (`approx.rs`) |
//!
//! A board stored natively (every board of one tree; its registry record
//! ends in `~native`) has no `:n` and `:a` rows: its players' rows are the
//! 16 bytes `desc(score) ‖ arrival` of their order member, and every exact
//! read is one script over `:o`, `:s` and `:p` (`board_tx/native.rs`).
//! | `P:{t}:rk<id>:h` | hash | queue heads: shard -> next sequence number |
//! | `P:{t}:rk<id>:q<k>` | stream | queue shard `k`: entry `<seq>-1` with `p` (player) and `s` (score, absent for a removal) |
//! | `P:{t}:rk<id>:d`, `:di` | hash, string | dead letters (id -> JSON) and their counter |

use super::board_codec::{parse_record, record};
pub(super) use super::board_keys::registry;
pub(crate) use super::board_keys::BoardKeys;
use super::board_tx::{self, BoardTx, Ending, Mode};
use super::keys::key_slot;
use super::{scripts, Conn, Piece, RedisCluster, Reply};
use crate::error::{Error, Result};
use crate::seam::{Board, BoardSpec, BoardStore, DeadLetter, Placement, QueuedUpdate, Storage};
use crate::trace;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// How many times a board transaction is run before it gives up with
/// [`Error::Conflict`]: optimistic writers of one board retry whenever
/// another committed first, and some writer always does, so this only
/// bounds a pathological pile-up.
const TX_ATTEMPTS: u32 = 1_000;

/// Whether a new board is stored natively (`board_tx/native.rs`): every
/// board of one tree, the trees of a split board included (a split board's
/// own row, whose record has `trees` > 1, holds no players). A tree
/// made before split boards were native keeps its count tree: its record
/// says which it is.
fn stored_natively(spec: &BoardSpec) -> bool {
    #[cfg(test)]
    if COUNT_TREE.get() {
        return false;
    }
    spec.trees == 1 && spec.buckets == 0
}

#[cfg(test)]
thread_local! {
    /// A unit test's switch: boards this thread creates keep the count
    /// tree, the layout approximate boards and trees made before split
    /// boards were native still have (`boards_tests.rs` checks its rows).
    pub(super) static COUNT_TREE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// 1 ms doubling to 16 ms, jittered: optimistic writers of one board spread
/// out after a conflict without sleeping as long as a failover needs.
fn conflict_backoff(attempt: u32) {
    let cap = 1u64 << attempt.min(4);
    let micros = crate::random::range(cap * 500..=cap * 1000);
    std::thread::sleep(Duration::from_micros(micros));
}

impl RedisCluster {
    /// The shape of board `id`, from this handle's cache or the registry,
    /// and whether it is stored natively.
    pub(super) fn board_spec(&self, id: i64) -> Result<(BoardSpec, bool)> {
        if let Some(spec) = self.inner.boards.lock().expect("not poisoned").get(&id) {
            return Ok(spec.clone());
        }
        self.board_spec_on(&mut *self.checkout()?, id)
    }

    /// [`board_spec`](Self::board_spec) on a connection the caller holds.
    fn board_spec_on(&self, conn: &mut Conn, id: i64) -> Result<(BoardSpec, bool)> {
        if let Some(spec) = self.inner.boards.lock().expect("not poisoned").get(&id) {
            return Ok(spec.clone());
        }
        let registry = registry(self.prefix());
        let all: HashMap<String, String> =
            self.with_conn(conn, |c| redis::cmd("HGETALL").arg(&registry).query(c))?;
        for (name, stored) in &all {
            let (found, spec, native) = parse_record(name, stored)?;
            if found == id {
                self.remember(id, spec.clone(), native);
                return Ok((spec, native));
            }
        }
        Err(Error::RankingNotFound {
            name: format!("(board id {id})"),
        })
    }

    fn remember(&self, id: i64, spec: BoardSpec, native: bool) {
        self.inner
            .boards
            .lock()
            .expect("not poisoned")
            .insert(id, (spec, native));
    }

    /// Runs `f` in one transaction on `boards` (one slot: a commit is one
    /// script), again whole whenever it read a state that a concurrent
    /// commit replaced (a read transaction's reads must all be of one state
    /// of each board, a write transaction's commit must find the states
    /// its reads saw).
    fn board_transaction(
        &self,
        boards: &[Board<'_>],
        mode: Mode,
        how: Ending,
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        let mut conn = self.checkout()?;
        self.board_transaction_on(&mut conn, boards, mode, how, false, f)
    }

    /// One transaction over `boards` whose alike reads go to all of them
    /// at once (`board_tx::Ahead`).
    fn boards_alike(
        &self,
        boards: &[Board<'_>],
        mode: Mode,
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        if boards.is_empty() {
            return f(&[]);
        }
        let mut conn = self.checkout()?;
        self.board_transaction_on(&mut conn, boards, mode, Ending::Fresh, true, f)
    }

    /// [`board_transaction`](Self::board_transaction) on a connection
    /// the caller holds (an entity write's, `ranked.rs`: a second one from
    /// the pool could wait for ever on writers that each hold one).
    pub(super) fn board_transaction_on(
        &self,
        conn: &mut Conn,
        boards: &[Board<'_>],
        mode: Mode,
        how: Ending,
        alike: bool,
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        let mut shapes = Vec::with_capacity(boards.len());
        for board in boards {
            let (spec, native) = self.board_spec_on(conn, board.id)?;
            shapes.push((spec, native, BoardKeys::new(self.prefix(), board.id)));
        }
        if mode == Mode::Write && shapes.windows(2).any(|w| w[0].2.slot != w[1].2.slot) {
            // Only a family's boards are written together, and they are
            // created on one slot (`placement.rs`).
            return Err(Error::Unsupported {
                store: "redis-cluster",
                operation: "one write to boards on different slots",
            });
        }
        for attempt in 1..=TX_ATTEMPTS {
            let ahead = (alike && boards.len() > 1).then(|| {
                board_tx::Ahead::new(
                    shapes
                        .iter()
                        .map(|(_, native, keys)| (keys.version(), keys.data(), *native))
                        .collect(),
                )
            });
            let shared = std::cell::RefCell::new(&mut *conn);
            let txs: Vec<BoardTx<'_>> = boards
                .iter()
                .zip(&shapes)
                .enumerate()
                .map(|(i, (board, (spec, native, keys)))| {
                    let mut tx = BoardTx::new(self, &shared, keys, board.name, spec.clone(), mode);
                    if let Some(ahead) = &ahead {
                        tx = tx.read_ahead(ahead, i);
                    }
                    tx.native.set(*native);
                    tx
                })
                .collect();
            let storages: Vec<&dyn Storage> = txs.iter().map(|tx| tx as &dyn Storage).collect();
            let outcome = f(&storages).and_then(|()| txs.iter().try_for_each(BoardTx::confirm));
            // A read that found the state moved ends the run with an error
            // of its own; whatever `f` made of it, the run is void.
            if txs.iter().any(BoardTx::stale) {
                let _retry = trace::retry!(
                    store = "redis",
                    board = boards.first().map_or("", |b| b.name),
                    attempt,
                    error = "a read found the board moved"
                );
                // A reader waits for no one: the run is over as soon as
                // its reads see one state, which a pause does not bring
                // closer while writers keep committing.
                if mode == Mode::Write {
                    conflict_backoff(attempt);
                }
                continue;
            }
            outcome?;
            if board_tx::commit(&txs, how)? {
                return Ok(());
            }
            let _retry = trace::retry!(
                store = "redis",
                board = boards.first().map_or("", |b| b.name),
                attempt,
                error = "the board changed before the commit"
            );
            conflict_backoff(attempt);
        }
        Err(Error::Conflict {
            attempts: TX_ATTEMPTS,
        })
    }

    /// [`BoardStore::open_board`] on a connection the caller holds.
    pub(super) fn open_board_on(
        &self,
        conn: &mut Conn,
        name: &str,
    ) -> Result<Option<(i64, BoardSpec)>> {
        let stored: Option<String> = self.with_conn(conn, |c| {
            redis::cmd("HGET")
                .arg(registry(self.prefix()))
                .arg(name)
                .query(c)
        })?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        let (id, spec, native) = parse_record(name, &stored)?;
        self.remember(id, spec.clone(), native);
        Ok(Some((id, spec)))
    }

    /// Runs a piece on the board's slot (its writer table is there too).
    fn board_piece(&self, piece: &Piece<'_>) -> Result<Reply> {
        let mut conn = self.checkout()?;
        let id = self.next_seq(&mut conn);
        self.run(&mut conn, piece, id)
    }

    fn board_query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        let mut conn = self.checkout()?;
        self.with_conn(&mut conn, |c| cmd.query(c))
    }
}

impl BoardStore for RedisCluster {
    fn create_board(&self, name: &str, spec: &BoardSpec, placement: Placement<'_>) -> Result<i64> {
        // Random, like a writer id: an id is never reused, also not after a
        // failover rolled the registry back, so a new board never finds an
        // old one's keys. Random among those of the slot `placement` names
        // (`placement.rs`).
        let id = self.new_board_id(placement);
        let native = stored_natively(spec);
        let registry = registry(self.prefix());
        let piece = Piece {
            script: scripts::create_board(),
            key: &registry,
            slot: key_slot(registry.as_bytes()),
            args: vec![name.to_owned(), record(id, spec, native)],
            binary: Vec::new(),
            more_keys: &[],
        };
        match self.board_piece(&piece)? {
            Reply::Exists => Err(Error::RankingExists { name: name.into() }),
            reply if reply.applied() => {
                self.remember(id, spec.clone(), native);
                Ok(id)
            }
            other => Err(Error::SchemaMismatch {
                kind: "redis script".into(),
                reason: format!("unexpected reply {other:?} to a board's creation"),
            }),
        }
    }

    fn open_board(&self, name: &str) -> Result<Option<(i64, BoardSpec)>> {
        self.open_board_on(&mut *self.checkout()?, name)
    }

    fn read_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        self.board_transaction(&[board], Mode::Read, Ending::Fresh, &mut |sts| f(sts[0]))
    }

    fn write_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        self.board_transaction(&[board], Mode::Write, Ending::Fresh, &mut |sts| f(sts[0]))
    }

    // The streams need no preparing; and whether two handles reach one
    // cluster cannot be told for sure from their seed addresses.
    fn prepare_queue(&self) -> Result<Option<String>> {
        Ok(None)
    }

    fn approx(&self) -> Result<&dyn crate::seam::ApproxStore> {
        Ok(self)
    }

    fn write_boards(
        &self,
        boards: &[Board<'_>],
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        if boards.is_empty() {
            return f(&[]);
        }
        self.board_transaction(boards, Mode::Write, Ending::Fresh, f)
    }

    /// The boards' reads in one transaction on one connection, each read
    /// sent for every board at once where they ask alike (`board_tx::Ahead`):
    /// a split board's trees, on different masters, answer a merged count
    /// in one pipelined round trip, not one per tree.
    fn read_boards(
        &self,
        boards: &[Board<'_>],
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        self.boards_alike(boards, Mode::Read, f)
    }

    fn write_boards_alike(
        &self,
        boards: &[Board<'_>],
        f: &mut dyn FnMut(&[&dyn Storage]) -> Result<()>,
    ) -> Result<()> {
        self.boards_alike(boards, Mode::Write, f)
    }

    fn write_native(
        &self,
        board: Board<'_>,
        policy: &str,
        updates: &[crate::seam::NativeUpdate<'_>],
    ) -> Result<Option<std::result::Result<u64, crate::seam::NativeRefused>>> {
        self.write_native_batch(board, policy, updates)
    }

    fn submit_native(
        &self,
        board: Board<'_>,
        policy: &str,
        update: crate::seam::NativeUpdate<'_>,
    ) -> Result<Option<std::result::Result<crate::seam::NativeSubmitted, crate::seam::NativeRefused>>>
    {
        self.submit_native_one(board, policy, update)
    }

    fn submit_native_together(
        &self,
        guard: crate::seam::NativeStep<'_>,
        steps: &[crate::seam::NativeStep<'_>],
    ) -> Result<Option<crate::seam::NativeTogether>> {
        self.submit_native_steps(guard, steps)
    }

    fn trim_native(
        &self,
        board: Board<'_>,
        pick: crate::seam::NativeTrim,
        limit: u64,
    ) -> Result<Option<(u64, u64)>> {
        self.trim_native_batch(board, pick, limit)
    }

    fn list_boards(&self) -> Result<Vec<String>> {
        self.list()
    }

    fn delete_board(&self, name: &str) -> Result<bool> {
        self.delete(name)
    }

    fn append_queue(&self, board: Board<'_>, items: &[QueuedUpdate]) -> Result<()> {
        let keys = BoardKeys::new(self.prefix(), board.id);
        let mut groups: BTreeMap<u32, Vec<&QueuedUpdate>> = BTreeMap::new();
        for item in items {
            groups.entry(item.queue).or_default().push(item);
        }
        let streams: Vec<String> = std::iter::once(keys.version())
            .chain(groups.keys().map(|&q| keys.queue(q)))
            .collect();
        let mut args: Vec<Vec<u8>> = Vec::new();
        for (queue, group) in &groups {
            args.push(queue.to_string().into_bytes());
            args.push(group.len().to_string().into_bytes());
            for item in group {
                args.push(item.player.clone().into_bytes());
                args.push(
                    item.score
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                        .into_bytes(),
                );
                // Empty: no data; else a `v` and the data, so that empty
                // data stays data.
                args.push(match &item.data {
                    Some(data) => [b"v", &data[..]].concat(),
                    None => Vec::new(),
                });
            }
        }
        let heads = keys.heads();
        let piece = Piece {
            script: scripts::append_queue(),
            key: &heads,
            slot: keys.slot,
            args: Vec::new(),
            binary: args,
            more_keys: &streams,
        };
        match self.board_piece(&piece)? {
            Reply::Gone => Err(board.not_found()),
            _ => Ok(()),
        }
    }

    fn queued(&self, board: i64) -> Result<u64> {
        let (spec, _) = self.board_spec(board)?;
        let keys = BoardKeys::new(self.prefix(), board);
        let mut invocation = scripts::queue_count().prepare_invoke();
        for queue in 0..spec.queues {
            invocation.key(keys.queue(queue));
        }
        invocation.arg("all");
        let mut conn = self.checkout()?;
        self.with_conn(&mut conn, |c| invocation.invoke(c))
    }

    /// The queue shards are streams trimmed by the apply's commit: their
    /// lengths are the backlog, one `XLEN` each.
    fn backlog_from_marks(&self) -> bool {
        false
    }

    fn queue_marks(&self, board: i64) -> Result<Vec<(u32, i64)>> {
        let keys = BoardKeys::new(self.prefix(), board);
        let heads: HashMap<String, String> =
            self.board_query(redis::cmd("HGETALL").arg(keys.heads()))?;
        heads
            .iter()
            .map(|(queue, next)| match (queue.parse(), next.parse()) {
                (Ok(queue), Ok(next)) => Ok((queue, next)),
                _ => Err(Error::Corrupt {
                    kind: "ranking",
                    id: format!("(board id {board})"),
                    field: format!("queue head {queue:?}"),
                    reason: format!("{next:?} is not a sequence number"),
                }),
            })
            .collect()
    }

    fn queued_below(&self, board: i64, marks: &[(u32, i64)], count: bool) -> Result<u64> {
        if marks.is_empty() {
            return Ok(0);
        }
        let keys = BoardKeys::new(self.prefix(), board);
        let mut invocation = scripts::queue_count().prepare_invoke();
        invocation.arg(if count { "count" } else { "any" });
        for &(queue, mark) in marks {
            invocation.key(keys.queue(queue));
            // Entry `<seq>-1` for sequence numbers below the mark.
            let last = if mark > 0 {
                format!("{}-1", mark - 1)
            } else {
                String::new()
            };
            invocation.arg(last);
        }
        let mut conn = self.checkout()?;
        self.with_conn(&mut conn, |c| invocation.invoke(c))
    }

    fn dead_letters(&self, board: i64) -> Result<Vec<DeadLetter>> {
        let keys = BoardKeys::new(self.prefix(), board);
        let stored: HashMap<String, String> =
            self.board_query(redis::cmd("HGETALL").arg(keys.dead_letters()))?;
        let mut letters = stored
            .iter()
            .map(|(id, json)| super::board_codec::parse_dead_letter(board, id, json))
            .collect::<Result<Vec<_>>>()?;
        letters.sort_by_key(|letter| letter.id);
        Ok(letters)
    }

    /// Nothing to do: the commit that applied a batch trimmed its rows from
    /// the streams (`BoardTx::set_applied_through`).
    fn delete_queued(&self, _board: i64, _through: &[(u32, i64)]) -> Result<()> {
        Ok(())
    }

    fn delete_dead_letter(&self, board: i64, id: i64) -> Result<bool> {
        let keys = BoardKeys::new(self.prefix(), board);
        let deleted: i64 = self.board_query(redis::cmd("HDEL").arg(keys.dead_letters()).arg(id))?;
        Ok(deleted > 0)
    }

    fn dead_letter_count(&self, board: i64) -> Result<u64> {
        let keys = BoardKeys::new(self.prefix(), board);
        self.board_query(redis::cmd("HLEN").arg(keys.dead_letters()))
    }

    fn oldest_queued_age(&self, board: i64) -> Result<Option<std::time::Duration>> {
        let (spec, _) = self.board_spec(board)?;
        let keys = BoardKeys::new(self.prefix(), board);
        let mut invocation = scripts::queue_oldest().prepare_invoke();
        for queue in 0..spec.queues {
            invocation.key(keys.queue(queue));
        }
        let mut conn = self.checkout()?;
        let ms: i64 = self.with_conn(&mut conn, |c| invocation.invoke(c))?;
        Ok(u64::try_from(ms).ok().map(std::time::Duration::from_millis))
    }
}

#[cfg(test)]
#[path = "boards_tests.rs"]
mod tests;

//! Entity boards on Redis Cluster (`seam/ranked.rs`): a save's board write
//! cannot share a transaction with the save, whose pieces and the board
//! live in other slots. So the write is owed, then paid:
//!
//! 1. Before any piece, the board writes are run once without a commit
//!    ([`Ending::Skip`]): a missing board, a board of another policy or a
//!    total out of its range refuses the save with nothing written.
//! 2. Each piece that writes a ranked field's row records, in its own
//!    script, an *intent* in its slot's intent table (`KindKeys::intents`):
//!    the board write and the operation id reserved for it.
//! 3. After the save's pieces, each board write commits under its reserved
//!    id, and its intent is cleared.
//!
//! A writer killed between 2 and 3 leaves the intent; the kind's next
//! compaction pass ([`RedisCluster::recover_intents`]) commits it under
//! the same id. The id makes that exactly once: a board write already
//! applied answers `DUP` (its writer's mark in the board's slot is at or
//! past it, for the marks' retention, `exec.rs`). That holds because a
//! board write's id is above every id its save's pieces took, and a writer
//! that stops without knowing whether its board write applied takes a new
//! writer id ([`Conn::retire`]): no later piece of its old id can raise
//! the mark past an unapplied board write.

use super::board_tx::{Ending, Mode};
use super::entities::KindInfo;
use super::keys::KindKeys;
use super::{Conn, RedisCluster};
use crate::error::{Error, Result};
use crate::seam::{Board, BoardSpec, BoardTx, BoardWrite, Kind, Storage};
use crate::trace;
use redis::cluster::cluster_pipe;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// The boards as a ranked save sees them: every write transaction ends as
/// `how` says.
struct RedisBoards<'a> {
    db: &'a RedisCluster,
    /// The entity write's connection.
    conn: RefCell<&'a mut Conn>,
    how: Ending,
    /// Whether a board was found in the handle's cache of names, not in
    /// the registry: a board deleted since then is looked up again.
    cached: Cell<bool>,
}

impl<'a> RedisBoards<'a> {
    fn new(db: &'a RedisCluster, conn: &'a mut Conn, how: Ending) -> Self {
        RedisBoards {
            db,
            conn: RefCell::new(conn),
            how,
            cached: Cell::new(false),
        }
    }

    /// Runs `kind`'s board writer on these boards, once more with the
    /// registry's ids if a board from the cache was missing or of another
    /// shape: its id may be of a deleted board, whose name is another
    /// board's now.
    fn write(&self, kind: &Kind, writes: &[BoardWrite]) -> Result<()> {
        match kind.write_boards(self, writes) {
            Err(Error::RankingNotFound { .. } | Error::RankingMismatch { .. })
                if self.cached.get() =>
            {
                let names: Vec<&str> = writes.iter().map(|w| w.board).collect();
                let mut cache = self.db.inner.ranked_boards.lock().expect("not poisoned");
                cache.retain(|name, _| !names.contains(&name.as_str()));
                drop(cache);
                kind.write_boards(self, writes)
            }
            outcome => outcome,
        }
    }
}

impl BoardTx for RedisBoards<'_> {
    fn open(&self, name: &str) -> Result<Option<(i64, BoardSpec)>> {
        let cached = self
            .db
            .inner
            .ranked_boards
            .lock()
            .expect("not poisoned")
            .get(name)
            .copied();
        if let Some(id) = cached {
            let spec = self
                .db
                .inner
                .boards
                .lock()
                .expect("not poisoned")
                .get(&id)
                .cloned();
            if let Some((spec, _)) = spec {
                self.cached.set(true);
                return Ok(Some((id, spec)));
            }
        }
        let found = self.db.open_board_on(&mut self.conn.borrow_mut(), name)?;
        if let Some((id, _)) = &found {
            let mut cache = self.db.inner.ranked_boards.lock().expect("not poisoned");
            cache.insert(name.to_owned(), *id);
        }
        Ok(found)
    }

    fn with_board(
        &self,
        board: Board<'_>,
        f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        let mut conn = self.conn.borrow_mut();
        self.db.board_transaction_on(
            &mut conn,
            &[board],
            Mode::Write,
            self.how,
            false,
            &mut |sts| f(sts[0]),
        )
    }
}

/// One board write owed by a piece: where its intent is kept and the id
/// it commits under.
pub(super) struct Intent {
    table: String,
    /// `<writer>:<seq>`, the intent's field.
    field: String,
    /// The encoded write, the intent's value.
    value: String,
    write: BoardWrite,
    id: (i64, i64),
}

/// The board writes of one operation, with ids reserved above every id its
/// pieces take.
pub(super) struct Intents {
    writer: i64,
    first: i64,
    owed: Vec<Intent>,
}

impl Intents {
    /// Reserves ids for an operation whose pieces take at most `pieces`
    /// ids of `conn`.
    pub fn reserve(conn: &Conn, pieces: usize) -> Intents {
        Intents {
            writer: conn.writer,
            first: conn.seq + pieces as i64 + 1,
            owed: Vec::new(),
        }
    }

    /// Owes `write`, recorded by a piece in `slot`: the intent table
    /// (the piece's `KEYS[3]`) and the arguments that record it.
    pub fn owe(&mut self, keys: &KindKeys, slot: u16, write: BoardWrite) -> (String, [String; 2]) {
        let id = (self.writer, self.first + self.owed.len() as i64);
        let intent = Intent {
            table: keys.intents(slot),
            field: format!("{}:{}", id.0, id.1),
            value: encode(&write),
            write,
            id,
        };
        let recorded = (
            intent.table.clone(),
            [intent.field.clone(), intent.value.clone()],
        );
        self.owed.push(intent);
        recorded
    }
}

/// `<change> <board length>:<board><player>`, the change `-` for a removal.
fn encode(write: &BoardWrite) -> String {
    let change = write
        .change
        .map_or_else(|| "-".to_owned(), |d| d.to_string());
    format!(
        "{change} {}:{}{}",
        write.board.len(),
        write.board,
        write.player
    )
}

/// An intent back as a write to one of `kind`'s boards, and its id; `None`
/// if it is not one (a board the kind no longer ranks is left alone).
fn decode(kind: &Kind, field: &str, value: &str) -> Option<(BoardWrite, (i64, i64))> {
    let (writer, seq) = field.split_once(':')?;
    let id = (writer.parse().ok()?, seq.parse().ok()?);
    let (change, rest) = value.split_once(' ')?;
    let (len, rest) = rest.split_once(':')?;
    let (board, player) = rest.split_at_checked(len.parse().ok()?)?;
    let change = match change {
        "-" => None,
        delta => Some(delta.parse().ok()?),
    };
    let board = kind.ranked_boards().find(|name| *name == board)?;
    Some((
        BoardWrite {
            board,
            player: player.to_owned(),
            change,
        },
        id,
    ))
}

/// Whether a board write that failed with `e` certainly did not apply and
/// never will: its intent may go.
fn refused(e: &Error) -> bool {
    matches!(
        e,
        Error::RankingNotFound { .. }
            | Error::RankingMismatch { .. }
            | Error::ScoreOutOfRange { .. }
            | Error::InvalidValue { .. }
            | Error::Fold { .. }
            | Error::Corrupt { .. }
    )
}

impl RedisCluster {
    /// Step 1: `writes` would apply now; nothing is written.
    pub(super) fn check_boards(
        &self,
        conn: &mut Conn,
        kind: &Kind,
        writes: &[BoardWrite],
    ) -> Result<()> {
        RedisBoards::new(self, conn, Ending::Skip).write(kind, writes)
    }

    /// Step 3: commits each owed write under its id and clears the intents
    /// it settled. A write refused now (its board deleted or changed since
    /// step 1) is dropped: the error, except a deleted board's, is
    /// returned. A write that may or may not have applied keeps its intent
    /// for recovery, and `conn` takes a new writer id.
    pub(super) fn pay(&self, conn: &mut Conn, kind: &Kind, intents: Intents) -> Result<()> {
        assert!(
            conn.seq < intents.first,
            "an operation's pieces took the ids reserved for its board writes"
        );
        if let Some(last) = intents.owed.last() {
            conn.seq = last.id.1;
        }
        #[cfg(feature = "failpoints")]
        {
            std::thread::sleep(hooks::PAUSE.get());
            if hooks::OWE.get() == hooks::Owe::All {
                // As a killed writer: its id is never heard of again.
                conn.retire();
                return Ok(());
            }
        }
        let mut settled = Vec::new();
        let mut failure = None;
        for intent in &intents.owed {
            match self.apply_owed(conn, kind, &intent.write, intent.id) {
                Ok(()) | Err(Error::RankingNotFound { .. }) => settled.push(intent),
                Err(e) if refused(&e) => {
                    settled.push(intent);
                    failure.get_or_insert(e);
                }
                Err(e) => {
                    // This write and the ones after it stay owed: sent
                    // under the old id, a later one would raise its mark
                    // past this one.
                    conn.retire();
                    failure.get_or_insert(e);
                    break;
                }
            }
        }
        #[cfg(feature = "failpoints")]
        if hooks::OWE.get() == hooks::Owe::Intents {
            settled.clear();
        }
        // A clear that fails leaves intents a recovery finds applied.
        let _ = self.clear(conn, &settled);
        failure.map_or(Ok(()), Err)
    }

    fn apply_owed(
        &self,
        conn: &mut Conn,
        kind: &Kind,
        write: &BoardWrite,
        id: (i64, i64),
    ) -> Result<()> {
        RedisBoards::new(self, conn, Ending::As(id)).write(kind, std::slice::from_ref(write))
    }

    fn clear(&self, conn: &mut Conn, settled: &[&Intent]) -> Result<()> {
        if settled.is_empty() {
            return Ok(());
        }
        self.with_conn(conn, |c| {
            let mut pipe = cluster_pipe();
            for intent in settled {
                pipe.cmd("HDEL")
                    .arg(&intent.table)
                    .arg(&intent.field)
                    .ignore();
            }
            pipe.query::<()>(c)
        })
    }

    /// Commits every board write of `kind` that a piece recorded and no
    /// writer settled (a writer killed, or cut off, between its pieces and
    /// its board writes), each under its own id: exactly once, also while
    /// its writer still runs. Returns how many it settled. Compaction runs
    /// it at the start of every pass.
    pub(crate) fn recover_intents(&self, kind: &Kind) -> Result<u64> {
        if !kind.has_ranked() {
            return Ok(0);
        }
        let info = self.kind(kind)?;
        let mut conn = self.checkout()?;
        let tables = self.intent_tables(&mut conn, &info)?;
        self.settle(&mut conn, kind, &tables, None)
    }

    /// Before an insert or a delete of the entity `player` (in `tables`,
    /// its slots' intent tables): settles what earlier writes of it owe
    /// (only increments unless `removals`), so a board sees its writes in
    /// their order (an owed save before the delete's removal, an owed
    /// removal before the new entity's entry).
    pub(super) fn settle_entity(
        &self,
        conn: &mut Conn,
        kind: &Kind,
        tables: &[String],
        player: &str,
        removals: bool,
    ) -> Result<u64> {
        self.settle(conn, kind, tables, Some((player, removals)))
    }

    /// Pays the intents in `tables` (those of one player, and whether its
    /// removals too, if given), in the order of their ids, and clears them.
    fn settle(
        &self,
        conn: &mut Conn,
        kind: &Kind,
        tables: &[String],
        player: Option<(&str, bool)>,
    ) -> Result<u64> {
        if tables.is_empty() {
            return Ok(0);
        }
        let found: Vec<HashMap<String, String>> = self.with_conn(conn, |c| {
            let mut pipe = cluster_pipe();
            for table in tables {
                pipe.cmd("HGETALL").arg(table);
            }
            pipe.query(c)
        })?;
        let mut owed = Vec::new();
        for (table, found) in tables.iter().zip(found) {
            for (field, value) in found {
                match decode(kind, &field, &value) {
                    Some((write, id))
                        if player.is_none_or(|(p, removals)| {
                            p == write.player && (removals || write.change.is_some())
                        }) =>
                    {
                        owed.push((id, write, table, field));
                    }
                    _ => {}
                }
            }
        }
        // A writer's marks say "applied through seq": its writes must be
        // sent in the order of their ids, or a later one's mark would pass
        // an earlier one off as applied. Removals go last: an increment
        // owed beside a removal of the same player is one its deleted
        // incarnation's save made before the delete took its buckets
        // (an insert pays a removal before it writes anything). One
        // writer's writes are all removals (a delete's) or none are, so
        // this keeps each writer's order.
        owed.sort_by_key(|(id, write, ..)| (write.change.is_none(), *id));
        let mut settled = 0;
        for (id, write, table, field) in owed {
            match self.apply_owed(conn, kind, &write, id) {
                Ok(()) => {}
                Err(e) if refused(&e) => {
                    trace::event!(
                        WARN,
                        store = "redis",
                        board = write.board,
                        error = %e,
                        "autoshard: an owed entity board write is refused; dropped"
                    );
                }
                Err(e) => return Err(e),
            }
            self.with_conn(conn, |c| {
                redis::cmd("HDEL").arg(table).arg(&field).query::<i64>(c)
            })?;
            settled += 1;
        }
        Ok(settled)
    }

    /// The kind's intent tables on every master (`SCAN` on each).
    fn intent_tables(&self, conn: &mut Conn, info: &KindInfo) -> Result<Vec<String>> {
        let pattern = info.keys.intents_pattern();
        let mut tables = Vec::new();
        for slot in self.master_slots(conn)? {
            let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                slot,
                SlotAddr::Master,
            )));
            let mut cursor = "0".to_owned();
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(&cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .arg("TYPE")
                    .arg("hash");
                let (next, keys): (String, Vec<String>) = self.with_conn(conn, |c| {
                    c.route_command(&scan, route.clone())
                        .and_then(|v| redis::from_redis_value(v).map_err(Into::into))
                })?;
                tables.extend(keys);
                if next == "0" {
                    break;
                }
                cursor = next;
            }
        }
        tables.sort_unstable();
        tables.dedup();
        Ok(tables)
    }

    /// One slot of each master (`CLUSTER SLOTS`: a range's first slot).
    fn master_slots(&self, conn: &mut Conn) -> Result<Vec<u16>> {
        let ranges: Vec<Vec<redis::Value>> = self.with_conn(conn, |c| {
            c.route_command(
                redis::cmd("CLUSTER").arg("SLOTS"),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .and_then(|v| redis::from_redis_value(v).map_err(Into::into))
        })?;
        let mut slots = Vec::new();
        let mut masters = Vec::new();
        for range in ranges {
            // `[start, end, [host, port, id], replicas...]`
            let (Some(start), Some(master)) = (range.first(), range.get(2)) else {
                continue;
            };
            let Ok(start) = redis::from_redis_value::<u16>(start.clone()) else {
                continue;
            };
            let master = format!("{master:?}");
            if !masters.contains(&master) {
                masters.push(master);
                slots.push(start);
            }
        }
        Ok(slots)
    }
}

/// This thread's switches for the crash and recovery tests
/// (`__private::redis_hooks`).
#[cfg(feature = "failpoints")]
pub(crate) mod hooks {
    use std::cell::Cell;
    use std::time::Duration;

    /// What a ranked write leaves owed, as a writer killed at that point
    /// would.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Owe {
        Nothing,
        /// Every board write: killed after the pieces.
        All,
        /// The intents of applied board writes: killed before the clear.
        Intents,
    }

    thread_local! {
        pub static OWE: Cell<Owe> = const { Cell::new(Owe::Nothing) };
        pub static PAUSE: Cell<Duration> = const { Cell::new(Duration::ZERO) };
        /// Runs in a delete between its document's removal and its
        /// buckets' (`writes.rs`).
        pub static BEFORE_BUCKETS_DELETED: std::cell::RefCell<Option<Box<dyn FnMut()>>> =
            std::cell::RefCell::new(None);
    }

    /// Runs the hook, if one is set (taken out while it runs, so it may
    /// delete an entity itself).
    pub fn before_buckets_deleted() {
        let hook = BEFORE_BUCKETS_DELETED.with(|h| h.borrow_mut().take());
        if let Some(mut hook) = hook {
            hook();
            BEFORE_BUCKETS_DELETED.with(|h| *h.borrow_mut() = Some(hook));
        }
    }
}

//! [`Storage`](crate::seam::Storage) over one optimistic board transaction
//! on Redis Cluster.
//!
//! Every read is one [`scripts::board_read`] call that also checks the
//! board's version: the first read learns it, every later one is refused
//! (`STALE`) if a commit replaced it meanwhile, so whatever `f` sees comes
//! from one state of the board. Writes are buffered, with what they wrote
//! remembered so that the transaction reads its own writes, and committed
//! by [`scripts::board_commit`] if the version is still the one read. This
//! file is that transaction; `storage.rs` maps the seam's calls onto it.

use super::board_codec::{array, bytes};
use super::boards::BoardKeys;
use super::{scripts, Conn, Piece, RedisCluster, Reply};
use crate::error::{Error, Result};
use crate::seam::BoardSpec;
use redis::Value;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

mod ahead;
mod native;
mod storage;

pub(crate) use ahead::Ahead;
#[cfg(test)]
mod tests;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Read,
    Write,
}

/// How a write transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Under a new operation id.
    Fresh,
    /// Under this operation id, reserved earlier: an entity board's write,
    /// which a recovery may send again (`ranked.rs`).
    As((i64, i64)),
    /// Not at all: the run only checks that the writes would apply.
    Skip,
}

/// The hashes of a board, by their index in [`BoardKeys::data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Hash {
    Nodes = 0,
    Arrivals = 1,
    Players = 2,
    /// Entry data: player -> bytes.
    Data = 6,
}

const ORDER: usize = 3;
const DEAD: usize = 4;
const DEAD_IDS: usize = 5;
/// A native board's distinct scores (sorted set), players per score (hash)
/// and arrival counter.
const DISTINCT: usize = 7;
/// What a reset unlinks: everything but the dead-letter counter, so a dead
/// letter's id is never given again.
const CLEARED: [usize; 9] = [
    Hash::Nodes as usize,
    Hash::Arrivals as usize,
    Hash::Players as usize,
    ORDER,
    DEAD,
    Hash::Data as usize,
    DISTINCT,
    DISTINCT + 1,
    DISTINCT + 2,
];

/// A buffered write.
enum Write {
    Put(Hash, Vec<u8>, Vec<u8>),
    Delete(Hash, Vec<u8>),
    Rank(Vec<u8>),
    Unrank(Vec<u8>),
    /// Deletes queue shard `.0`'s entries below id `.1`.
    Trim(u32, String),
    DeadLetter(String),
    /// Unlinks the keys of [`CLEARED`]: a reset.
    Clear,
    /// A native board's move of a player: from their stored row (16
    /// bytes, empty if absent; `None`: where an earlier move of this
    /// transaction put them, which the commit reads) to a score key (8
    /// bytes, empty: removed).
    Move {
        player: Vec<u8>,
        to: Vec<u8>,
        from: Option<Vec<u8>>,
        /// The lowest arrival the move may take (0: the board's counter).
        floor: u64,
    },
}

/// Hash fields by `(hash, field)`: their value, `None` if absent.
type Known = HashMap<(Hash, Vec<u8>), Option<Vec<u8>>>;

pub(crate) struct BoardTx<'a> {
    db: &'a RedisCluster,
    /// Shared by the boards of one multi-board transaction.
    conn: &'a RefCell<&'a mut Conn>,
    keys: &'a BoardKeys,
    version_key: String,
    data: Vec<String>,
    name: &'a str,
    spec: BoardSpec,
    mode: Mode,
    /// Whether the board is stored natively (`native.rs`): set by the
    /// caller from the registry record.
    pub native: Cell<bool>,
    /// Native reads are peeks (`NativeBoard::peeking`): outside the
    /// snapshot, so they cannot make it stale.
    peeking: Cell<bool>,
    /// The version the reads saw; `None` before the first.
    version: RefCell<Option<String>>,
    stale: Cell<bool>,
    /// Whether the transaction reset the board: every field not written
    /// since is absent, without a read.
    cleared: Cell<bool>,
    /// Hash fields read or written so far (`None`: absent).
    known: RefCell<Known>,
    /// The players of a native board this transaction moved.
    moved: RefCell<HashSet<Vec<u8>>>,
    writes: RefCell<Vec<Write>>,
    /// The transaction's reads ahead, and this board's place in it.
    ahead: Option<(&'a Ahead, usize)>,
}

impl<'a> BoardTx<'a> {
    pub fn new(
        db: &'a RedisCluster,
        conn: &'a RefCell<&'a mut Conn>,
        keys: &'a BoardKeys,
        name: &'a str,
        spec: BoardSpec,
        mode: Mode,
    ) -> Self {
        BoardTx {
            db,
            conn,
            keys,
            version_key: keys.version(),
            data: keys.data(),
            name,
            spec,
            mode,
            native: Cell::new(false),
            peeking: Cell::new(false),
            version: RefCell::new(None),
            stale: Cell::new(false),
            cleared: Cell::new(false),
            known: RefCell::default(),
            moved: RefCell::default(),
            writes: RefCell::default(),
            ahead: None,
        }
    }

    /// Takes part in `ahead` as its board `index`.
    pub fn read_ahead(mut self, ahead: &'a Ahead, index: usize) -> Self {
        self.ahead = Some((ahead, index));
        self
    }

    /// Whether a read found the board changed since the first read: the run
    /// is void, whatever `f` returned.
    pub fn stale(&self) -> bool {
        self.stale.get()
    }

    /// Reads the version if no read has yet: a transaction that read
    /// nothing (a reset, a flush's check) would otherwise check no version,
    /// neither for a deleted board (`RankingNotFound`) nor at its commit.
    pub fn confirm(&self) -> Result<()> {
        if self.version.borrow().is_none() {
            self.read(&self.version_key, "EXISTS", &[])?;
        }
        Ok(())
    }

    /// One version-checked read of `key`: the command's reply.
    fn read(&self, key: &str, op: &str, args: &[&[u8]]) -> Result<Value> {
        self.read_with(scripts::board_read(), &[key], op, args)
    }

    /// One version-checked read by `script` (which checks the version as
    /// [`scripts::board_read`] does) of `keys`: the reply.
    fn read_with(
        &self,
        script: &redis::Script,
        keys: &[&str],
        op: &str,
        args: &[&[u8]],
    ) -> Result<Value> {
        if self.stale.get() {
            return Err(Error::Conflict { attempts: 1 });
        }
        let version = self.version.borrow().clone().unwrap_or_default();
        if let Some((ahead, me, id)) = self.shared(script, keys, op, args) {
            let sent = ahead.take(me, &id, false);
            if let Some(reply) = sent {
                return self.accept(reply, true);
            }
            if let Some(reply) = self.read_for_all(ahead, me, &id, &version, false)? {
                return self.accept(reply, false);
            }
        }
        let reply = self.invoke(script, keys, &version, op, args)?;
        self.accept(reply, false)
    }

    /// `script` on this board's version key and `keys`, with `version`,
    /// `op` and `args`: one round trip.
    fn invoke(
        &self,
        script: &redis::Script,
        keys: &[&str],
        version: &str,
        op: &str,
        args: &[&[u8]],
    ) -> Result<Value> {
        let mut invocation = script.prepare_invoke();
        invocation.key(&self.version_key);
        for key in keys {
            invocation.key(*key);
        }
        invocation.arg(version).arg(op);
        for arg in args {
            invocation.arg(*arg);
        }
        let mut conn = self.conn.borrow_mut();
        self.db.with_conn(&mut conn, |c| invocation.invoke(c))
    }

    /// A read by `script` of `keys` outside the transaction's snapshot:
    /// sent with no version, and the version it saw neither kept nor
    /// compared, so it cannot make the run stale. Only for a read whose
    /// answer a later, checked read confirms. While the board is peeking
    /// (a look of every tree, `NativeBoard::peeking`), sent alike to the
    /// other boards of an [`Ahead`] as a checked read is; a lone peek (a
    /// player's place, in their tree only) goes alone.
    fn peek_with(
        &self,
        script: &redis::Script,
        keys: &[&str],
        op: &str,
        args: &[&[u8]],
    ) -> Result<Value> {
        let mut reply = None;
        let shared = match self.peeking.get() {
            true => self.shared(script, keys, op, args),
            false => None,
        };
        if let Some((ahead, me, id)) = shared {
            let sent = ahead.take(me, &id, true);
            reply = match sent {
                Some(sent) => Some(sent),
                None => self.read_for_all(ahead, me, &id, "", true)?,
            };
        }
        let reply = match reply {
            Some(reply) => reply,
            None => self.invoke(script, keys, "", op, args)?,
        };
        let mut reply = array(reply).into_iter();
        if reply.next().and_then(bytes).as_deref() != Some(b"OK") {
            return Err(self.unexpected("to a peek".into()));
        }
        let seen = reply.next().and_then(bytes).unwrap_or_default();
        if seen == super::lifecycle::DELETED.as_bytes() {
            return Err(super::lifecycle::not_found(self.name));
        }
        Ok(reply.next().unwrap_or(Value::Nil))
    }

    /// A read's reply, checked: `ahead` if it was sent for this board by
    /// another, with no version, so it must have seen the version this
    /// board's reads saw.
    fn accept(&self, reply: Value, ahead: bool) -> Result<Value> {
        let mut reply = array(reply).into_iter();
        match reply.next().and_then(bytes).as_deref() {
            Some(b"OK") => {}
            Some(b"STALE") => {
                self.stale.set(true);
                // Not seen by the caller: `board_transaction` runs `f`
                // again once it returns.
                return Err(Error::Conflict { attempts: 1 });
            }
            other => return Err(self.unexpected(format!("{other:?}"))),
        }
        let seen = reply.next().and_then(bytes).unwrap_or_default();
        if seen == super::lifecycle::DELETED.as_bytes() {
            return Err(super::lifecycle::not_found(self.name));
        }
        let moved = self
            .version
            .borrow()
            .as_ref()
            .is_some_and(|v| v.as_bytes() != seen.as_slice());
        if ahead && moved {
            self.stale.set(true);
            return Err(Error::Conflict { attempts: 1 });
        }
        self.version
            .borrow_mut()
            .get_or_insert_with(|| String::from_utf8_lossy(&seen).into_owned());
        Ok(reply.next().unwrap_or(Value::Nil))
    }

    fn unexpected(&self, what: String) -> Error {
        Error::SchemaMismatch {
            kind: "redis script".into(),
            reason: format!("unexpected board read reply {what}"),
        }
    }

    /// The values of `fields` of `hash`, from this transaction's reads and
    /// writes where known, the rest in one read.
    fn fields(&self, hash: Hash, fields: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let missing: Vec<&[u8]> = {
            let known = self.known.borrow();
            fields
                .iter()
                .filter(|f| !known.contains_key(&(hash, f.to_vec())))
                .map(Vec::as_slice)
                .collect()
        };
        if !missing.is_empty() && self.cleared.get() {
            let mut known = self.known.borrow_mut();
            for field in missing {
                known.insert((hash, field.to_vec()), None);
            }
        } else if !missing.is_empty() {
            let values = array(self.read(&self.data[hash as usize], "HMGET", &missing)?);
            if values.len() != missing.len() {
                return Err(self.unexpected(format!(
                    "{} values for {}",
                    values.len(),
                    missing.len()
                )));
            }
            let mut known = self.known.borrow_mut();
            for (field, value) in missing.into_iter().zip(values) {
                known.insert((hash, field.to_vec()), bytes(value));
            }
        }
        let known = self.known.borrow();
        Ok(fields
            .iter()
            .map(|f| known[&(hash, f.clone())].clone())
            .collect())
    }

    fn put(&self, hash: Hash, field: Vec<u8>, value: &[u8]) {
        debug_assert_eq!(self.mode, Mode::Write, "a read transaction writes");
        let write = if value.is_empty() {
            Write::Delete(hash, field.clone())
        } else {
            Write::Put(hash, field.clone(), value.to_vec())
        };
        self.writes.borrow_mut().push(write);
        let value = (!value.is_empty()).then(|| value.to_vec());
        self.known.borrow_mut().insert((hash, field), value);
    }

    /// Appends this board's part of a commit (`scripts::board_commit`):
    /// its keys (and their type letters) to `keys`, its version triple to
    /// `heads`, its writes to `ops`. The first board's version key is
    /// `KEYS[1]`, not in `keys`.
    fn encode(&self, first: bool, commit: &mut Commit) {
        // `KEYS[1]` and `KEYS[2]` (the writer table) precede `keys`.
        let index_of_next = |keys: &Vec<String>| keys.len() + 3;
        let version_at = if first {
            1
        } else {
            commit.keys.push(self.version_key.clone());
            commit.types.push('s');
            commit.keys.len() + 2
        };
        // Data key `i` (0-based, `BoardKeys::data`) is `KEYS[base + 1 + i]`.
        let base = index_of_next(&commit.keys) - 1;
        commit.keys.extend(self.data.iter().cloned());
        commit.types.push_str(DATA_TYPES);
        let writes = self.writes.take();
        commit.heads.extend([
            version_at.to_string().into_bytes(),
            self.version
                .borrow()
                .clone()
                .unwrap_or_default()
                .into_bytes(),
            if writes.is_empty() { b"0" } else { b"1" }.to_vec(),
        ]);
        let index = |i: usize| (base + 1 + i).to_string().into_bytes();
        let mut queues: HashMap<u32, Vec<u8>> = HashMap::new();
        let ops = &mut commit.ops;
        for write in writes {
            match write {
                Write::Put(h, field, value) => {
                    ops.extend([b"H".to_vec(), index(h as usize), field, value]);
                }
                Write::Delete(h, field) => ops.extend([b"h".to_vec(), index(h as usize), field]),
                Write::Rank(member) => ops.extend([b"Z".to_vec(), index(ORDER), member]),
                Write::Unrank(member) => ops.extend([b"z".to_vec(), index(ORDER), member]),
                Write::Trim(queue, below) => {
                    let at = queues.entry(queue).or_insert_with(|| {
                        commit.keys.push(self.keys.queue(queue));
                        commit.types.push('x');
                        (commit.keys.len() + 2).to_string().into_bytes()
                    });
                    ops.extend([b"X".to_vec(), at.clone(), below.into_bytes()]);
                }
                Write::Clear => {
                    ops.extend([b"C".to_vec(), CLEARED.len().to_string().into_bytes()]);
                    ops.extend(CLEARED.iter().map(|&i| index(i)));
                }
                Write::Move {
                    player,
                    to,
                    from,
                    floor,
                } => {
                    let from = from.unwrap_or_else(|| b"?".to_vec());
                    ops.extend([
                        b"M".to_vec(),
                        base.to_string().into_bytes(),
                        player,
                        to,
                        from,
                        floor.to_string().into_bytes(),
                    ]);
                }
                Write::DeadLetter(json) => {
                    ops.extend([
                        b"D".to_vec(),
                        index(DEAD),
                        index(DEAD_IDS),
                        json.into_bytes(),
                    ]);
                }
            }
        }
    }

    fn wrote(&self) -> bool {
        !self.writes.borrow().is_empty()
    }
}

/// The type letters of [`BoardKeys::data`] for `scripts::board_commit`.
const DATA_TYPES: &str = "hhhzhshzhs";

/// A commit script's arguments, built board by board.
#[derive(Default)]
struct Commit {
    /// `KEYS[3..]`.
    keys: Vec<String>,
    /// One type letter per key of `keys`.
    types: String,
    /// Per board: version key index, version read, written.
    heads: Vec<Vec<u8>>,
    ops: Vec<Vec<u8>>,
}

/// Commits the buffered writes of `txs` (boards of one slot, sharing one
/// connection) in one script, all or nothing: `false` if a concurrent
/// commit moved any of them since its reads (run the transaction again). A
/// board only read is checked, not moved; a transaction that wrote nothing
/// has nothing to commit: its reads were of one state of each board
/// already.
pub(crate) fn commit(txs: &[BoardTx<'_>], how: Ending) -> Result<bool> {
    let Some(first) = txs.first() else {
        return Ok(true);
    };
    if how == Ending::Skip || !txs.iter().any(BoardTx::wrote) {
        return Ok(true);
    }
    debug_assert!(txs.iter().all(|tx| tx.keys.slot == first.keys.slot));
    let mut commit = Commit::default();
    for (i, tx) in txs.iter().enumerate() {
        tx.encode(i == 0, &mut commit);
    }
    let mut conn = first.conn.borrow_mut();
    let id = match how {
        Ending::As(id) => id,
        _ => first.db.next_seq(&mut conn),
    };
    // The commit's operation id is the new version: unique, so a state
    // rolled back by a failover never passes for a later one.
    let mut binary = vec![
        format!("{}:{}", id.0, id.1).into_bytes(),
        commit.types.into_bytes(),
        txs.len().to_string().into_bytes(),
    ];
    binary.extend(commit.heads);
    binary.extend(commit.ops);
    let piece = Piece {
        script: scripts::board_commit(),
        key: &first.version_key,
        slot: first.keys.slot,
        args: Vec::new(),
        binary,
        more_keys: &commit.keys,
    };
    let reply = first.db.run(&mut conn, &piece, id)?;
    match reply {
        Reply::Conflict => Ok(false),
        reply if reply.applied() => Ok(true),
        other => Err(first.unexpected(format!("{other:?} to a commit"))),
    }
}

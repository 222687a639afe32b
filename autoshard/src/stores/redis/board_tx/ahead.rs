//! Reads a transaction over several boards sends to all of them at once
//! ([`Ahead`]): a family submission's members, or a split board's trees,
//! each making the same read of its own keys.

use super::BoardTx;
use crate::error::Result;
use crate::stores::redis::exec;
use redis::Value;
use std::cell::RefCell;
use std::collections::HashMap;

/// A read as its boards share it: the script, its keys as places among
/// a board's keys (0 the version, `1 + i` data key `i`), op and arguments.
pub(super) type ReadId = (String, Vec<usize>, String, Vec<Vec<u8>>);

/// Reads sent ahead for the other boards of a transaction whose boards all
/// read alike: a family submission's members, which take the same
/// player's update (`BoardStore::write_boards_alike`), and a split board's
/// trees (`RedisCluster::read_boards`). The first board to make a read sends
/// it for every board of its kind (native or not) in the same round trip,
/// and each keeps its reply until it makes that read itself. Each board
/// checks a reply it gets this way against the version it read before, so
/// a board's reads still come from one state.
pub(crate) struct Ahead {
    /// Per board: its version key, its data keys, whether it is native.
    boards: Vec<(String, Vec<String>, bool)>,
    replies: RefCell<HashMap<(usize, ReadId), Value>>,
    /// Peeks (`BoardTx::peek_with`) sent alike the same way, kept apart:
    /// they are read outside the snapshot, so no version checks them, and
    /// a board drops its own once it stops peeking.
    peeks: RefCell<HashMap<(usize, ReadId), Value>>,
}

impl Ahead {
    pub fn new(boards: Vec<(String, Vec<String>, bool)>) -> Self {
        Ahead {
            boards,
            replies: RefCell::default(),
            peeks: RefCell::default(),
        }
    }

    /// The replies kept for `peek`s or for checked reads.
    fn kept(&self, peek: bool) -> &RefCell<HashMap<(usize, ReadId), Value>> {
        match peek {
            true => &self.peeks,
            false => &self.replies,
        }
    }

    /// The reply kept for `board`'s read `id` (a `peek`'s or a checked
    /// read's), taken: each is used once.
    pub(super) fn take(&self, board: usize, id: &ReadId, peek: bool) -> Option<Value> {
        self.kept(peek).borrow_mut().remove(&(board, id.clone()))
    }

    /// Drops the peeks kept for `board`: the look they served is over.
    pub fn forget_peeks(&self, board: usize) {
        self.peeks.borrow_mut().retain(|(b, _), _| *b != board);
    }

    /// `keys` of board `board` as places among its keys, if they all are.
    fn places(&self, board: usize, keys: &[&str]) -> Option<Vec<usize>> {
        let (version, data, _) = self.boards.get(board)?;
        keys.iter()
            .map(|k| match *k == version.as_str() {
                true => Some(0),
                false => data.iter().position(|d| d == k).map(|i| i + 1),
            })
            .collect()
    }

    /// The keys at `places` of board `board`.
    fn keys(&self, board: usize, places: &[usize]) -> Vec<&str> {
        let (version, data, _) = &self.boards[board];
        places
            .iter()
            .map(|&p| match p {
                0 => version.as_str(),
                p => data[p - 1].as_str(),
            })
            .collect()
    }
}

impl<'a> BoardTx<'a> {
    /// The read as the boards of this transaction's [`Ahead`] share it, if
    /// it has one and the read's keys are all this board's.
    pub(super) fn shared(
        &self,
        script: &redis::Script,
        keys: &[&str],
        op: &str,
        args: &[&[u8]],
    ) -> Option<(&'a Ahead, usize, ReadId)> {
        let (ahead, me) = self.ahead?;
        let mut places = vec![0];
        places.extend(ahead.places(me, keys)?);
        let id: ReadId = (
            script.get_hash().to_owned(),
            places,
            op.to_owned(),
            args.iter().map(|a| a.to_vec()).collect(),
        );
        Some((ahead, me, id))
    }

    /// Sends read `id` for this board (with `version`) and, with no
    /// version (the reply says which it saw), for every other board of its
    /// kind that has no reply to it yet, in one pipeline; this board's
    /// reply. `None` if the pipeline failed (the script not yet loaded on
    /// the node, say): the caller reads alone. A `peek`'s replies are kept
    /// apart from the checked reads'.
    pub(super) fn read_for_all(
        &self,
        ahead: &Ahead,
        me: usize,
        id: &ReadId,
        version: &str,
        peek: bool,
    ) -> Result<Option<Value>> {
        let native = ahead.boards[me].2;
        let others: Vec<usize> = (0..ahead.boards.len())
            .filter(|&b| b != me && ahead.boards[b].2 == native)
            .filter(|&b| !ahead.kept(peek).borrow().contains_key(&(b, id.clone())))
            .collect();
        if others.is_empty() {
            return Ok(None);
        }
        let (hash, places, op, args) = id;
        let mut pipe = redis::cluster::cluster_pipe();
        for (board, version) in
            std::iter::once((me, version)).chain(others.iter().map(|&b| (b, "")))
        {
            let keys = ahead.keys(board, places);
            let cmd = pipe.cmd("EVALSHA").arg(hash).arg(keys.len());
            for key in keys {
                cmd.arg(key);
            }
            cmd.arg(version).arg(op);
            for arg in args {
                cmd.arg(arg.as_slice());
            }
        }
        let mut conn = self.conn.borrow_mut();
        exec::count_round_trip();
        let replies: Vec<Value> = match conn
            .cluster(&self.db.inner.client)
            .and_then(|c| pipe.query(c))
        {
            Ok(replies) => replies,
            Err(_) => return Ok(None),
        };
        let mut replies = replies.into_iter();
        let mine = replies.next();
        let mut kept = ahead.kept(peek).borrow_mut();
        for (board, reply) in others.into_iter().zip(replies) {
            kept.insert((board, id.clone()), reply);
        }
        Ok(mine)
    }
}

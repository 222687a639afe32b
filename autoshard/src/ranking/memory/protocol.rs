//! The callers' side of the `Storage` contract, which a SQL backend cannot
//! check: what a write transaction must lock, read and write, and in what
//! order (the module docs of `memory` list the rules).

use super::MemoryTx;
use crate::ranking::storage;
use std::collections::BTreeSet;

pub(super) enum Mode {
    Read,
    /// `None`: unchecked.
    Write(Option<Protocol>),
}

/// What a write transaction has announced and done so far.
#[derive(Default)]
pub(super) struct Protocol {
    pub(super) players: Option<BTreeSet<String>>,
    pub(super) leaves: Option<BTreeSet<u64>>,
    /// Inner shard rows read through `node_shard`, in call order.
    pub(super) shard_rows: Vec<(u32, u64, u32)>,
    pub(super) written: BTreeSet<String>,
}

impl Protocol {
    pub(super) fn player_locked(&self, player: &str) -> Result<(), String> {
        match &self.players {
            Some(locked) if locked.contains(player) => Ok(()),
            _ => Err(format!("player {player:?} is not locked")),
        }
    }

    pub(super) fn leaf_locked(&self, idx: u64) -> Result<(), String> {
        match &self.leaves {
            Some(locked) if locked.contains(&idx) => Ok(()),
            _ => Err(format!("leaf {idx} is not locked")),
        }
    }

    pub(super) fn written_once(&mut self, row: String) -> Result<(), String> {
        match self.written.insert(row.clone()) {
            true => Ok(()),
            false => Err(format!("{row} written twice")),
        }
    }
}

/// Whether a call belongs to writers only.
#[derive(PartialEq)]
pub(super) enum Who {
    Anyone,
    Writers,
}

impl MemoryTx<'_> {
    /// Checks `call` against the transaction's protocol; panics on a
    /// violation.
    pub(super) fn rule(
        &self,
        who: Who,
        call: &str,
        rule: impl FnOnce(&mut Protocol) -> Result<(), String>,
    ) {
        match &mut *self.mode.borrow_mut() {
            Mode::Read if who == Who::Writers => {
                panic!("storage protocol: {call} in a read transaction")
            }
            Mode::Read | Mode::Write(None) => {}
            Mode::Write(Some(protocol)) => {
                if let Err(why) = rule(protocol) {
                    panic!("storage protocol: {call}: {why}");
                }
            }
        }
    }

    /// The leaf whose lock covers `score`'s arrival tree.
    pub(super) fn leaf_of(&self, score: i64) -> Result<u64, String> {
        let g = &self.storage.geometry;
        g.offset(score)
            .map(|offset| g.node(offset, 1))
            .ok_or_else(|| format!("score {score} is outside the board"))
    }

    pub(super) fn canonical(&self, what: &str, v: &[u8]) {
        let trimmed = !v.ends_with(&[0; 8]);
        assert!(
            storage::well_formed(v, self.storage.geometry.b()) && trimmed,
            "storage protocol: {what}: {v:?} is not a canonical vector of at most B entries"
        );
    }
}

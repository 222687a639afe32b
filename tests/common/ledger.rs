//! The entity the crash tests' children save, and the op ids that let the
//! parent check every acknowledged op is stored exactly once.
#![allow(dead_code)] // the controls' half-methods are SQLite-only

use autoshard::{shard_fold, shard_method, Pending, Shardable};
use std::collections::BTreeSet;

#[derive(Shardable, Debug)]
pub struct Ledger {
    #[shard(id)]
    pub id: u64,
    #[shard(neutral = 0, shards = 8)]
    pub fixed: i64,
    #[shard(neutral = 0)]
    pub grown: i64,
    #[shard(neutral = BTreeSet::new())]
    pub ops: BTreeSet<u64>,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl Ledger {
    pub fn new(id: u64) -> Self {
        Ledger {
            id,
            fixed: 0,
            grown: 0,
            ops: BTreeSet::new(),
            pending: Pending::default(),
        }
    }

    #[shard_method]
    pub fn count_static(&mut self, op: u64) {
        self.fixed += 1;
        self.ops.insert(op);
    }

    #[shard_method]
    pub fn count_dynamic(&mut self, op: u64) {
        self.grown += 1;
        self.ops.insert(op);
    }

    /// Half of `count_dynamic`, for the split-save control.
    #[shard_method]
    pub fn count_only(&mut self) {
        self.grown += 1;
    }

    /// The other half.
    #[shard_method]
    pub fn record_only(&mut self, op: u64) {
        self.ops.insert(op);
    }

    #[shard_fold]
    fn fold_fixed(a: i64, b: i64) -> i64 {
        a + b
    }

    #[shard_fold]
    fn fold_grown(a: i64, b: i64) -> i64 {
        a + b
    }

    #[shard_fold]
    fn fold_ops(mut a: BTreeSet<u64>, b: BTreeSet<u64>) -> BTreeSet<u64> {
        a.extend(b);
        a
    }
}

/// Op ids: child number, writer thread within the child, sequence number.
/// A (child, thread) pair is a *stream*; a stream's ops are saved in order.
pub fn op_id(child: u64, thread: u64, seq: u64) -> u64 {
    (child << 32) | (thread << 24) | seq
}

pub fn stream_of(op: u64) -> u64 {
    op >> 24
}

pub fn seq_of(op: u64) -> u64 {
    op & 0xFF_FFFF
}

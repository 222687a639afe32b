// Generated code must not trip the lints a careful crate turns on: the
// derive and the macros are used here under `deny` on a documented public
// entity, so any warning the expansion causes fails the build.
#![deny(warnings, missing_docs, unused, rust_2018_idioms, unreachable_pub)]
//! A crate with an entity.

use autoshard::{shard_fold, shard_method, Pending, Shardable};

/// A counter.
#[derive(Shardable, Debug)]
pub struct Counter {
    #[shard(id)]
    id: u32,
    #[shard(neutral = 0, shards = 2)]
    hits: u64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Counter {
    /// Counts a hit.
    #[shard_method]
    pub fn hit(&mut self) {
        self.hits += 1;
    }

    #[shard_fold]
    fn fold_hits(a: u64, b: u64) -> u64 {
        a + b
    }
}

/// An entity without sharded fields needs no pending field.
#[derive(Shardable, Debug)]
pub struct Plain {
    #[shard(id)]
    id: i64,
    name: String,
}

fn main() {
    let mut c = Counter {
        id: 1,
        hits: 0,
        pending: Pending::default(),
    };
    c.hit();
    assert_eq!(c.hits, 1);
    let p = Plain {
        id: 1,
        name: "p".into(),
    };
    assert_eq!(autoshard::Shardable::id(&p), &1);
    assert_eq!(p.name, "p");
}

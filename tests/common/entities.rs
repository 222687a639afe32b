//! Entities declared the same way by more than one test file. A test whose
//! entity differs (another shard count, other methods) keeps its own.
#![allow(dead_code)] // not every test file uses every entity or method

use autoshard::{shard_fold, shard_method, Pending, Shardable};

/// The paper's hot question: votes statically sharded over 10 rows, views
/// dynamically sharded, and an unsharded title in the document.
#[derive(Shardable, Debug)]
pub struct Question {
    #[shard(id)]
    pub id: u64,
    pub title: String,
    #[shard(neutral = 0, shards = 10)]
    pub votes: i64,
    #[shard(neutral = 0)]
    pub views: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl Question {
    pub fn new(id: u64, votes: i64, views: i64) -> Self {
        Question {
            id,
            title: format!("question {id}"),
            votes,
            views,
            pending: Pending::default(),
        }
    }
    #[shard_method]
    pub fn vote(&mut self, by: i64) {
        self.votes += by;
    }
    #[shard_method]
    pub fn view(&mut self) {
        self.views += 1;
    }
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
}

/// One kind, `Switch`, declared twice: `hits` statically sharded over 4
/// rows here and dynamically sharded in [`DynamicSwitch`], for the tests
/// that change a field's sharding between runs.
#[derive(Shardable, Debug)]
#[shard(kind = "Switch")]
pub struct StaticSwitch {
    #[shard(id)]
    pub id: u64,
    #[shard(neutral = 0, shards = 4)]
    pub hits: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl StaticSwitch {
    #[shard_method]
    pub fn hit(&mut self) {
        self.hits += 1;
    }
    #[shard_fold]
    fn fold_hits(a: i64, b: i64) -> i64 {
        a + b
    }
}

/// The kind `Switch` with `hits` dynamically sharded.
#[derive(Shardable, Debug)]
#[shard(kind = "Switch")]
pub struct DynamicSwitch {
    #[shard(id)]
    pub id: u64,
    #[shard(neutral = 0)]
    pub hits: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl DynamicSwitch {
    #[shard_method]
    pub fn hit(&mut self) {
        self.hits += 1;
    }
    #[shard_fold]
    fn fold_hits(a: i64, b: i64) -> i64 {
        a + b
    }
}

/// Issue 12, item 1: integer sums with `checked_sum`, float sums with `+`; statically sharded
/// over 2 rows (so a delta and the big value can land in different rows)
/// and dynamically sharded.
#[derive(Shardable, Debug)]
#[shard(kind = "Capped")]
pub struct Capped {
    #[shard(id)]
    pub id: u64,
    #[shard(neutral = 0, shards = 2, fold = autoshard::fold::checked_sum)]
    pub hits: i64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum)]
    pub appended: i64,
    #[shard(neutral = 0.0, shards = 2)]
    pub real: f64,
    #[shard(neutral = 0.0)]
    pub real_appended: f64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl Capped {
    pub fn new(id: u64, hits: i64, appended: i64) -> Self {
        Capped {
            id,
            hits,
            appended,
            real: 0.0,
            real_appended: 0.0,
            pending: Pending::default(),
        }
    }
    // Wrapping, so that the method itself cannot panic: an object whose
    // own aggregate would overflow is refused by the save's check of its
    // fields (base folded with delta, before the store), which leaves the
    // store's own check to the totals an object cannot see.
    #[shard_method]
    pub fn hit(&mut self, by: i64) {
        self.hits = self.hits.wrapping_add(by);
    }
    #[shard_method]
    pub fn append(&mut self, by: i64) {
        self.appended = self.appended.wrapping_add(by);
    }
    #[shard_method]
    pub fn add_real(&mut self, by: f64) {
        self.real += by;
    }
    #[shard_method]
    pub fn append_real(&mut self, by: f64) {
        self.real_appended += by;
    }
    #[shard_fold]
    fn fold_real(a: f64, b: f64) -> f64 {
        a + b
    }
    #[shard_fold]
    fn fold_real_appended(a: f64, b: f64) -> f64 {
        a + b
    }
}

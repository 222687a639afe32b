//! The entities the benchmarks save: the issue's `Question`, and one kind per
//! voting variant so each gets its own tables.

use autoshard::{shard_fold, shard_method, Pending, Shardable};

/// The question: static `votes` (10 shards), dynamic `views`.
#[derive(Shardable, Debug)]
pub struct Question {
    #[shard(id)]
    pub id: u64,
    pub question: String,
    pub author: String,
    #[shard(neutral = 0, shards = 10)]
    pub votes: i64,
    #[shard(neutral = 0)]
    pub views: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl Question {
    pub fn new(id: u64) -> Self {
        Question {
            id,
            question: "How do you plan to improve public education?".into(),
            author: "moderator".into(),
            votes: 0,
            views: 0,
            pending: Pending::default(),
        }
    }

    #[shard_method]
    pub fn vote_up(&mut self) {
        self.votes += 1;
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

/// A voting-benchmark entity whose `votes` a save persists.
pub trait Ballot: Shardable<Id = u64> {
    fn new(id: u64) -> Self;
    fn vote(&mut self);
    fn votes(&self) -> i64;
}

macro_rules! sharded_ballot {
    ($name:ident, $($shard:tt)*) => {
        #[derive(Shardable, Debug)]
        pub struct $name {
            #[shard(id)]
            pub id: u64,
            pub question: String,
            #[shard($($shard)*)]
            pub votes: i64,
            #[shard(pending)]
            pub pending: Pending<Self>,
        }

        impl $name {
            #[shard_method]
            fn vote_up(&mut self) {
                self.votes += 1;
            }

            #[shard_fold]
            fn fold_votes(a: i64, b: i64) -> i64 {
                a + b
            }
        }

        impl Ballot for $name {
            fn new(id: u64) -> Self {
                $name {
                    id,
                    question: "Hot question".into(),
                    votes: 0,
                    pending: Pending::default(),
                }
            }
            fn vote(&mut self) {
                self.vote_up();
            }
            fn votes(&self) -> i64 {
                self.votes
            }
        }
    };
}

sharded_ballot!(StaticVotes, neutral = 0, shards = 10);
sharded_ballot!(DynamicVotes, neutral = 0);
sharded_ballot!(OneShardVotes, neutral = 0, shards = 1);
sharded_ballot!(AutoVotes, neutral = 0, shards = 1..=256);

/// The unsharded baseline: `votes` lives in the JSON document, so a vote is
/// load, increment, save of the whole document.
#[derive(Shardable, Debug)]
pub struct DocumentVotes {
    #[shard(id)]
    pub id: u64,
    pub question: String,
    pub votes: i64,
}

/// Counters for the compaction benchmark: one dynamic field.
#[derive(Shardable, Debug)]
pub struct Counter {
    #[shard(id)]
    pub id: u64,
    #[shard(neutral = 0)]
    pub hits: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

impl Counter {
    #[shard_fold]
    fn fold_hits(a: i64, b: i64) -> i64 {
        a + b
    }
}

// The shard-count sweep's other static counts (1 and 10 are above).
sharded_ballot!(TwoShardVotes, neutral = 0, shards = 2);
sharded_ballot!(FiveShardVotes, neutral = 0, shards = 5);
sharded_ballot!(TwentyShardVotes, neutral = 0, shards = 20);
sharded_ballot!(FiftyShardVotes, neutral = 0, shards = 50);
sharded_ballot!(HundredShardVotes, neutral = 0, shards = 100);

use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 10)]
    votes: i64,
    pending: Pending<Self>,
}

impl Question {
    #[autoshard::shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn main() {}

use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 10)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    #[autoshard::shard_fold]
    fn fold_votes(a: i32, b: i32) -> i32 {
        a + b
    }
}

fn main() {}

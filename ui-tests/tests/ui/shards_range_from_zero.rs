use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 0..=5)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {}

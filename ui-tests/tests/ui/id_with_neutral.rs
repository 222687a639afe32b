use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id, neutral = 0)]
    id: u64,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {}

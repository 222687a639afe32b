use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id, pending)]
    id: u64,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {}

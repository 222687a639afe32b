use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(id)]
    slug: String,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {}

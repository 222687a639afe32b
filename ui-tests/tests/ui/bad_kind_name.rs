use autoshard::{Pending, Shardable};

#[derive(Shardable)]
#[shard(kind = "bad name")]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {}

use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: f64,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {}

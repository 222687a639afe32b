use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    title: String,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {}

use autoshard::{Pending, Shardable};

struct Author {
    name: String,
}

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    author: Author,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {}

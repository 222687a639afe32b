use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, ranked = "top-questions")]
    votes: u64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    fn fold_votes(a: u64, b: u64) -> u64 {
        a + b
    }
}

fn main() {}

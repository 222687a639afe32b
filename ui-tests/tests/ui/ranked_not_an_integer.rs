use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0.0, shards = 10, ranked = "top-questions")]
    votes: f64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    fn fold_votes(a: f64, b: f64) -> f64 {
        a + b
    }
}

fn main() {}

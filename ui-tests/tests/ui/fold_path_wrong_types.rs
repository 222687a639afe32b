use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0.0, fold = autoshard::fold::checked_sum)]
    score: f64,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {}

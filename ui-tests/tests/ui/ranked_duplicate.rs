use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 10, ranked = "top-questions", ranked = "hot")]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn main() {}

use autoshard::{Pending, Shardable};

#[derive(Clone, Copy, PartialEq, Default)]
struct Tally(i64);

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = Tally(0), shards = 10)]
    votes: Tally,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    #[autoshard::shard_fold]
    fn fold_votes(a: Tally, b: Tally) -> Tally {
        Tally(a.0 + b.0)
    }
}

fn main() {}

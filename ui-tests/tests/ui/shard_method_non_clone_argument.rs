use autoshard::{shard_fold, shard_method, Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 10)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }

    #[shard_method]
    fn vote_by(&mut self, ballot: Ballot) {
        self.votes += ballot.weight;
    }
}

struct Ballot {
    weight: i64,
}

fn main() {}

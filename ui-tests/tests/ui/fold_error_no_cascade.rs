// A fold with a wrong signature next to a derive that uses it must give the
// fold's error only, not also a type mismatch in the derived code.
use autoshard::{shard_fold, Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 10)]
    votes: i64,
    #[shard(neutral = 0)]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    #[shard_fold]
    fn fold_votes(&self, b: i64) -> i64 {
        self.votes + b
    }

    #[shard_fold]
    fn fold_views(a: i64, b: i64) {
        let _ = a + b;
    }
}

fn main() {}

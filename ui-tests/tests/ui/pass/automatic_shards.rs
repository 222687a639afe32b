// `shards = LOW..=HIGH` expands, and the field spec says what was declared.
use autoshard::{Pending, Shardable};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 1..=256, fold = autoshard::fold::checked_sum)]
    votes: i64,
    #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum)]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() {
    let fields = <Question as Shardable>::__FIELDS;
    assert_eq!(
        (fields[0].min_shards, fields[0].shards),
        (Some(1), Some(256))
    );
    assert_eq!((fields[1].min_shards, fields[1].shards), (None, Some(10)));
    let q = Question {
        id: 1,
        votes: 0,
        views: 0,
        pending: Pending::default(),
    };
    let _ = (q.id, q.votes, q.views);
}

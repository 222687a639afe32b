//! A ranked field, static and dynamic, feeds its board on SQLite.
use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{Pending, Shardable, Sqlite, Store};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: String,
    #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum, ranked = "top")]
    votes: i64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum, ranked = "views")]
    views: u32,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() -> autoshard::Result<()> {
    let db = Sqlite::memory()?;
    let increment = |range| RankingConfig::new(range).policy(Policy::Increment);
    let top = Ranking::create(&db, "top", increment(-100..100))?;
    let views = Ranking::create(&db, "views", increment(0..100))?;
    let q = Question {
        id: "q1".into(),
        votes: 3,
        views: 4,
        pending: Pending::new(),
    };
    db.insert(&q)?;
    assert_eq!((top.score("q1")?, views.score("q1")?), (Some(3), Some(4)));
    Ok(())
}

use autoshard::{Pending, Shardable, Sqlite, Store};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn main() -> autoshard::Result<()> {
    let db = Sqlite::memory()?;
    let top = db.query::<Question>().filter(|q| q.votes.ge("50")).run()?;
    let _ = top.len();
    Ok(())
}

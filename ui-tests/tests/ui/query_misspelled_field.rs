use autoshard::{Pending, Shardable, Store};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

// Any store gives the same error: the check is at compile time.
fn run(db: &impl Store) -> autoshard::Result<()> {
    let top = db.query::<Question>().filter(|q| q.vtoes.ge(50)).run()?;
    let _ = top.len();
    Ok(())
}

fn main() {}

mod model {
    use autoshard::{Pending, Shardable};

    #[derive(Shardable)]
    pub struct Question {
        #[shard(id)]
        pub id: u64,
        secret: String,
        #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum)]
        pub votes: i64,
        #[shard(pending)]
        pending: Pending<Self>,
    }
}

use autoshard::Store;

// Any store gives the same error: the check is at compile time.
fn run(db: &impl Store) -> autoshard::Result<()> {
    // `votes` is public, so its handle is; `secret` is not, nor its handle.
    let found = db
        .query::<model::Question>()
        .filter(|q| q.votes.ge(1))
        .filter(|q| q.secret.eq(String::new()))
        .run()?;
    let _ = found.len();
    Ok(())
}

fn main() {}

// A bad attribute on an entity that the rest of the file uses through the
// store and its shard methods must give the attribute error and nothing
// else: the derive's fallback impl keeps every use type-checking.
use autoshard::{shard_fold, shard_method, Pending, Shardable, Store};

#[derive(Shardable)]
struct Question {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 0)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    #[shard_method]
    fn vote_up(&mut self) {
        self.votes += 1;
    }

    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
}

// Any store gives the same error: the check is at compile time.
fn run(db: &impl Store) -> autoshard::Result<()> {
    db.insert(&Question {
        id: 1,
        votes: 0,
        pending: Pending::default(),
    })?;
    let mut q: Question = db.load(&1)?.expect("inserted");
    q.vote_up();
    db.save(&mut q)?;
    Ok(())
}

fn main() {}

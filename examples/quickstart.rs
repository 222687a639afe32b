//! The README's quickstart as a program: a question whose votes are sharded
//! statically and whose views dynamically, on an in-memory SQLite database.
//!
//! ```text
//! cargo run --release --example quickstart
//! ```

use autoshard::{shard_fold, shard_method, Pending, Shardable, Sqlite, Store};

#[derive(Shardable, Debug)]
struct Question {
    #[shard(id)]
    id: u64,
    question: String, // unsharded: stored in a JSON document
    #[shard(neutral = 0, shards = 10)] // static sharding: 10 shard rows
    votes: i64,
    #[shard(neutral = 0)] // dynamic sharding: a new row per save
    views: i64,
    #[shard(pending)] // the unsaved deltas live here
    pending: Pending<Self>,
}

impl Question {
    #[shard_method]
    fn vote_up(&mut self) {
        self.votes += 1;
    }
    #[shard_method]
    fn view(&mut self) {
        self.views += 1;
    }
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn main() -> autoshard::Result<()> {
    let db = Sqlite::memory()?; // or Sqlite::open("moderator.db")?
    let question = "How do you plan to improve public education?".to_string();
    db.insert(&Question {
        id: 42,
        question,
        votes: 76,
        views: 0,
        pending: Pending::default(),
    })?;

    for _ in 0..3 {
        let mut q: Question = db.load(&42)?.expect("inserted above");
        q.view();
        q.vote_up(); // q.votes is one up right away
        db.save(&mut q)?; // one transaction: 1 of 10 vote shards updated, 1 view row appended
    }
    let rows = |field: &str| db.shard_count::<Question>(&42, field);
    let (vote_rows, view_rows) = (rows("votes")?, rows("views")?);
    println!("after 3 saves: {vote_rows} vote shard rows, {view_rows} view shard rows");

    let merged = db.compact::<Question>()?.rows_merged; // folds the piled-up view rows
    let left = rows("views")?;
    println!("compaction merged {merged} rows: {left} view row left");
    let q: Question = db.load(&42)?.expect("inserted above");
    println!("{:?}: {} votes, {} views", q.question, q.votes, q.views);
    Ok(())
}

// `cargo test` runs this: the folds are lawful and the shard methods
// replayable (see `autoshard::testing`).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_obeys_the_fold_laws() {
        let laws = autoshard::testing::laws::<Question>()
            .values("votes", -1_000_000i64..1_000_000)
            .values("views", 0i64..1_000_000);
        laws.check_folds();
        let q = Question {
            id: 1,
            question: "?".into(),
            votes: 0,
            views: 0,
            pending: Pending::default(),
        };
        laws.check_shard_method(&q, Question::vote_up);
        laws.check_shard_method(&q, Question::view);
    }
}

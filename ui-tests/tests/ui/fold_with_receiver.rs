use autoshard::shard_fold;

struct Question;

impl Question {
    #[shard_fold]
    fn fold_votes(&self, b: i64) -> i64 {
        b
    }
}

fn main() {}

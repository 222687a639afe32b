use autoshard::shard_fold;

struct Question;

impl Question {
    #[shard_fold(votes)]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn main() {}

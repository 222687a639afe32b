use autoshard::shard_fold;

struct Question;

impl Question {
    #[shard_fold]
    fn fold_votes(a: i64, b: i64, c: i64) -> i64 {
        a + b + c
    }
}

fn main() {}

use autoshard::shard_fold;

struct Question;

impl Question {
    #[shard_fold]
    fn fold_votes(a: i64) -> i64 {
        a
    }
}

fn main() {}

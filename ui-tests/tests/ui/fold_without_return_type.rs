use autoshard::shard_fold;

struct Question;

impl Question {
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) {
        let _ = a + b;
    }
}

fn main() {}

use autoshard::Shardable;

#[derive(Shardable)]
union Question {
    id: u64,
    votes: i64,
}

fn main() {}

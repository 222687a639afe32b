use autoshard::Shardable;

#[derive(Shardable)]
struct Question(u64, i64);

fn main() {}

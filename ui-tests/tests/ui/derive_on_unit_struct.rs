use autoshard::Shardable;

#[derive(Shardable)]
struct Question;

fn main() {}

use autoshard::Shardable;

#[derive(Shardable)]
enum Question {
    Open { id: u64 },
    Closed { id: u64 },
}

fn main() {}

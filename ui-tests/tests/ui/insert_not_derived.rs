use autoshard::{Sqlite, Store};

struct Question {
    id: u64,
}

fn main() -> autoshard::Result<()> {
    let db = Sqlite::memory()?;
    db.insert(&Question { id: 1 })?;
    Ok(())
}

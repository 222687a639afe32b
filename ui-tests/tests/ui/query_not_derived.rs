use autoshard::{Sqlite, Store};

struct Question {
    id: u64,
}

fn main() -> autoshard::Result<()> {
    let db = Sqlite::memory()?;
    let found = db.query::<Question>().run()?;
    let _ = found.iter().map(|q| q.id);
    Ok(())
}

use autoshard::{Sqlite, Store};

struct Question {
    id: u64,
}

fn main() -> autoshard::Result<()> {
    let db = Sqlite::memory()?;
    let question = db.load::<Question>(&1)?;
    let _ = question.map(|q| q.id);
    Ok(())
}

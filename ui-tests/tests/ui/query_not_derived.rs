use autoshard::Store;

struct Question {
    id: u64,
}

// Any store gives the same error: the check is at compile time.
fn run(db: &impl Store) -> autoshard::Result<()> {
    let found = db.query::<Question>().run()?;
    let _ = found.iter().map(|q| q.id);
    Ok(())
}

fn main() {}

use autoshard::Store;

struct Question {
    id: u64,
}

// Any store gives the same error: the check is at compile time.
fn run(db: &impl Store) -> autoshard::Result<()> {
    db.insert(&Question { id: 1 })?;
    Ok(())
}

fn main() {}

use autoshard::Store;

struct Question {
    id: u64,
}

// Any store gives the same error: the check is at compile time.
fn run(db: &impl Store) -> autoshard::Result<()> {
    let question = db.load::<Question>(&1)?;
    let _ = question.map(|q| q.id);
    Ok(())
}

fn main() {}

use autoshard::{shard_fold, Pending, Shardable, Store};
use std::collections::BTreeSet;

#[derive(Shardable)]
struct Page {
    #[shard(id)]
    url: String,
    #[shard(neutral = BTreeSet::new())]
    visitors: BTreeSet<String>,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Page {
    #[shard_fold]
    fn fold_visitors(mut a: BTreeSet<String>, b: BTreeSet<String>) -> BTreeSet<String> {
        a.extend(b);
        a
    }
}

// Any store gives the same error: the check is at compile time.
fn run(db: &impl Store) -> autoshard::Result<()> {
    let pages = db.query::<Page>().order_by(|p| p.visitors.desc()).run()?;
    let _ = pages.len();
    Ok(())
}

fn main() {}

//! The README's tour, compiled and run: each `rust,ignore` block of the
//! README's "A tour" section is copied below (fragments cannot be doc
//! tests on their own; `rustfmt::skip` keeps them as the README has them),
//! and `the_readme_tour_is_the_code_below` fails when a README block and
//! its copy here differ, so neither can drift.
//!
//! Seen failing: with the README's `board.set_score("alice", 30)?;` changed
//! to `board.set_score("alice", 31)?;`, that test fails with
//! `README tour block 4 is not in tests/docs/readme_tour.rs: ...`.

use autoshard::ranking::Update;
use autoshard::ranking::{Dim, Family, FamilyConfig, Period, Ranking, RankingConfig, Tie, Window};
use autoshard::{AsyncRanking, Pending, Shardable, Sqlite, Store};
use std::fs;
use std::path::Path;

// Block 1.
#[rustfmt::skip]
#[derive(Shardable)]
struct Question {
    #[shard(id)] id: u64,
    #[shard(neutral = 0, shards = 1..=256, fold = autoshard::fold::checked_sum)] votes: i64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum)] views: i64,
    #[shard(pending)] pending: Pending<Self>,
}

#[rustfmt::skip]
fn block_2(db: Sqlite) -> autoshard::Result<()> {
    let compactor = db.compactor::<Question>().max_writer_share(0.25).spawn()?;
    println!("{}", db.stats::<Question>()?); // rows and pending rows per field
    let stats = compactor.stop()?;           // rows merged, batches, writer share
    assert_eq!(stats.rows_merged, 0);
    Ok(())
}

#[rustfmt::skip]
fn block_3(db: Sqlite) -> autoshard::Result<()> {
    let top: Vec<Question> = db.query::<Question>()
        .filter(|q| q.votes.ge(50)).order_by(|q| q.votes.desc()).limit(10).run()?;
    assert_eq!(top.len(), 1);
    Ok(())
}

#[rustfmt::skip]
fn block_4(db: Sqlite) -> autoshard::Result<()> {
    let board = Ranking::create(&db, "season-1", RankingConfig::new(0..10_000))?;
    board.set_score("alice", 30)?;                  // or board.enqueue(..) for a worker
    let rank = board.rank("alice", Tie::Standard)?; // Some(1); Dense and Ordinal too
    let page = board.page(150, 175)?;               // and top(n), around(player, k)
    assert_eq!((rank, page.len()), (Some(1), 0));
    Ok(())
}

#[rustfmt::skip]
fn block_5(db: Sqlite) -> autoshard::Result<()> {
    let config = FamilyConfig::new(RankingConfig::new(0..1_000_000)).window(Window::Week).filter("age", ["u35", "35+"]);
    let game = Family::open_or_create(&db, "game", config)?;
    game.submission("ann", 120).filter("age", "35+").submit()?;
    let this_week = game.board(Window::Week, Period::Current, None)?;
    assert_eq!(this_week.expect("submitted this week").len()?, 1);
    Ok(())
}

#[rustfmt::skip]
fn block_6(db: Sqlite) -> autoshard::Result<()> {
    let levels = Ranking::create(&db, "levels", RankingConfig::dimensions([Dim::higher(0..10_000), Dim::lower(0..1_000)]))?;
    levels.submit_update(Update::dims("ann", &[12, 3]))?;
    let global = Ranking::create(&db, "global", RankingConfig::new(0..1 << 40).approximate(1_000))?;
    global.refresh()?; let about = global.approx_rank(123_456)?;
    assert_eq!(about, 1);
    Ok(())
}

#[rustfmt::skip]
async fn block_7() -> autoshard::Result<()> {
    let db = autoshard::open_async("sqlite::memory:").await?; // any URL open takes
    db.insert(&Question { id: 1, votes: 0, views: 0, pending: Pending::default() }).await?;
    db.save_delta::<Question, _>(&1, "votes", &1).await?;    // on the store's threads
    let board = AsyncRanking::create(&db, "season-2", RankingConfig::new(0..10_000)).await?;
    board.set_score("bo", 12).await?; let top = board.top(10).await?;
    assert_eq!((top.len(), db.load::<Question>(&1).await?.map(|q| q.votes)), (1, Some(1)));
    Ok(())
}

#[tokio::test]
async fn the_readme_async_block_runs() -> autoshard::Result<()> {
    block_7().await
}

#[test]
fn the_readme_tour_runs() -> autoshard::Result<()> {
    let db = Sqlite::memory()?;
    db.insert(&Question {
        id: 1,
        votes: 60,
        views: 0,
        pending: Pending::default(),
    })?;
    block_2(db.clone())?;
    block_3(db.clone())?;
    block_4(db.clone())?;
    block_5(db.clone())?;
    block_6(db)
}

/// Each block's lines, trimmed, must appear in order as consecutive lines
/// of this file.
#[test]
fn the_readme_tour_is_the_code_below() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let here = fs::read_to_string(root.join("tests/docs/readme_tour.rs")).expect("this file");
    let here: Vec<&str> = here.lines().map(str::trim).collect();
    let tour = readme
        .split("\n## A tour\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README.md has a `## A tour` section");
    let blocks: Vec<Vec<&str>> = tour
        .split("```rust,ignore\n")
        .skip(1)
        .map(|b| {
            b.split("\n```")
                .next()
                .unwrap_or_default()
                .lines()
                .map(str::trim)
                .collect()
        })
        .collect();
    assert_eq!(
        blocks.len(),
        7,
        "the tour's blocks changed: update this file"
    );
    for (i, block) in blocks.iter().enumerate() {
        assert!(
            here.windows(block.len()).any(|w| w == block.as_slice()),
            "README tour block {} is not in tests/docs/readme_tour.rs: {block:?}",
            i + 1
        );
    }
}

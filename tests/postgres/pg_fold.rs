//! A write that holds a PostgreSQL board alone (a batch of more than 64
//! players: a worker's batch, a large `set_scores`) folds the shard rows of
//! every inner node it changes into one, so a read sums one row per node
//! where it summed up to `node_shards`; small writes, which run beside each
//! other, keep adding to a random shard.
#![cfg(feature = "postgres")]

use autoshard::ranking::{Ranking, RankingConfig, Tie};
use autoshard::Postgres;
use std::collections::BTreeMap;

use crate::stores;
use stores::pg;

/// `(height, idx, part) -> shard rows` of every inner node in `schema`.
fn shard_rows(client: &mut postgres::Client, schema: &str) -> BTreeMap<(i32, i64, i16), i64> {
    let sql = format!(
        "SELECT height, idx, part, count(*) FROM \"{schema}\".autoshard_rank_nodes \
         WHERE height > 1 GROUP BY height, idx, part"
    );
    let rows = client.query(&sql, &[]).unwrap();
    rows.iter()
        .map(|r| ((r.get(0), r.get(1), r.get(2)), r.get(3)))
        .collect()
}

/// Small writes spread an inner node over several shard rows; one batch
/// of new players under every inner node leaves each with one row per part,
/// and every rank still matches a brute-force oracle. The control: before
/// the batch, nodes held several rows (the premise), and with the fold
/// removed (`ranking/apply/flush.rs` not reading the other shards) the
/// batch leaves them so and this test fails at `several rows after`.
#[test]
fn a_batch_that_holds_the_board_alone_folds_its_nodes_shard_rows() {
    let schema = pg::new_schema();
    let _drop = pg::DropSchema(schema.clone());
    let db = Postgres::builder(&pg::url())
        .schema(&schema)
        .open()
        .unwrap();
    // Depth 4 at B = 10: 100 nodes at height 2, 10 at 3, the root.
    let config = RankingConfig::new(0..10_000).branching(10).node_shards(8);
    let board = Ranking::create(&db, "fold", config).unwrap();
    let mut scores = BTreeMap::new();
    for i in 0..300i64 {
        let (who, score) = (format!("small-{i}"), i * 7_919 % 10_000);
        board.set_score(&who, score).unwrap();
        scores.insert(who, score);
    }
    let mut client = postgres::Client::connect(&pg::url(), postgres::NoTls).unwrap();
    let before = shard_rows(&mut client, &schema);
    let spread = before.values().filter(|&&n| n > 1).count();
    assert!(
        spread > 20,
        "premise: {spread} inner node parts in several rows"
    );
    // One new player under every node at height 2, and so under every
    // inner node: a batch of 100 (> 64) takes the board alone.
    let batch: Vec<(String, i64)> = (0..100)
        .map(|i| (format!("big-{i}"), i * 100 + 3))
        .collect();
    let refs: Vec<(&str, i64)> = batch.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    board.set_scores(&refs).unwrap();
    scores.extend(batch.iter().cloned());
    let after = shard_rows(&mut client, &schema);
    let several: Vec<_> = after.iter().filter(|(_, &n)| n > 1).collect();
    assert!(
        several.is_empty(),
        "{} node parts in several rows after the batch, among them {:?}",
        several.len(),
        &several[..several.len().min(4)]
    );
    let lost: Vec<_> = before.keys().filter(|k| !after.contains_key(k)).collect();
    assert!(lost.is_empty(), "node parts lost: {lost:?}");
    board.check_integrity().unwrap();
    for (who, &score) in scores.iter().step_by(7) {
        let standard = 1 + scores.values().filter(|&&s| s > score).count() as u64;
        assert_eq!(
            board.rank(who, Tie::Standard).unwrap(),
            Some(standard),
            "{who}"
        );
        assert_eq!(board.rank_of_score(score).unwrap(), standard, "{score}");
    }
    assert_eq!(board.len().unwrap(), scores.len() as u64);
}

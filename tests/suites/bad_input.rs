//! Bad input: every case has a defined, typed outcome, writes nothing it
//! should not, and loses nothing the caller still holds.
//!
//! One module per kind of bad input; the row dump that shows "nothing
//! changed" and the entity most of them use are here.

use autoshard::{shard_fold, shard_method, Pending, Shardable};
use rusqlite::types::Value as Sql;
use std::collections::BTreeMap;
use std::path::Path;

use crate::common;
use common::raw;
// The suites written once and run on every store (`nul`).

mod contention;
mod corrupted;
mod floats;
mod missing;
mod names;
mod nul;
mod overflow;
mod panics;
mod schema;

// --- helpers -------------------------------------------------------------

/// Everything stored under one table base: the documents and the shard
/// rows, as text, so "nothing changed" is one comparison.
fn dump(path: &Path, base: &str) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let conn = raw(path);
    let exists = |table: &str| -> bool {
        conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = ?1",
            [table],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
            > 0
    };
    let mut docs = BTreeMap::new();
    let mut shards = BTreeMap::new();
    if exists(&format!("as_entity_{base}")) {
        let mut stmt = conn
            .prepare(&format!("SELECT id, doc FROM as_entity_{base}"))
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            docs.insert(
                format!("{:?}", r.get::<_, Sql>(0).unwrap()),
                r.get(1).unwrap(),
            );
        }
    }
    if exists(&format!("as_shard_{base}")) {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT entity, field, shard, value FROM as_shard_{base}"
            ))
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            shards.insert(
                format!(
                    "{:?}/{}/{}",
                    r.get::<_, Sql>(0).unwrap(),
                    r.get::<_, String>(1).unwrap(),
                    r.get::<_, i64>(2).unwrap()
                ),
                format!("{:?}", r.get::<_, Sql>(3).unwrap()),
            );
        }
    }
    (docs, shards)
}

fn is_empty(dump: &(BTreeMap<String, String>, BTreeMap<String, String>)) -> bool {
    dump.0.is_empty() && dump.1.is_empty()
}

#[derive(Shardable, Debug)]
struct Question {
    #[shard(id)]
    id: u64,
    title: String,
    #[shard(neutral = 0, shards = 4)]
    votes: i64,
    #[shard(neutral = 0)]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    fn new(id: u64) -> Self {
        Question {
            id,
            title: "t".into(),
            votes: 0,
            views: 0,
            pending: Pending::default(),
        }
    }
    #[shard_method]
    fn vote(&mut self) {
        self.votes += 1;
    }
    #[shard_method]
    fn view(&mut self) {
        self.views += 1;
    }
    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
}

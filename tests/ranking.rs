//! The ranking tree on SQLite only: damage done to the rows behind the
//! store's back. Behaviour shared by every store (the oracle property test,
//! the Code Jam and Redis examples, bad input, threads) is in
//! `stores_ranking.rs`.

use autoshard::ranking::{Ranking, RankingConfig};
use autoshard::{Error, Sqlite};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct FileDb {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: Sqlite,
}

fn file_db() -> FileDb {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ranking.db");
    let store = Sqlite::open(&path).unwrap();
    FileDb {
        _dir: dir,
        path,
        store,
    }
}

fn raw(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn
}

fn decode(blob: &[u8]) -> Vec<i64> {
    blob.chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

// ------------------------------------------------------ integrity control

/// check_integrity is not a rubber stamp: each kind of damage done behind
/// the store's back is reported as `Error::Corrupt`.
#[test]
fn check_integrity_catches_corruption() {
    type Damage = fn(&Connection);
    let damages: [(&str, Damage); 6] = [
        ("bumped root count", |c| {
            let (shard, a): (i64, Vec<u8>) = c
                .query_row(
                    "SELECT shard, v FROM autoshard_rank_nodes WHERE part = 0 ORDER BY height DESC LIMIT 1",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            let mut v = decode(&a);
            v[0] += 1;
            let blob: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            c.execute(
                "UPDATE autoshard_rank_nodes SET v = ?1 WHERE part = 0 AND shard = ?2 \
                 AND height = (SELECT max(height) FROM autoshard_rank_nodes)",
                rusqlite::params![blob, shard],
            )
            .unwrap();
        }),
        ("negative shard sum", |c| {
            let blob: Vec<u8> = [-5i64].iter().flat_map(|x| x.to_le_bytes()).collect();
            c.execute(
                "INSERT INTO autoshard_rank_nodes (board, height, idx, part, shard, v) \
                 SELECT board, height, idx, 0, 3, ?1 FROM autoshard_rank_nodes WHERE height = 2 LIMIT 1 \
                 ON CONFLICT DO UPDATE SET v = excluded.v",
                [blob],
            )
            .unwrap();
        }),
        ("player row deleted", |c| {
            c.execute("DELETE FROM autoshard_rank_players WHERE player = 'b'", [])
                .unwrap();
        }),
        ("player moved without the tree", |c| {
            c.execute(
                "UPDATE autoshard_rank_players SET score = 77 WHERE player = 'b'",
                [],
            )
            .unwrap();
        }),
        ("arrival node dropped", |c| {
            c.execute("DELETE FROM autoshard_rank_arrivals WHERE score = 7", [])
                .unwrap();
        }),
        ("truncated blob", |c| {
            c.execute(
                "UPDATE autoshard_rank_nodes SET v = x'0102' WHERE height = 1",
                [],
            )
            .unwrap();
        }),
    ];
    for (what, damage) in damages {
        let db = file_db();
        let board = Ranking::create(
            &db.store,
            "c",
            RankingConfig::new(0..100).branching(4).shards(4),
        )
        .unwrap();
        board
            .set_scores(&[("a", 7), ("b", 7), ("c", 12), ("d", 99), ("e", 0)])
            .unwrap();
        board.check_integrity().unwrap(); // the control: intact before
        damage(&raw(&db.path));
        let err = board.check_integrity().unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    kind: "ranking",
                    ..
                }
            ),
            "{what}: {err}"
        );
    }
}

/// A board row that no `RankingConfig` could have produced is reported as
/// corruption on open, not used.
#[test]
fn open_refuses_a_corrupt_configuration() {
    let db = file_db();
    Ranking::create(&db.store, "cfg", RankingConfig::new(0..100)).unwrap();
    Ranking::open(&db.store, "cfg").unwrap(); // the control
    raw(&db.path)
        .execute("UPDATE autoshard_rank_boards SET branching = 1", [])
        .unwrap();
    let err = Ranking::open(&db.store, "cfg").unwrap_err();
    assert!(
        matches!(
            err,
            Error::Corrupt {
                kind: "ranking",
                ..
            }
        ),
        "{err}"
    );
}

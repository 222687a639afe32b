//! Entity boards on Redis Cluster: refused. A board write there cannot be
//! in the entity's transaction (the board and the entity live in other
//! slots, and a Redis transaction spans one), so a kind with a ranked
//! field gets `Error::Unsupported` from every write, with nothing written.
//!
//! Runs on `AUTOSHARD_REDIS_CLUSTER_URL`, else on a cluster the test run
//! starts by itself (`autoshard-test-servers`).
#![cfg(feature = "redis")]

use autoshard::{shard_method, Error, Pending, RedisCluster, Shardable, Store};

use crate::stores;
use stores::redis_cluster as rc;
use stores::TestStore;

#[derive(Shardable, Debug)]
#[shard(kind = "Voted")]
struct Voted {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 4, fold = autoshard::fold::checked_sum, ranked = "votes")]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Voted {
    #[shard_method]
    fn vote(&mut self) {
        self.votes += 1;
    }
}

/// The same kind without `ranked`, to store an entity the ranked
/// declaration then loads.
#[derive(Shardable, Debug)]
#[shard(kind = "Voted")]
struct Unranked {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 4, fold = autoshard::fold::checked_sum)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

fn unsupported<T: std::fmt::Debug>(result: autoshard::Result<T>) {
    assert!(
        matches!(
            result,
            Err(Error::Unsupported {
                store: "redis-cluster",
                ..
            })
        ),
        "{result:?}"
    );
}

#[test]
fn a_ranked_field_is_refused_with_nothing_written() {
    let db = RedisCluster::fresh();
    let prefix = db.prefix().to_owned();
    unsupported(db.insert(&Voted {
        id: 1,
        votes: 3,
        pending: Pending::default(),
    }));
    assert!(rc::scan(&format!("{prefix}:*")).is_empty());

    db.insert(&Unranked {
        id: 2,
        votes: 3,
        pending: Pending::default(),
    })
    .unwrap();
    let keys = || {
        let mut keys = rc::scan(&format!("{prefix}:*"));
        keys.sort();
        keys
    };
    let stored = keys();
    // Loading reads only: allowed.
    let mut q = db.load::<Voted>(&2).unwrap().unwrap();
    q.vote();
    unsupported(db.save(&mut q));
    unsupported(db.save_delta::<Voted, _>(&2, "votes", &1i64));
    unsupported(db.delete::<Voted>(&2));
    assert_eq!(keys(), stored);
    assert_eq!(db.load::<Unranked>(&2).unwrap().unwrap().votes, 3);
}

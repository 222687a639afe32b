//! The run's Redis Cluster comes up whole: 3 masters, 3 linked replicas,
//! all slots served, and a write through the cluster client is read back.

#[test]
fn the_cluster_serves_every_slot_with_a_replica_per_master() {
    let nodes = autoshard_test_servers::redis_cluster_nodes();
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    let client = redis::cluster::ClusterClient::new(
        nodes
            .iter()
            .map(|n| format!("redis://{n}"))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let mut conn = client.get_connection().unwrap();
    let key = format!("test-servers:{}", std::process::id());
    redis::cmd("SET")
        .arg(&key)
        .arg("v")
        .query::<()>(&mut conn)
        .unwrap();
    let got: String = redis::cmd("GET").arg(&key).query(&mut conn).unwrap();
    redis::cmd("DEL").arg(&key).query::<()>(&mut conn).unwrap();
    assert_eq!(got, "v");

    let mut first = redis::Client::open(format!("redis://{}", nodes[0]))
        .unwrap()
        .get_connection()
        .unwrap();
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut first).unwrap();
    assert!(info.contains("cluster_state:ok"), "{info}");
    assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
    let listing: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut first)
        .unwrap();
    let masters = listing.lines().filter(|l| l.contains("master")).count();
    let replicas = listing.lines().filter(|l| l.contains("slave")).count();
    assert_eq!((masters, replicas), (3, 3), "{listing}");
}

//! Boards and the queue on every store `autoshard::open(url)` gives.

#[cfg(any(feature = "postgres", feature = "redis"))]
use crate::stores;
use autoshard::ranking::{Ranking, RankingConfig, Tie};

/// `autoshard::open(url)` gives boards on any store from configuration.
#[test]
fn boards_through_any_store() {
    #[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(unused_mut))]
    let mut urls = vec!["sqlite::memory:".to_owned()];
    #[cfg(feature = "postgres")]
    let _schema = {
        let schema = stores::pg::new_schema();
        urls.push(format!("{}?schema={schema}", stores::pg::url()));
        stores::pg::DropSchema(schema)
    };
    #[cfg(feature = "redis")]
    let _prefix = {
        let prefix = stores::redis_cluster::new_prefix();
        urls.push(stores::redis_cluster::url(&prefix));
        stores::redis_cluster::DropPrefix(prefix)
    };
    for url in urls {
        let db = autoshard::open(&url).unwrap();
        let board = Ranking::create(&db, "any", RankingConfig::new(0..100)).unwrap();
        board.set_scores(&[("a", 5), ("b", 7)]).unwrap();
        let board = Ranking::open(&db, "any").unwrap();
        assert_eq!(board.rank("a", Tie::Standard).unwrap(), Some(2), "{url}");
        board.check_integrity().unwrap();
    }
}

/// The queue works on every store `open(url)` gives (its behaviour is
/// tested in `stores_ranking_queue/`): enqueued updates are applied by a
/// worker and the queue empties.
#[test]
fn the_queue_through_any_store() {
    #[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(unused_mut))]
    let mut urls = vec!["sqlite::memory:".to_owned()];
    #[cfg(feature = "postgres")]
    let _schema = {
        let schema = stores::pg::new_schema();
        urls.push(format!("{}?schema={schema}", stores::pg::url()));
        stores::pg::DropSchema(schema)
    };
    #[cfg(feature = "redis")]
    let _prefix = {
        let prefix = stores::redis_cluster::new_prefix();
        urls.push(stores::redis_cluster::url(&prefix));
        stores::redis_cluster::DropPrefix(prefix)
    };
    for url in urls {
        let db = autoshard::open(&url).unwrap();
        let board = Ranking::create(&db, "q", RankingConfig::new(0..100).queues(2)).unwrap();
        board.set_score("a", 1).unwrap();
        board.enqueue("b", 5).unwrap();
        board.enqueue_remove("a").unwrap();
        assert_eq!(board.queued().unwrap(), 2, "{url}");
        let stats = board.worker().drain().unwrap();
        assert_eq!(stats.updates, 2, "{url}");
        assert_eq!(board.queued().unwrap(), 0, "{url}");
        assert_eq!(board.score("a").unwrap(), None, "{url}");
        assert_eq!(board.rank("b", Tie::Standard).unwrap(), Some(1), "{url}");
        board.check_integrity().unwrap();
    }
}

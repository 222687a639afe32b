use super::*;
use crate::{shard_fold, shard_method, Pending, Shardable, Sqlite, Store};

#[derive(Shardable, Debug)]
#[shard(kind = "Page")]
struct Page {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0)]
    views: i64,
    #[shard(neutral = 0, shards = 2)]
    likes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Page {
    fn new(id: u64) -> Self {
        Page {
            id,
            views: 0,
            likes: 0,
            pending: Pending::default(),
        }
    }
    #[shard_method]
    fn view(&mut self) {
        self.views += 1;
    }
    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
    #[shard_fold]
    fn fold_likes(a: i64, b: i64) -> i64 {
        a + b
    }
}

/// `pages` entities with `views` dynamic rows each beyond the first.
fn piled_up(pages: u64, views: u64) -> Sqlite {
    let db = Sqlite::memory().unwrap();
    for id in 0..pages {
        db.insert(&Page::new(id)).unwrap();
        let mut page: Page = db.load(&id).unwrap().unwrap();
        for _ in 0..views {
            page.view();
            db.save(&mut page).unwrap();
        }
    }
    db
}

#[test]
fn a_pass_folds_what_compact_would() {
    let db = piled_up(20, 5);
    let stats = db.compactor::<Page>().batch_rows(7).run_once().unwrap();
    assert_eq!(stats.passes, 1);
    assert_eq!(stats.rows_merged, 20 * 5);
    assert_eq!(stats.entities_compacted, 20);
    // 20 × (6 views rows + 2 likes rows) = 160 rows in batches of ~7.
    assert!(stats.batches >= 160 / 8, "{stats:?}");
    assert!(stats.writer_time >= stats.longest_batch);
    for id in 0..20 {
        assert_eq!(db.shard_count::<Page>(&id, "views").unwrap(), 1);
        assert_eq!(db.load::<Page>(&id).unwrap().unwrap().views, 5);
    }
    assert_eq!(db.compact::<Page>().unwrap().rows_merged, 0);
}

#[test]
fn the_pause_keeps_the_share_at_the_cap() {
    let compactor = Sqlite::memory()
        .unwrap()
        .compactor::<Page>()
        .max_writer_share(0.2);
    let held = Duration::from_millis(10);
    let pause = compactor.job.pause_after(held);
    assert_eq!(pause, Duration::from_millis(40));
    let share = held.as_secs_f64() / (held + pause).as_secs_f64();
    assert!((share - 0.2).abs() < 1e-9);
    let full = compactor.max_writer_share(1.0);
    assert_eq!(full.job.pause_after(held), Duration::ZERO);
}

#[test]
#[should_panic(expected = "max_writer_share must be in (0, 1]")]
fn a_share_of_zero_is_refused() {
    let _ = Sqlite::memory()
        .unwrap()
        .compactor::<Page>()
        .max_writer_share(0.0);
}

#[test]
fn a_throttled_pass_holds_the_writer_at_most_its_share() {
    let db = piled_up(40, 20);
    let stats = db
        .compactor::<Page>()
        .batch_rows(50)
        .max_writer_share(0.1)
        .run_once()
        .unwrap();
    assert_eq!(stats.rows_merged, 40 * 20);
    // Paused 9 × what it held, after every batch.
    assert!(stats.throttled >= stats.writer_time * 8, "{stats:?}");
    assert!(stats.writer_share() <= 0.1 + 0.02, "{stats:?}");
}

#[test]
fn spawned_it_keeps_folding_until_stopped() {
    let db = Sqlite::memory().unwrap();
    db.insert(&Page::new(1)).unwrap();
    let handle = db
        .compactor::<Page>()
        .interval(Duration::from_millis(1))
        .max_writer_share(1.0)
        .spawn()
        .unwrap();
    let mut page: Page = db.load(&1).unwrap().unwrap();
    for round in 0..5 {
        for _ in 0..10 {
            page.view();
            db.save(&mut page).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while db.shard_count::<Page>(&1, "views").unwrap() > 1 {
            assert!(Instant::now() < deadline, "round {round} never compacted");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert!(!handle.is_finished());
    let live = handle.stats();
    let stats = handle.stop().unwrap();
    assert_eq!(stats.rows_merged, 50);
    assert!(
        stats.passes >= 5 && stats.passes >= live.passes,
        "{stats:?}"
    );
    assert_eq!(db.load::<Page>(&1).unwrap().unwrap().views, 50);
}

#[test]
fn stop_does_not_wait_for_the_interval() {
    let db = Sqlite::memory().unwrap();
    let handle = db
        .compactor::<Page>()
        .interval(Duration::from_secs(3600))
        .spawn()
        .unwrap();
    while handle.stats().passes == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let asked = Instant::now();
    let stats = handle.stop().unwrap();
    assert!(asked.elapsed() < Duration::from_secs(5));
    assert_eq!(stats.passes, 1);
    // Dropping stops it the same way.
    drop(
        db.compactor::<Page>()
            .interval(Duration::from_secs(3600))
            .spawn(),
    );
}

#[test]
fn an_error_stops_it_and_stop_returns_it() {
    let db = piled_up(1, 2);
    db.with_conn(|conn| Ok(conn.execute_batch("DROP TABLE as_shard_page")?))
        .unwrap();
    let handle = db
        .compactor::<Page>()
        .interval(Duration::from_millis(1))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !handle.is_finished() {
        assert!(Instant::now() < deadline, "the compactor never failed");
        std::thread::sleep(Duration::from_millis(1));
    }
    let err = handle.stop().unwrap_err();
    assert!(matches!(err, crate::Error::Sqlite(_)), "{err:?}");
}

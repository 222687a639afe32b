//! The four background jobs share one lifecycle (`autoshard::Job`, issue 20
//! item 6): `spawn` returns a handle whose `stats()` is live while the job
//! runs, `stop()` returns the same counters once it ended, `join()` waits
//! for a job that ends by itself and returns its error, and the trait
//! calls agree with the inherent ones. One generic function checks all
//! four, so a job whose handle lacks a call does not compile here.

use autoshard::ranking::{FamilyConfig, Ranking, RankingConfig, Window};
use autoshard::{shard_fold, shard_method, Error, Job, Pending, Shardable, Sqlite, Store};
use std::time::{Duration, Instant};

#[derive(Shardable, Debug)]
struct Page {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0)]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Page {
    #[shard_method]
    fn view(&mut self) {
        self.views += 1;
    }
    #[shard_fold]
    fn fold_views(a: i64, b: i64) -> i64 {
        a + b
    }
}

/// Waits until `done(stats)` holds for the running job's live stats, then
/// stops it through the trait and checks that what `stop` returns still
/// satisfies `done`: the counters a supervisor watched are the ones it
/// gets at the end.
fn live_then_stopped<J: Job>(job: J, what: &str, done: impl Fn(&J::Stats) -> bool) -> J::Stats {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(&job.stats()) {
        assert!(
            !job.is_finished(),
            "{what} ended by itself: {:?}",
            job.stats()
        );
        assert!(Instant::now() < deadline, "{what}: {:?}", job.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats = Job::stop(job).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(done(&stats), "{what} stopped with {stats:?}");
    stats
}

#[test]
fn every_job_reports_live_stats_and_stops_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Sqlite::open(dir.path().join("jobs.db")).unwrap();

    db.insert(&Page {
        id: 1,
        views: 0,
        pending: Pending::default(),
    })
    .unwrap();
    let mut page: Page = db.load(&1).unwrap().unwrap();
    for _ in 0..20 {
        page.view();
        db.save(&mut page).unwrap();
    }
    let compactor = db
        .compactor::<Page>()
        .interval(Duration::from_millis(5))
        .spawn()
        .unwrap();
    live_then_stopped(compactor, "compactor", |s| s.rows_merged >= 20);

    let board = Ranking::create(&db, "season", RankingConfig::new(0..1_000)).unwrap();
    let worker = board.worker().spawn().unwrap();
    for (i, p) in ["ann", "bo", "cy"].into_iter().enumerate() {
        board.enqueue(p, i as i64).unwrap();
    }
    live_then_stopped(worker, "queue worker", |s| s.updates == 3);
    assert_eq!(board.len().unwrap(), 3);

    let family = autoshard::ranking::Family::create(
        &db,
        "weekly",
        FamilyConfig::new(RankingConfig::new(0..1_000)).window(Window::Week),
    )
    .unwrap();
    let family_worker = family.worker().spawn().unwrap();
    family.submission("ann", 5).enqueue().unwrap();
    family.submission("bo", 7).enqueue().unwrap();
    live_then_stopped(family_worker, "family worker", |s| s.submissions == 2);

    let approx =
        Ranking::create(&db, "global", RankingConfig::new(0..1_000).approximate(10)).unwrap();
    approx.set_scores(&[("ann", 1), ("bo", 2)]).unwrap();
    let refresher = approx.refresher(Duration::from_millis(5)).spawn().unwrap();
    live_then_stopped(refresher, "refresher", |s| s.published >= 2);
}

/// `join` returns the error that ended a job by itself, and `is_finished`
/// saw it end: a queue worker whose board was deleted. The control is
/// `stop` on a healthy worker, which returns `Ok` (above).
#[test]
fn join_returns_the_error_that_ended_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let db = Sqlite::open(dir.path().join("jobs.db")).unwrap();
    let board = Ranking::create(&db, "gone", RankingConfig::new(0..10)).unwrap();
    let worker = board
        .worker()
        .idle_timeout(Duration::from_millis(5))
        .spawn()
        .unwrap();
    board.enqueue("ann", 1).unwrap();
    board.flush().unwrap();
    assert!(!worker.is_finished());
    assert!(Ranking::delete(&db, "gone").unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !worker.is_finished() {
        assert!(Instant::now() < deadline, "the worker outlived its board");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(worker.stats().updates, 1);
    match Job::join(worker) {
        Err(Error::RankingNotFound { name }) => assert_eq!(name, "gone"),
        other => panic!("expected RankingNotFound, got {other:?}"),
    }
}

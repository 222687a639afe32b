//! The async API (feature `tokio`, issue 19 item 1) on every store and
//! both runtime flavors: the same script run through `AsyncStore` /
//! `AsyncRanking` / `AsyncFamily` and through the sync API gives the same
//! transcript, while a probe task checks that no runtime worker was
//! blocked (its wake-up gap stays under 50 ms); the probe's control shows
//! it catching sync store calls made on the runtime's thread. Dropped save
//! futures neither lose nor double a delta.
#![cfg(feature = "tokio")]

use autoshard::ranking::{Family, FamilyConfig, Period, Ranking, RankingConfig, Tie, Window};
use autoshard::{
    AnyStore, AsyncFamily, AsyncRanking, AsyncStore, Error, Pending, Shardable, Store,
};
use std::time::{Duration, Instant};

#[derive(Shardable, Debug)]
struct Question {
    #[shard(id)]
    id: u64,
    title: String,
    #[shard(neutral = 0, shards = 4, fold = autoshard::fold::checked_sum)]
    votes: i64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum)]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Question {
    fn new(id: u64, title: &str) -> Self {
        Question {
            id,
            title: title.into(),
            votes: 0,
            views: 0,
            pending: Pending::default(),
        }
    }

    #[autoshard::shard_method]
    fn vote(&mut self) {
        self.votes += 1;
    }

    #[autoshard::shard_method]
    fn view(&mut self) {
        self.views += 1;
    }
}

use crate::probe;
use probe::{Lateness, Probe, BLOCKED};

/// Store URLs, one fresh namespace per call.
mod urls {
    use crate::scratch::{self, Scratch};

    pub fn sqlite() -> (Scratch, String) {
        scratch::sqlite()
    }

    pub fn postgres() -> (Scratch, String) {
        scratch::postgres("async")
    }

    pub fn redis() -> (Scratch, String) {
        scratch::redis("async")
    }
}

/// What each call returned, rendered: the transcript two runs compare.
type Transcript = Vec<String>;

fn note<T: std::fmt::Debug>(t: &mut Transcript, what: &str, r: autoshard::Result<T>) {
    t.push(format!("{what}: {:?}", r.map_err(|e| e.to_string())));
}

/// The script through the async API.
async fn async_script(db: &AsyncStore) -> Transcript {
    let mut t = Transcript::new();
    note(
        &mut t,
        "insert",
        db.insert(&Question::new(1, "first")).await,
    );
    note(
        &mut t,
        "insert again",
        db.insert(&Question::new(1, "again")).await,
    );
    let mut q: Question = db.load(&1).await.unwrap().unwrap();
    q.vote();
    q.vote();
    q.view();
    q.title = "edited".into();
    note(
        &mut t,
        "save",
        db.save(&mut q).await.map(|s| s.shard_writes),
    );
    note(
        &mut t,
        "save nothing",
        db.save(&mut q).await.map(|s| s.attempts),
    );
    note(
        &mut t,
        "save_delta",
        db.save_delta::<Question, _>(&1, "votes", &40)
            .await
            .map(|s| s.shard_writes),
    );
    note(
        &mut t,
        "save_delta bad field",
        db.save_delta::<Question, _>(&1, "nope", &1).await,
    );
    note(
        &mut t,
        "save_delta bad value",
        db.save_delta::<Question, _>(&1, "votes", &"x").await,
    );
    let q: Question = db.load(&1).await.unwrap().unwrap();
    t.push(format!("loaded: {} {} {}", q.title, q.votes, q.views));
    note(
        &mut t,
        "load missing",
        db.load::<Question>(&9).await.map(|q| q.is_some()),
    );
    db.insert(&Question::new(2, "second")).await.unwrap();
    let top = db
        .query::<Question>()
        .order_by(|q| q.votes.desc())
        .limit(5)
        .run()
        .await;
    note(
        &mut t,
        "query",
        top.map(|v| v.iter().map(|q| (q.id, q.votes)).collect::<Vec<_>>()),
    );
    // What a pass merges depends on the store (Redis Cluster folds within
    // a slot's bucket, picked at random); the totals after it do not.
    note(&mut t, "compact", db.compact::<Question>().await.map(drop));
    let q: Question = db.load(&1).await.unwrap().unwrap();
    t.push(format!("compacted: {} {}", q.votes, q.views));
    note(
        &mut t,
        "stats",
        db.stats::<Question>().await.map(|s| s.entities),
    );
    note(&mut t, "delete", db.delete::<Question>(&2).await);
    note(&mut t, "delete again", db.delete::<Question>(&2).await);

    let config = RankingConfig::new(0..1_000).branching(10);
    let board = AsyncRanking::create(db, "async-board", config.clone())
        .await
        .unwrap();
    note(
        &mut t,
        "create again",
        AsyncRanking::create(db, "async-board", config)
            .await
            .map(|_| ()),
    );
    note(&mut t, "submit", board.submit("alice", 30).await);
    note(&mut t, "set_score", board.set_score("bob", 40).await);
    note(
        &mut t,
        "set_scores",
        board.set_scores(&[("carol", 30), ("dave", 12)]).await,
    );
    note(&mut t, "out of range", board.submit("eve", 5_000).await);
    note(&mut t, "enqueue", board.enqueue("frank", 7).await);
    note(&mut t, "queued", board.queued().await);
    let board = AsyncRanking::open(db, "async-board").await.unwrap();
    note(&mut t, "rank", board.rank("carol", Tie::Ordinal).await);
    note(&mut t, "rank_of_score", board.rank_of_score(30).await);
    note(&mut t, "score", board.score("bob").await);
    note(&mut t, "top", board.top(2).await);
    note(&mut t, "page", board.page(2, 3).await);
    note(&mut t, "around", board.around("alice", 1).await);
    note(&mut t, "among", board.among(&["dave", "bob", "zed"]).await);
    note(&mut t, "remove", board.remove("dave").await);
    note(&mut t, "len", board.len().await);

    let family = FamilyConfig::new(RankingConfig::new(0..1_000))
        .window(Window::AllTime)
        .filter("country", ["fr", "de"]);
    let family = AsyncFamily::create(db, "async-family", family)
        .await
        .expect("a family");
    let at = 1_795_516_200;
    let done = family
        .submission("ann", 120)
        .filter("country", "fr")
        .at(at)
        .submit()
        .await;
    note(&mut t, "family submit", done.map(|d| d.members.len()));
    let bad = family
        .submission("bo", 90)
        .filter("country", "xx")
        .at(at)
        .submit()
        .await;
    note(&mut t, "family bad filter", bad.map(|d| d.members.len()));
    let fr = family
        .board(Window::AllTime, Period::At(at), Some(("country", "fr")))
        .await;
    let fr = fr.unwrap().unwrap();
    note(&mut t, "family top", fr.top(5).await);
    t
}

/// The same script through the sync API.
fn sync_script(db: &AnyStore) -> Transcript {
    let mut t = Transcript::new();
    note(&mut t, "insert", db.insert(&Question::new(1, "first")));
    note(
        &mut t,
        "insert again",
        db.insert(&Question::new(1, "again")),
    );
    let mut q: Question = db.load(&1).unwrap().unwrap();
    q.vote();
    q.vote();
    q.view();
    q.title = "edited".into();
    note(&mut t, "save", db.save(&mut q).map(|s| s.shard_writes));
    note(&mut t, "save nothing", db.save(&mut q).map(|s| s.attempts));
    note(
        &mut t,
        "save_delta",
        db.save_delta::<Question, _>(&1, "votes", &40)
            .map(|s| s.shard_writes),
    );
    note(
        &mut t,
        "save_delta bad field",
        db.save_delta::<Question, _>(&1, "nope", &1),
    );
    note(
        &mut t,
        "save_delta bad value",
        db.save_delta::<Question, _>(&1, "votes", &"x"),
    );
    let q: Question = db.load(&1).unwrap().unwrap();
    t.push(format!("loaded: {} {} {}", q.title, q.votes, q.views));
    note(
        &mut t,
        "load missing",
        db.load::<Question>(&9).map(|q| q.is_some()),
    );
    db.insert(&Question::new(2, "second")).unwrap();
    let top = db
        .query::<Question>()
        .order_by(|q| q.votes.desc())
        .limit(5)
        .run();
    note(
        &mut t,
        "query",
        top.map(|v| v.iter().map(|q| (q.id, q.votes)).collect::<Vec<_>>()),
    );
    note(&mut t, "compact", db.compact::<Question>().map(drop));
    let q: Question = db.load(&1).unwrap().unwrap();
    t.push(format!("compacted: {} {}", q.votes, q.views));
    note(&mut t, "stats", db.stats::<Question>().map(|s| s.entities));
    note(&mut t, "delete", db.delete::<Question>(&2));
    note(&mut t, "delete again", db.delete::<Question>(&2));

    let config = RankingConfig::new(0..1_000).branching(10);
    let board = Ranking::create(db, "async-board", config.clone()).unwrap();
    note(
        &mut t,
        "create again",
        Ranking::create(db, "async-board", config).map(|_| ()),
    );
    note(&mut t, "submit", board.submit("alice", 30));
    note(&mut t, "set_score", board.set_score("bob", 40));
    note(
        &mut t,
        "set_scores",
        board.set_scores(&[("carol", 30), ("dave", 12)]),
    );
    note(&mut t, "out of range", board.submit("eve", 5_000));
    note(&mut t, "enqueue", board.enqueue("frank", 7));
    note(&mut t, "queued", board.queued());
    let board = Ranking::open(db, "async-board").unwrap();
    note(&mut t, "rank", board.rank("carol", Tie::Ordinal));
    note(&mut t, "rank_of_score", board.rank_of_score(30));
    note(&mut t, "score", board.score("bob"));
    note(&mut t, "top", board.top(2));
    note(&mut t, "page", board.page(2, 3));
    note(&mut t, "around", board.around("alice", 1));
    note(&mut t, "among", board.among(&["dave", "bob", "zed"]));
    note(&mut t, "remove", board.remove("dave"));
    note(&mut t, "len", board.len());

    let family = FamilyConfig::new(RankingConfig::new(0..1_000))
        .window(Window::AllTime)
        .filter("country", ["fr", "de"]);
    let family = Family::create(db, "async-family", family).expect("a family");
    let at = 1_795_516_200;
    let done = family
        .submission("ann", 120)
        .filter("country", "fr")
        .at(at)
        .submit();
    note(&mut t, "family submit", done.map(|d| d.members.len()));
    let bad = family
        .submission("bo", 90)
        .filter("country", "xx")
        .at(at)
        .submit();
    note(&mut t, "family bad filter", bad.map(|d| d.members.len()));
    let fr = family.board(Window::AllTime, Period::At(at), Some(("country", "fr")));
    note(&mut t, "family top", fr.unwrap().unwrap().top(5));
    t
}

/// Concurrent async votes on one hot question, with the probe running:
/// every vote counted, no worker blocked.
async fn hot_votes(db: &AsyncStore) -> Lateness {
    db.insert(&Question::new(7, "hot")).await.unwrap();
    let probe = Probe::start();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let mut q: Question = db.load(&7).await.unwrap().unwrap();
                q.vote();
                db.save(&mut q).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let worst = probe.finish().await;
    let q: Question = db.load(&7).await.unwrap().unwrap();
    assert_eq!(q.votes, 8 * 25, "every vote counted once");
    worst
}

async fn suite(url: fn() -> (crate::scratch::Scratch, String)) {
    probe::assert_unblocked("the async API", || attempt(url)).await;
}

/// One run of the script and the hot votes on fresh namespaces; the worse
/// of its two probes.
async fn attempt(url: fn() -> (crate::scratch::Scratch, String)) -> Lateness {
    let (_dir, a) = url();
    let (_dir2, b) = url();
    let db = autoshard::open_async(&a).await.unwrap();
    let probe = Probe::start();
    let async_run = async_script(&db).await;
    let worst = probe.finish().await;
    let sync_run = tokio::task::spawn_blocking(move || sync_script(&autoshard::open(&b).unwrap()))
        .await
        .unwrap();
    assert_eq!(async_run, sync_run, "the async API answers as the sync one");
    worst.worse(hot_votes(&db).await)
}

macro_rules! flavors {
    ($($store:ident),*) => {$(
        mod $store {
            #[tokio::test(flavor = "current_thread")]
            async fn current_thread() {
                super::suite(super::urls::$store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn multi_thread() {
                super::suite(super::urls::$store).await;
            }
        }
    )*};
}

flavors!(sqlite, postgres, redis);

/// The probe's control: sync SQLite calls made on a current-thread
/// runtime's only thread hold the probe's wake-up back by as long as they
/// run, which the check above would refuse.
#[tokio::test(flavor = "current_thread")]
async fn probe_control_sync_calls_on_the_runtime_thread_are_caught() {
    let worst = sync_calls_on_the_runtime_thread().await;
    assert!(worst.blocked(), "the probe missed sync calls: {worst:?}");
}

/// The control of the second measurement: a worker blocked on every
/// attempt fails the check.
#[tokio::test(flavor = "current_thread")]
#[should_panic(expected = "a runtime worker was blocked, twice")]
async fn probe_control_a_worker_blocked_twice_fails_the_check() {
    probe::assert_unblocked("the control", sync_calls_on_the_runtime_thread).await;
}

async fn sync_calls_on_the_runtime_thread() -> Lateness {
    let (_dir, url) = urls::sqlite();
    let db = autoshard::open(&url).unwrap();
    db.insert(&Question::new(1, "blocked")).unwrap();
    let probe = Probe::start();
    tokio::task::yield_now().await; // the probe is asleep now
    let started = Instant::now();
    for _ in 0..10_000 {
        let mut q: Question = db.load(&1).unwrap().unwrap();
        q.vote();
        db.save(&mut q).unwrap();
        if started.elapsed() > 10 * BLOCKED {
            break;
        }
    }
    probe.finish().await
}

/// `compact_with` reports each committed batch, off the runtime's thread,
/// and its last report is the returned total: 12 entities with 3 pending
/// rows each, 8 rows read per entity, so each fills a batch of 5 rows
/// alone: 12 reports.
#[tokio::test(flavor = "current_thread")]
async fn compact_with_reports_every_batch_from_a_store_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = autoshard::Sqlite::builder(dir.path().join("c.db"))
        .compaction_batch_rows(5)
        .open()
        .unwrap();
    let db = AsyncStore::new(store.into(), 2).unwrap();
    for id in 1..=12 {
        db.insert(&Question::new(id, "q")).await.unwrap();
        for _ in 0..3 {
            let mut q: Question = db.load(&id).await.unwrap().unwrap();
            q.view();
            db.save(&mut q).await.unwrap();
        }
    }
    let runtime_thread = std::thread::current().id();
    let (sent, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let total = db
        .compact_with::<Question>(move |so_far| {
            let report = (so_far.clone(), std::thread::current().id());
            sent.send(report).unwrap();
        })
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(report) = reports.recv().await {
        seen.push(report);
    }
    assert_eq!(
        (total.entities_compacted, total.rows_merged),
        (12, 36),
        "{total:?}"
    );
    assert_eq!(seen.len(), 12, "{seen:?}");
    assert_eq!(seen.last().map(|(s, _)| s), Some(&total));
    for (i, (so_far, thread)) in seen.iter().enumerate() {
        assert_eq!(so_far.batches, i as u64 + 1);
        assert_ne!(
            *thread, runtime_thread,
            "progress ran on the runtime's thread"
        );
    }
    for id in 1..=12 {
        let q: Question = db.load(&id).await.unwrap().unwrap();
        assert_eq!(q.views, 3);
    }
}

/// A save whose future is dropped after its write was sent: the write
/// lands (or not) once, and the object's next save knows which. A held
/// write lock makes both outcomes deterministic.
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_save_is_never_lost_nor_counted_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drop.db");
    let store = autoshard::Sqlite::builder(&path)
        .busy_timeout(Duration::from_millis(300))
        .max_attempts(1)
        .open()
        .unwrap();
    let db = AsyncStore::new(store.into(), 2).unwrap();
    db.insert(&Question::new(1, "q")).await.unwrap();
    let lock = rusqlite::Connection::open(&path).unwrap();

    for lands in [true, false] {
        let before = db.load::<Question>(&1).await.unwrap().unwrap().votes;
        let mut q: Question = db.load(&1).await.unwrap().unwrap();
        q.vote();
        lock.execute_batch("BEGIN IMMEDIATE").unwrap();
        {
            // Sent, then dropped while the write waits for the lock.
            let save = db.save(&mut q);
            let cut = tokio::time::timeout(Duration::from_millis(20), save).await;
            assert!(cut.is_err(), "the save could not have committed yet");
        }
        if lands {
            lock.execute_batch("COMMIT").unwrap(); // the write goes through
        } else {
            tokio::time::sleep(Duration::from_millis(600)).await; // it gives up
            lock.execute_batch("COMMIT").unwrap();
        }
        // Wait (bounded) for the landing write to show.
        for _ in 0..200 {
            let stored = db.load::<Question>(&1).await.unwrap().unwrap().votes;
            if stored == before + 1 || !lands {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(q.votes, before + 1, "the object still shows its vote");
        match db.save(&mut q).await {
            Err(Error::StaleCopy { .. }) => assert!(lands, "refused, yet the write failed"),
            Ok(saved) => {
                assert!(!lands, "saved again after the write landed");
                assert_eq!(saved.shard_writes, 1, "the kept delta is written");
            }
            Err(e) => panic!("unexpected {e}"),
        }
        let now = db.load::<Question>(&1).await.unwrap().unwrap().votes;
        assert_eq!(now, before + 1, "one vote, stored once (lands: {lands})");
    }
}

/// Every async call's future is `Send`, so it can be `tokio::spawn`ed
/// (axum handlers need it): a compile-time check.
#[allow(dead_code)]
fn futures_are_send(db: AsyncStore, board: AsyncRanking, family: AsyncFamily, mut q: Question) {
    fn send<T: Send>(_: T) {}
    send(db.insert(&Question::new(1, "x")));
    send(db.save(&mut q));
    send(db.load::<Question>(&1));
    send(db.save_delta::<Question, _>(&1, "votes", &1));
    send(db.delete::<Question>(&1));
    send(db.compact::<Question>());
    send(db.stats::<Question>());
    send(db.query::<Question>().limit(1).run());
    send(AsyncRanking::open(&db, "b"));
    send(board.submit("a", 1));
    send(board.set_scores(&[("a", 1)]));
    send(board.among(&["a"]));
    send(board.spawn_worker(board.worker()));
    send(AsyncFamily::open(&db, "f"));
    send(family.submission("a", 1).filter("k", "v").submit());
    send(family.board(Window::AllTime, Period::Current, None));
    send(db.spawn_compactor(db.compactor::<Question>()).stop());
}

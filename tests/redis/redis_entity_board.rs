//! Entity boards on Redis Cluster: a save's board writes are owed by its
//! pieces (an intent in each piece's slot, written by the piece's own
//! script) and paid after them under operation ids reserved for them; a
//! writer that stops in between leaves them owed, and the kind's next
//! compaction pass pays them exactly once (`stores/redis/ranked.rs`).
//!
//! The suite `stores_entity_board` runs here too; these tests cover what a
//! single-transaction store never sees:
//! - writes left owed (a writer killed after its pieces) are paid by the
//!   next compaction, once, for a save, a `save_delta`, an insert and a
//!   delete, with a string id that holds the intent format's separators;
//! - writes paid but still recorded (killed before the clear) are not paid
//!   again. Control: a recovery without operation ids pays them twice.
//!
//! Kills of a real child process: `tests/crash/entity_board_crash.rs`.
//! Runs on `AUTOSHARD_REDIS_CLUSTER_URL`, else on a cluster the test run
//! starts by itself (`autoshard-test-servers`).
#![cfg(feature = "redis")]

use autoshard::__private::redis_hooks;
use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{shard_method, Pending, RedisCluster, Shardable, Store};

use crate::stores;
use stores::redis_cluster as rc;
use stores::{Options, TestStore};

#[derive(Shardable, Debug)]
#[shard(kind = "Voted")]
struct Voted {
    #[shard(id)]
    id: String,
    #[shard(neutral = 0, shards = 4, fold = autoshard::fold::checked_sum, ranked = "votes")]
    votes: i64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum, ranked = "views")]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Voted {
    fn new(id: &str, votes: i64) -> Self {
        Voted {
            id: id.to_owned(),
            votes,
            views: 0,
            pending: Pending::new(),
        }
    }

    #[shard_method]
    fn vote(&mut self, by: i64) {
        self.votes += by;
        self.views += 1;
    }
}

/// Ids with the intent format's separators (space, colon) in them.
const IDS: [&str; 3] = ["a b:1", "2:-", "c"];

fn boards(db: &RedisCluster) -> (Ranking, Ranking) {
    let config = RankingConfig::new(-1_000..1_000).policy(Policy::Increment);
    (
        Ranking::create(db, "votes", config.clone()).unwrap(),
        Ranking::create(db, "views", config).unwrap(),
    )
}

/// A board's entries, `(player, score)`, sorted.
type Entries = Vec<(String, i64)>;

fn entries(board: &Ranking) -> Entries {
    let mut all: Vec<_> = board
        .top(100)
        .unwrap()
        .into_iter()
        .map(|e| (e.player, e.score))
        .collect();
    all.sort();
    all
}

/// What the boards must hold: each stored entity's totals.
fn totals(db: &RedisCluster) -> (Entries, Entries) {
    let (mut votes, mut views) = (Vec::new(), Vec::new());
    for id in IDS {
        if let Some(q) = db.load::<Voted>(&id.to_owned()).unwrap() {
            votes.push((id.to_owned(), q.votes));
            views.push((id.to_owned(), q.views));
        }
    }
    votes.sort();
    views.sort();
    (votes, views)
}

fn intents(prefix: &str) -> usize {
    rc::scan(&format!("{prefix}:*:voted:i")).len()
}

/// Inserts, saves (static and dynamic rows), a `save_delta` and a delete,
/// each with its board writes left owed.
fn write_all_owed(db: &RedisCluster) {
    db.insert(&Voted::new(IDS[2], 9)).unwrap();
    redis_hooks::leave_board_writes_owed(true);
    db.insert(&Voted::new(IDS[0], 3)).unwrap();
    db.insert(&Voted::new(IDS[1], 0)).unwrap();
    let mut q = db.load::<Voted>(&IDS[0].to_owned()).unwrap().unwrap();
    q.vote(2);
    q.vote(5);
    db.save(&mut q).unwrap();
    db.save_delta::<Voted, _>(&IDS[1].to_owned(), "votes", &-4i64)
        .unwrap();
    assert!(db.delete::<Voted>(&IDS[2].to_owned()).unwrap());
    redis_hooks::leave_board_writes_owed(false);
}

#[test]
fn owed_board_writes_are_paid_by_the_next_compaction_exactly_once() {
    let fresh = RedisCluster::fresh();
    let db = &fresh.store;
    let (votes, views) = boards(db);
    write_all_owed(db);
    let (want_votes, want_views) = totals(db);
    assert_eq!(
        want_votes,
        [("2:-".to_owned(), -4), ("a b:1".to_owned(), 10)]
    );
    // Owed: the boards still show the state before these writes.
    assert_eq!(entries(&votes), [("c".to_owned(), 9)]);
    assert!(intents(db.prefix()) > 0);

    db.compact::<Voted>().unwrap();
    assert_eq!(entries(&votes), want_votes);
    assert_eq!(entries(&views), want_views);
    assert_eq!(intents(db.prefix()), 0);
    // Paid once: another pass, and writes after it, count once.
    db.compact::<Voted>().unwrap();
    db.save_delta::<Voted, _>(&IDS[0].to_owned(), "votes", &1i64)
        .unwrap();
    let (want_votes, _) = totals(db);
    assert_eq!(entries(&votes), want_votes);
    votes.check_integrity().unwrap();
    views.check_integrity().unwrap();
}

/// Writes whose board writes were applied but whose intents were kept,
/// as a writer killed before clearing them leaves them.
fn paid_but_recorded() -> (stores::Fresh<RedisCluster>, Ranking, Ranking) {
    let fresh = RedisCluster::fresh();
    let (votes, views) = boards(&fresh.store);
    redis_hooks::keep_paid_intents(true);
    fresh.store.insert(&Voted::new(IDS[0], 3)).unwrap();
    let mut q = fresh
        .store
        .load::<Voted>(&IDS[0].to_owned())
        .unwrap()
        .unwrap();
    q.vote(2);
    fresh.store.save(&mut q).unwrap();
    redis_hooks::keep_paid_intents(false);
    assert_eq!(entries(&votes), [(IDS[0].to_owned(), 5)]);
    assert!(intents(fresh.store.prefix()) > 0);
    (fresh, votes, views)
}

/// A writer killed after its board writes but before it cleared their
/// intents: the recovery finds each applied (its operation id's mark) and
/// only clears it. Control: a handle without operation ids pays them again.
#[test]
fn paid_writes_still_recorded_are_not_paid_again() {
    let (fresh, votes, views) = paid_but_recorded();
    let db = &fresh.store;
    let (want_votes, want_views) = totals(db);
    db.compact::<Voted>().unwrap();
    assert_eq!(entries(&votes), want_votes);
    assert_eq!(entries(&views), want_views);
    assert_eq!(intents(db.prefix()), 0);

    let (fresh, votes, _) = paid_but_recorded();
    let blind = rc::builder(fresh.store.prefix(), &Options::default())
        .exactly_once(false)
        .open()
        .unwrap();
    blind.compact::<Voted>().unwrap();
    assert_eq!(
        entries(&votes),
        [(IDS[0].to_owned(), 10)],
        "the control counts each write twice"
    );
}

/// The concurrent suite's check, on a board whose writes are owed while
/// other writers pay theirs: compaction running beside the writers pays
/// the owed ones once.
#[test]
fn owed_writes_beside_paying_writers_end_exact() {
    let fresh = RedisCluster::fresh_with(Options::default());
    let db = &fresh.store;
    let (votes, _views) = boards(db);
    for id in IDS {
        db.insert(&Voted::new(id, 0)).unwrap();
    }
    std::thread::scope(|s| {
        for owed in [true, false] {
            let db = fresh.open_another();
            s.spawn(move || {
                redis_hooks::leave_board_writes_owed(owed);
                for i in 0..40 {
                    let id = IDS[i % IDS.len()].to_owned();
                    db.save_delta::<Voted, _>(&id, "votes", &1i64).unwrap();
                }
                redis_hooks::leave_board_writes_owed(false);
            });
        }
        let compactor = fresh.open_another();
        s.spawn(move || {
            for _ in 0..5 {
                compactor.compact::<Voted>().unwrap();
            }
        });
    });
    db.compact::<Voted>().unwrap();
    let (want_votes, _) = totals(db);
    assert_eq!(want_votes.iter().map(|(_, v)| v).sum::<i64>(), 80);
    assert_eq!(entries(&votes), want_votes);
}

/// A delete first pays what earlier writes of the entity owe, and an
/// insert what its deleted predecessor owes, so each board sees an
/// entity's writes in their order. Control: with the settling step
/// removed from insert and delete (`settle_entity`), this fails at the
/// first check (the owed `+5` is paid after the removal).
#[test]
fn a_delete_and_an_insert_pay_what_the_entity_owes_first() {
    let fresh = RedisCluster::fresh();
    let db = &fresh.store;
    let (votes, views) = boards(db);
    let c = IDS[2].to_owned();
    let check = |when: &str| {
        db.compact::<Voted>().unwrap();
        let (want_votes, want_views) = totals(db);
        assert_eq!(entries(&votes), want_votes, "{when}");
        assert_eq!(entries(&views), want_views, "{when}");
    };
    db.insert(&Voted::new(&c, 9)).unwrap();
    redis_hooks::leave_board_writes_owed(true);
    db.save_delta::<Voted, _>(&c, "votes", &5i64).unwrap();
    redis_hooks::leave_board_writes_owed(false);
    assert!(db.delete::<Voted>(&c).unwrap());
    check("an owed save, then a delete");

    db.insert(&Voted::new(&c, 2)).unwrap();
    redis_hooks::leave_board_writes_owed(true);
    assert!(db.delete::<Voted>(&c).unwrap());
    redis_hooks::leave_board_writes_owed(false);
    db.insert(&Voted::new(&c, 4)).unwrap();
    assert_eq!(entries(&votes), [(c.clone(), 4)]);
    check("an owed delete, then an insert");
}

/// A ranked write runs its board writes on its own connection: with one
/// pooled connection it completes. Control: before the board reads took
/// the write's connection, this timed out (a second checkout waited for
/// the connection the write itself held).
#[test]
fn a_ranked_write_needs_one_connection() {
    let fresh = RedisCluster::fresh();
    let (votes, _views) = boards(&fresh.store);
    let (done, finished) = std::sync::mpsc::channel();
    // Detached: a write that hangs must fail the test, not hang it.
    let db = fresh.open_with(Options {
        pool_size: Some(1),
        ..Options::default()
    });
    std::thread::spawn(move || {
        db.insert(&Voted::new(IDS[0], 1)).unwrap();
        db.save_delta::<Voted, _>(&IDS[0].to_owned(), "votes", &2i64)
            .unwrap();
        assert!(db.delete::<Voted>(&IDS[1].to_owned()).is_ok());
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the writes complete on one connection");
    assert_eq!(entries(&votes), [(IDS[0].to_owned(), 3)]);
}

/// A handle remembers the ids of the boards its ranked saves wrote; a
/// board deleted and created again under the same name is found anew.
/// This test found a cache that looked again only for a missing board: it
/// kept the deleted `Replace` board's shape and refused the last save.
#[test]
fn a_board_created_again_under_its_name_is_the_one_written() {
    let fresh = RedisCluster::fresh();
    let db = &fresh.store;
    boards(db);
    let id = IDS[0].to_owned();
    db.insert(&Voted::new(&id, 1)).unwrap();
    db.save_delta::<Voted, _>(&id, "votes", &1i64).unwrap();
    Ranking::delete(db, "votes").unwrap();
    // Another policy now: refused, nothing written.
    Ranking::create(db, "votes", RankingConfig::new(-1_000..1_000)).unwrap();
    let err = db.save_delta::<Voted, _>(&id, "votes", &1i64).unwrap_err();
    assert!(
        matches!(err, autoshard::Error::RankingMismatch { .. }),
        "{err}"
    );
    assert_eq!(db.load::<Voted>(&id).unwrap().unwrap().votes, 2);
    Ranking::delete(db, "votes").unwrap();
    let config = RankingConfig::new(-1_000..1_000).policy(Policy::Increment);
    let votes = Ranking::create(db, "votes", config).unwrap();
    db.save_delta::<Voted, _>(&id, "votes", &5i64).unwrap();
    // The new board starts from the delta: entities before it are not on it.
    assert_eq!(entries(&votes), [(id, 5)]);
}

/// A save whose piece lands between a delete's document and its buckets
/// (its object loaded before the delete) owes a board write for an entity
/// that is going away: the delete pays it before its removal, so no entry
/// is left for the deleted entity. Control: without the delete's second
/// settling step this fails (the owed `+5` is paid after the removal and
/// the board keeps `c`).
#[test]
fn a_save_racing_a_delete_leaves_no_entry() {
    let fresh = RedisCluster::fresh();
    let db = &fresh.store;
    let (votes, views) = boards(db);
    let c = IDS[2].to_owned();
    db.insert(&Voted::new(&c, 1)).unwrap();
    let other = fresh.open_another();
    let racing = std::cell::RefCell::new(Some(db.load::<Voted>(&c).unwrap().unwrap()));
    let racing = std::rc::Rc::new(racing);
    let saved = std::rc::Rc::clone(&racing);
    redis_hooks::before_buckets_deleted(Some(Box::new(move || {
        let Some(mut q) = saved.borrow_mut().take() else {
            return;
        };
        q.vote(5);
        redis_hooks::leave_board_writes_owed(true);
        // Its pieces find the buckets still there: applied, board owed.
        let _ = other.save(&mut q);
        redis_hooks::leave_board_writes_owed(false);
    })));
    assert!(db.delete::<Voted>(&c).unwrap());
    redis_hooks::before_buckets_deleted(None);
    assert!(racing.borrow().is_none(), "the hook saved");
    db.compact::<Voted>().unwrap();
    assert_eq!(entries(&votes), []);
    assert_eq!(entries(&views), []);
}

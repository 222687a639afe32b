//! Exactly-once saves on PostgreSQL when the connection breaks around
//! `COMMIT`. The store talks to the server through a loopback proxy
//! (`common/proxy.rs`) that, on every other write transaction, cuts the
//! connection just before `COMMIT` reaches the server, just after the
//! server answered it (the answer is never relayed), or kills the backend
//! with `pg_terminate_backend` before or right after forwarding it. Each
//! save sees at most one fault and is retried by the store.
//!
//! With operation ids (the default) every save returns `Ok` exactly once
//! and the stored total equals the number of saves. The control run turns
//! them off: a commit whose answer was lost is retried blindly, and every
//! "applied but unanswered" commit is counted twice.
#![cfg(feature = "postgres")]

use autoshard::Store;
use autoshard::{shard_fold, shard_method, Concurrency, Error, Pending, Postgres, Shardable};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::proxy;
use crate::stores;
use proxy::{Fault, Proxy};
use stores::pg;

#[derive(Shardable, Debug)]
struct Counter {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 4)]
    votes: i64,
    #[shard(neutral = 0)]
    views: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Counter {
    #[shard_method]
    fn vote(&mut self) {
        self.votes += 1;
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

const SAVES: u64 = 200;

/// What a run observed.
#[derive(Debug)]
struct Run {
    ok: u64,
    errors: Vec<String>,
    /// Saves by `Saved::attempts`.
    attempts: BTreeMap<u32, u64>,
    /// Faults the proxy applied, by kind.
    faults: BTreeMap<Fault, u64>,
    /// The stored totals after the run.
    votes: i64,
    views: i64,
}

/// A fresh schema (dropped with the guard) holding counter 1 at zero, and a
/// direct handle on it.
fn counter_schema() -> (pg::DropSchema, Postgres) {
    let schema = pg::new_schema();
    let guard = pg::DropSchema(schema.clone());
    let direct = pg::builder(&schema, &Default::default()).open().unwrap();
    direct
        .insert(&Counter {
            id: 1,
            votes: 0,
            views: 0,
            pending: Pending::default(),
        })
        .unwrap();
    (guard, direct)
}

/// `SAVES` saves through the proxy; every other write commit gets the next
/// fault of `kinds`, cyclically.
fn run(concurrency: Concurrency, exactly_once: bool, kinds: &'static [Fault]) -> Run {
    let (guard, direct) = counter_schema();
    let schema = &guard.0;

    let armed = Arc::new(AtomicBool::new(false));
    let proxy = {
        let armed = armed.clone();
        let seen = AtomicU64::new(0);
        Proxy::start(proxy::upstream(&pg::url()), &pg::url(), move |_, _| {
            if !armed.load(Ordering::Acquire) {
                return Fault::None;
            }
            let n = seen.fetch_add(1, Ordering::Relaxed);
            match n % 2 {
                0 => kinds[(n / 2) as usize % kinds.len()],
                _ => Fault::None,
            }
        })
    };
    let store = Postgres::builder(&proxy::via(&pg::url(), &proxy))
        .schema(schema)
        .concurrency(concurrency)
        .exactly_once(exactly_once)
        .pool_size(2)
        .open()
        .unwrap();
    let mut counter: Counter = store.load(&1).unwrap().unwrap();
    armed.store(true, Ordering::Release);

    let mut result = Run {
        ok: 0,
        errors: Vec::new(),
        attempts: BTreeMap::new(),
        faults: BTreeMap::new(),
        votes: 0,
        views: 0,
    };
    for _ in 0..SAVES {
        counter.vote();
        match store.save(&mut counter) {
            Ok(saved) => {
                result.ok += 1;
                *result.attempts.entry(saved.attempts).or_default() += 1;
            }
            Err(e) => {
                result.errors.push(format!("{e} ({e:?})"));
                break;
            }
        }
    }
    result.faults = proxy.applied();
    let stored: Counter = direct.load(&1).unwrap().unwrap();
    (result.votes, result.views) = (stored.votes, stored.views);
    result
}

const ALL: &[Fault] = &[
    Fault::DropBefore,
    Fault::DropAfter,
    Fault::TerminateBefore,
    Fault::TerminateAfter,
];

fn count(run: &Run, fault: Fault) -> u64 {
    run.faults.get(&fault).copied().unwrap_or(0)
}

fn check_exactly_once(run: &Run) {
    assert!(run.errors.is_empty(), "{run:#?}");
    assert_eq!(run.ok, SAVES, "{run:#?}");
    assert!(run.faults.values().sum::<u64>() >= 100, "{run:#?}");
    assert!(ALL.iter().all(|f| count(run, *f) > 0), "{run:#?}");
    // The invariant: every save counted once, whatever its commit's fate. A
    // store that treated an unanswered commit as failed would count the
    // `DropAfter` saves twice; one that treated it as done would lose the
    // `DropBefore` and `TerminateBefore` ones.
    assert_eq!(
        (run.votes, run.views),
        (SAVES as i64, SAVES as i64),
        "{run:#?}"
    );
    // A commit that never reached the server was retried (2 attempts); one
    // applied but unanswered was recognised as applied (1 attempt). A
    // backend killed after it answered is found dead by the next save,
    // which then retries on a new connection.
    let never_applied = count(run, Fault::DropBefore) + count(run, Fault::TerminateBefore);
    let racing = count(run, Fault::TerminateAfter);
    let retried: u64 = run.attempts.range(2..).map(|(_, n)| n).sum();
    assert!(
        (never_applied..=never_applied + 2 * racing).contains(&retried),
        "{retried} retried saves for {never_applied} unapplied and {racing} racing faults: {run:#?}"
    );
}

#[test]
fn commits_cut_100_times_count_exactly_once_locking() {
    let started = Instant::now();
    let run = run(Concurrency::Locking, true, ALL);
    check_exactly_once(&run);
    eprintln!("locking: {run:?} in {:.2?}", started.elapsed());
}

#[test]
fn commits_cut_100_times_count_exactly_once_optimistic() {
    let started = Instant::now();
    let run = run(Concurrency::Optimistic, true, ALL);
    check_exactly_once(&run);
    eprintln!("optimistic: {run:?} in {:.2?}", started.elapsed());
}

/// The control: without operation ids the store cannot tell an applied
/// commit from a lost one, retries both, and counts every `DropAfter`
/// twice. This is the bug the operation ids fix, shown live.
#[test]
fn control_without_operation_ids_counts_unanswered_commits_twice() {
    const DETERMINISTIC: &[Fault] = &[Fault::DropBefore, Fault::DropAfter, Fault::TerminateBefore];
    let run = run(Concurrency::Locking, false, DETERMINISTIC);
    assert!(run.errors.is_empty(), "{run:#?}");
    assert_eq!(run.ok, SAVES);
    let doubled = run.faults[&Fault::DropAfter];
    assert!(doubled > 30, "{run:#?}");
    assert_eq!(run.votes, (SAVES + doubled) as i64, "{run:#?}");
    assert_eq!(run.views, (SAVES + doubled) as i64, "{run:#?}");
}

/// The server stays unreachable after a commit whose answer was lost: the
/// store cannot check, says so with a typed error that is not retryable
/// (a blind retry could count twice), and the commit did in fact happen.
#[test]
fn an_unresolvable_commit_is_in_doubt_not_retried() {
    let (guard, direct) = counter_schema();
    let schema = &guard.0;
    let armed = Arc::new(AtomicBool::new(false));
    let proxy = {
        let armed = armed.clone();
        Proxy::start(
            proxy::upstream(&pg::url()),
            &pg::url(),
            move |_, refusing| {
                if armed.swap(false, Ordering::AcqRel) {
                    refusing.store(true, Ordering::Release);
                    Fault::DropAfter
                } else {
                    Fault::None
                }
            },
        )
    };
    let store = Postgres::builder(&proxy::via(&pg::url(), &proxy))
        .schema(schema)
        .in_doubt_timeout(Duration::from_millis(300))
        .open()
        .unwrap();
    let mut counter: Counter = store.load(&1).unwrap().unwrap();
    armed.store(true, Ordering::Release);
    counter.vote();
    let err = store.save(&mut counter).unwrap_err();
    assert!(matches!(err, Error::InDoubt { .. }), "{err:?}");
    assert!(!err.is_retryable());
    let stored: Counter = direct.load(&1).unwrap().unwrap();
    assert_eq!((stored.votes, stored.views), (1, 1), "DropAfter commits");

    // Reachable again: the store works, and a fresh load is the way on.
    proxy.refuse(false);
    let mut counter: Counter = store.load(&1).unwrap().unwrap();
    counter.vote();
    store.save(&mut counter).unwrap();
    assert_eq!(direct.load::<Counter>(&1).unwrap().unwrap().votes, 2);
}

/// `in_doubt_timeout(Duration::MAX)` means "keep trying to find out": a
/// commit whose answer was lost is resolved as usual. Before the fix the
/// save panicked with "overflow when adding duration to instant" (issue 12,
/// item 9); the lock and statement timeouts of the check now saturate at
/// PostgreSQL's largest too.
#[test]
fn an_in_doubt_timeout_of_duration_max_still_resolves_a_lost_commit() {
    let (guard, direct) = counter_schema();
    let armed = Arc::new(AtomicBool::new(false));
    let proxy = {
        let armed = armed.clone();
        Proxy::start(proxy::upstream(&pg::url()), &pg::url(), move |_, _| {
            if armed.swap(false, Ordering::AcqRel) {
                Fault::DropAfter
            } else {
                Fault::None
            }
        })
    };
    let store = Postgres::builder(&proxy::via(&pg::url(), &proxy))
        .schema(&guard.0)
        .in_doubt_timeout(Duration::MAX)
        .open()
        .unwrap();
    let mut counter: Counter = store.load(&1).unwrap().unwrap();
    armed.store(true, Ordering::Release);
    counter.vote();
    let saved = store.save(&mut counter).unwrap();
    assert_eq!(saved.attempts, 1, "the lost commit was found applied");
    assert_eq!(proxy.applied().get(&Fault::DropAfter), Some(&1));
    let stored: Counter = direct.load(&1).unwrap().unwrap();
    assert_eq!((stored.votes, stored.views), (1, 1));
}

/// Connections lost outside COMMIT: reads and writes retry on a new
/// connection; a server that stays away is a typed, retryable error with
/// nothing written, and the kept delta lands once when it is back.
#[test]
fn a_lost_server_is_a_retryable_error_and_nothing_is_lost() {
    let (guard, direct) = counter_schema();
    let schema = &guard.0;
    let proxy = Proxy::start(proxy::upstream(&pg::url()), &pg::url(), |_, _| Fault::None);
    let store = Postgres::builder(&proxy::via(&pg::url(), &proxy))
        .schema(schema)
        .max_attempts(3)
        .open()
        .unwrap();
    let mut counter: Counter = store.load(&1).unwrap().unwrap();

    // Every pooled connection dies; the next calls reconnect by themselves.
    proxy.cut_all();
    counter.vote();
    assert_eq!(store.save(&mut counter).unwrap().shard_writes, 2);
    proxy.cut_all();
    assert_eq!(store.load::<Counter>(&1).unwrap().unwrap().votes, 1);

    proxy.refuse(true);
    proxy.cut_all();
    counter.vote();
    let err = store.save(&mut counter).unwrap_err();
    assert!(
        matches!(err, Error::Unavailable { attempts: 3, .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
    let err = store.load::<Counter>(&1).unwrap_err();
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert_eq!(direct.load::<Counter>(&1).unwrap().unwrap().votes, 1);

    proxy.refuse(false);
    store.save(&mut counter).unwrap();
    let stored: Counter = direct.load(&1).unwrap().unwrap();
    assert_eq!((stored.votes, stored.views), (2, 2));
}

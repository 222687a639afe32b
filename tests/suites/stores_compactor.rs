//! The background compactor (`db.compactor::<T>()`) on every store: several
//! compactors in threads, each on its own handle, folding the same rows
//! while writers keep saving, never fold a row twice or lose a save, and a
//! compactor holds the writer for at most the share of time it was given.
//!
//! The checks are exact. Every save adds its unique op id to the union
//! field `Ledger::ops` and 1 to a counter (`fixed`, static, or `grown`,
//! dynamic), so in every loaded snapshot `fixed + grown == ops.len()`: a
//! row folded twice counts its ops again in the counter while the set
//! absorbs them, and a row lost drops both. At the end the stored ops are
//! exactly the acknowledged ones. `Switch` adds the sharpest case: static
//! saves fold into shards `0..4` while compactors fold appended surplus
//! rows into shard 0, a row that savers write too; folding a surplus row
//! twice, or writing shard 0 from a stale read, changes the total.
//!
//! The control at the end shows the check failing live: two compactors
//! that read the rows to fold outside the transaction that folds them (so
//! both may fold the same rows) are caught within seconds. That it also
//! catches a compactor that is not atomic is shown in `compactor_crash/`.
//!
//! The tests take a lock so they run one after another: each runs a dozen
//! threads, and overlapping them would starve the 2 CI cores.

use autoshard::{CompactorHandle, CompactorStats, Pending, Shardable, Store};
use rand::RngExt;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::common;
use crate::entities;
use crate::ledger;
use crate::stores;
use entities::{DynamicSwitch, Question, StaticSwitch};
use ledger::{op_id, Ledger};
use stores::TestStore;

store_tests!(
    compactors_in_threads_never_double_fold_while_writers_save,
    compactors_folding_surplus_into_a_live_static_shard_keep_the_total,
    the_cap_bounds_the_share_of_time_holding_the_writer,
);

static SERIAL: Mutex<()> = Mutex::new(());

const WRITERS: u64 = 3;
const COMPACTORS: usize = 3;
const ENTITIES: u64 = 16;

/// Saves per writer thread: a SQLite save is a local commit, a PostgreSQL
/// one a few round trips.
fn saves_per_writer<S: TestStore>() -> u64 {
    match S::NAME {
        "sqlite" => 1_500,
        _ => 200,
    }
}

/// Compactors racing as hard as they can: no pause between passes or
/// batches, batches of a couple of entities, so many batches overlap the
/// others' and the writers'.
fn spawn_compactors<S: TestStore, T: Shardable>(db: &stores::Fresh<S>) -> Vec<CompactorHandle> {
    (0..COMPACTORS)
        .map(|_| {
            db.open_another()
                .compactor::<T>()
                .interval(Duration::ZERO)
                .batch_rows(8)
                .max_writer_share(1.0)
                .spawn()
                .unwrap()
        })
        .collect()
}

fn stop_all(compactors: Vec<CompactorHandle>) -> Vec<CompactorStats> {
    compactors
        .into_iter()
        .map(|c| c.stop().expect("a compactor failed"))
        .collect()
}

fn load_ledger<S: Store>(db: &S, id: u64) -> Ledger {
    db.load(&id).expect("load").expect("the ledger exists")
}

/// The invariant of one loaded snapshot.
fn check_ledger(ledger: &Ledger) {
    if let Some(error) = ledger_error(ledger) {
        panic!("{error}");
    }
}

fn ledger_error(ledger: &Ledger) -> Option<String> {
    (ledger.fixed + ledger.grown != ledger.ops.len() as i64).then(|| {
        format!(
            "ledger {}: fixed {} + grown {} != {} distinct ops: a row was folded twice or lost",
            ledger.id,
            ledger.fixed,
            ledger.grown,
            ledger.ops.len()
        )
    })
}

/// Waits until `done` holds, failing after a minute.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what} did not happen in 60 s");
        thread::sleep(Duration::from_millis(10));
    }
}

fn compactors_in_threads_never_double_fold_while_writers_save<S: TestStore>() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let db = S::fresh();
    for id in 0..ENTITIES {
        db.insert(&Ledger::new(id)).unwrap();
    }
    let compactors = spawn_compactors::<S, Ledger>(&db);
    let saves = saves_per_writer::<S>();
    let writing = AtomicBool::new(true);
    let snapshots = AtomicU64::new(0);
    let acked: Vec<BTreeSet<u64>> = thread::scope(|s| {
        // A reader checking the invariant in every snapshot while the
        // compactors fold and the writers save.
        s.spawn(|| {
            let reader = db.open_another();
            while writing.load(Ordering::Relaxed) {
                let id = rand::random_range(0..ENTITIES);
                check_ledger(&load_ledger(&reader, id));
                snapshots.fetch_add(1, Ordering::Relaxed);
            }
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|thread| {
                let handle = db.open_another();
                s.spawn(move || {
                    let mut ledgers: Vec<Ledger> =
                        (0..ENTITIES).map(|id| load_ledger(&handle, id)).collect();
                    let mut acked = BTreeSet::new();
                    for seq in 0..saves {
                        let ledger = &mut ledgers[rand::random_range(0..ENTITIES) as usize];
                        let op = op_id(0, thread, seq);
                        if seq % 3 == 0 {
                            ledger.count_static(op);
                        } else {
                            ledger.count_dynamic(op);
                        }
                        handle.save(ledger).expect("save");
                        acked.insert(op);
                    }
                    acked
                })
            })
            .collect();
        let acked = writers.into_iter().map(|w| w.join().unwrap()).collect();
        writing.store(false, Ordering::Relaxed);
        acked
    });
    eventually("compacting every ledger to one dynamic row", || {
        (0..ENTITIES).all(|id| {
            db.shard_count::<Ledger>(&id, "grown").unwrap() == 1
                && db.shard_count::<Ledger>(&id, "ops").unwrap() == 1
        })
    });
    let stats = stop_all(compactors);

    let mut stored = BTreeSet::new();
    for id in 0..ENTITIES {
        let ledger = load_ledger(&db.store, id);
        check_ledger(&ledger);
        assert!(ledger.ops.is_disjoint(&stored), "an op stored twice");
        stored.extend(ledger.ops);
        assert_eq!(db.shard_count::<Ledger>(&id, "fixed").unwrap(), 8);
    }
    let acked: BTreeSet<u64> = acked.into_iter().flatten().collect();
    assert_eq!(acked.len() as u64, WRITERS * saves);
    assert_eq!(
        stored, acked,
        "the stored ops are not the acknowledged ones"
    );

    let merged: Vec<u64> = stats.iter().map(|s| s.rows_merged).collect();
    // Every save appended an `ops` row, a dynamic one a `grown` row too;
    // each was folded away exactly once, by one of the compactors.
    let appended =
        acked.len() as u64 + acked.iter().filter(|op| (*op & 0xFF_FFFF) % 3 != 0).count() as u64;
    assert_eq!(merged.iter().sum::<u64>(), appended);
    assert!(
        merged.iter().filter(|&&m| m > 0).count() >= 2,
        "the compactors did not race: rows merged {merged:?}"
    );
    eprintln!(
        "{}: {} saves, {} snapshots checked, rows merged per compactor {merged:?}, \
         batches {:?}",
        S::NAME,
        acked.len(),
        snapshots.load(Ordering::Relaxed),
        stats.iter().map(|s| s.batches).collect::<Vec<_>>()
    );
}

fn compactors_folding_surplus_into_a_live_static_shard_keep_the_total<S: TestStore>() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const HOT: u64 = 7;
    let db = S::fresh();
    db.insert(&StaticSwitch {
        id: HOT,
        hits: 0,
        pending: Pending::default(),
    })
    .unwrap();
    let compactors = spawn_compactors::<S, StaticSwitch>(&db);
    let saves = saves_per_writer::<S>();
    let acked: u64 = thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|_| {
                let handle = db.open_another();
                s.spawn(move || {
                    // The same kind seen two ways: saves through
                    // `StaticSwitch` fold into shards 0..4, saves through
                    // `DynamicSwitch` append rows that `StaticSwitch`'s
                    // compaction folds into shard 0.
                    let mut fixed: StaticSwitch = handle.load(&HOT).unwrap().unwrap();
                    let mut grown: DynamicSwitch = handle.load(&HOT).unwrap().unwrap();
                    for seq in 0..saves {
                        if seq % 2 == 0 {
                            fixed.hit();
                            handle.save(&mut fixed).expect("static save");
                        } else {
                            grown.hit();
                            handle.save(&mut grown).expect("dynamic save");
                        }
                    }
                    saves
                })
            })
            .collect();
        writers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    eventually("folding every surplus row", || {
        db.shard_count::<StaticSwitch>(&HOT, "hits").unwrap() <= 4
    });
    let stats = stop_all(compactors);
    let switch: StaticSwitch = db.load(&HOT).unwrap().unwrap();
    assert_eq!(
        switch.hits as u64, acked,
        "a surplus row was folded twice, or a save into shard 0 was lost"
    );
    let merged: u64 = stats.iter().map(|s| s.rows_merged).sum();
    // Every dynamic save appended one row, and each was folded exactly once.
    assert_eq!(merged, acked / 2);
    eprintln!(
        "{}: {acked} saves, rows merged per compactor {:?}",
        S::NAME,
        stats.iter().map(|s| s.rows_merged).collect::<Vec<_>>()
    );
}

/// A backlog of dynamic rows, folded by one pass at several caps: the
/// measured share of time holding the writer stays under each cap, and the
/// rows are all folded.
fn the_cap_bounds_the_share_of_time_holding_the_writer<S: TestStore>() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let db = S::fresh();
    // PostgreSQL pays round trips per save and per batch statement: a
    // smaller backlog, and fewer caps, keep the test short there.
    let (entities, views, caps): (u64, u64, &[f64]) = match S::NAME {
        "sqlite" => (200, 20, &[1.0, 0.5, 0.1]),
        _ => (50, 10, &[1.0, 0.2]),
    };
    for &cap in caps {
        pile_up(&db.store, entities, views);
        let started = Instant::now();
        let stats = db
            .compactor::<Question>()
            .batch_rows(100)
            .max_writer_share(cap)
            .run_once()
            .unwrap();
        let wall = started.elapsed();
        assert_eq!(stats.rows_merged, entities * views);
        assert!(
            stats.writer_share() <= cap + 0.01,
            "cap {cap}: held the writer {:.1}% of the time",
            100.0 * stats.writer_share()
        );
        // The definition, checked against the wall clock: held plus paused
        // is at most the pass's duration.
        assert!(stats.writer_time + stats.throttled <= wall);
        eprintln!(
            "{}: cap {cap}: {} rows in {} batches, {:.0} ms; writer held {:.1}% \
             ({:.1} ms, longest batch {:.2} ms), paused {:.1} ms; {:.0} rows/s",
            S::NAME,
            stats.rows_merged,
            stats.batches,
            wall.as_secs_f64() * 1e3,
            100.0 * stats.writer_share(),
            stats.writer_time.as_secs_f64() * 1e3,
            stats.longest_batch.as_secs_f64() * 1e3,
            stats.throttled.as_secs_f64() * 1e3,
            stats.rows_merged as f64 / wall.as_secs_f64()
        );
    }

    // Spawned, alongside writers, the running share stays under the cap too.
    let compactor = db
        .compactor::<Question>()
        .interval(Duration::from_millis(5))
        .batch_rows(50)
        .max_writer_share(0.2)
        .spawn()
        .unwrap();
    let writing = Instant::now();
    thread::scope(|s| {
        for _ in 0..2 {
            let handle = db.open_another();
            s.spawn(move || {
                while writing.elapsed() < Duration::from_secs(2) {
                    let id = rand::rng().random_range(0..entities);
                    let mut q: Question = handle.load(&id).unwrap().unwrap();
                    q.view();
                    handle.save(&mut q).unwrap();
                }
            });
        }
    });
    let stats = compactor.stop().unwrap();
    assert!(stats.rows_merged > 0, "{stats:?}");
    // Stopped at any moment, the bound is the one at a batch's start plus
    // what the last batch held beyond its share (its pause was cut short).
    let bound =
        0.2 * stats.elapsed.as_secs_f64() + 0.2 * 0.001 + 0.8 * stats.longest_batch.as_secs_f64();
    assert!(stats.writer_time.as_secs_f64() <= bound, "{stats:?}");
    eprintln!(
        "{}: alongside 2 writers for 2 s at cap 0.2: {} passes, {} rows merged, \
         writer held {:.1}%",
        S::NAME,
        stats.passes,
        stats.rows_merged,
        100.0 * stats.writer_share()
    );
}

/// Makes sure entities `0..entities` exist and gives each `views` more
/// dynamic rows.
fn pile_up<S: Store>(db: &S, entities: u64, views: u64) {
    for id in 0..entities {
        let mut q = match db.load::<Question>(&id).unwrap() {
            Some(q) => q,
            None => {
                db.insert(&Question::new(id, 0, 0)).unwrap();
                db.load(&id).unwrap().unwrap()
            }
        };
        for _ in 0..views {
            q.view();
            db.save(&mut q).unwrap();
        }
    }
}

/// Control: the bug the tests above guard against, made on purpose. Two
/// compactors (raw SQL on SQLite) read an entity's `grown` rows in one
/// transaction and add them to the kept row and delete them in a second
/// one, without reading them again: when both read the same rows, both add
/// them. With writers saving alongside, the invariant check catches it.
#[test]
fn sqlite_control_compactors_that_do_not_reread_fold_twice_and_are_caught() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let db = common::db();
    for id in 0..ENTITIES {
        db.store.insert(&Ledger::new(id)).unwrap();
    }
    let done = AtomicBool::new(false);
    let caught = thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut conn = common::raw(&db.path);
                while !done.load(Ordering::Relaxed) {
                    for entity in 0..ENTITIES as i64 {
                        stale_fold(&mut conn, entity);
                    }
                }
            });
        }
        s.spawn(|| {
            let mut ledgers: Vec<Ledger> =
                (0..ENTITIES).map(|id| load_ledger(&db.store, id)).collect();
            let mut seq = 0;
            while !done.load(Ordering::Relaxed) {
                let ledger = &mut ledgers[rand::random_range(0..ENTITIES) as usize];
                ledger.count_dynamic(op_id(0, 0, seq));
                db.store.save(ledger).unwrap();
                seq += 1;
            }
        });
        let started = Instant::now();
        let caught = loop {
            if started.elapsed() > Duration::from_secs(30) {
                break None;
            }
            let id = rand::random_range(0..ENTITIES);
            if let Some(error) = ledger_error(&load_ledger(&db.store, id)) {
                break Some(error);
            }
        };
        done.store(true, Ordering::Relaxed);
        caught
    });
    let message = caught.expect("30 s of racing stale compactors went unnoticed");
    assert!(message.contains("folded twice or lost"), "{message}");
    eprintln!("caught: {message}");
}

/// One stale fold of an entity's `grown` rows: read, then write in another
/// transaction.
fn stale_fold(conn: &mut rusqlite::Connection, entity: i64) {
    let rows: Vec<(i64, i64)> = conn
        .prepare_cached(
            "SELECT shard, value FROM as_shard_ledger \
             WHERE entity = ?1 AND field = 'grown' ORDER BY shard",
        )
        .unwrap()
        .query_map([entity], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let [(kept, _), removed @ ..] = &rows[..] else {
        return;
    };
    if removed.is_empty() {
        return;
    }
    let sum: i64 = removed.iter().map(|(_, v)| v).sum();
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    tx.execute(
        "UPDATE as_shard_ledger SET value = value + ?3 \
         WHERE entity = ?1 AND field = 'grown' AND shard = ?2",
        (entity, kept, sum),
    )
    .unwrap();
    for (shard, _) in removed {
        tx.execute(
            "DELETE FROM as_shard_ledger WHERE entity = ?1 AND field = 'grown' AND shard = ?2",
            (entity, shard),
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

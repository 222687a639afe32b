//! Savers killed mid-loop: static, dynamic, and writers with a compactor.

use super::*;

#[derive(Debug, Default)]
pub(crate) struct SaverStats {
    kills: u64,
    /// Saves acknowledged by all children together.
    acked: u64,
    /// Ops stored but never acknowledged at the end (kills that landed
    /// between a commit and its ack), at most one per writer.
    in_flight_found: u64,
    /// Compaction runs in mixed children that merged rows while writers saved.
    compactions_merging: u64,
}

/// Spawns `kills` children in turn on one database, each killed 5–80 ms
/// after it is ready, and checks (a), (b), (c) after every kill.
pub(crate) fn kill_savers(mode: Mode, kills: u64) -> SaverStats {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let cold = prepare_savers(&path, mode);
    let cold_state = snapshot(&reopen(&path), &cold);
    let mut rng = SmallRng::seed_from_u64(seed());
    let mut book = Book::default();
    let mut stats = SaverStats::default();
    for child in 1..=kills {
        book.open_streams(child, mode.writers());
        let delay = Duration::from_millis(rng.random_range(5..=80));
        let run = spawn(&path, mode, child).kill_after(delay);
        assert!(
            run.killed(),
            "child {child} ended by itself: {:?}",
            run.status
        );
        stats.kills += 1;
        stats.acked += book.record(&run);
        stats.compactions_merging += run
            .lines
            .iter()
            .filter(|l| l.strip_prefix("compacted ").is_some_and(|n| n != "0"))
            .count() as u64;

        let db = reopen(&path);
        let ledger = load(&db, HOT);
        stats.in_flight_found = check(&ledger, &book)
            .unwrap_or_else(|e| panic!("after killing child {child} ({delay:?}): {e}"));
        check_shape(&db, mode, &ledger);
        assert_eq!(snapshot(&db, &cold), cold_state, "a cold entity changed");
    }
    assert!(
        stats.acked > 0,
        "no child ever saved: the kills tested nothing"
    );
    if mode == Mode::Mixed {
        assert!(
            stats.compactions_merging > 0,
            "compaction never raced the writers"
        );
        let db = reopen(&path);
        let before = load(&db, HOT);
        db.compact::<Ledger>().unwrap();
        let after = load(&db, HOT);
        assert_eq!(
            (after.fixed, after.grown, &after.ops),
            (before.fixed, before.grown, &before.ops)
        );
        assert_eq!(db.shard_count::<Ledger>(&HOT, "grown").unwrap(), 1);
        assert_eq!(db.shard_count::<Ledger>(&HOT, "ops").unwrap(), 1);
        assert_eq!(db.shard_count::<Ledger>(&HOT, "fixed").unwrap(), 8);
    }
    stats
}

/// Row counts that only hold without compaction: each save writes exactly
/// the rows it should, so a row written twice is caught even where the
/// fold would hide it.
fn check_shape(db: &Sqlite, mode: Mode, ledger: &Ledger) {
    let rows = |field| db.shard_count::<Ledger>(&HOT, field).unwrap();
    let ops = ledger.ops.len() as u64;
    match mode {
        Mode::Static => {
            assert_eq!(ledger.grown, 0);
            assert_eq!((rows("fixed"), rows("grown"), rows("ops")), (8, 1, 1 + ops));
        }
        Mode::Dynamic => {
            assert_eq!(ledger.fixed, 0);
            assert_eq!(
                (rows("fixed"), rows("grown"), rows("ops")),
                (8, 1 + ops, 1 + ops)
            );
        }
        _ => assert_eq!(rows("fixed"), 8),
    }
}

#[test]
fn static_saver_killed_100_times_loses_and_doubles_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let stats = kill_savers(Mode::Static, kills(KILLS));
    eprintln!("static saver: {stats:?}");
}

#[test]
fn dynamic_saver_killed_100_times_loses_and_doubles_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let stats = kill_savers(Mode::Dynamic, kills(KILLS));
    eprintln!("dynamic saver: {stats:?}");
}

#[test]
fn writers_and_compaction_killed_together_100_times() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let stats = kill_savers(Mode::Mixed, kills(KILLS));
    eprintln!("mixed writers + compaction: {stats:?}");
}

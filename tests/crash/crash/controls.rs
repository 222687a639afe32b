//! Controls (the checks above can fail, shown with a buggy child) and the
//! soak.

use super::*;

/// Kills a buggy child until the check reports `expect`; a correct child
/// would never make it fail, so the check is shown to detect the bug.
fn control(mode: Mode, expect: &str) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("control.db");
    prepare_savers(&path, mode);
    let mut rng = SmallRng::seed_from_u64(seed());
    let mut book = Book::default();
    for child in 1..=30 {
        book.open_streams(child, 1);
        let run =
            spawn(&path, mode, child).kill_after(Duration::from_millis(rng.random_range(5..=80)));
        book.record(&run);
        if let Err(e) = check(&load(&reopen(&path), HOT), &book) {
            assert!(e.contains(expect), "unexpected report: {e}");
            return child;
        }
    }
    panic!(
        "30 kills of the {} child never tripped the check",
        mode.name()
    );
}

#[test]
fn control_acknowledging_before_save_is_reported_as_lost() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kills = control(Mode::AckFirst, "acknowledged ops lost");
    eprintln!("ack-before-save caught after {kills} kills");
}

#[test]
fn control_a_save_split_in_two_transactions_is_reported_as_half_applied() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kills = control(Mode::Split, "applied in part");
    eprintln!("split save caught after {kills} kills");
}

#[test]
fn control_a_row_written_twice_is_reported_as_counted_twice() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("control.db");
    let db = reopen(&path);
    db.insert(&Ledger::new(HOT)).unwrap();
    let mut book = Book::default();
    book.open_streams(1, 1);
    let mut ledger = load(&db, HOT);
    for seq in 0..5 {
        ledger.count_dynamic(op_id(1, 0, seq));
        db.save(&mut ledger).unwrap();
    }
    *book.acked.get_mut(&stream_of(op_id(1, 0, 0))).unwrap() = 5;
    assert_eq!(check(&load(&db, HOT), &book), Ok(0));

    // What a retried-after-commit save would leave: the last delta of both
    // dynamic fields appended again. The set absorbs the duplicate op id,
    // the counter does not.
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute(
        "INSERT INTO as_shard_ledger (entity, field, shard, value) \
         SELECT entity, field, shard + 1000, value FROM as_shard_ledger \
         WHERE entity = ?1 AND field IN ('grown', 'ops') \
           AND shard = (SELECT max(shard) FROM as_shard_ledger WHERE entity = ?1 AND field = 'grown')",
        [HOT],
    )
    .unwrap();
    let err = check(&load(&db, HOT), &book).unwrap_err();
    assert!(err.contains("counted twice"), "{err}");

    // And an acknowledgement the database never saw.
    raw.execute("DELETE FROM as_shard_ledger WHERE shard >= 1000", [])
        .unwrap();
    *book.acked.get_mut(&stream_of(op_id(1, 0, 0))).unwrap() = 6;
    let err = check(&load(&db, HOT), &book).unwrap_err();
    assert!(err.contains("acknowledged ops lost"), "{err}");
}

/// 200 kills of each kind (`AUTOSHARD_KILLS` for another count). Run it
/// with `cargo test --test crash -- --ignored soak --nocapture` (set
/// AUTOSHARD_CRASH_SEED to repeat a run's delays). The other crash tests
/// soak with `AUTOSHARD_KILLS=200 cargo test --test crash --test store_specific
/// --test suites -- killed`.
#[test]
#[ignore = "soak: 200 kills of each kind, minutes"]
fn soak_200_kills_of_each_kind() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let kills = kills(200);
    for mode in [Mode::Static, Mode::Dynamic, Mode::Mixed] {
        let stats = kill_savers(mode, kills);
        eprintln!("soak {}: {stats:?}", mode.name());
    }
    let stats = kill_compactions(kills);
    eprintln!("soak compaction: {stats:?}");
}

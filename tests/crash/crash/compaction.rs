//! Compaction killed mid-way.

use super::*;

const COMPACTION_ENTITIES: u64 = 1_000;
const COMPACTION_DYNAMIC_SAVES: u64 = 20;

#[derive(Debug, Default)]
pub(crate) struct CompactionKills {
    kills: u64,
    mid_way: u64,
    refills: u64,
    /// Batches the killed children reported committed, all together.
    batches_before_kills: u64,
    /// Dynamic rows that killed children folded away before they died.
    rows_folded_before_kills: u64,
    /// Dynamic rows left for the run that finishes.
    rows_left_for_last_run: u64,
}

/// Fills 1,000 entities with 20 dynamic saves each (40,000 dynamic rows:
/// `grown` and `ops`), then kills compaction children until `kills` of them
/// died mid-run, and lets a last one finish.
pub(crate) fn kill_compactions(kills: u64) -> CompactionKills {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("compact.db");
    let ids: Vec<u64> = (1..=COMPACTION_ENTITIES).collect();
    let db = reopen(&path);
    fill(&db, &ids, COMPACTION_DYNAMIC_SAVES, 2);
    let mut expected = snapshot(&db, &ids);
    let mut counts = shard_counts(&db, &ids);
    drop(db);

    let mut rng = SmallRng::seed_from_u64(seed());
    let mut stats = CompactionKills::default();
    while stats.mid_way < kills {
        let delay = Duration::from_millis(rng.random_range(1..=40));
        let run = spawn(&path, Mode::Compact, stats.kills).kill_after(delay);
        stats.kills += 1;
        let db = reopen(&path);
        assert_eq!(
            snapshot(&db, &ids),
            expected,
            "totals changed after a compaction was killed {delay:?} in"
        );
        let now = shard_counts(&db, &ids);
        for (id, (before, after)) in counts.iter().zip(&now).enumerate() {
            assert!(
                after.0 <= before.0 && after.1 <= before.1,
                "entity {}: shard rows grew from {before:?} to {after:?}",
                id + 1
            );
            stats.rows_folded_before_kills += before.0 - after.0 + before.1 - after.1;
        }
        counts = now;
        if run.said("done") {
            // This machine compacts faster than the kills land: give the
            // next children something to do again.
            fill(&db, &ids, COMPACTION_DYNAMIC_SAVES, 0);
            expected = snapshot(&db, &ids);
            counts = shard_counts(&db, &ids);
            stats.refills += 1;
        } else {
            assert!(run.killed(), "compaction child failed: {:?}", run.status);
            stats.mid_way += 1;
            stats.batches_before_kills +=
                run.lines.iter().filter(|l| l.starts_with("batch ")).count() as u64;
        }
    }

    // Otherwise every kill landed before the first commit, and the test
    // only showed that an untouched database survives.
    assert!(
        stats.rows_folded_before_kills > 0,
        "no killed compaction committed a batch"
    );
    stats.rows_left_for_last_run = counts.iter().map(|(g, o)| g + o - 2).sum();
    let run = spawn(&path, Mode::Compact, 0).finish();
    assert!(run.status.success() && run.said("done"), "{:?}", run.status);
    let db = reopen(&path);
    assert_eq!(
        snapshot(&db, &ids),
        expected,
        "totals changed by the last run"
    );
    for (id, rows) in ids.iter().zip(shard_counts(&db, &ids)) {
        assert_eq!(rows, (1, 1), "entity {id} not compacted to one row");
        assert_eq!(db.shard_count::<Ledger>(id, "fixed").unwrap(), 8);
    }
    stats
}

/// (`grown` rows, `ops` rows) per entity.
fn shard_counts(db: &Sqlite, ids: &[u64]) -> Vec<(u64, u64)> {
    ids.iter()
        .map(|id| {
            (
                db.shard_count::<Ledger>(id, "grown").unwrap(),
                db.shard_count::<Ledger>(id, "ops").unwrap(),
            )
        })
        .collect()
}

#[test]
fn compaction_killed_100_times_mid_way_loses_and_doubles_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let stats = kill_compactions(kills(KILLS));
    eprintln!("compaction: {stats:?}");
}

//! Totals that leave their type (issue 12, item 1): a save is checked
//! against the field's total, whichever row it picks; compensating deltas,
//! `save_delta` and compaction's skips repair or step around a total that
//! is out of range.

use crate::entities::Capped;
use crate::stores::{Options, TestStore};
use autoshard::{shard_method, Error, Pending, Saved, Shardable, Value};
use std::collections::BTreeMap;

store_tests!(
    a_static_save_whose_total_would_overflow_is_refused_whichever_shard_it_picks,
    two_clients_retrying_after_a_fold_error_cannot_overflow_the_total,
    a_compensating_delta_brings_an_overflowed_dynamic_total_back,
    compaction_skips_an_entity_it_cannot_fold_and_compacts_the_others,
    a_float_total_that_would_reach_infinity,
    save_delta_folds_one_delta_without_loading_and_repairs_a_total,
    a_u64_total_beyond_i64_is_checked_too,
);

fn is_fold_error(result: &Result<Saved, Error>, field: &str) -> bool {
    matches!(result, Err(Error::Fold { field: f, .. }) if *f == field)
}

/// The total an `Error::Fold` from `load` reports for `field`.
fn out_of_range(err: &Error, field: &str) -> i128 {
    match err {
        Error::Fold {
            field: f, source, ..
        } if *f == field => {
            source
                .downcast_ref::<autoshard::fold::OutOfRange>()
                .unwrap_or_else(|| panic!("{err:?}"))
                .total
        }
        _ => panic!("{err:?}"),
    }
}

/// `i64::MAX` saved through one object and `+1` through another loaded
/// before it, so that the second object's own aggregate (1) fits and only
/// the stored total does not. Before the fix the store checked the picked
/// row only: with the `+1` landing in the other row the save returned `Ok`
/// about every second attempt and the entity could no longer be loaded
/// (seen on all three stores: `attempt 0: Ok(Saved { attempts: 1,
/// document_written: false, shard_writes: 1 })`). Now the save checks the
/// field's total and refuses every attempt, writing nothing.
fn a_static_save_whose_total_would_overflow_is_refused_whichever_shard_it_picks<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Capped::new(1, 0, 0)).unwrap();
    let mut c: Capped = db.load(&1).unwrap().unwrap();
    let mut other: Capped = db.load(&1).unwrap().unwrap();
    other.hit(i64::MAX);
    db.save(&mut other).unwrap();
    let rows = db.shard_rows("capped");
    c.hit(1);
    for attempt in 0..20 {
        let result = db.save(&mut c);
        assert!(
            is_fold_error(&result, "hits"),
            "attempt {attempt}: {result:?}"
        );
        assert_eq!(db.shard_rows("capped"), rows);
    }
    // The kept delta, compensated, lands; then five +1 fit again, in
    // whichever row each one picks (a row at MAX is passed over for one
    // where the delta fits).
    c.hit(-6);
    db.save(&mut c).unwrap();
    for _ in 0..5 {
        c.hit(1);
        db.save(&mut c).unwrap();
    }
    assert_eq!(db.load::<Capped>(&1).unwrap().unwrap().hits, i64::MAX);
}

/// The two honest clients: each adds 3·2^60 to a value at 2^62,
/// and the second retries after `Error::Fold` as the README says. Before
/// the fix a retry whose delta landed in the other row returned `Ok` and
/// the total (10·2^60 > 2^63) became unreadable (all three stores failed
/// with `attempt 0: Ok(Saved { .. })`).
fn two_clients_retrying_after_a_fold_error_cannot_overflow_the_total<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Capped::new(1, 1 << 62, 0)).unwrap();
    let mut a: Capped = db.load(&1).unwrap().unwrap();
    let mut b: Capped = db.load(&1).unwrap().unwrap();
    a.hit(3 << 60);
    b.hit(3 << 60);
    db.save(&mut a).unwrap();
    for attempt in 0..20 {
        let result = db.save(&mut b);
        assert!(
            is_fold_error(&result, "hits"),
            "attempt {attempt}: {result:?}"
        );
    }
    assert_eq!(db.load::<Capped>(&1).unwrap().unwrap().hits, 7 << 60);
}

/// A dynamic append reads nothing, so two objects loaded at `MAX - 1` that
/// each append `+1` both succeed; what matters is that the total stays
/// exact. Before the fix the rows folded in shard order, `MAX + 1` failed
/// before the `-2` was reached, and no compensating delta could ever
/// repair the entity (all three stores: the load after the `-2` was
/// `Err(Fold { kind: "Capped", field: "appended", source: Overflow })`).
fn a_compensating_delta_brings_an_overflowed_dynamic_total_back<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Capped::new(1, 0, i64::MAX - 1)).unwrap();
    let mut b: Capped = db.load(&1).unwrap().unwrap();
    let mut c: Capped = db.load(&1).unwrap().unwrap();
    b.append(1);
    db.save(&mut b).unwrap();
    c.append(1);
    db.save(&mut c).unwrap();
    let err = db.load::<Capped>(&1).unwrap_err();
    assert_eq!(out_of_range(&err, "appended"), i128::from(i64::MAX) + 1);
    c.append(-2);
    db.save(&mut c).unwrap();
    let loaded = db.load::<Capped>(&1);
    assert_eq!(loaded.unwrap().unwrap().appended, i64::MAX - 1);
    db.compact::<Capped>().unwrap();
    assert_eq!(
        db.field_rows("capped", "1", "appended"),
        BTreeMap::from([(0, Value::Integer(i64::MAX - 1))])
    );
}

/// One entity whose rows cannot be folded must not stop compaction of its
/// kind. Before the fix `compact` failed at entity 2 (`Err(Fold { kind:
/// "Capped", field: "appended", source: Overflow })` on all three stores)
/// and entities 3 and 4 kept their 6 rows each; a background compactor
/// stopped there with that error.
fn compaction_skips_an_entity_it_cannot_fold_and_compacts_the_others<S: TestStore>() {
    // Batches of 4 rows: the poisoned group (6 rows) is larger than a batch,
    // so its first rows make a part that does not fold either.
    for batch_rows in [None, Some(4)] {
        let db = S::fresh_with(Options {
            compaction_batch_rows: batch_rows,
            ..Options::default()
        });
        for id in 1..=4 {
            let start = if id == 2 { i64::MAX } else { 0 };
            db.insert(&Capped::new(id, 0, start)).unwrap();
            // Appends without an object: no object's aggregate could hold
            // entity 2's total, so its own check would refuse them first.
            for _ in 0..5 {
                db.save_delta::<Capped, _>(&id, "appended", &1i64).unwrap();
            }
        }
        let poisoned = db.field_rows("capped", "2", "appended");
        assert_eq!(poisoned.len(), 6);
        // With small batches a compactor's pass goes first: it is made of
        // the same batches, so it counts the entity and keeps going instead
        // of stopping, and leaves `compact` nothing to fold.
        let compactor_first = batch_rows.is_some();
        if compactor_first {
            let pass = db.compactor::<Capped>().batch_rows(4).run_once().unwrap();
            assert_eq!(
                (pass.entities_compacted, pass.entities_skipped),
                (3, 1),
                "{pass:?}"
            );
        }
        let s = db.compact::<Capped>().unwrap();
        for id in [1, 3, 4] {
            let rows = db.field_rows("capped", &id.to_string(), "appended");
            assert_eq!(rows.len(), 1, "{batch_rows:?}: entity {id}: {rows:?}");
            assert_eq!(db.load::<Capped>(&id).unwrap().unwrap().appended, 5);
        }
        assert_eq!(db.field_rows("capped", "2", "appended"), poisoned);
        let compacted = if compactor_first { 0 } else { 3 };
        assert_eq!(s.entities_compacted, compacted, "{batch_rows:?}: {s:?}");
        assert_eq!(s.entities_skipped, 1, "{batch_rows:?}: {s:?}");
        assert_eq!(s.skipped.len(), 1, "{batch_rows:?}: {s:?}");
        let skipped = &s.skipped[0];
        assert_eq!((skipped.id.as_str(), skipped.field), ("2", "appended"));
        let load_error = db.load::<Capped>(&2).unwrap_err();
        assert_eq!(skipped.error, load_error.to_string());
        assert_eq!(
            out_of_range(&load_error, "appended"),
            i128::from(i64::MAX) + 5
        );
    }
}

/// Float sums: a static save whose total would reach infinity is refused
/// whichever row it picks (before the fix the attempt that picked the other
/// row returned `Ok`); a dynamic total that reached infinity loads as
/// infinity, compaction skips it, and a compensating delta saved through
/// the loaded object brings it back (before the fix rows summed in shard
/// order stayed infinite). Before the fix this failed at the first refusal
/// on all three stores: `unwrap_err()` on `Ok(Saved { attempts: 1, .. })`.
fn a_float_total_that_would_reach_infinity<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Capped::new(1, 0, 0)).unwrap();
    // Loaded at 0, so its own aggregate stays finite: only the total is not.
    let mut c: Capped = db.load(&1).unwrap().unwrap();
    db.save_delta::<Capped, _>(&1, "real", &f64::MAX).unwrap();
    let rows = db.shard_rows("capped");
    c.add_real(f64::MAX);
    for attempt in 0..20 {
        let err = db.save(&mut c).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidValue { field: "real", .. }),
            "attempt {attempt}: {err:?}"
        );
        assert_eq!(db.shard_rows("capped"), rows);
    }

    for _ in 0..2 {
        db.save_delta::<Capped, _>(&1, "real_appended", &f64::MAX)
            .unwrap();
    }
    let mut c: Capped = db.load(&1).unwrap().unwrap();
    assert_eq!(c.real_appended, f64::INFINITY);
    let s = db.compact::<Capped>().unwrap();
    assert_eq!(db.field_rows("capped", "1", "real_appended").len(), 3);
    assert_eq!(s.entities_skipped, 1);
    assert_eq!(s.skipped[0].field, "real_appended");
    c.append_real(-f64::MAX);
    db.save(&mut c).unwrap();
    assert_eq!(
        db.load::<Capped>(&1).unwrap().unwrap().real_appended,
        f64::MAX
    );
}

/// `save_delta` is the repair path for an entity that no longer loads: the
/// same save, without an object.
fn save_delta_folds_one_delta_without_loading_and_repairs_a_total<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Capped::new(1, 0, i64::MAX)).unwrap();
    // A dynamic append reads nothing: this one takes the total out of range.
    let saved = db.save_delta::<Capped, _>(&1, "appended", &3i64).unwrap();
    assert_eq!((saved.document_written, saved.shard_writes), (false, 1));
    let err = db.load::<Capped>(&1).unwrap_err();
    let total = out_of_range(&err, "appended");
    assert_eq!(total, i128::from(i64::MAX) + 3);
    let back = i64::try_from(i128::from(i64::MAX) - total).unwrap();
    db.save_delta::<Capped, _>(&1, "appended", &back).unwrap();
    assert_eq!(db.load::<Capped>(&1).unwrap().unwrap().appended, i64::MAX);

    // Static: checked against the total like any save.
    db.save_delta::<Capped, _>(&1, "hits", &5i64).unwrap();
    let rows = db.shard_rows("capped");
    let err = db
        .save_delta::<Capped, _>(&1, "hits", &i64::MAX)
        .unwrap_err();
    assert!(matches!(err, Error::Fold { field: "hits", .. }), "{err:?}");
    db.save_delta::<Capped, _>(&1, "real", &f64::MAX).unwrap();
    let err = db
        .save_delta::<Capped, _>(&1, "real", &f64::MAX)
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidValue { field: "real", .. }),
        "{err:?}"
    );
    assert_eq!(db.shard_rows("capped").len(), rows.len());
    let c: Capped = db.load(&1).unwrap().unwrap();
    assert_eq!((c.hits, c.real), (5, f64::MAX));

    // Nothing to write, and the refusals.
    let saved = db.save_delta::<Capped, _>(&1, "hits", &0i64).unwrap();
    assert_eq!(saved, Saved::default());
    let err = db.save_delta::<Capped, _>(&1, "nope", &1i64).unwrap_err();
    assert!(matches!(err, Error::InvalidName { .. }), "{err:?}");
    for err in [
        db.save_delta::<Capped, _>(&1, "hits", "one").unwrap_err(),
        db.save_delta::<Capped, _>(&1, "hits", &1.5f64).unwrap_err(),
        db.save_delta::<Capped, _>(&1, "real", &f64::NAN)
            .unwrap_err(),
    ] {
        assert!(matches!(err, Error::InvalidValue { .. }), "{err:?}");
    }
    let err = db.save_delta::<Capped, _>(&9, "hits", &1i64).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    assert_eq!(db.shard_rows("capped").len(), rows.len());
}

#[derive(Shardable, Debug)]
#[shard(kind = "Unsigned")]
struct Unsigned {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 3, fold = autoshard::fold::checked_sum)]
    big: u64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Unsigned {
    #[shard_method]
    fn add(&mut self, by: u64) {
        self.big = self.big.wrapping_add(by);
    }
}

/// `u64` values above `i64::MAX` are stored as JSON text, which a store
/// cannot sum as integers; the total is checked all the same. `u` is
/// loaded before `other` takes the total to `u64::MAX`, so its own
/// aggregate fits and only the store can refuse its `+1`.
fn a_u64_total_beyond_i64_is_checked_too<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Unsigned {
        id: 1,
        big: u64::MAX - 10,
        pending: Pending::default(),
    })
    .unwrap();
    let mut u: Unsigned = db.load(&1).unwrap().unwrap();
    let mut other: Unsigned = db.load(&1).unwrap().unwrap();
    for _ in 0..10 {
        other.add(1);
        db.save(&mut other).unwrap();
    }
    let rows = db.shard_rows("unsigned");
    u.add(1);
    for attempt in 0..10 {
        let result = db.save(&mut u);
        assert!(
            is_fold_error(&result, "big"),
            "attempt {attempt}: {result:?}"
        );
    }
    assert_eq!(db.shard_rows("unsigned"), rows);
    assert_eq!(db.load::<Unsigned>(&1).unwrap().unwrap().big, u64::MAX);
}

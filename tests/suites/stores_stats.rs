//! `db.stats::<T>()` on every store: entities, shard rows per sharded field,
//! and the rows compaction would fold, checked against what the saves
//! wrote and against the raw rows behind the store's back.

use autoshard::{Pending, Shardable};
use std::time::{Duration, Instant};

use crate::entities;
use crate::stores;
use entities::{DynamicSwitch, Question, StaticSwitch};
use stores::TestStore;

store_tests!(
    stats_count_entities_rows_and_pending_dynamic_rows,
    stats_count_static_rows_beyond_the_shard_count_as_pending,
    stats_of_a_kind_never_stored_are_zero,
    stats_of_a_kind_without_sharded_fields_count_its_entities,
    stats_age_the_oldest_pending_row_by_the_database_clock,
    stats_of_rows_appended_before_the_time_column_have_no_age,
);

// On Redis Cluster compaction folds within a bucket, so the two tests that
// compact check their folded counts in `redis_cluster.rs`
// (`stats_before_and_after_a_bucketwise_compaction`).
redis_cluster_tests!(
    stats_of_a_kind_never_stored_are_zero,
    stats_of_a_kind_without_sharded_fields_count_its_entities,
);

fn stats_count_entities_rows_and_pending_dynamic_rows<S: TestStore>() {
    let db = S::fresh();
    for id in 1..=3 {
        db.insert(&Question::new(id, 10, 0)).unwrap();
    }
    for (id, saves) in [(1, 5), (2, 2)] {
        let mut q: Question = db.load(&id).unwrap().unwrap();
        for _ in 0..saves {
            q.vote(1);
            q.view();
            db.save(&mut q).unwrap();
        }
    }
    let stats = db.stats::<Question>().unwrap();
    assert_eq!((stats.kind, stats.entities), ("Question", 3));
    let votes = stats.field("votes").unwrap();
    assert_eq!(
        (votes.shards, votes.rows, votes.entities, votes.pending),
        (Some(10), 30, 3, 0)
    );
    let views = stats.field("views").unwrap();
    assert_eq!(
        (views.shards, views.rows, views.entities, views.pending),
        (None, 3 + 7, 3, 7)
    );
    assert_eq!(stats.pending(), 7);
    // The same counts as the rows themselves.
    let rows = db.shard_rows("question");
    assert_eq!(rows.keys().filter(|k| k.1 == "views").count(), 10);
    assert_eq!(rows.keys().filter(|k| k.1 == "votes").count(), 30);

    let merged = db.compact::<Question>().unwrap().rows_merged;
    let after = db.stats::<Question>().unwrap();
    assert_eq!(merged, 7);
    assert_eq!(after.field("views").unwrap().rows, 3);
    assert_eq!(after.pending(), 0);
    println!("{after}");
}

fn stats_count_static_rows_beyond_the_shard_count_as_pending<S: TestStore>() {
    let db = S::fresh();
    db.insert(&StaticSwitch {
        id: 1,
        hits: 0,
        pending: Pending::default(),
    })
    .unwrap();
    // The same kind with `hits` dynamic: three appended rows beyond 0..4.
    let mut grown: DynamicSwitch = db.load(&1).unwrap().unwrap();
    for _ in 0..3 {
        grown.hit();
        db.save(&mut grown).unwrap();
    }
    let fixed = db.stats::<StaticSwitch>().unwrap();
    let hits = fixed.field("hits").unwrap();
    assert_eq!((hits.rows, hits.entities, hits.pending), (7, 1, 3));
    // Seen as dynamic, everything but one row is pending.
    let dynamic = db.stats::<DynamicSwitch>().unwrap();
    assert_eq!(dynamic.field("hits").unwrap().pending, 6);

    db.compact::<StaticSwitch>().unwrap();
    let hits = db.stats::<StaticSwitch>().unwrap().fields[0].clone();
    assert_eq!((hits.rows, hits.pending), (4, 0));
}

fn stats_of_a_kind_never_stored_are_zero<S: TestStore>() {
    let db = S::fresh();
    let stats = db.stats::<Question>().unwrap();
    assert_eq!(stats.entities, 0);
    assert_eq!(stats.fields.len(), 2);
    assert!(stats.fields.iter().all(|f| f.rows == 0 && f.pending == 0));
}

#[derive(Shardable, Debug)]
struct Note {
    #[shard(id)]
    id: String,
    text: String,
}

fn stats_of_a_kind_without_sharded_fields_count_its_entities<S: TestStore>() {
    let db = S::fresh();
    for id in ["a", "b"] {
        db.insert(&Note {
            id: id.into(),
            text: "hello".into(),
        })
        .unwrap();
    }
    let stats = db.stats::<Note>().unwrap();
    assert_eq!(
        (stats.entities, stats.fields.len(), stats.pending()),
        (2, 0, 0)
    );
}

/// Clock slack for the ages: the database rounds its stamps down to whole
/// milliseconds, so an age may come out up to 1 ms short of the wall time.
const ROUNDING: Duration = Duration::from_millis(2);

/// Saves one view of question `id`: one appended `views` row.
fn view<S: TestStore>(db: &S, id: u64) {
    let mut q: Question = db.load(&id).unwrap().unwrap();
    q.view();
    db.save(&mut q).unwrap();
}

fn stats_age_the_oldest_pending_row_by_the_database_clock<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Question::new(1, 0, 0)).unwrap();
    db.insert(&Question::new(2, 0, 0)).unwrap();
    // Control: the rows an insert writes are not pending, and have no age.
    let fresh = db.stats::<Question>().unwrap();
    assert_eq!(fresh.oldest_pending(), None);

    let before_first = Instant::now();
    view(&db.store, 1);
    view(&db.store, 1);
    let after_first = Instant::now();
    let wait = Duration::from_millis(300);
    std::thread::sleep(wait);
    // A later append on another entity is younger; the oldest row counts.
    view(&db.store, 2);
    let since_first = after_first.elapsed();
    let stats = db.stats::<Question>().unwrap();
    let upper = before_first.elapsed();
    let views = stats.field("views").unwrap();
    assert_eq!(views.pending, 3);
    let age = views.oldest_pending.expect("pending views have an age");
    assert!(age + ROUNDING >= since_first, "{age:?} < {since_first:?}");
    // Generous: the same machine's clock, read by the database.
    assert!(age <= upper + Duration::from_secs(2), "{age:?} > {upper:?}");
    // The static field is rewritten in place: nothing pending, no age.
    assert_eq!(stats.field("votes").unwrap().oldest_pending, None);
    assert_eq!(stats.oldest_pending(), Some(age));

    // The age grows while nothing compacts.
    std::thread::sleep(Duration::from_millis(100));
    let later = db.stats::<Question>().unwrap().oldest_pending().unwrap();
    assert!(
        later + ROUNDING >= age + Duration::from_millis(100),
        "{later:?} vs {age:?}"
    );

    db.compact::<Question>().unwrap();
    let after = db.stats::<Question>().unwrap();
    assert_eq!((after.pending(), after.oldest_pending()), (0, None));
    println!("{stats}\n{after}");
}

/// Also the control of the test above: rows appended without a stamp
/// (here, before the column) report `None`, so its `expect` fails on a store
/// whose appends stamp nothing.
fn stats_of_rows_appended_before_the_time_column_have_no_age<S: TestStore>() {
    let db = S::fresh();
    db.insert(&Question::new(1, 0, 0)).unwrap();
    view(&db.store, 1);
    view(&db.store, 1);
    assert!(db.stats::<Question>().unwrap().oldest_pending().is_some());
    // The database as an autoshard without append times left it; a new
    // handle adds the column back, empty in the old rows.
    db.execute("ALTER TABLE as_shard_question DROP COLUMN appended_ms");
    let reopened = db.open_another();
    let old = reopened.stats::<Question>().unwrap();
    assert_eq!(old.field("views").unwrap().pending, 2);
    assert_eq!(old.oldest_pending(), None);

    view(&reopened, 1);
    let new = reopened.stats::<Question>().unwrap();
    assert_eq!(new.field("views").unwrap().pending, 3);
    let age = new.oldest_pending().expect("the new row has an age");
    assert!(age < Duration::from_secs(5), "{age:?}");
    reopened.compact::<Question>().unwrap();
    assert_eq!(reopened.stats::<Question>().unwrap().oldest_pending(), None);
}

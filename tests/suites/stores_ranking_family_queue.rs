//! Family submissions through the queue (issue 10, item 6), on SQLite
//! files and PostgreSQL (locking and optimistic mode): a family worker
//! applies each queued submission to every member in one transaction with
//! the player's stored filter values.
//!
//! - `queued_twin_ends_where_direct_twin_does`: the same submissions (filter
//!   values that change, entry data, periods crossing day and week
//!   boundaries at injected timestamps, Best policy) queued to one family
//!   and submitted to its twin end at the same boards, entries and data.
//!   Control, reverted: with the worker skipping the boards a player leaves,
//!   the snapshots differed (SQLite).
//! - `worker_and_direct_submitters_changing_values_agree`: a spawned worker
//!   applies queued submissions while a thread submits directly for the
//!   same player, both changing its filter value every time: whatever the
//!   interleaving, the player ends on exactly one value's board, with the
//!   overall board's score. The worker's stats show batches whose members
//!   changed after the peek (retries: 1 to 29 per run). Control, reverted:
//!   with such a row applied to the boards the peek opened (skipping the
//!   board to leave it did not), it failed on SQLite and PostgreSQL:
//!   `on [("35-44", 59), ("45+", 559)]`.
//! - `reader_never_sees_a_queued_submission_half_applied`: a reader reads two
//!   members of one period in turn while a worker applies; every
//!   submission is +1 on both, so the first read can never exceed the
//!   second. Control (`member_by_member_apply_is_caught`, SQLite): the same
//!   reader, with the same updates queued on each member and drained
//!   member by member (the single-board queue, what `enqueue` did before),
//!   sees a member ahead of the other.
//! - `concurrent_enqueues_are_group_committed`: threads enqueueing at once
//!   share transactions, and every submission is applied once.

use autoshard::ranking::{
    Family, FamilyConfig, FamilyUpdate, Period, Policy, RankingConfig, ScoreOrder, Window,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::family;
use crate::stores;
use family::snapshot;

every_store_tests!(
    queued_twin_ends_where_direct_twin_does,
    reader_never_sees_a_queued_submission_half_applied,
    concurrent_enqueues_are_group_committed,
    worker_and_direct_submitters_changing_values_agree,
    the_largest_entry_data_goes_through,
    a_worker_stopped_by_a_delete_ends_typed_naming_the_family,
    a_submission_whose_values_change_under_it_does_not_start_over,
    a_board_of_the_old_value_created_after_the_look_is_left_too,
    a_worker_leaves_a_board_of_the_old_value_created_after_its_peek,
);

const HOUR: i64 = 3_600;
/// 2026-11-24 10:30 UTC, a Tuesday.
const NOV_24: i64 = 1_795_516_200;
const AGES: [&str; 3] = ["u35", "35-44", "45+"];

fn segment() -> FamilyConfig {
    let board = RankingConfig::new(1..100_000)
        .policy(Policy::Best)
        .order(ScoreOrder::LowerIsBetter)
        .entry_data(16);
    FamilyConfig::new(board)
        .window(Window::AllTime)
        .window(Window::Week)
        .window(Window::Day)
        .filter("age", AGES)
        .filter("club", ["a", "b"])
        .auto_drop(false)
}

/// A member's entries: `(player, score, entry data)`.
type Entries = Vec<(String, i64, Option<Vec<u8>>)>;

/// Every member's entries with their data.
fn with_data(f: &Family) -> Vec<(String, Entries)> {
    let mut out = Vec::new();
    for (key, _) in snapshot(f) {
        let (window, _, filter) = key.clone();
        let filter = filter.as_ref().map(|(d, v)| (d.as_str(), v.as_str()));
        let span = f.periods(window).unwrap();
        let span = span.iter().find(|s| s.key == key.1).unwrap();
        let board = f
            .board(window, Period::At(span.start.max(-1_000_000_000)), filter)
            .unwrap();
        let entries = board.unwrap().top(1_000).unwrap();
        let entries = entries.into_iter().map(|e| (e.player, e.score, e.data));
        out.push((format!("{key:?}"), entries.collect()));
    }
    out
}

fn queued_twin_ends_where_direct_twin_does<S: stores::TestStore>() {
    let db = S::fresh();
    let direct = Family::create(&*db, "direct", segment()).unwrap();
    let queued = Family::create(&*db, "queued", segment()).unwrap();
    let players = ["ann", "bo", "cy", "di"];
    for i in 0..60i64 {
        let player = players[(i % 4) as usize];
        // 13 hours apart: days and a week boundary are crossed.
        let at = NOV_24 + i / 4 * 13 * HOUR;
        let time = 500 - (i * 37) % 300;
        let data = format!("effort-{i}");
        fn go<'a>(
            f: &'a Family,
            i: i64,
            player: &'a str,
            at: i64,
            time: i64,
            data: &'a str,
        ) -> autoshard::ranking::FamilyUpdate<'a> {
            let mut e = f.submission(player, time).at(at).data(data.as_bytes());
            // Age group changes every 5th effort, club every 3rd, none at times.
            if i % 7 != 3 {
                e = e.filter("age", AGES[(i / 5 % 3) as usize]);
            }
            if i % 11 != 5 {
                e = e.filter("club", ["a", "b"][(i / 3 % 2) as usize]);
            }
            e
        }
        go(&direct, i, player, at, time, &data).submit().unwrap();
        go(&queued, i, player, at, time, &data).enqueue().unwrap();
        if i == 19 || i == 39 {
            // Some submissions applied in between, most in big batches.
            queued.worker().batch_size(7).drain().unwrap();
        }
    }
    assert!(queued.queued().unwrap() > 0);
    assert_eq!(queued.drain_queued().unwrap(), 20);
    assert_eq!(queued.queued().unwrap(), 0);
    assert_eq!(snapshot(&queued), snapshot(&direct));
    assert_eq!(with_data(&queued), with_data(&direct));
    assert!(snapshot(&queued).len() > 30, "many members were written");
}

/// A family of two windows of one period; `n` queued +1 submissions.
fn reader_family(db: &impl autoshard::ranking::RankingStore, name: &str) -> Family {
    let config = FamilyConfig::new(RankingConfig::new(0..1 << 30).policy(Policy::Increment))
        .window(Window::AllTime)
        .window(Window::Day);
    Family::create(db, name, config).unwrap()
}

/// Reads the members in turn, alternating which first, until `done`;
/// `Err` if the first read was ever ahead of the second.
fn read_in_turn(f: &Family, done: &AtomicBool) -> Result<u64, String> {
    let board = |w| loop {
        if let Some(b) = f.board(w, Period::At(NOV_24), None).unwrap() {
            return b;
        }
    };
    let (all, day) = (board(Window::AllTime), board(Window::Day));
    let mut reads = 0;
    while !done.load(Ordering::Acquire) || reads < 10 {
        let order = if reads % 2 == 0 {
            [&all, &day]
        } else {
            [&day, &all]
        };
        let first = order[0].score("ann").unwrap().unwrap_or(0);
        let second = order[1].score("ann").unwrap().unwrap_or(0);
        if first > second {
            return Err(format!("read {reads}: {first} then {second}"));
        }
        reads += 1;
    }
    Ok(reads)
}

fn reader_never_sees_a_queued_submission_half_applied<S: stores::TestStore>() {
    let db = S::fresh();
    let f = reader_family(&*db, "game");
    // Both members exist before the reader starts.
    f.submission("ann", 1).at(NOV_24).submit().unwrap();
    for _ in 0..200 {
        f.submission("ann", 1).at(NOV_24).enqueue().unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let reader = std::thread::spawn({
        let (f, done) = (f.clone(), done.clone());
        move || read_in_turn(&f, &done)
    });
    let stats = f.worker().batch_size(4).drain().unwrap();
    done.store(true, Ordering::Release);
    let reads = reader.join().unwrap().unwrap();
    assert_eq!(stats.submissions, 200);
    assert!(stats.batches >= 50, "{stats:?}");
    let all = f.board(Window::AllTime, Period::At(NOV_24), None).unwrap();
    assert_eq!(all.unwrap().score("ann").unwrap(), Some(201));
    eprintln!("{reads} reads");
}

/// The control: the same updates queued on each member's own queue and
/// drained member by member are caught.
#[test]
fn member_by_member_apply_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let db = autoshard::Sqlite::open(dir.path().join("control.db")).unwrap();
    let f = reader_family(&db, "game");
    f.submission("ann", 1).at(NOV_24).submit().unwrap();
    for w in [Window::AllTime, Window::Day] {
        let board = f.board(w, Period::At(NOV_24), None).unwrap().unwrap();
        for _ in 0..300 {
            board.enqueue("ann", 1).unwrap();
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let reader = std::thread::spawn({
        let (f, done) = (f.clone(), done.clone());
        move || read_in_turn(&f, &done)
    });
    for w in [Window::AllTime, Window::Day] {
        let board = f.board(w, Period::At(NOV_24), None).unwrap().unwrap();
        board.worker().batch_size(5).drain().unwrap();
    }
    done.store(true, Ordering::Release);
    let caught = reader.join().unwrap();
    assert!(caught.is_err(), "the control must fail: {caught:?}");
}

fn concurrent_enqueues_are_group_committed<S: stores::TestStore>() {
    let db = S::fresh();
    let f = reader_family(&*db, "game");
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let f = f.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    f.submission(&format!("p{t}"), 1)
                        .at(NOV_24)
                        .enqueue()
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(f.queued().unwrap(), 400);
    assert_eq!(f.drain_queued().unwrap(), 400);
    for t in 0..8 {
        for w in [Window::AllTime, Window::Day] {
            let board = f.board(w, Period::At(NOV_24), None).unwrap().unwrap();
            assert_eq!(board.score(&format!("p{t}")).unwrap(), Some(50));
        }
    }
}

fn worker_and_direct_submitters_changing_values_agree<S: stores::TestStore>() {
    let db = S::fresh();
    let config = FamilyConfig::new(RankingConfig::new(0..1_000))
        .window(Window::Day)
        .filter("age", AGES);
    let f = Family::create(&*db, "game", config).unwrap();
    let worker = f.worker().batch_size(1).spawn().unwrap();
    let direct = std::thread::spawn({
        let f = f.clone();
        move || {
            for i in 0..60 {
                // Always the one value the queued submissions never carry:
                // a batch's peek never opens that board to leave.
                let age = AGES[2];
                f.submission("ann", 500 + i as i64)
                    .filter("age", age)
                    .at(NOV_24)
                    .submit()
                    .unwrap();
            }
        }
    });
    for i in 0..60 {
        let age = AGES[i % 2];
        f.submission("ann", i as i64)
            .filter("age", age)
            .at(NOV_24)
            .enqueue()
            .unwrap();
    }
    direct.join().unwrap();
    while f.queued().unwrap() > 0 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let stats = worker.stop().unwrap();
    assert_eq!(stats.submissions, 60);
    let at = Period::At(NOV_24);
    let overall = f.board(Window::Day, at, None).unwrap().unwrap();
    let score = overall.score("ann").unwrap();
    let on: Vec<_> = AGES
        .iter()
        .filter_map(|&a| {
            let board = f.board(Window::Day, at, Some(("age", a))).unwrap()?;
            board.check_integrity().unwrap();
            board.score("ann").unwrap().map(|s| (a, s))
        })
        .collect();
    assert_eq!(on.len(), 1, "on {on:?}");
    assert_eq!(Some(on[0].1), score, "on {on:?}");
}

/// A queue row holds more than a board's entry data limit: the header and
/// the filter values come on top of the largest entry data.
fn the_largest_entry_data_goes_through<S: stores::TestStore>() {
    let db = S::fresh();
    let max = autoshard::ranking::MAX_ENTRY_DATA;
    let board = RankingConfig::new(0..100).entry_data(max);
    let config = FamilyConfig::new(board)
        .window(Window::Day)
        .filter("club", ["a-long-club-name"]);
    let f = Family::create(&*db, "big", config).unwrap();
    let data = vec![0xA5; max as usize];
    let entry = f.submission("ann", 7).filter("club", "a-long-club-name");
    entry.data(&data).at(NOV_24).enqueue().unwrap();
    assert_eq!(f.drain_queued().unwrap(), 1);
    let club = Some(("club", "a-long-club-name"));
    let board = f.board(Window::Day, Period::At(NOV_24), club).unwrap();
    let top = board.unwrap().top(1).unwrap();
    assert_eq!(top[0].data.as_deref(), Some(&data[..]));
}

/// A family deleted under a spawned worker ends it with
/// `RankingNotFound` naming the family, whenever the delete comes: idle,
/// or with a queue full of submissions (the worker mid-batch). On the old
/// code each store failed on the name: sqlite at `delay 0` with
/// `"\u{2}1\u{2}players"` (the hidden players board), postgres at `delay
/// 20`, postgres_optimistic at `delay 1` (the rounds before passed: the
/// name depended on where the worker met the delete).
fn a_worker_stopped_by_a_delete_ends_typed_naming_the_family<S: stores::TestStore>() {
    let db = S::fresh();
    for (round, delay) in [0u64, 1, 5, 20, 50].into_iter().enumerate() {
        let name = format!("f{round}");
        let config = FamilyConfig::new(RankingConfig::new(0..1_000))
            .window(Window::Day)
            .filter("age", AGES);
        let f = Family::create(&*db, &name, config).unwrap();
        let worker = f.worker().batch_size(7).spawn().unwrap();
        for i in 0..200 {
            f.submission(&format!("p{}", i % 40), i)
                .filter("age", AGES[(i % 3) as usize])
                .at(NOV_24)
                .enqueue()
                .unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(delay));
        assert!(Family::delete(&*db, &name).unwrap());
        // The worker notices within its idle timeout (default 20 ms).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !worker.is_finished() {
            assert!(
                std::time::Instant::now() < deadline,
                "delay {delay}: the worker runs on"
            );
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        match worker.stop() {
            Err(autoshard::Error::RankingNotFound { name: got }) => {
                assert_eq!(got, name, "delay {delay}")
            }
            other => panic!("delay {delay}: {other:?}"),
        }
    }
}

/// The interleaving behind the flaky
/// `postgres::worker_and_direct_submitters_changing_values_agree` (issue 20
/// item 7), made deterministic with a hook: between each submission's look
/// at the player's filter values and its transaction, another handle moves
/// the player to another value. The submission reads the values under the
/// player's lock in its transaction and leaves whichever board they name:
/// it looks again at most once (its first look spans only the value it
/// read; the second every value's board), so 20 submissions run the hook
/// at most 40 times, and the player ends on exactly one value's boards.
/// On the old code (the values compared with the look's, the submission
/// starting over on any change, up to 32 times) sqlite failed with
/// `submission 0: Conflict { attempts: 32 }`, and postgres the same.
fn a_submission_whose_values_change_under_it_does_not_start_over<S: stores::TestStore>() {
    use std::cell::Cell;
    use std::rc::Rc;
    let db = S::fresh();
    let (f, other) = day_and_all_time_by_age(&db);
    // Every value's boards of the period exist.
    for (i, age) in AGES.iter().enumerate() {
        let p = format!("x{i}");
        other
            .submission(&p, 1)
            .filter("age", age)
            .at(NOV_24)
            .submit()
            .unwrap();
    }
    other
        .submission("ann", 1)
        .filter("age", AGES[0])
        .at(NOV_24)
        .submit()
        .unwrap();
    let calls = Rc::new(Cell::new(0u32));
    autoshard::__private::family_hooks::between_look_and_write(Some(Box::new({
        let calls = calls.clone();
        move || {
            let n = calls.get() + 1;
            calls.set(n);
            other
                .submission("ann", 100 + i64::from(n))
                .filter("age", AGES[(n % 2) as usize])
                .at(NOV_24)
                .submit()
                .unwrap();
        }
    })));
    let outcome: Vec<_> = (0..20)
        .map(|i| {
            f.submission("ann", 500 + i)
                .filter("age", AGES[2])
                .at(NOV_24)
                .submit()
                .map_err(|e| format!("submission {i}: {e:?}"))
        })
        .collect();
    autoshard::__private::family_hooks::between_look_and_write(None);
    for result in outcome {
        result.unwrap();
    }
    assert!(
        calls.get() <= 40,
        "{} looks for 20 submissions",
        calls.get()
    );
    for window in [Window::Day, Window::AllTime] {
        let at = Period::At(NOV_24);
        let overall = f.board(window, at, None).unwrap().unwrap();
        assert_eq!(overall.score("ann").unwrap(), Some(519));
        let on: Vec<_> = AGES
            .iter()
            .filter_map(|&a| {
                let board = f.board(window, at, Some(("age", a))).unwrap()?;
                board.check_integrity().unwrap();
                board.score("ann").unwrap().map(|s| (a, s))
            })
            .collect();
        assert_eq!(on, [(AGES[2], 519)], "{window:?}");
    }
}

/// A family "game" of daily and all-time boards by age group, created, and
/// a second handle on it over another connection.
fn day_and_all_time_by_age<S: stores::TestStore>(db: &stores::Fresh<S>) -> (Family, Family) {
    let config = FamilyConfig::new(RankingConfig::new(0..1_000))
        .window(Window::Day)
        .window(Window::AllTime)
        .filter("age", AGES);
    let f = Family::create(&**db, "game", config).unwrap();
    let other = Family::open(&db.open_another(), "game").unwrap();
    (f, other)
}

/// A submission's look guesses the player's old filter value from what is
/// stored and opens that value's boards of the current periods to leave;
/// on a new day the old value's board of the day may not exist yet. A
/// submission of the same player with the old value (another device, say)
/// may then create it and put them on it before this one's transaction:
/// the player must still end on the new value's boards only. On the old
/// code (a board absent at the look taken as one the player cannot be on)
/// ann ended on both values' boards of the day, on every store.
fn a_board_of_the_old_value_created_after_the_look_is_left_too<S: stores::TestStore>() {
    use std::cell::Cell;
    use std::rc::Rc;
    let db = S::fresh();
    let (f, other) = day_and_all_time_by_age(&db);
    // Yesterday ann rode as u35.
    let yesterday = NOV_24 - 24 * HOUR;
    let ride = |family: &Family, score: i64, age: &str, at: i64| {
        let submission = family.submission("ann", score).filter("age", age);
        submission.at(at).submit().unwrap();
    };
    ride(&f, 5, AGES[0], yesterday);
    let raced = Rc::new(Cell::new(false));
    autoshard::__private::family_hooks::between_look_and_write(Some(Box::new({
        let raced = raced.clone();
        move || {
            // Today's u35 board does not exist at the look: this creates
            // it, with ann on it.
            if !raced.replace(true) {
                ride(&other, 7, AGES[0], NOV_24);
            }
        }
    })));
    let moved = f
        .submission("ann", 9)
        .filter("age", AGES[1])
        .at(NOV_24)
        .submit();
    autoshard::__private::family_hooks::between_look_and_write(None);
    moved.unwrap();
    assert!(raced.get(), "the hook ran");
    assert_ann_only_on(&f, AGES[1]);
}

/// The family worker's peek opens the boards its batch leaves as a
/// submission's look does: the same race, with a queued submission moving
/// ann from u35 to 35-44 and a direct one of ann as u35 creating today's
/// u35 board between the worker's peek and its transaction.
fn a_worker_leaves_a_board_of_the_old_value_created_after_its_peek<S: stores::TestStore>() {
    fn submission<'a>(family: &'a Family, score: i64, age: &'a str, at: i64) -> FamilyUpdate<'a> {
        family.submission("ann", score).filter("age", age).at(at)
    }
    use std::cell::Cell;
    use std::rc::Rc;
    let db = S::fresh();
    let (f, other) = day_and_all_time_by_age(&db);
    submission(&f, 5, AGES[0], NOV_24 - 24 * HOUR)
        .submit()
        .unwrap();
    submission(&f, 9, AGES[1], NOV_24).enqueue().unwrap();
    let raced = Rc::new(Cell::new(false));
    autoshard::__private::family_hooks::between_look_and_write(Some(Box::new({
        let raced = raced.clone();
        move || {
            if !raced.replace(true) {
                submission(&other, 7, AGES[0], NOV_24).submit().unwrap();
            }
        }
    })));
    let drained = f.worker().drain();
    autoshard::__private::family_hooks::between_look_and_write(None);
    assert_eq!(drained.unwrap().submissions, 1);
    assert!(raced.get(), "the hook ran");
    assert_ann_only_on(&f, AGES[1]);
}

/// ann is on `age`'s boards of NOV_24's periods and on no other age's.
fn assert_ann_only_on(f: &Family, age: &str) {
    for window in [Window::Day, Window::AllTime] {
        let on: Vec<&str> = AGES
            .iter()
            .filter(|&&age| {
                let board = f.board(window, Period::At(NOV_24), Some(("age", age)));
                board
                    .unwrap()
                    .is_some_and(|b| b.score("ann").unwrap().is_some())
            })
            .copied()
            .collect();
        assert_eq!(on, [age], "{window:?}: ann's age boards");
    }
}

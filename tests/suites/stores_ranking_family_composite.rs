//! Seed 001's leaderboards with its composite score: daily, weekly (from
//! Sunday) and all-time boards of one family fed by one submission, each
//! ranking trophies higher-better, then retries lower-better, then time
//! lower-better, across Saturday midnight (a new day and a new week) with
//! injected timestamps; on SQLite files and PostgreSQL (locking and
//! optimistic mode).
//!
//! Control: before the family's stored configuration kept the dimensions
//! (`FamilyConfig::encode`), `Family::create` (which reopens what it
//! stored) handed out a family whose board was a plain one over the encoded
//! range. Removing the `dims` line from `encode` makes both tests fail at
//! their first `Family::encode` (`DimensionCount`: the family has no
//! dimensions any more); members created that way would `decode` to the
//! encoded number instead of the tuple.

use autoshard::ranking::{Dim, Family, FamilyConfig, Period, Policy, Ranking, RankingConfig};
use autoshard::ranking::{Weekday, Window};
use autoshard::Error;

use crate::stores;

every_store_tests!(
    the_tuples_rank_with_ties_broken_by_the_next_dimension,
    bad_tuples_are_refused_with_nothing_written,
);

const DAY: i64 = 86_400;
/// Saturday 2026-11-28 23:59:30 UTC.
const SATURDAY_LATE: i64 = 1_795_910_370;
/// Sunday 2026-11-29 00:00:30 UTC: a new day and, weeks starting on
/// Sunday, a new week.
const SUNDAY_EARLY: i64 = SATURDAY_LATE + 60;

/// Trophies, retries, time in milliseconds; a player's best run counts.
fn levels() -> FamilyConfig {
    let run = RankingConfig::dimensions([
        Dim::higher(0..10_000),
        Dim::lower(0..1_000),
        Dim::lower(0..86_400_000),
    ])
    .policy(Policy::Best);
    FamilyConfig::new(run)
        .window(Window::AllTime)
        .window(Window::Week)
        .window(Window::Day)
        .week_starts(Weekday::Sunday)
        .auto_drop(false)
}

type Standing = (String, Vec<i64>, u64);

/// `(player, tuple, rank)` from top to bottom, decoded by the member itself.
fn standings(board: &Ranking) -> Vec<Standing> {
    let top = board.top(100).unwrap();
    top.into_iter()
        .map(|e| (e.player, board.decode(e.score).unwrap(), e.rank))
        .collect()
}

fn owned(v: &[(&str, [i64; 3], u64)]) -> Vec<Standing> {
    v.iter()
        .map(|&(p, t, r)| (p.into(), t.to_vec(), r))
        .collect()
}

fn the_tuples_rank_with_ties_broken_by_the_next_dimension<S: stores::TestStore>() {
    let db = S::fresh();
    let game = Family::create(&*db, "levels", levels()).unwrap();
    let play = |who: &str, run: [i64; 3], at: i64| {
        let score = game.encode(&run).unwrap();
        game.submission(who, score).at(at).submit().unwrap()
    };
    let wednesday = SATURDAY_LATE - 3 * DAY;
    play("ann", [10, 2, 50_000], wednesday);
    play("bo", [10, 2, 60_000], wednesday);
    // Saturday: fewer retries beat ann's faster Wednesday run.
    let fewer = play("ann", [10, 1, 90_000], SATURDAY_LATE);
    assert!(fewer.get(Window::Week, None).unwrap().new_best);
    assert_eq!(fewer.get(Window::Day, None).unwrap().old_rank, None);
    play("cy", [10, 1, 80_000], SATURDAY_LATE);
    play("dan", [9, 0, 1_000], SATURDAY_LATE); // no retry, one trophy short
                                               // Sunday, a minute later: a new day and a new week.
    play("bo", [11, 5, 99_000], SUNDAY_EARLY);
    play("ann", [10, 1, 70_000], SUNDAY_EARLY);
    play("dan", [10, 1, 70_000], SUNDAY_EARLY); // ann's tuple, exactly
    let worse = play("cy", [10, 3, 10_000], SUNDAY_EARLY);
    assert!(!worse.get(Window::AllTime, None).unwrap().changed());
    assert!(worse.get(Window::Week, None).unwrap().new_best);

    let board = |w, at| game.board(w, Period::At(at), None).unwrap().unwrap();
    assert_eq!(
        standings(&board(Window::Day, wednesday)),
        owned(&[("ann", [10, 2, 50_000], 1), ("bo", [10, 2, 60_000], 2)])
    );
    let saturday = owned(&[
        ("cy", [10, 1, 80_000], 1),
        ("ann", [10, 1, 90_000], 2),
        ("dan", [9, 0, 1_000], 3),
    ]);
    assert_eq!(standings(&board(Window::Day, SATURDAY_LATE)), saturday);
    assert_eq!(
        standings(&board(Window::Week, SATURDAY_LATE)),
        owned(&[
            ("cy", [10, 1, 80_000], 1),
            ("ann", [10, 1, 90_000], 2),
            ("bo", [10, 2, 60_000], 3),
            ("dan", [9, 0, 1_000], 4),
        ])
    );
    // Equal tuples share a rank; the one reached first is listed first.
    let sunday = owned(&[
        ("bo", [11, 5, 99_000], 1),
        ("ann", [10, 1, 70_000], 2),
        ("dan", [10, 1, 70_000], 2),
        ("cy", [10, 3, 10_000], 4),
    ]);
    assert_eq!(standings(&board(Window::Day, SUNDAY_EARLY)), sunday);
    assert_eq!(standings(&board(Window::Week, SUNDAY_EARLY)), sunday);
    let all_time = owned(&[
        ("bo", [11, 5, 99_000], 1),
        ("ann", [10, 1, 70_000], 2),
        ("dan", [10, 1, 70_000], 2),
        ("cy", [10, 1, 80_000], 4),
    ]);
    assert_eq!(standings(&board(Window::AllTime, SUNDAY_EARLY)), all_time);
    // Yesterday, as a query names it on Sunday, is Saturday.
    let yesterday = game.board(Window::Day, Period::Before(SUNDAY_EARLY), None);
    assert_eq!(standings(&yesterday.unwrap().unwrap()), saturday);

    // Another handle reads the same tuples from the stored configuration.
    let again = Family::open(&*db, "levels").unwrap();
    assert_eq!(again.config(), game.config());
    let member = again
        .board(Window::AllTime, Period::Current, None)
        .unwrap()
        .unwrap();
    assert_eq!(standings(&member), all_time);
    assert_eq!(member.rank_of_dims(&[10, 1, 75_000]).unwrap(), 4);
}

fn bad_tuples_are_refused_with_nothing_written<S: stores::TestStore>() {
    let db = S::fresh();
    let game = Family::create(&*db, "levels", levels()).unwrap();
    let run = game.encode(&[3, 1, 500]).unwrap();
    game.submission("ann", run)
        .at(SUNDAY_EARLY)
        .submit()
        .unwrap();
    assert!(matches!(
        game.encode(&[3, 1]),
        Err(Error::DimensionCount {
            expected: 3,
            got: 2
        })
    ));
    assert!(matches!(
        game.encode(&[3, 1_000, 500]),
        Err(Error::DimensionOutOfRange { dimension: 1, .. })
    ));
    // An encoded score beyond the tuples' range is refused by the entry.
    let past = game.config().board().range().end;
    assert!(matches!(
        game.submission("ann", past).at(SUNDAY_EARLY).submit(),
        Err(Error::ScoreOutOfRange { .. })
    ));
    assert!(matches!(
        game.decode(past),
        Err(Error::ScoreOutOfRange { .. })
    ));
    // Policy::Increment has no meaning on tuples: the family is refused.
    let increment = FamilyConfig::new(
        RankingConfig::dimensions([Dim::higher(0..10), Dim::lower(0..10)])
            .policy(Policy::Increment),
    )
    .window(Window::Day);
    assert!(matches!(
        Family::create(&*db, "sums", increment),
        Err(Error::InvalidRanking { .. })
    ));
    assert_eq!(Family::list(&*db).unwrap(), ["levels"]);
    for w in [Window::AllTime, Window::Week, Window::Day] {
        let b = game
            .board(w, Period::At(SUNDAY_EARLY), None)
            .unwrap()
            .unwrap();
        assert_eq!(standings(&b), owned(&[("ann", [3, 1, 500], 1)]));
    }
}

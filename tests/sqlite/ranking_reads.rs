//! Issue 21's reads past their happy path (their answers are checked
//! against the oracle on every store and shape in `stores_ranking_trees.rs`,
//! `EVERY_READ`, and `stores_ranking_policy.rs`, `verify`): bad input is a
//! typed error before any read, an approximate board refuses what needs
//! its exact tree and answers what its index can, and composite and
//! lower-is-better boards take ranges as documented.

use autoshard::ranking::Update;
use autoshard::ranking::{Dim, Ranking, RankingConfig, ScoreOrder};
use autoshard::{Error, Sqlite};

fn invalid<T: std::fmt::Debug>(what: &str, r: autoshard::Result<T>) {
    assert!(
        matches!(r, Err(Error::InvalidRanking { .. })),
        "{what}: {r:?}"
    );
}

#[test]
fn bad_input_is_a_typed_error() {
    let db = Sqlite::memory().unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
    board.set_scores(&[("a", 10), ("b", 20)]).unwrap();
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = 20..=10;
    invalid("reversed count", board.count_between(reversed.clone()));
    invalid("reversed between", board.between(reversed, 5));
    for p in [-0.1, 100.1, f64::NAN, f64::INFINITY] {
        invalid("percentile", board.score_at_percentile(p));
    }
    invalid("page 0", board.page_number(0, 10));
    invalid("size 0", board.page_number(1, 0));
    invalid("count of size 0", board.page_count(0));
    assert!(matches!(board.entry(""), Err(Error::InvalidName { .. })));
    assert!(matches!(
        board.percentile("a\0"),
        Err(Error::InvalidName { .. })
    ));
    // Control: the same calls with good input answer.
    assert_eq!(board.count_between(10..=10).unwrap(), 1);
    assert_eq!(board.page_number(1, 1).unwrap()[0].player, "b");
    assert_eq!(board.score_at_percentile(100.0).unwrap(), Some(20));
    assert_eq!(board.page_count(1).unwrap(), 2);
}

#[test]
fn an_empty_board_answers_none_and_zero() {
    let db = Sqlite::memory().unwrap();
    let board = Ranking::create(&db, "b", RankingConfig::new(0..100)).unwrap();
    assert_eq!(board.score_at_percentile(50.0).unwrap(), None);
    assert_eq!(board.page_count(10).unwrap(), 0);
    assert_eq!(board.count_between(0..=99).unwrap(), 0);
    assert!(board.between(0..=99, 10).unwrap().is_empty());
    assert_eq!(board.entry("a").unwrap(), None);
    assert!(board.page_number(u64::MAX, u64::MAX).unwrap().is_empty());
}

#[test]
fn an_approximate_board_refuses_exact_reads_and_pages_from_its_index() {
    let db = Sqlite::memory().unwrap();
    let config = RankingConfig::new(0..100).approximate(4);
    let board = Ranking::create(&db, "b", config).unwrap();
    board
        .set_scores(&[("a", 10), ("b", 20), ("c", 30)])
        .unwrap();
    let refused = |call: &str, e: Error| match e {
        Error::ApproximateBoard { call: c, .. } => assert_eq!(c, call),
        other => panic!("{call}: {other:?}"),
    };
    refused("entry", board.entry("a").unwrap_err());
    refused("count_between", board.count_between(0..=50).unwrap_err());
    refused("between", board.between(0..=50, 3).unwrap_err());
    refused("percentile", board.percentile("a").unwrap_err());
    refused(
        "score_at_percentile",
        board.score_at_percentile(50.0).unwrap_err(),
    );
    let second: Vec<_> = board.page_number(2, 2).unwrap();
    assert_eq!((second[0].player.as_str(), second[0].position), ("a", 3));
    assert_eq!(board.page_count(2).unwrap(), 2);
}

#[test]
fn lower_is_better_ranges_are_score_values_best_first() {
    let db = Sqlite::memory().unwrap();
    let config = RankingConfig::new(0..1_000).order(ScoreOrder::LowerIsBetter);
    let board = Ranking::create(&db, "laps", config).unwrap();
    board
        .set_scores(&[("a", 61), ("b", 58), ("c", 70), ("d", 58)])
        .unwrap();
    let fast: Vec<_> = board.between(50..=65, 10).unwrap();
    let fast: Vec<_> = fast.iter().map(|e| (e.player.as_str(), e.rank)).collect();
    assert_eq!(fast, [("b", 1), ("d", 1), ("a", 3)]);
    assert_eq!(board.count_between(59..=2_000).unwrap(), 2);
    // The best (lowest) time is the 100th percentile.
    assert_eq!(board.percentile("b").unwrap(), Some(100.0));
    assert_eq!(board.score_at_percentile(25.0).unwrap(), Some(70));
}

#[test]
fn composite_ranges_are_over_the_encoded_score() {
    let db = Sqlite::memory().unwrap();
    let dims = [Dim::higher(0..10), Dim::higher(0..100)];
    let board = Ranking::create(&db, "c", RankingConfig::dimensions(dims)).unwrap();
    board.write(Update::dims("a", &[3, 50])).unwrap();
    board.write(Update::dims("b", &[3, 80])).unwrap();
    board.write(Update::dims("c", &[4, 0])).unwrap();
    let (lo, hi) = (
        board.encode(&[3, 0]).unwrap(),
        board.encode(&[3, 99]).unwrap(),
    );
    let level_3: Vec<_> = board.between(lo..=hi, 10).unwrap();
    let level_3: Vec<_> = level_3.iter().map(|e| e.player.as_str()).collect();
    assert_eq!(level_3, ["b", "a"]);
    let top = board.score_at_percentile(100.0).unwrap().unwrap();
    assert_eq!(board.decode(top).unwrap(), [4, 0]);
}

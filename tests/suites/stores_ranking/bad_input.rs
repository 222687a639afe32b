//! Bad input: configurations, board names and updates or queries that are
//! refused, and change nothing.

use super::{create, Boards};
use autoshard::ranking::{Ranking, RankingConfig, Tie};
use autoshard::Error;

every_store_tests!(
    bad_configurations_are_refused_and_create_nothing,
    board_names_are_validated_and_bound_as_data,
    bad_updates_and_queries_are_refused_and_change_nothing,
);

fn invalid_ranking(r: autoshard::Result<impl std::fmt::Debug>) -> bool {
    matches!(r, Err(Error::InvalidRanking { .. }))
}

#[allow(clippy::reversed_empty_ranges)] // reversed ranges are the point
fn bad_configurations_are_refused_and_create_nothing<S: Boards>() {
    let store = S::fresh();
    let db = store.db();
    let bad = [
        RankingConfig::new(0..10).branching(0),
        RankingConfig::new(0..10).branching(1),
        RankingConfig::new(0..10).branching(1001),
        RankingConfig::new(0..10).node_shards(0),
        RankingConfig::new(0..10).node_shards(1025),
        RankingConfig::new(0..10).queues(0),
        RankingConfig::new(5..5),
        RankingConfig::new(6..5),
        RankingConfig::new(i64::MAX..i64::MIN),
    ];
    for config in bad {
        let err = Ranking::create(db, "b", config.clone());
        assert!(invalid_ranking(err), "{config:?}");
    }
    // None of them left a board behind.
    assert!(matches!(
        Ranking::open(db, "b"),
        Err(Error::RankingNotFound { .. })
    ));
    Ranking::create(
        db,
        "b",
        RankingConfig::new(0..10)
            .branching(2)
            .node_shards(1024)
            .queues(3),
    )
    .unwrap();
    Ranking::create(db, "c", RankingConfig::new(0..10).branching(1000)).unwrap();
    let opened = Ranking::open(db, "b").unwrap();
    assert_eq!(
        (
            opened.config().branching(),
            opened.config().node_shards(),
            opened.config().queues()
        ),
        (2, 1024, 3)
    );
}

fn board_names_are_validated_and_bound_as_data<S: Boards>() {
    let store = S::fresh();
    let db = store.db();
    for name in ["", "tab\there", &"x".repeat(129)] {
        let err = Ranking::create(db, name, RankingConfig::new(0..10)).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{name:?}: {err}");
        let err = Ranking::open(db, name).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{name:?}: {err}");
    }
    // A hostile name is just a name.
    let hostile = "x'); DROP TABLE autoshard_rank_players; --";
    let board = Ranking::create(db, hostile, RankingConfig::new(0..10)).unwrap();
    board.set_score("p", 3).unwrap();
    assert_eq!(
        Ranking::open(db, hostile).unwrap().score("p").unwrap(),
        Some(3)
    );
    assert!(matches!(
        Ranking::create(db, hostile, RankingConfig::new(0..10)),
        Err(Error::RankingExists { name }) if name == hostile
    ));
    assert!(matches!(
        Ranking::open(db, "season-2"),
        Err(Error::RankingNotFound { name }) if name == "season-2"
    ));
    // The existing board survived the refused create.
    assert_eq!(Ranking::open(db, hostile).unwrap().config().range(), 0..10);
}

fn bad_updates_and_queries_are_refused_and_change_nothing<S: Boards>() {
    let store = S::fresh();
    let board = create(&*store, "strict", RankingConfig::new(-10..10).branching(3));
    board.set_scores(&[("a", 1), ("b", -10), ("c", 9)]).unwrap();
    let before = board.top(10).unwrap();

    for score in [10, -11, i64::MIN, i64::MAX] {
        let err = board.set_score("a", score).unwrap_err();
        assert!(
            matches!(
                err,
                Error::ScoreOutOfRange {
                    min: -10,
                    max: 10,
                    ..
                }
            ),
            "{score}: {err}"
        );
        assert!(!err.is_retryable());
        assert!(matches!(
            board.rank_of_score(score),
            Err(Error::ScoreOutOfRange { .. })
        ));
    }
    // One bad entry refuses the whole batch.
    let err = board
        .set_scores(&[("a", 2), ("d", 3), ("e", 10)])
        .unwrap_err();
    assert!(matches!(err, Error::ScoreOutOfRange { score: 10, .. }));
    let err = board.set_scores(&[("a", 2), ("", 3)]).unwrap_err();
    assert!(matches!(err, Error::InvalidName { .. }));

    let long = "p".repeat(257);
    for player in ["", "nul\0byte", long.as_str()] {
        assert!(
            matches!(board.set_score(player, 1), Err(Error::InvalidName { .. })),
            "{player:?}"
        );
        assert!(matches!(
            board.remove(player),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            board.rank(player, Tie::Dense),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            board.score(player),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            board.around(player, 1),
            Err(Error::InvalidName { .. })
        ));
    }
    board.set_score(&"p".repeat(256), 0).unwrap(); // the longest allowed name
    assert!(board.remove(&"p".repeat(256)).unwrap());
    // Names are data, bytes compared exactly.
    board.set_score("ünï'cødé; --", 4).unwrap();
    assert_eq!(board.score("ünï'cødé; --").unwrap(), Some(4));
    assert_eq!(board.score("UNI'CODE; --").unwrap(), None);
    assert!(board.remove("ünï'cødé; --").unwrap());

    assert!(invalid_ranking(board.page(0, 3)));
    assert!(invalid_ranking(board.page(4, 3)));
    assert_eq!(board.top(10).unwrap(), before);
    assert!(!board.remove("nobody").unwrap());
    assert_eq!(board.top(10).unwrap(), before);
    board.check_integrity().unwrap();
}

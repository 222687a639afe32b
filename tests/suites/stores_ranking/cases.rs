//! Named cases: the article's figure 5, Redis's tie example, a batch
//! applied twice, and scores at both ends of `i64`.

use super::{create, Boards};
use autoshard::ranking::{Ranking, RankingConfig, Tie};
use autoshard::Error;

every_store_tests!(
    code_jam_example,
    redis_tie_example,
    reapplying_a_batch_is_a_no_op,
    full_i64_range_ranks_the_extremes,
);

/// The article's figure 5: a ternary tree over 0..81 needs four levels, and
/// the player with score 30 has 22 players above, so ranks 23rd.
fn code_jam_example<S: Boards>() {
    let store = S::fresh();
    let board = create(&*store, "codejam", RankingConfig::new(0..81).branching(3));
    // 22 players above 30, spread so that every level of the path
    // contributes: 31 and 32 share 30's leaf, 33..35 is the next leaf,
    // 36..=53 are further right under the same root child, 54.. is the
    // root's last child.
    let above: Vec<i64> = [31, 32, 33, 34, 35, 36, 40, 44, 44, 45, 50, 53]
        .into_iter()
        .chain([54, 60, 61, 70, 72, 75, 78, 79, 80, 80])
        .collect();
    assert_eq!(above.len(), 22);
    let mut players: Vec<(String, i64)> = above
        .iter()
        .enumerate()
        .map(|(i, &s)| (format!("a{i}"), s))
        .collect();
    players.extend((0..10).map(|i| (format!("b{i}"), i * 3)));
    players.push(("me".into(), 30));
    players.push(("tied".into(), 30));
    let batch: Vec<_> = players.iter().map(|(p, s)| (p.as_str(), *s)).collect();
    board.set_scores(&batch).unwrap();

    assert_eq!(board.rank_of_score(30).unwrap(), 23);
    assert_eq!(board.rank("me", Tie::Standard).unwrap(), Some(23));
    assert_eq!(board.rank("tied", Tie::Standard).unwrap(), Some(23));
    assert_eq!(board.rank("tied", Tie::Ordinal).unwrap(), Some(24));

    // Four levels, and the root counts 0-26, 27-53 and 54-80 as in the
    // figure (one shard: the root is one row).
    // Row for row where the store keeps the tree (a board Redis Cluster
    // orders natively has none; its answers are checked above).
    if store.keeps_tree("codejam") {
        let nodes = store.rank_nodes("codejam");
        let depth = nodes.keys().map(|k| k.0).max().unwrap();
        assert_eq!(depth, 4);
        assert_eq!(nodes[&(4, 0, 0, 0)], [9, 15, 10]); // 0,3..24 | 27,30,30,31..53 | 54..
    }
    board.check_integrity().unwrap();
}

/// The Redis article's tie example: 18, 15, 15, 7, 7, 7, 3.
fn redis_tie_example<S: Boards>() {
    let store = S::fresh();
    let board = create(&*store, "redis", RankingConfig::new(0..100).branching(4));
    let scores = [
        ("a", 18),
        ("b", 15),
        ("c", 15),
        ("d", 7),
        ("e", 7),
        ("f", 7),
        ("g", 3),
    ];
    for (p, s) in scores {
        board.set_score(p, s).unwrap();
    }
    let ranks = |tie| -> Vec<u64> {
        scores
            .iter()
            .map(|(p, _)| board.rank(p, tie).unwrap().unwrap())
            .collect()
    };
    assert_eq!(ranks(Tie::Standard), [1, 2, 2, 4, 4, 4, 7]);
    assert_eq!(ranks(Tie::Dense), [1, 2, 2, 3, 3, 3, 4]);
    assert_eq!(ranks(Tie::Ordinal), [1, 2, 3, 4, 5, 6, 7]);

    // Setting the same score again keeps the place; leaving and coming back
    // puts the player behind everyone who holds it now.
    board.set_score("d", 7).unwrap();
    assert_eq!(board.rank("d", Tie::Ordinal).unwrap(), Some(4));
    board.set_score("d", 8).unwrap();
    board.set_score("d", 7).unwrap();
    assert_eq!(ranks(Tie::Ordinal), [1, 2, 3, 6, 4, 5, 7]);
    let page: Vec<_> = board
        .page(4, 6)
        .unwrap()
        .into_iter()
        .map(|e| (e.player, e.rank, e.dense, e.position))
        .collect();
    assert_eq!(
        page,
        [
            ("e".into(), 4, 3, 4),
            ("f".into(), 4, 3, 5),
            ("d".into(), 4, 3, 6)
        ]
    );
    board.check_integrity().unwrap();
}

/// A re-applied batch changes nothing, not even the order among ties, and a
/// player who leaves a score and comes back within one batch keeps their
/// place: readers never saw them leave.
fn reapplying_a_batch_is_a_no_op<S: Boards>() {
    let store = S::fresh();
    let board = create(
        &*store,
        "again",
        RankingConfig::new(0..1000).branching(10).node_shards(4),
    );
    board.set_scores(&[("v", 5), ("x", 6)]).unwrap();
    let batch = [
        ("x", 5),
        ("y", 5),
        ("z", 900),
        ("x", 6),
        ("w", 5),
        ("v", 7),
        ("v", 5),
    ];
    board.set_scores(&batch).unwrap();
    let order = |b: &Ranking| -> Vec<(String, i64)> {
        b.top(10)
            .unwrap()
            .into_iter()
            .map(|e| (e.player, e.score))
            .collect()
    };
    let before = order(&board);
    let expected = [("z", 900), ("x", 6), ("v", 5), ("y", 5), ("w", 5)];
    assert_eq!(before, expected.map(|(p, s)| (p.to_string(), s)));
    board.set_scores(&batch).unwrap();
    board.set_scores(&batch[3..]).unwrap();
    board.set_scores(&[("y", 5), ("z", 900)]).unwrap();
    assert_eq!(order(&board), before);
    board.check_integrity().unwrap();
}

fn full_i64_range_ranks_the_extremes<S: Boards>() {
    let store = S::fresh();
    let board = create(
        &*store,
        "wide",
        RankingConfig::new(i64::MIN..i64::MAX)
            .branching(2)
            .node_shards(3),
    );
    board
        .set_scores(&[
            ("lo", i64::MIN),
            ("hi", i64::MAX - 1),
            ("zero", 0),
            ("neg", -1),
        ])
        .unwrap();
    let order: Vec<_> = board
        .top(10)
        .unwrap()
        .into_iter()
        .map(|e| (e.player, e.score))
        .collect();
    assert_eq!(
        order,
        [
            ("hi".into(), i64::MAX - 1),
            ("zero".into(), 0),
            ("neg".into(), -1),
            ("lo".into(), i64::MIN)
        ]
    );
    assert_eq!(board.rank_of_score(i64::MIN).unwrap(), 4);
    assert_eq!(board.rank_of_score(i64::MAX - 1).unwrap(), 1);
    assert!(matches!(
        board.set_score("x", i64::MAX),
        Err(Error::ScoreOutOfRange {
            score: i64::MAX,
            min: i64::MIN,
            max: i64::MAX
        })
    ));
    board.check_integrity().unwrap();
}

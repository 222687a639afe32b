//! Ranking among an explicit set of players (`Ranking::among`, issue 10
//! item 6: Strava's "following" and club boards), on every store, against
//! the same ranking done by hand over the players' stored scores.

use autoshard::ranking::Update;
use autoshard::ranking::{Entry, Policy, Ranking, RankingConfig, ScoreOrder, MAX_AMONG};
use autoshard::Error;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::boards;
use boards::Boards;

every_store_tests!(
    among_ranks_a_set_as_a_board_of_its_own_would,
    among_refuses_bad_input_and_reads_one_snapshot,
);

/// `among(set)` equals a fresh board holding only the set's players,
/// filled in the order they reached their scores: rank, dense rank,
/// position, real scores (lower-is-better mirrored back) and entry data.
///
/// Control: sorting `among`'s entries by arrival descending instead of
/// ascending (`among.rs`) fails the tie cases (each round has ties: 40
/// players on 12 scores).
fn among_ranks_a_set_as_a_board_of_its_own_would<S: Boards>() {
    let store = S::fresh();
    let mut rng = SmallRng::seed_from_u64(7);
    for (round, order) in [ScoreOrder::HigherIsBetter, ScoreOrder::LowerIsBetter]
        .into_iter()
        .enumerate()
    {
        let config = RankingConfig::new(0..12)
            .order(order)
            .policy(Policy::Replace)
            .entry_data(8);
        let board = Ranking::create(store.db(), &format!("all-{round}"), config.clone()).unwrap();
        let players: Vec<String> = (0..40).map(|i| format!("p{i}")).collect();
        // Arrival order is the write order, so the set's own board is
        // filled in the same order.
        let mut writes = Vec::new();
        for _ in 0..80 {
            let player = &players[rng.random_range(0..players.len())];
            let score = rng.random_range(0..12);
            board
                .submit_update(Update::score(player, score).with_data(player.as_bytes()))
                .unwrap();
            writes.push((player.clone(), score));
        }
        let set: Vec<&str> = players
            .iter()
            .filter(|_| rng.random_range(0..3) > 0)
            .map(String::as_str)
            .chain(["nobody", "p1", "p1"])
            .collect();
        let own = Ranking::create(store.db(), &format!("own-{round}"), config).unwrap();
        for (player, score) in &writes {
            if set.contains(&player.as_str()) {
                own.submit_update(Update::score(player, *score).with_data(player.as_bytes()))
                    .unwrap();
            }
        }
        let expected: Vec<Entry> = own.top(1_000).unwrap();
        assert!(expected.len() > 5, "a set of {}", expected.len());
        assert_eq!(board.among(&set).unwrap(), expected, "{order:?}");
    }
}

fn among_refuses_bad_input_and_reads_one_snapshot<S: Boards>() {
    let store = S::fresh();
    let board = Ranking::create(store.db(), "b", RankingConfig::new(0..100)).unwrap();
    board.set_scores(&[("a", 1), ("b", 2)]).unwrap();
    let many: Vec<String> = (0..=MAX_AMONG).map(|i| format!("p{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert!(matches!(
        board.among(&many),
        Err(Error::InvalidRanking { .. })
    ));
    assert!(matches!(
        board.among(&["a", ""]),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        board.among(&["a", "nul\0"]),
        Err(Error::InvalidName { .. })
    ));
    assert_eq!(board.among(&[]).unwrap(), []);
    // The most the call takes, in one statement on PostgreSQL.
    let ranked = board.among(&many[..MAX_AMONG]).unwrap();
    assert_eq!(ranked, []);
    let mut with_a = many[..MAX_AMONG - 1].to_vec();
    with_a.push("a");
    let ranked = board.among(&with_a).unwrap();
    assert_eq!(ranked.len(), 1);
    assert_eq!((ranked[0].rank, ranked[0].position), (1, 1));
}

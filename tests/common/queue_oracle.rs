//! A brute-force oracle for the queue tests: expected scores, and a check
//! of every query the queue tests rely on against them.
#![allow(dead_code)] // each suite uses its own part of this

use autoshard::ranking::{Policy, Ranking, Tie};
use std::collections::{BTreeMap, BTreeSet};

/// The score range of the queue tests' boards.
pub const RANGE: std::ops::Range<i64> = 0..10_000;

/// Expected scores: player -> score; absent = not on the board.
pub type Scores = BTreeMap<String, i64>;

/// Checks every query the queue tests rely on against a brute-force model of
/// `expected`, over `players` (which may include players not on the board).
pub fn assert_board(board: &Ranking, expected: &Scores, players: &BTreeSet<String>) {
    board.check_integrity().expect("integrity");
    assert_eq!(board.len().unwrap(), expected.len() as u64, "len");
    let mut sorted: Vec<i64> = expected.values().copied().collect();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let higher = |s: i64| sorted.iter().take_while(|&&x| x > s).count() as u64;
    let distinct_higher = |s: i64| {
        let set: BTreeSet<i64> = sorted.iter().copied().filter(|&x| x > s).collect();
        set.len() as u64
    };
    let mut ordinals = BTreeSet::new();
    for player in players {
        let want = expected.get(player).copied();
        assert_eq!(board.score(player).unwrap(), want, "score of {player}");
        let Some(s) = want else {
            assert_eq!(board.rank(player, Tie::Standard).unwrap(), None, "{player}");
            continue;
        };
        let standard = board.rank(player, Tie::Standard).unwrap().unwrap();
        assert_eq!(standard, 1 + higher(s), "standard rank of {player}");
        let dense = board.rank(player, Tie::Dense).unwrap().unwrap();
        assert_eq!(dense, 1 + distinct_higher(s), "dense rank of {player}");
        let ordinal = board.rank(player, Tie::Ordinal).unwrap().unwrap();
        let tied = sorted.iter().filter(|&&x| x == s).count() as u64;
        assert!(
            (standard..standard + tied).contains(&ordinal),
            "ordinal rank {ordinal} of {player} outside {standard}..{}",
            standard + tied
        );
        assert!(ordinals.insert(ordinal), "ordinal rank {ordinal} twice");
    }
    assert!(expected.keys().all(|p| players.contains(p)));
    let n = expected.len() as u64;
    assert_eq!(ordinals, (1..=n).collect(), "ordinal ranks are not 1..=n");
    let top = board.top(10).unwrap();
    let want: Vec<i64> = sorted.iter().take(10).copied().collect();
    assert_eq!(
        top.iter().map(|e| e.score).collect::<Vec<_>>(),
        want,
        "top 10"
    );
    for e in &top {
        assert_eq!(expected.get(&e.player), Some(&e.score), "top entry {e:?}");
    }
    for s in [RANGE.start, 2_500, 5_000, RANGE.end - 1] {
        assert_eq!(
            board.rank_of_score(s).unwrap(),
            1 + higher(s),
            "rank_of_score({s})"
        );
    }
}

pub fn apply(scores: &mut Scores, player: &str, score: Option<i64>) {
    match score {
        Some(s) => scores.insert(player.to_owned(), s),
        None => scores.remove(player),
    };
}

/// One queued update as the oracle applies it: a new score, or under
/// `Policy::Increment` a delta.
pub fn apply_as(policy: Policy, scores: &mut Scores, player: &str, value: Option<i64>) {
    match (policy, value) {
        (Policy::Increment, Some(delta)) => *scores.entry(player.to_owned()).or_insert(0) += delta,
        _ => apply(scores, player, value),
    }
}

/// The board as the public API reads it, for `players`.
pub fn read_scores(board: &Ranking, players: &BTreeSet<String>) -> Scores {
    players
        .iter()
        .filter_map(|p| board.score(p).unwrap().map(|s| (p.clone(), s)))
        .collect()
}

/// One update, direct (`set_score`/`remove`) or through the queue.
pub fn write(board: &Ranking, queued: bool, player: &str, score: Option<i64>) {
    match (queued, score) {
        (true, Some(s)) => board.enqueue(player, s).unwrap(),
        (true, None) => board.enqueue_remove(player).unwrap(),
        (false, Some(s)) => board.set_score(player, s).unwrap(),
        (false, None) => {
            board.remove(player).unwrap();
        }
    }
}

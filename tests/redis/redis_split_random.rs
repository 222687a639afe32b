//! Split boards on Redis Cluster against a board of one tree, on random
//! writes and reads at sizes the shared oracle suite (`stores_ranking_trees`,
//! ten players) never reaches: every policy and both score orders, entry
//! data, one distinct score or thousands, trees of equal and of very
//! unequal sizes, pages longer than a look's window (2,048) and reads at
//! both ends. `redis_split_boards` checks chosen positions of two boards;
//! this draws them.
//!
//! Runs on `AUTOSHARD_REDIS_CLUSTER_URL`, else on a cluster the test run
//! starts by itself (`autoshard-test-servers`).
#![cfg(feature = "redis")]

use autoshard::ranking::{Policy, Ranking, RankingConfig, ScoreOrder, Tie, Update};
use autoshard::RedisCluster;

use crate::stores::TestStore;

/// A xorshift generator: the draws are the same on every run, so a
/// failure names its case and repeats.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
}

/// One board shape: trees, players, how many distinct scores they share,
/// whether most players sit in the first tree, the policy and the order.
struct Shape {
    trees: u32,
    players: usize,
    distinct: u64,
    skewed: bool,
    policy: Policy,
    order: ScoreOrder,
}

const SHAPES: [Shape; 4] = [
    Shape {
        trees: 3,
        players: 5_000,
        distinct: 1,
        skewed: false,
        policy: Policy::Replace,
        order: ScoreOrder::HigherIsBetter,
    },
    Shape {
        trees: 5,
        players: 2_500,
        distinct: 30_000,
        skewed: false,
        policy: Policy::Best,
        order: ScoreOrder::LowerIsBetter,
    },
    Shape {
        trees: 2,
        players: 5_000,
        distinct: 40,
        skewed: true,
        policy: Policy::Worst,
        order: ScoreOrder::HigherIsBetter,
    },
    Shape {
        trees: 3,
        players: 3_000,
        distinct: 1_000,
        skewed: false,
        policy: Policy::Increment,
        order: ScoreOrder::LowerIsBetter,
    },
];

const RANGE: i64 = 1_000_000;

fn same<T: PartialEq + std::fmt::Debug>(what: &str, split: T, one: T) {
    assert_eq!(split, one, "{what}: split board (left) vs one tree (right)");
}

/// Each shape's two boards get the same writes (batches, moves, removals,
/// submissions with entry data), then 30 rounds of random reads of every
/// kind, each compared.
///
/// Controls, reverted: with a page taken from the merged lists even where
/// a tree's list was cut (`trees/native/mod.rs`, `anchored`: the `exact`
/// check only when it is 0), this failed at `page 3..=2502` of the skewed
/// shape (as `a_split_board_of_unequal_trees_reads_as_a_board_of_one_tree`
/// did at `page at 2047`); with the counts of a batch's second chunk of
/// scores written to the first chunk's (`native_scripts::MOVES`, `pres[j]`
/// for `pres[s + j - 1]`), it failed at `page 2479..=4978` of the shape of
/// 30,000 scores (a dense rank), where before the second pass and its
/// batches of 1,500 no shape's batch reached a second chunk.
#[test]
fn random_reads_of_split_boards_match_a_board_of_one_tree() {
    let store = RedisCluster::fresh();
    for (case, shape) in SHAPES.iter().enumerate() {
        let mut draw = Draw(0x9e37_79b9_7f4a_7c15 ^ case as u64);
        let config = || {
            RankingConfig::new(0..RANGE)
                .policy(shape.policy)
                .order(shape.order)
                .entry_data(16)
        };
        let one = Ranking::create(&*store, &format!("one-{case}"), config()).unwrap();
        let split = Ranking::create(
            &*store,
            &format!("split-{case}"),
            config().trees(shape.trees),
        )
        .unwrap();
        // Shown with a failure: which shape it was.
        eprintln!(
            "shape {case}: {} trees, {} players on {} scores, skewed {}, {:?}, {:?}",
            shape.trees, shape.players, shape.distinct, shape.skewed, shape.policy, shape.order
        );
        let names = players(shape);
        let n = names.len() as u64;
        let step = RANGE as u64 / shape.distinct;
        let adds = shape.policy == Policy::Increment;
        // A score of the shape's few; under `Increment` a small step, so
        // sums stay in the range.
        let value = |draw: &mut Draw, start: bool| match (adds, start) {
            (true, false) => draw.below(3) as i64,
            (true, true) => (draw.below(shape.distinct) * step / 2) as i64,
            (false, _) => (draw.below(shape.distinct) * step) as i64,
        };
        // Twice: the second pass moves the players again, so a batch
        // touches up to 3,000 scores' counts (several chunks of a
        // script's variadic calls, `native_scripts::MOVES`).
        for pass in [true, false] {
            for chunk in names.chunks(1_500) {
                let batch: Vec<(&str, i64)> = chunk
                    .iter()
                    .map(|p| (p.as_str(), value(&mut draw, pass)))
                    .collect();
                one.set_scores(&batch).unwrap();
                split.set_scores(&batch).unwrap();
            }
        }
        for _ in 0..60 {
            let player = &names[draw.below(n) as usize];
            let score = value(&mut draw, false);
            match draw.below(3) {
                0 => same(
                    "remove",
                    split.remove(player).unwrap(),
                    one.remove(player).unwrap(),
                ),
                1 => {
                    split.set_score(player, score).unwrap();
                    one.set_score(player, score).unwrap();
                }
                _ => {
                    let data = format!("d{}", draw.below(100));
                    let update = || Update::score(player, score).with_data(data.as_bytes());
                    same(
                        &format!("submission of {player}"),
                        split.submit_update(update()).unwrap(),
                        one.submit_update(update()).unwrap(),
                    );
                }
            }
        }
        let len = one.len().unwrap();
        same("len", split.len().unwrap(), len);
        for _ in 0..30 {
            reads(&mut draw, &split, &one, &names, len);
        }
        for player in names.iter().take(50) {
            same(
                "entry",
                split.entry(player).unwrap(),
                one.entry(player).unwrap(),
            );
        }
        split.check_integrity().unwrap();
        one.check_integrity().unwrap();
    }
}

/// The shape's players; when skewed, about 9 in 10 in the first tree.
fn players(shape: &Shape) -> Vec<String> {
    use autoshard::__private::tree_hooks::tree_of;
    (0..)
        .map(|i| format!("q{i}"))
        .filter(|p| !shape.skewed || tree_of(p, shape.trees as usize) == 0 || p.len() % 9 == 0)
        .take(shape.players)
        .collect()
}

/// One round of every read at drawn positions, sizes and players.
fn reads(draw: &mut Draw, split: &Ranking, one: &Ranking, names: &[String], len: u64) {
    let from = match draw.below(4) {
        0 => 1 + draw.below(3),
        1 => len.saturating_sub(draw.below(5)).max(1),
        _ => 1 + draw.below(len + 3),
    };
    let to = from + draw.pick(&[1u64, 2, 10, 100, 777, 2_500]) - 1;
    let at = format!("{from}..={to}");
    same(
        &format!("page {at}"),
        split.page(from, to).unwrap(),
        one.page(from, to).unwrap(),
    );
    let rank = 1 + draw.below(len + 2);
    same(
        &format!("score_at_rank {rank}"),
        split.score_at_rank(rank).unwrap(),
        one.score_at_rank(rank).unwrap(),
    );
    let player = names[draw.below(names.len() as u64) as usize].as_str();
    for tie in [Tie::Standard, Tie::Dense, Tie::Ordinal] {
        same(
            &format!("rank of {player} ({tie:?})"),
            split.rank(player, tie).unwrap(),
            one.rank(player, tie).unwrap(),
        );
    }
    let k = draw.pick(&[0u64, 1, 5, 300]);
    same(
        &format!("around {player} {k}"),
        split.around(player, k).unwrap(),
        one.around(player, k).unwrap(),
    );
    same(
        &format!("percentile of {player}"),
        split.percentile(player).unwrap(),
        one.percentile(player).unwrap(),
    );
    let p = draw.below(100_001) as f64 / 1_000.0;
    same(
        &format!("score_at_percentile {p}"),
        split.score_at_percentile(p).unwrap(),
        one.score_at_percentile(p).unwrap(),
    );
    let low = draw.below(RANGE as u64) as i64;
    let scores = low..=low + draw.below(300_000) as i64;
    let limit = draw.pick(&[1u64, 10, 500, 5_000]);
    same(
        &format!("between {scores:?}, {limit}"),
        split.between(scores.clone(), limit).unwrap(),
        one.between(scores.clone(), limit).unwrap(),
    );
    same(
        &format!("count_between {scores:?}"),
        split.count_between(scores.clone()).unwrap(),
        one.count_between(scores).unwrap(),
    );
    let set: Vec<&str> = (0..draw.below(20))
        .map(|_| names[draw.below(names.len() as u64) as usize].as_str())
        .collect();
    same(
        &format!("among {set:?}"),
        split.among(&set).unwrap(),
        one.among(&set).unwrap(),
    );
    let n = draw.below(3_000);
    same(
        &format!("top {n}"),
        split.top(n).unwrap(),
        one.top(n).unwrap(),
    );
    let size = 1 + draw.below(300);
    let number = 1 + draw.below(len / size + 2);
    same(
        &format!("page_number {number} of {size}"),
        split.page_number(number, size).unwrap(),
        one.page_number(number, size).unwrap(),
    );
    same(
        &format!("page_count {size}"),
        split.page_count(size).unwrap(),
        one.page_count(size).unwrap(),
    );
}

//! `autoshard::testing::laws` on every entity the tests share
//! (`tests/common`), and on entities whose folds or shard methods break a
//! law: each of those is caught, with the law named. The examples' entities
//! are checked by tests inside the examples themselves (`cargo test` runs
//! them: `test = true` in `Cargo.toml`), as an application would.

use autoshard::testing::laws;
use autoshard::testing::proptest::collection::btree_set;
use autoshard::{shard_fold, shard_method, Pending, Shardable};
use std::collections::BTreeSet;
use std::panic::{catch_unwind, UnwindSafe};

use crate::entities;
use crate::ledger;
use entities::{DynamicSwitch, Question, StaticSwitch};
use ledger::Ledger;

// ---------------------------------------------------------------------------
// The shared entities obey the laws.
// ---------------------------------------------------------------------------

#[test]
fn question_folds_and_shard_methods_are_lawful() {
    let laws = laws::<Question>()
        .values("votes", -1_000_000i64..1_000_000)
        .values("views", 0i64..1_000_000);
    laws.check_folds();
    let question = Question::new(1, 0, 0);
    laws.check_shard_method_with(&question, -100i64..100, Question::vote);
    laws.check_shard_method(&question, Question::view);
}

#[test]
fn switch_folds_and_shard_methods_are_lawful() {
    let fixed = laws::<StaticSwitch>().values("hits", -1_000_000i64..1_000_000);
    fixed.check_folds();
    let switch = StaticSwitch {
        id: 1,
        hits: 0,
        pending: Pending::default(),
    };
    fixed.check_shard_method(&switch, StaticSwitch::hit);

    let grown = laws::<DynamicSwitch>().values("hits", -1_000_000i64..1_000_000);
    grown.check_folds();
    let switch = DynamicSwitch {
        id: 1,
        hits: 0,
        pending: Pending::default(),
    };
    grown.check_shard_method(&switch, DynamicSwitch::hit);
}

#[test]
fn ledger_folds_and_shard_methods_are_lawful() {
    let laws = laws::<Ledger>()
        .values("fixed", -1_000_000i64..1_000_000)
        .values("grown", -1_000_000i64..1_000_000)
        .values("ops", btree_set(0u64..1_000, 0..8));
    laws.check_folds();
    let ledger = Ledger::new(1);
    laws.check_shard_method_with(&ledger, 0u64..1_000, Ledger::count_static);
    laws.check_shard_method_with(&ledger, 0u64..1_000, Ledger::count_dynamic);
    laws.check_shard_method(&ledger, Ledger::count_only);
    laws.check_shard_method_with(&ledger, 0u64..1_000, Ledger::record_only);
}

// ---------------------------------------------------------------------------
// Broken entities are caught.
// ---------------------------------------------------------------------------

/// The checker's panic message for `check`.
fn caught(check: impl FnOnce() + UnwindSafe) -> String {
    let panic = catch_unwind(check).expect_err("the checker let a broken law pass");
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .expect("a panic message");
    eprintln!("caught as expected:\n{message}\n");
    message
}

/// Lawful folds, and shard methods that the fold cannot replay.
#[derive(Shardable, Debug)]
struct Poll {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, shards = 4)]
    votes: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Poll {
    fn new() -> Self {
        Poll {
            id: 1,
            votes: 0,
            pending: Pending::default(),
        }
    }

    /// The README's example of a change the fold cannot replay: the delta
    /// of neutral is 0, so the store records nothing while the object
    /// doubles.
    #[shard_method]
    fn double(&mut self) {
        self.votes *= 2;
    }

    /// An assignment: the delta is 5, added to whatever is stored.
    #[shard_method]
    fn set_five(&mut self) {
        self.votes = 5;
    }

    /// A branch on the field's own value: the first run sees the delta
    /// (0), not the total.
    #[shard_method]
    fn vote_unless_popular(&mut self) {
        if self.votes < 100 {
            self.votes += 1;
        }
    }

    #[shard_fold]
    fn fold_votes(a: i64, b: i64) -> i64 {
        a + b
    }
}

fn poll_laws() -> autoshard::testing::Laws<Poll> {
    laws::<Poll>().values("votes", -1_000i64..1_000)
}

#[test]
fn doubling_a_sharded_field_is_caught() {
    poll_laws().check_folds(); // the fold itself is fine
    let message = caught(|| poll_laws().check_shard_method(&Poll::new(), Poll::double));
    assert!(
        message.contains("Poll::double` breaks the replay rule on `Poll.votes`"),
        "{message}"
    );
    // Proptest shrinks to the smallest total that shows it: 1 (or -1)
    // doubles to 2, while the delta 0 folds back to 1.
    assert!(
        message.contains("from 1 it made 2, but the delta it recorded, 0, folds to 1")
            || message.contains("from -1 it made -2, but the delta it recorded, 0, folds to -1"),
        "{message}"
    );
}

#[test]
fn assigning_a_sharded_field_is_caught() {
    let message = caught(|| poll_laws().check_shard_method(&Poll::new(), Poll::set_five));
    assert!(message.contains("breaks the replay rule"), "{message}");
}

#[test]
fn branching_on_a_sharded_field_is_caught() {
    let message = caught(|| {
        poll_laws().check_shard_method(&Poll::new(), Poll::vote_unless_popular);
    });
    assert!(message.contains("breaks the replay rule"), "{message}");
    assert!(message.contains("from 100 it made 100"), "{message}");
}

/// An average as a fold: commutative, but `0` (or anything) is not its
/// identity, and it is not associative; the design's advice is to keep
/// `(sum, count)` instead, which [`FairRating`] does.
#[derive(Shardable, Debug)]
struct Rating {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0.0)]
    stars: f64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Rating {
    #[shard_fold]
    fn fold_stars(a: f64, b: f64) -> f64 {
        (a + b) / 2.0
    }
}

#[test]
fn an_average_fold_is_caught() {
    let message = caught(|| {
        laws::<Rating>()
            .values_eq("stars", 0.0f64..5.0, |a, b| (a - b).abs() < 1e-9)
            .check_folds();
    });
    assert!(
        message.contains("the fold of `Rating.stars` breaks a law: neutral is not its identity"),
        "{message}"
    );
}

/// The average done right: `(sum, count)`, folded component-wise.
#[derive(Shardable, Debug)]
struct FairRating {
    #[shard(id)]
    id: u64,
    #[shard(neutral = (0, 0))]
    stars: (i64, i64),
    #[shard(pending)]
    pending: Pending<Self>,
}

impl FairRating {
    #[shard_method]
    fn rate(&mut self, stars: i64) {
        self.stars.0 += stars;
        self.stars.1 += 1;
    }

    #[shard_fold]
    fn fold_stars(a: (i64, i64), b: (i64, i64)) -> (i64, i64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

#[test]
fn the_sum_and_count_in_place_of_an_average_pass() {
    let laws = laws::<FairRating>().values("stars", (0i64..1_000_000, 0i64..200_000));
    laws.check_folds();
    let rating = FairRating {
        id: 1,
        stars: (0, 0),
        pending: Pending::default(),
    };
    laws.check_shard_method_with(&rating, 1i64..=5, FairRating::rate);
}

/// Last writer wins: `neutral` is an identity on the left only, and the
/// order of shard rows decides the total.
#[derive(Shardable, Debug)]
struct Status {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0)]
    code: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Status {
    #[shard_fold]
    fn fold_code(_a: i64, b: i64) -> i64 {
        b
    }
}

#[test]
fn a_last_writer_wins_fold_is_caught() {
    let message = caught(|| laws::<Status>().values("code", 1i64..100).check_folds());
    assert!(
        message.contains("neutral is not its identity")
            && message.contains("fold(1, neutral 0) = 0, expected 1"),
        "{message}"
    );
}

/// `|a - b|` over non-negative values: 0 is its identity and it is
/// commutative, but not associative.
#[derive(Shardable, Debug)]
struct Gap {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0)]
    gap: u32,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Gap {
    #[shard_fold]
    fn fold_gap(a: u32, b: u32) -> u32 {
        a.abs_diff(b)
    }
}

#[test]
fn a_non_associative_fold_is_caught() {
    let message = caught(|| laws::<Gap>().values("gap", 0u32..1_000).check_folds());
    assert!(message.contains("not associative"), "{message}");
}

/// A set union is lawful; the same union over a `Vec` (append) is not
/// commutative.
#[derive(Shardable, Debug)]
struct Log {
    #[shard(id)]
    id: u64,
    #[shard(neutral = Vec::new())]
    lines: Vec<u8>,
    #[shard(neutral = BTreeSet::new())]
    tags: BTreeSet<u8>,
    #[shard(pending)]
    pending: Pending<Self>,
}

impl Log {
    #[shard_fold]
    fn fold_lines(mut a: Vec<u8>, b: Vec<u8>) -> Vec<u8> {
        a.extend(b);
        a
    }

    #[shard_fold]
    fn fold_tags(mut a: BTreeSet<u8>, b: BTreeSet<u8>) -> BTreeSet<u8> {
        a.extend(b);
        a
    }
}

#[test]
fn an_append_fold_is_caught_as_not_commutative() {
    use autoshard::testing::proptest::collection::vec;
    let message = caught(|| {
        laws::<Log>()
            .values("lines", vec(0u8..4, 0..4))
            .values("tags", btree_set(0u8..4, 0..4))
            .check_folds();
    });
    assert!(
        message.contains("the fold of `Log.lines` breaks a law: not commutative"),
        "{message}"
    );
}

/// A fold that refuses (overflow through `checked_sum`) on one side of a
/// law only is a failure: the store could fail to load a total another
/// grouping of the same rows would give.
#[derive(Shardable, Debug)]
struct Big {
    #[shard(id)]
    id: u64,
    #[shard(neutral = 0, fold = autoshard::fold::checked_sum)]
    n: i64,
    #[shard(pending)]
    pending: Pending<Self>,
}

#[test]
fn checked_sum_is_lawful_where_it_cannot_overflow_and_caught_where_it_can() {
    laws::<Big>()
        .values("n", -1_000_000_000i64..1_000_000_000)
        .check_folds();
    let message = caught(|| {
        laws::<Big>()
            .values("n", autoshard::testing::proptest::num::i64::ANY)
            .check_folds();
    });
    assert!(message.contains("error ("), "{message}");
}

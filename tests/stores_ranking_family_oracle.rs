//! Board families against a plain in-memory model, on SQLite files and
//! PostgreSQL: random windows × filters × policies × orders, submissions
//! at random times over nine days across a week, a month and a year end
//! (at a random UTC offset and first weekday), players changing filter
//! values, increments refused past the range; then expired periods
//! dropped. After each case every member board in the store must hold
//! exactly the model's players, scores and standard ranks (boards a
//! refused submission created may be empty), and pass `check_integrity`.
//!
//! The model takes each period's key from `Family::span` (the calendar is
//! checked on its own in `ranking/family/window.rs`); everything else
//! (which boards a submission touches, leaving a filter value, policies,
//! all-or-nothing refusal, retention) it computes by itself.
//!
//! Control, reverted: with the leave step skipped in `submit.rs` (a player
//! who changes age group stays on the old group's board), this failed on
//! SQLite within a few cases with the old group's board holding the player
//! in the store and not in the model.
//!
//! More cases: `AUTOSHARD_FAMILY_CASES=200 cargo test --test
//! stores_ranking_family_oracle`.

use autoshard::ranking::{Family, FamilyConfig, Order, Period, Policy, RankingConfig, Weekday};
use autoshard::ranking::{FamilySubmission, Window};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::collections::{BTreeMap, HashMap};

#[path = "common/family.rs"]
mod family;
#[path = "common/stores.rs"]
mod stores;
use family::{non_empty, snapshot, MemberKey, Snapshot};

store_tests!(families_agree_with_a_model);

const DAY: i64 = 86_400;
/// 2026-12-28 00:00 UTC, a Monday: nine days from here cross a week, a
/// month and a year.
const BASE: i64 = 1_798_416_000;
const WINDOWS: [Window; 5] = [
    Window::AllTime,
    Window::Year,
    Window::Month,
    Window::Week,
    Window::Day,
];
const DIMS: [(&str, [&str; 2]); 2] = [("age", ["u35", "35+"]), ("weight", ["light", "heavy"])];
const PLAYERS: [&str; 4] = ["ann", "bo", "cy", "di"];

#[derive(Debug, Clone)]
struct Op {
    player: usize,
    value: i64,
    /// Per dimension: a value index, or none.
    filters: [Option<usize>; 2],
    day: i64,
    hour: i64,
}

fn op() -> impl Strategy<Value = Op> {
    let filter = prop::option::weighted(0.8, 0..2usize);
    (
        0..PLAYERS.len(),
        -6..20i64,
        [filter.clone(), filter],
        0..9i64,
        prop::sample::select(vec![0i64, 4, 12, 23]),
    )
        .prop_map(|(player, value, filters, day, hour)| Op {
            player,
            value,
            filters,
            day,
            hour,
        })
}

struct Model {
    policy: Policy,
    order: Order,
    range: (i64, i64),
    boards: BTreeMap<MemberKey, BTreeMap<String, i64>>,
    values: HashMap<String, [Option<usize>; 2]>,
}

impl Model {
    /// The player's score after `value` under the policy; `None` when the
    /// family must refuse the whole submission.
    fn next(&self, old: Option<i64>, value: i64) -> Option<i64> {
        let new = match (self.policy, old) {
            (Policy::Increment, _) => old.unwrap_or(0) + value,
            (Policy::Best, Some(o)) if !self.order.is_better(value, o) => o,
            (Policy::Worst, Some(o)) if self.order.is_better(value, o) => o,
            _ => value,
        };
        (self.range.0..self.range.1).contains(&new).then_some(new)
    }

    /// Applies a submission; the new score per member, or `None` (and no
    /// change) if the family must refuse it.
    fn submit(&mut self, f: &Family, op: &Op, ts: i64) -> Option<BTreeMap<MemberKey, i64>> {
        let player = PLAYERS[op.player];
        let old = self.values.get(player).copied().unwrap_or_default();
        let mut boards = self.boards.clone();
        let mut written = BTreeMap::new();
        for window in f.config().windows() {
            let key = f.span(window, Period::At(ts)).unwrap().key;
            let mut targets = vec![None];
            for (d, value) in op.filters.iter().enumerate() {
                if let Some(v) = value {
                    targets.push(Some((DIMS[d].0.to_owned(), DIMS[d].1[*v].to_owned())));
                }
                if let Some(was) = old[d].filter(|was| Some(*was) != *value) {
                    let left = (window, key, Some((DIMS[d].0.into(), DIMS[d].1[was].into())));
                    if let Some(board) = boards.get_mut(&left) {
                        board.remove(player);
                    }
                }
            }
            for target in targets {
                let member = (window, key, target);
                let board = boards.entry(member.clone()).or_default();
                let new = self.next(board.get(player).copied(), op.value)?;
                board.insert(player.into(), new);
                written.insert(member, new);
            }
        }
        self.boards = boards;
        self.values.insert(player.into(), op.filters);
        Some(written)
    }

    /// Players, scores and standard ranks of every non-empty board.
    fn snapshot(&self) -> Snapshot {
        let mut out = Snapshot::new();
        for (member, board) in &self.boards {
            if board.is_empty() {
                continue;
            }
            let ranked = board.iter().map(|(p, &s)| {
                let better = board.values().filter(|&&o| self.order.is_better(o, s));
                (p.clone(), (s, better.count() as u64 + 1))
            });
            out.insert(member.clone(), ranked.collect());
        }
        out
    }
}

fn written(done: &FamilySubmission) -> BTreeMap<MemberKey, i64> {
    done.members
        .iter()
        .map(|(m, s)| ((m.span.window, m.span.key, m.filter.clone()), s.new_score))
        .collect()
}

fn cases<S: stores::TestStore>() -> u32 {
    match std::env::var("AUTOSHARD_FAMILY_CASES") {
        Ok(n) => n.parse().expect("a number of cases"),
        // PostgreSQL round trips cost more: fewer cases there.
        Err(_) if S::NAME == "sqlite" => 16,
        Err(_) => 6,
    }
}

fn families_agree_with_a_model<S: stores::TestStore>() {
    let db = S::fresh();
    let mut runner = TestRunner::new(Config {
        cases: cases::<S>(),
        source_file: Some(file!()),
        ..Config::default()
    });
    let case = std::cell::Cell::new(0);
    let shape = (
        prop::sample::select(vec![
            Policy::Replace,
            Policy::Best,
            Policy::Worst,
            Policy::Increment,
        ]),
        prop::sample::select(vec![Order::HigherIsBetter, Order::LowerIsBetter]),
        1..32usize,
        prop::sample::select(vec![0, -300, 330]),
        prop::sample::select(vec![Weekday::Monday, Weekday::Sunday, Weekday::Friday]),
        0..3u32,
    );
    let strategy = (shape, prop::collection::vec(op(), 1..14));
    let outcome = runner.run(&strategy, |(shape, ops)| {
        let (policy, order, windows, offset, week, keep) = shape;
        case.set(case.get() + 1);
        let range = if policy == Policy::Increment {
            (0, 25)
        } else {
            (-6, 20)
        };
        let mut config = FamilyConfig::new(
            RankingConfig::new(range.0..range.1)
                .branching(4)
                .policy(policy)
                .order(order),
        )
        .utc_offset_minutes(offset)
        .week_starts(week)
        .auto_drop(false);
        for (i, w) in WINDOWS.iter().enumerate() {
            if windows & (1 << i) != 0 {
                config = config.keep(*w, keep);
            }
        }
        for (dim, values) in DIMS {
            config = config.filter(dim, values);
        }
        let f = Family::create(&*db, &format!("f{}", case.get()), config)?;
        let mut model = Model {
            policy,
            order,
            range,
            boards: BTreeMap::new(),
            values: HashMap::new(),
        };
        let mut latest = BASE;
        for op in &ops {
            let ts = BASE + op.day * DAY + op.hour * 3600;
            latest = latest.max(ts);
            let mut entry = f.entry(PLAYERS[op.player], op.value).at(ts);
            for (d, v) in op.filters.iter().enumerate() {
                if let Some(v) = v {
                    entry = entry.filter(DIMS[d].0, DIMS[d].1[*v]);
                }
            }
            let done = entry.submit();
            match model.submit(&f, op, ts) {
                Some(want) => prop_assert_eq!(written(&done?), want),
                None => prop_assert!(
                    matches!(done, Err(autoshard::Error::ScoreOutOfRange { .. })),
                    "{:?}",
                    done
                ),
            }
        }
        prop_assert_eq!(non_empty(snapshot(&f)), model.snapshot());
        // Retention: what the family keeps as of the latest submission.
        f.drop_expired_at(latest)?;
        model.boards.retain(|(w, key, _), _| {
            let current = f.span(*w, Period::At(latest)).unwrap().key;
            *w == Window::AllTime || *key >= current - i64::from(keep)
        });
        prop_assert_eq!(non_empty(snapshot(&f)), model.snapshot());
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

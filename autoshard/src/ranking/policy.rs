//! Update policies and score order: what a submitted value does to a
//! player's score, and which end of the range ranks first.
//!
//! The tree only knows one order: higher is better. A lower-is-better
//! board stores every score mirrored inside its range (`min + max - 1 -
//! score`, its *tree score*) and mirrors it back on the way out, so the
//! tree, its integrity check, the ranking-order index and the tie rules are
//! the same for both orders. Policies are applied in tree scores too, where
//! "better" is always "higher"; only `Increment` adds in real scores.
//! `docs/design/ranking-tree.md` ("Ranking tree", "Policies and order") has the reasons.

use super::apply::{apply_updates_from, store_entry_data, Step};
use super::handle::check_player;
use super::query::{self, Want};
use super::shape;
use super::storage::Storage;
use super::tree::Geometry;
use super::{Ranking, Update};
use crate::error::{Error, Result};
use crate::seam::NativeSubmitted;

/// What a submitted score does to the player's stored one, set per board
/// with [`RankingConfig::policy`](super::RankingConfig::policy) and fixed
/// when the board is created.
///
/// Every write call ([`set_score`](Ranking::set_score),
/// [`set_scores`](Ranking::set_scores), [`submit`](Ranking::submit),
/// [`enqueue`](Ranking::enqueue)) submits a value; the policy decides what
/// the player's score becomes. A batch applies its values in order, so a
/// player named twice in one batch gets both: two increments add up, and
/// `Best` keeps the best of the stored score and the whole batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// The value becomes the score (the default).
    #[default]
    Replace,
    /// The better of the stored score and the value, under the board's
    /// [`ScoreOrder`]: a personal best (Redis `ZADD GT` on a higher-is-better
    /// board, `ZADD LT` on a lower-is-better one).
    Best,
    /// The worse of the stored score and the value, under the board's order.
    Worst,
    /// The value is added to the score (negative values subtract): points,
    /// counters. A player who is not on the board starts at 0. A sum outside
    /// the board's range is refused with
    /// [`Error::ScoreOutOfRange`](crate::Error::ScoreOutOfRange).
    Increment,
}

/// Which scores rank first, set per board with
/// [`RankingConfig::order`](super::RankingConfig::order) and fixed when the
/// board is created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ScoreOrder {
    /// The highest score ranks first (the default): points, trophies.
    #[default]
    HigherIsBetter,
    /// The lowest score ranks first: elapsed times, strokes, retries.
    LowerIsBetter,
}

impl Policy {
    /// The name stored in the board table.
    pub(crate) fn stored(self) -> &'static str {
        match self {
            Policy::Replace => "replace",
            Policy::Best => "best",
            Policy::Worst => "worst",
            Policy::Increment => "increment",
        }
    }

    pub(crate) fn from_stored(name: &str) -> Option<Self> {
        [
            Policy::Replace,
            Policy::Best,
            Policy::Worst,
            Policy::Increment,
        ]
        .into_iter()
        .find(|p| p.stored() == name)
    }
}

impl ScoreOrder {
    /// The name stored in the board table.
    pub(crate) fn stored(self) -> &'static str {
        match self {
            ScoreOrder::HigherIsBetter => "higher_is_better",
            ScoreOrder::LowerIsBetter => "lower_is_better",
        }
    }

    pub(crate) fn from_stored(name: &str) -> Option<Self> {
        [ScoreOrder::HigherIsBetter, ScoreOrder::LowerIsBetter]
            .into_iter()
            .find(|o| o.stored() == name)
    }

    /// Whether score `a` ranks strictly before score `b`.
    pub fn is_better(self, a: i64, b: i64) -> bool {
        match self {
            ScoreOrder::HigherIsBetter => a > b,
            ScoreOrder::LowerIsBetter => a < b,
        }
    }
}

/// A board's policy and order, and the mapping between scores and tree
/// scores they imply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    pub policy: Policy,
    pub order: ScoreOrder,
    /// An approximate board: updates write player rows only (`approx/`).
    pub approx: bool,
    /// Shard rows per inner node (`RankingConfig::node_shards`): a batch
    /// that writes alone folds them into one (`apply/flush.rs`).
    pub shards: u32,
}

impl Rules {
    /// The tree score of `score`, or [`Error::ScoreOutOfRange`].
    pub fn tree_score(self, g: &Geometry, score: i64) -> Result<i64> {
        g.checked_offset(score)?;
        Ok(match self.order {
            ScoreOrder::HigherIsBetter => score,
            ScoreOrder::LowerIsBetter => g.mirror(score).expect("checked above"),
        })
    }

    /// The score a stored tree score stands for; `None` if it is outside
    /// the board's range (a damaged row).
    pub fn score(self, g: &Geometry, tree: i64) -> Option<i64> {
        match self.order {
            ScoreOrder::HigherIsBetter => Some(tree),
            ScoreOrder::LowerIsBetter => g.mirror(tree),
        }
    }

    /// [`score`](Rules::score), reporting a tree score outside the range as
    /// corruption of the row that held it.
    pub fn checked_score(self, st: &dyn Storage, g: &Geometry, tree: i64) -> Result<i64> {
        self.score_on(st.board_name(), g, tree)
    }

    /// [`checked_score`](Rules::checked_score) of a tree score board
    /// `board` holds, read outside a transaction.
    pub fn score_on(self, board: &str, g: &Geometry, tree: i64) -> Result<i64> {
        self.score(g, tree).ok_or_else(|| Error::Corrupt {
            kind: "ranking",
            id: board.to_owned(),
            field: format!("player score {tree}"),
            reason: "outside the board's range".into(),
        })
    }

    /// Checks a submitted value on its own, before it is written or queued:
    /// a score must be in range; an increment may be any `i64`, its sum is
    /// checked when it is applied.
    pub fn check_value(self, g: &Geometry, value: i64) -> Result<()> {
        match self.policy {
            Policy::Increment => Ok(()),
            _ => g.checked_offset(value).map(drop),
        }
    }

    /// The tree score a player at tree score `current` ends at when `value`
    /// is submitted; `current` must be in range (the caller checks).
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`] for a score outside the range, or an
    /// increment whose sum is (clamped to `i64` if the sum overflows it).
    pub fn next(self, g: &Geometry, current: Option<i64>, value: i64) -> Result<i64> {
        if self.policy == Policy::Increment {
            let old = current.map_or(0, |c| self.score(g, c).expect("in range"));
            return match old.checked_add(value) {
                Some(sum) => self.tree_score(g, sum),
                // Past `i64` itself: reported clamped, which may be a score
                // in range (`i64::MIN` on a board starting there).
                None => Err(Error::ScoreOutOfRange {
                    score: if value < 0 { i64::MIN } else { i64::MAX },
                    min: g.min(),
                    max: g.max(),
                }),
            };
        }
        let tree = self.tree_score(g, value)?;
        Ok(match (self.policy, current) {
            (Policy::Best, Some(c)) => c.max(tree),
            (Policy::Worst, Some(c)) => c.min(tree),
            _ => tree,
        })
    }
}

/// What one submission did, as [`Ranking::submit`] reports it: enough for
/// "new personal record: you moved from 212th to 87th".
///
/// Ranks are standard ranks ([`Tie::Standard`](super::Tie::Standard)): 1 +
/// the players with a strictly better score, counted in the submission's
/// transaction just before and just after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Submission {
    /// The player's score before, `None` if they were not on the board.
    pub old_score: Option<i64>,
    /// The player's score now, after the board's policy (under
    /// [`Policy::Best`] the old score when the submitted one was no better).
    pub new_score: i64,
    /// The player's rank before, `None` if they were not on the board.
    pub old_rank: Option<u64>,
    /// The player's rank now.
    pub new_rank: u64,
    /// Whether the new score is strictly better than the old one under the
    /// board's order, or the player is new: a personal best.
    pub new_best: bool,
}

impl Submission {
    /// Whether the stored score changed.
    pub fn changed(&self) -> bool {
        self.old_score != Some(self.new_score)
    }
}

/// [`Ranking::submit`].
pub(in crate::ranking) fn submit(
    ranking: &Ranking,
    player: &str,
    score: i64,
) -> Result<Submission> {
    ranking.submit_update(Update::score(player, score))
}

pub(in crate::ranking) fn submission(
    ranking: &Ranking,
    player: &str,
    score: i64,
    data: Option<&[u8]>,
) -> Result<Submission> {
    shape::exact_only(ranking, "submit")?;
    check_input(ranking, player, Some(score))?;
    shape::of(ranking)
        .writes()
        .submission(ranking, player, score, data)
}

/// [`submit`](Ranking::submit) on a board of one tree, checked.
pub(in crate::ranking) fn one_tree_submission(
    ranking: &Ranking,
    player: &str,
    score: i64,
    data: Option<&[u8]>,
) -> Result<Submission> {
    if let Some(done) = super::write::submit_native(ranking, player, score, data)? {
        return native_reported(ranking, done);
    }
    let shard = ranking.inner.random_shard();
    ranking
        .inner
        .write_with(|st| submit_in(ranking, st, shard, player, score, data))
}

/// [`submit_in`](Ranking::submit_in) without the ranks it reports: the
/// write alone, for a caller that drops the report. A family worker
/// applies a batch's submissions in one transaction, where the ranks of
/// a native board (read from the state before the transaction) would
/// not account for a player's earlier move in it.
pub(in crate::ranking) fn write_in(
    ranking: &Ranking,
    st: &dyn Storage,
    shard: u32,
    player: &str,
    score: i64,
    data: Option<&[u8]>,
) -> Result<Step> {
    let (rules, g) = (ranking.inner.rules(), ranking.inner.geometry());
    let (update, floor) = ([(player, Some(score))], shape::arrival_floor(ranking, 1));
    let step = apply_updates_from(st, g, rules, shard, &update, None, &|_| floor)?[0];
    store_entry_data(st, rules, &update, [data], &[step], &[])?;
    Ok(step)
}

/// The body of [`submit`](Ranking::submit) in a write transaction that
/// is already open (a family's multi-board write runs it once per
/// member); `player` and `score` are checked.
pub(in crate::ranking) fn submit_in(
    ranking: &Ranking,
    st: &dyn Storage,
    shard: u32,
    player: &str,
    score: i64,
    data: Option<&[u8]>,
) -> Result<Submission> {
    let g = ranking.inner.geometry();
    let step = write_in(ranking, st, shard, player, score, data)?;
    let new = step.after.expect("a score, not a removal");
    let above = |tree: i64| -> Result<u64> {
        let offset = g.offset(tree).expect("checked by the update");
        Ok(query::place_of(st, g, offset, Want::default())?.above)
    };
    let (old_rank, new_rank) = match st.native() {
        Some(native) => super::native::submission_ranks(native, step.before, new)?,
        // Counted after the update: the player is above their old
        // score now exactly when they moved up, and was not before.
        None => (
            match step.before {
                Some(old) => Some(above(old)? + 1 - u64::from(new > old)),
                None => None,
            },
            above(new)? + 1,
        ),
    };
    reported(
        ranking,
        st.board_name(),
        (step.before, new),
        (old_rank, new_rank),
    )
}

/// The submission a store that orders `ranking` natively reported.
pub(in crate::ranking) fn native_reported(
    ranking: &Ranking,
    done: NativeSubmitted,
) -> Result<Submission> {
    let ranks = (done.above_before.map(|n| n + 1), done.above_after + 1);
    reported(ranking, ranking.name(), (done.before, done.after), ranks)
}

/// The submission that moved a player of board `board` between the tree
/// scores `moved` (`None`: they were not on it), with the standard ranks
/// `ranks` before and after.
fn reported(
    ranking: &Ranking,
    board: &str,
    moved: (Option<i64>, i64),
    ranks: (Option<u64>, u64),
) -> Result<Submission> {
    let (rules, g) = (ranking.inner.rules(), ranking.inner.geometry());
    let (before, after) = moved;
    Ok(Submission {
        old_score: match before {
            Some(old) => Some(rules.score_on(board, g, old)?),
            None => None,
        },
        new_score: rules.score_on(board, g, after)?,
        old_rank: ranks.0,
        new_rank: ranks.1,
        new_best: before.is_none_or(|old| after > old),
    })
}

/// Checks one update's player name and value under the board's policy.
pub(in crate::ranking) fn check_input(
    ranking: &Ranking,
    player: &str,
    value: Option<i64>,
) -> Result<()> {
    check_player(player)?;
    match value {
        Some(value) => ranking
            .inner
            .rules()
            .check_value(ranking.inner.geometry(), value),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(policy: Policy, order: ScoreOrder) -> Rules {
        Rules {
            policy,
            order,
            approx: false,
            shards: 1,
        }
    }

    #[test]
    fn stored_names_round_trip() {
        for p in [
            Policy::Replace,
            Policy::Best,
            Policy::Worst,
            Policy::Increment,
        ] {
            assert_eq!(Policy::from_stored(p.stored()), Some(p));
        }
        for o in [ScoreOrder::HigherIsBetter, ScoreOrder::LowerIsBetter] {
            assert_eq!(ScoreOrder::from_stored(o.stored()), Some(o));
        }
        assert_eq!(Policy::from_stored("Replace"), None);
        assert_eq!(ScoreOrder::from_stored(""), None);
    }

    /// Tree scores mirror a lower-is-better range onto itself, extremes
    /// included, and policies pick the better one in tree scores.
    #[test]
    fn lower_is_better_mirrors_the_range() {
        let g = Geometry::new(-5, 5, 3).unwrap();
        let low = rules(Policy::Best, ScoreOrder::LowerIsBetter);
        assert_eq!(low.tree_score(&g, -5).unwrap(), 4);
        assert_eq!(low.tree_score(&g, 4).unwrap(), -5);
        assert_eq!(low.score(&g, 0), Some(-1));
        assert!(low.tree_score(&g, 5).is_err());
        // Best on lower-is-better keeps the smaller score.
        let stored = low.tree_score(&g, 2).unwrap();
        let kept = low.next(&g, Some(stored), 3).unwrap();
        assert_eq!(low.score(&g, kept), Some(2));
        let improved = low.next(&g, Some(stored), -3).unwrap();
        assert_eq!(low.score(&g, improved), Some(-3));
        let worst = rules(Policy::Worst, ScoreOrder::LowerIsBetter);
        assert_eq!(
            worst.score(&g, worst.next(&g, Some(stored), 3).unwrap()),
            Some(3)
        );

        let g = Geometry::new(i64::MIN, i64::MAX, 2).unwrap();
        let low = rules(Policy::Replace, ScoreOrder::LowerIsBetter);
        assert_eq!(low.tree_score(&g, i64::MIN).unwrap(), i64::MAX - 1);
        assert_eq!(low.tree_score(&g, i64::MAX - 1).unwrap(), i64::MIN);
        assert_eq!(low.score(&g, -1), Some(-1));
    }

    /// Increments add in real scores (a lower-is-better board's tree score
    /// goes down), start at 0, and a sum past the range or past `i64` is
    /// refused with the sum.
    #[test]
    fn increments_add_and_refuse_sums_outside_the_range() {
        let g = Geometry::new(-10, 10, 4).unwrap();
        for order in [ScoreOrder::HigherIsBetter, ScoreOrder::LowerIsBetter] {
            let inc = rules(Policy::Increment, order);
            let three = inc.next(&g, None, 3).unwrap();
            assert_eq!(inc.score(&g, three), Some(3));
            let five = inc.next(&g, Some(three), 2).unwrap();
            assert_eq!(inc.score(&g, five), Some(5));
            match inc.next(&g, Some(five), 5) {
                Err(Error::ScoreOutOfRange {
                    score: 10,
                    min: -10,
                    max: 10,
                }) => {}
                other => panic!("{other:?}"),
            }
            assert!(
                inc.check_value(&g, i64::MAX).is_ok(),
                "any delta may be queued"
            );
        }
        let g = Geometry::new(i64::MIN, i64::MAX, 2).unwrap();
        let inc = rules(Policy::Increment, ScoreOrder::HigherIsBetter);
        let low = inc.next(&g, None, i64::MIN).unwrap();
        match inc.next(&g, Some(low), -1) {
            // Clamped to i64::MIN, which is in range: refused all the same.
            Err(Error::ScoreOutOfRange {
                score: i64::MIN, ..
            }) => {}
            other => panic!("{other:?}"),
        }
        match inc.next(&g, Some(i64::MAX - 1), 1) {
            Err(Error::ScoreOutOfRange {
                score: i64::MAX, ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn order_compares() {
        assert!(ScoreOrder::HigherIsBetter.is_better(2, 1));
        assert!(ScoreOrder::LowerIsBetter.is_better(1, 2));
        assert!(!ScoreOrder::LowerIsBetter.is_better(1, 1));
    }
}

//! The direct writes: [`Ranking::set_score`], [`Ranking::set_scores`] and
//! [`Ranking::remove`], each one write transaction applying its updates
//! as one batch (`apply/`) under the board's policy; `submit` is in
//! `policy.rs`, the queued writes in `queue/`.

use super::apply::{apply_updates_from, Step};
use super::handle::check_player;
use super::policy;
use super::shape;
use super::Ranking;
use super::ScoreOrder;
use crate::error::{Error, Result};
use crate::seam::{NativeRefused, NativeSubmitted, NativeValue};

/// Applies `updates` (validated) in one write transaction under the
/// board's policy, inner-node deltas going to one random shard; each
/// update's tree scores before and after it.
pub(in crate::ranking) fn write_steps(
    ranking: &Ranking,
    updates: &[(&str, Option<i64>)],
) -> Result<Vec<Step>> {
    write_at(ranking, updates, None)
}

/// [`write_steps`](Ranking::write_steps); `at`, on a tree of a split board, is a
/// block of arrival numbers reserved for a batch of the whole board and
/// each update's index in that batch, so that players arriving in
/// different trees are ordered as the batch orders them.
pub(in crate::ranking) fn write_at(
    ranking: &Ranking,
    updates: &[(&str, Option<i64>)],
    at: Option<(u64, &[usize])>,
) -> Result<Vec<Step>> {
    let (rules, shard) = (ranking.inner.rules(), ranking.inner.random_shard());
    ranking.inner.write_with(|st| {
        let floor = floors(ranking, updates.len(), at);
        apply_updates_from(
            st,
            ranking.inner.geometry(),
            rules,
            shard,
            updates,
            None,
            &floor,
        )
    })
}

/// The arrival floor of update `i` of a write of `n` updates (see
/// [`write_at`](Ranking::write_at)): 0, the store's counter alone,
/// except on a tree of a split board. Taken once per transaction
/// attempt, so a retried one arrives later.
fn floors<'a>(
    ranking: &Ranking,
    n: usize,
    at: Option<(u64, &'a [usize])>,
) -> impl Fn(usize) -> u64 + 'a {
    let base = at.map_or_else(|| shape::arrival_floor(ranking, n), |(base, _)| base);
    move |i: usize| match at {
        _ if base == 0 => 0,
        Some((_, index)) => base + index[i] as u64,
        None => base + i as u64,
    }
}

/// [`write_at`](Ranking::write_at) for a split board's batch, in one
/// step where the store orders the tree natively.
pub(in crate::ranking) fn write_scores_at(
    ranking: &Ranking,
    updates: &[(&str, Option<i64>)],
    at: (u64, &[usize]),
) -> Result<()> {
    if write_native(ranking, updates, Some(at))?.is_some() {
        return Ok(());
    }
    write_at(ranking, updates, Some(at)).map(drop)
}

/// [`Ranking::set_score`].
pub(in crate::ranking) fn set_score(ranking: &Ranking, player: &str, score: i64) -> Result<()> {
    policy::check_input(ranking, player, Some(score))?;
    shape::of(ranking)
        .writes()
        .set_score(ranking, player, score)
}

/// [`set_score`](Ranking::set_score) on a board of one tree, checked.
pub(in crate::ranking) fn one_tree_set_score(
    ranking: &Ranking,
    player: &str,
    score: i64,
) -> Result<()> {
    if write_native(ranking, &[(player, Some(score))], None)?.is_some() {
        return Ok(());
    }
    write_steps(ranking, &[(player, Some(score))]).map(drop)
}

/// [`Ranking::remove`].
pub(in crate::ranking) fn remove(ranking: &Ranking, player: &str) -> Result<bool> {
    check_player(player)?;
    shape::of(ranking).writes().remove(ranking, player)
}

/// [`remove`](Ranking::remove) on a board of one tree, checked.
pub(in crate::ranking) fn one_tree_remove(ranking: &Ranking, player: &str) -> Result<bool> {
    if let Some(found) = write_native(ranking, &[(player, None)], None)? {
        return Ok(found > 0);
    }
    Ok(write_steps(ranking, &[(player, None)])?[0].before.is_some())
}

/// [`Ranking::set_scores`].
pub(in crate::ranking) fn set_scores(ranking: &Ranking, scores: &[(&str, i64)]) -> Result<()> {
    for &(player, score) in scores {
        policy::check_input(ranking, player, Some(score))?;
    }
    if scores.is_empty() {
        return Ok(());
    }
    shape::of(ranking).writes().set_scores(ranking, scores)
}

/// [`set_scores`](Ranking::set_scores) on a board of one tree, checked,
/// not empty.
pub(in crate::ranking) fn one_tree_set_scores(
    ranking: &Ranking,
    scores: &[(&str, i64)],
) -> Result<()> {
    let updates: Vec<_> = scores.iter().map(|&(p, s)| (p, Some(s))).collect();
    if write_native(ranking, &updates, None)?.is_some() {
        return Ok(());
    }
    write_steps(ranking, &updates).map(drop)
}

/// Applies validated updates in one step where the store orders this
/// board natively and can apply the board's policy itself
/// ([`BoardStore::write_native`](crate::seam::BoardStore)): how many
/// of the batch's players were on the board before it, `None` if it
/// cannot, and nothing was written. Only where the caller needs no
/// step back beyond that count.
fn write_native(
    ranking: &Ranking,
    updates: &[(&str, Option<i64>)],
    at: Option<(u64, &[usize])>,
) -> Result<Option<u64>> {
    // Removals take no policy: a batch of them is one step whatever
    // the board's.
    let removals = updates.iter().all(|&(_, value)| value.is_none());
    let Some(policy) = native_policy(ranking, removals) else {
        return Ok(None);
    };
    let floor = floors(ranking, updates.len(), at);
    let mut native = Vec::with_capacity(updates.len());
    for (i, &(player, value)) in updates.iter().enumerate() {
        let value = match value {
            Some(v) => native_value(ranking, v)?,
            None => NativeValue::Remove,
        };
        native.push((player, value, None, floor(i)));
    }
    let done = ranking
        .inner
        .boards
        .write_native(ranking.inner.board(), policy, &native)?;
    done.map(|done| done.map_err(|r| refused(ranking, updates, r)))
        .transpose()
}

/// [`submit`](Ranking::submit) of a validated score and data in one step
/// where the store orders this board natively and can apply the board's
/// policy itself ([`BoardStore::submit_native`](crate::seam::BoardStore)):
/// the tree scores and counts the submission reports, `None` if it
/// cannot, and nothing was written.
pub(in crate::ranking) fn submit_native(
    ranking: &Ranking,
    player: &str,
    score: i64,
    data: Option<&[u8]>,
) -> Result<Option<NativeSubmitted>> {
    let Some(policy) = native_policy(ranking, false) else {
        return Ok(None);
    };
    let floor = floors(ranking, 1, None)(0);
    let update = (player, native_value(ranking, score)?, data, floor);
    let done = ranking
        .inner
        .boards
        .submit_native(ranking.inner.board(), policy, update)?;
    done.map(|done| done.map_err(|r| refused(ranking, &[(player, Some(score))], r)))
        .transpose()
}

/// The stored name of the policy a store applies in one step
/// (`BoardStore::write_native`), `None` where the board's writes need
/// the transaction: an approximate board's.
pub(in crate::ranking) fn native_policy(ranking: &Ranking, removals: bool) -> Option<&'static str> {
    let rules = ranking.inner.rules();
    if rules.approx {
        return None;
    }
    Some(match removals {
        true => super::Policy::Replace.stored(),
        false => rules.policy.stored(),
    })
}

/// A validated value as a store applies it natively: a tree score, or
/// under `Increment` the increment in tree scores.
pub(in crate::ranking) fn native_value(ranking: &Ranking, value: i64) -> Result<NativeValue> {
    let (rules, g) = (ranking.inner.rules(), ranking.inner.geometry());
    if rules.policy != super::Policy::Increment {
        return Ok(NativeValue::Score(rules.tree_score(g, value)?));
    }
    // Where lower is better a tree score is the mirrored score, which an
    // increment moves the other way.
    let by = match rules.order {
        ScoreOrder::HigherIsBetter => i128::from(value),
        ScoreOrder::LowerIsBetter => -i128::from(value),
    };
    Ok(NativeValue::Add {
        by,
        // A player not on the board starts from 0.
        fresh: rules.tree_score(g, value).ok(),
        lo: g.min(),
        // `max` is one past the largest score (wrapping at `i64::MAX`).
        hi: g.max().wrapping_sub(1),
    })
}

/// The error an update the store refused meets in the transaction: an
/// increment whose sum leaves the range, computed as `apply/` does.
pub(in crate::ranking) fn refused(
    ranking: &Ranking,
    updates: &[(&str, Option<i64>)],
    r: NativeRefused,
) -> Error {
    let (rules, g) = (ranking.inner.rules(), ranking.inner.geometry());
    let in_range = r.current.is_none_or(|c| rules.score(g, c).is_some());
    match updates.get(r.index) {
        Some(&(_, Some(value))) if in_range => match rules.next(g, r.current, value) {
            Err(e) => e,
            Ok(_) => native_refusal(ranking, r, "an update in range"),
        },
        _ => native_refusal(ranking, r, "no increment there"),
    }
}

fn native_refusal(ranking: &Ranking, r: NativeRefused, what: &str) -> Error {
    Error::Corrupt {
        kind: "ranking",
        id: ranking.name().to_owned(),
        field: format!("native write, update {} at {:?}", r.index, r.current),
        reason: format!("the store refused {what}"),
    }
}

/// Checks one queued update (player name, value) without writing.
pub(in crate::ranking) fn check_update(
    ranking: &Ranking,
    player: &str,
    score: Option<i64>,
) -> Result<()> {
    policy::check_input(ranking, player, score)
}

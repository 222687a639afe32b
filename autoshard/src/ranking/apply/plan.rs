//! Batch planning: a batch's values taken in order under the board's
//! policy, to what each update did (`Step`) and where each player whose
//! score changed ends (`NetMoves`). Only the net moves touch the tree, so
//! re-applying a batch of absolute scores changes nothing; the approximate
//! boards plan their batches here too.

use super::super::policy::Rules;
use super::super::storage::Storage;
use super::super::tree::Geometry;
use crate::error::{Error, Result};

/// A player's tree score before and after one update of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    pub before: Option<i64>,
    pub after: Option<i64>,
}

/// Refused updates of a batch that goes on without them: `(index in the
/// batch, why)`. The queue's worker dead-letters them.
pub(crate) type Refused = Vec<(usize, Error)>;

/// Per player whose score a batch changed: the index of their last change
/// and their final tree score (`None`: removed).
pub(crate) type NetMoves<'u> = super::FastMap<&'u str, (usize, Option<i64>)>;

/// A batch's values taken in order under `rules`, from each player's
/// stored tree score (`stored`, asked once per player): each update's step,
/// and per player whose score changed, the index of their last change and
/// their final tree score. An update the policy refuses fails the batch,
/// or with `refused` is listed there and changes nothing. Shared by the
/// tree's batches and the approximate boards' (`approx/apply.rs`).
pub(crate) fn net_effect<'u>(
    st: &dyn Storage,
    g: &Geometry,
    rules: Rules,
    updates: &[(&'u str, Option<i64>)],
    mut stored: impl FnMut(&str) -> Result<Option<i64>>,
    mut refused: Option<&mut Refused>,
) -> Result<(Vec<Step>, NetMoves<'u>)> {
    let mut net = NetMoves::default();
    let mut seen: super::FastMap<&str, Option<i64>> = Default::default();
    let mut steps = Vec::with_capacity(updates.len());
    for (i, &(player, value)) in updates.iter().enumerate() {
        let current = match (net.get(player), seen.get(player)) {
            (Some(&(_, current)), _) => current,
            (None, Some(&current)) => current,
            (None, None) => {
                let current = stored(player)?;
                seen.insert(player, current);
                current
            }
        };
        let next = match value {
            None => Ok(None),
            Some(value) => {
                // A stored score outside the range is damage, reported as
                // the update that leaves it would report it.
                if let Some(c) = current.filter(|&c| g.offset(c).is_none()) {
                    rules.checked_score(st, g, c)?;
                }
                rules.next(g, current, value).map(Some)
            }
        };
        let next = match (next, refused.as_deref_mut()) {
            (Ok(next), _) => next,
            (Err(e), Some(refused)) => {
                refused.push((i, e));
                current
            }
            (Err(e), None) => return Err(e),
        };
        steps.push(Step {
            before: current,
            after: next,
        });
        if current != next {
            net.insert(player, (i, next));
        }
    }
    Ok((steps, net))
}

//! A family submission in one step, where the store writes the family's
//! boards natively in one place (Redis Cluster: its boards share a slot,
//! so one script): every member of the current periods and, for a player
//! new to the family, their filter values, guarded by the values already
//! stored. A player whose stored values differ from the submission's may
//! have boards to leave, which only the transaction (`submit.rs`) finds;
//! the step then writes nothing and the transaction runs instead, as it
//! does wherever the store cannot take the step (another store, an
//! `Increment` or approximate board, a member deleted meanwhile).

use super::submit::{encode_values, FamilySubmission, FamilyUpdate};
use crate::error::{Error, Result};
use crate::ranking::{policy, write, Ranking};
use crate::seam::{NativeRefused, NativeStep, NativeTogether};

/// What [`FamilyUpdate::in_one_step`] did.
pub(super) enum OneStep {
    Done(FamilySubmission),
    /// Nothing written: the store cannot take the step, or the player's
    /// stored values differ. `opened`: a member of a new period was
    /// created on the way (the transaction, finding it, does not know).
    Declined {
        opened: bool,
    },
}

impl FamilyUpdate<'_> {
    /// The submission in one step, if the store takes it.
    pub(super) fn in_one_step(
        &self,
        ts: i64,
        values: &[Option<&str>],
        data: Option<&[u8]>,
    ) -> Result<OneStep> {
        let f = self.family;
        let config = f.config();
        let (targets, opened) = self.members_written(ts, values)?;
        let encoded = encode_values(config, values);
        let players = &f.inner.players;
        let declined = OneStep::Declined { opened };
        let Some(guard) = step(players, self.player, 0, Some(encoded.as_bytes()))? else {
            return Ok(declined);
        };
        let mut steps = Vec::with_capacity(targets.len());
        for (board, _) in &targets {
            match step(board, self.player, self.score, data)? {
                Some(step) => steps.push(step),
                None => return Ok(declined),
            }
        }
        let reports = match f.inner.boards.submit_native_together(guard, &steps) {
            Ok(Some(NativeTogether::Submitted(reports))) => reports,
            // Values to compare, boards to leave, a board to open again:
            // the transaction's work.
            Ok(Some(NativeTogether::Guarded) | None) | Err(Error::RankingNotFound { .. }) => {
                return Ok(declined)
            }
            // As the transaction refuses it: no member written.
            Ok(Some(NativeTogether::Refused(r))) => {
                let (board, update) = match targets.get(r.index) {
                    Some((board, _)) => (board, vec![(self.player, Some(self.score))]),
                    // Not a step: reported as the store's fault.
                    None => (players, Vec::new()),
                };
                let at = NativeRefused { index: 0, ..r };
                return Err(write::refused(board, &update, at));
            }
            Err(e) => return Err(e),
        };
        let mut members = Vec::with_capacity(targets.len());
        for ((board, m), done) in targets.into_iter().zip(reports) {
            members.push((m, policy::native_reported(&board, done)?));
        }
        Ok(OneStep::Done(FamilySubmission {
            members,
            left: Vec::new(),
            dropped: usize::from(opened),
            drop_error: None,
        }))
    }
}

/// `board`'s update of the step, `None` where its writes need the
/// transaction.
fn step<'a>(
    board: &'a Ranking,
    player: &'a str,
    score: i64,
    data: Option<&'a [u8]>,
) -> Result<Option<NativeStep<'a>>> {
    let Some(policy) = write::native_policy(board, false) else {
        return Ok(None);
    };
    Ok(Some(NativeStep {
        board: board.inner.board(),
        policy,
        // One tree, so no arrival floor: a split member takes the
        // transaction (the store orders only single trees natively).
        update: (player, write::native_value(board, score)?, data, 0),
    }))
}

//! The direct writes: [`Ranking::set_score`], [`Ranking::set_scores`] and
//! [`Ranking::remove`], each one write transaction applying its updates
//! as one batch (`apply/`) under the board's policy; `submit` is in
//! `policy.rs`, the queued writes in `queue/`.

use super::apply::{apply_updates_from, Step};
use super::handle::check_player;
use super::Ranking;
use crate::error::Result;

impl Ranking {
    /// Applies `updates` (validated) in one write transaction under the
    /// board's policy, inner-node deltas going to one random shard; each
    /// update's tree scores before and after it.
    pub(super) fn write_steps(&self, updates: &[(&str, Option<i64>)]) -> Result<Vec<Step>> {
        self.write_at(updates, None)
    }

    /// [`write_steps`](Ranking::write_steps); `at`, on a tree of a split board, is a
    /// block of arrival numbers reserved for a batch of the whole board and
    /// each update's index in that batch, so that players arriving in
    /// different trees are ordered as the batch orders them.
    pub(super) fn write_at(
        &self,
        updates: &[(&str, Option<i64>)],
        at: Option<(u64, &[usize])>,
    ) -> Result<Vec<Step>> {
        let (rules, shard) = (self.rules(), self.random_shard());
        self.write_with(|st| {
            let floor = self.floors(updates.len(), at);
            apply_updates_from(st, self.geometry(), rules, shard, updates, None, &floor)
        })
    }

    /// The arrival floor of update `i` of a write of `n` updates (see
    /// [`write_at`](Ranking::write_at)): 0, the store's counter alone,
    /// except on a tree of a split board. Taken once per transaction
    /// attempt, so a retried one arrives later.
    fn floors<'a>(&self, n: usize, at: Option<(u64, &'a [usize])>) -> impl Fn(usize) -> u64 + 'a {
        let base = at.map_or_else(|| self.arrival_floor(n), |(base, _)| base);
        move |i: usize| match at {
            _ if base == 0 => 0,
            Some((_, index)) => base + index[i] as u64,
            None => base + i as u64,
        }
    }

    /// [`write_at`](Ranking::write_at) for a split board's batch, in one
    /// step where the store orders the tree natively.
    pub(super) fn write_scores_at(
        &self,
        updates: &[(&str, Option<i64>)],
        at: (u64, &[usize]),
    ) -> Result<()> {
        if self.write_native(updates, Some(at))?.is_some() {
            return Ok(());
        }
        self.write_at(updates, Some(at)).map(drop)
    }

    /// Submits `score` for `player` under the board's
    /// [`Policy`](super::Policy): with the default
    /// [`Policy::Replace`](super::Policy::Replace) it becomes their score,
    /// replacing any earlier one; [`Policy::Best`](super::Policy::Best) and
    /// [`Policy::Worst`](super::Policy::Worst) keep the better or worse of
    /// the two; [`Policy::Increment`](super::Policy::Increment) adds it.
    /// [`submit`](Ranking::submit) does the same and reports what changed.
    /// Setting the score a player already has changes nothing (not even
    /// their place among ties), so a retried call is harmless, except under
    /// `Increment`, where every call adds.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`](crate::Error::ScoreOutOfRange) for a score
    /// outside the board's range (under `Increment`, a sum outside it),
    /// [`Error::InvalidName`](crate::Error::InvalidName) (player names are 1
    /// to [`MAX_PLAYER_LEN`](super::MAX_PLAYER_LEN) bytes without NUL), or a
    /// store error; nothing is written on error.
    pub fn set_score(&self, player: &str, score: i64) -> Result<()> {
        self.check_input(player, Some(score))?;
        self.shape().writes().set_score(self, player, score)
    }

    /// [`set_score`](Ranking::set_score) on a board of one tree, checked.
    pub(in crate::ranking) fn one_tree_set_score(&self, player: &str, score: i64) -> Result<()> {
        if self.write_native(&[(player, Some(score))], None)?.is_some() {
            return Ok(());
        }
        self.write_steps(&[(player, Some(score))]).map(drop)
    }

    /// Removes `player`; returns whether they were on the board.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a player name
    /// `set_score` would refuse, or a store error; nothing is written on
    /// error.
    pub fn remove(&self, player: &str) -> Result<bool> {
        check_player(player)?;
        self.shape().writes().remove(self, player)
    }

    /// [`remove`](Ranking::remove) on a board of one tree, checked.
    pub(in crate::ranking) fn one_tree_remove(&self, player: &str) -> Result<bool> {
        if let Some(found) = self.write_native(&[(player, None)], None)? {
            return Ok(found > 0);
        }
        Ok(self.write_steps(&[(player, None)])?[0].before.is_some())
    }

    /// Submits many scores in one transaction, all or nothing: one bad
    /// entry refuses the whole batch before anything is written.
    ///
    /// The batch is applied by its net effect: the values are taken in
    /// order under the board's policy, so a player named twice ends at the
    /// later score (`Replace`), the best of both (`Best`), or the sum
    /// (`Increment`); a player whose final score is the one they had before
    /// keeps their place among ties; players arriving at one score are
    /// ordered by their last change in the slice. So applying the same
    /// batch again changes nothing, except under `Increment`.
    ///
    /// # Errors
    ///
    /// [`Error::ScoreOutOfRange`](crate::Error::ScoreOutOfRange) (under
    /// `Increment`, for a running sum outside the range) or
    /// [`Error::InvalidName`](crate::Error::InvalidName) for any entry
    /// (nothing is written then), or a store error.
    pub fn set_scores(&self, scores: &[(&str, i64)]) -> Result<()> {
        for &(player, score) in scores {
            self.check_input(player, Some(score))?;
        }
        if scores.is_empty() {
            return Ok(());
        }
        self.shape().writes().set_scores(self, scores)
    }

    /// [`set_scores`](Ranking::set_scores) on a board of one tree, checked,
    /// not empty.
    pub(in crate::ranking) fn one_tree_set_scores(&self, scores: &[(&str, i64)]) -> Result<()> {
        let updates: Vec<_> = scores.iter().map(|&(p, s)| (p, Some(s))).collect();
        if self.write_native(&updates, None)?.is_some() {
            return Ok(());
        }
        self.write_steps(&updates).map(drop)
    }

    /// Applies validated updates in one step where the store orders this
    /// board natively and can apply the board's policy itself
    /// ([`BoardStore::write_native`](crate::seam::BoardStore)): how many
    /// of the batch's players were on the board before it, `None` if it
    /// cannot, and nothing was written. Only where the caller needs no
    /// step back beyond that count.
    fn write_native(
        &self,
        updates: &[(&str, Option<i64>)],
        at: Option<(u64, &[usize])>,
    ) -> Result<Option<u64>> {
        let rules = self.rules();
        // Removals take no policy: a batch of them is one step whatever
        // the board's.
        let removals = updates.iter().all(|&(_, value)| value.is_none());
        if rules.approx || (rules.policy == super::Policy::Increment && !removals) {
            return Ok(None);
        }
        let floor = self.floors(updates.len(), at);
        let mut tree = Vec::with_capacity(updates.len());
        for (i, &(player, value)) in updates.iter().enumerate() {
            let score = value
                .map(|v| rules.tree_score(self.geometry(), v))
                .transpose()?;
            tree.push((player, score, None, floor(i)));
        }
        let policy = match removals {
            true => super::Policy::Replace.stored(),
            false => rules.policy.stored(),
        };
        self.inner.boards.write_native(self.board(), policy, &tree)
    }

    /// Checks one queued update (player name, value) without writing.
    pub(crate) fn check_update(&self, player: &str, score: Option<i64>) -> Result<()> {
        self.check_input(player, score)
    }
}

//! Family submissions through the queue: one append to every member's
//! queue, applied by each member's worker.
//!
//! What holds: the append is ONE transaction of the queue's storage, so
//! every current member's update is queued or none is, and each is then
//! applied exactly once by its board's worker (the queue's guarantee). What
//! does not (yet): the members are drained one by one, so until a drain
//! finishes a reader may see the day's board updated and the week's not;
//! and filter dimensions are refused, since leaving a filter value needs
//! the player's stored values read and written with the members' apply,
//! which no worker does yet. `docs/wip/family.md` has the state of this.

use super::submit::FamilyEntry;
use super::window::{check_timestamp, now, Period};
use super::Family;
use crate::error::{Error, Result};
use crate::ranking::{check_player, Ranking};
use crate::seam::QueuedUpdate;

impl FamilyEntry<'_> {
    /// Queues the submission for the current period of every window (the
    /// overall boards), in ONE transaction of the queue's storage: all of
    /// them are queued, or none is. Each member's update is applied exactly
    /// once by a worker of that board, as [`Ranking::enqueue`]'s are; run
    /// [`Family::drain_queued`] (from a job, or a thread) to apply every
    /// member's queue. Member boards of new periods are created first.
    ///
    /// ```
    /// use autoshard::ranking::{Family, FamilyConfig, Period, Policy, RankingConfig, Window};
    /// # fn main() -> autoshard::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = autoshard::Sqlite::open(dir.path().join("game.db"))?;
    /// let points = RankingConfig::new(0..1_000_000).policy(Policy::Increment);
    /// let config = FamilyConfig::new(points).window(Window::AllTime).window(Window::Day);
    /// let game = Family::create(&db, "points", config)?;
    /// game.entry("ann", 10).at(0).enqueue()?;
    /// game.entry("ann", 5).at(86_400).enqueue()?;
    /// assert_eq!(game.drain_queued()?, 4); // 2 submissions × 2 windows
    /// let all = game.board(Window::AllTime, Period::Current, None)?.unwrap();
    /// assert_eq!(all.score("ann")?, Some(15));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Before anything is queued: as [`submit`](FamilyEntry::submit)'s
    /// checks, and [`Error::InvalidRanking`] for a family with filter
    /// dimensions or a submission with entry data (neither is queued yet:
    /// use `submit`). A store error if the append failed (then nothing is
    /// queued).
    pub fn enqueue(self) -> Result<()> {
        let (f, player, score) = (self.family, self.player, self.score);
        let config = f.config();
        check_player(player)?;
        let board = config.board();
        board.rules().check_value(&board.geometry()?, score)?;
        if !config.filters().is_empty() || self.data.is_some() {
            return Err(Error::InvalidRanking {
                reason: "queued family submissions take no filter values or entry data yet; \
                         use submit"
                    .into(),
            });
        }
        let ts = self.at.unwrap_or_else(now);
        check_timestamp(ts)?;
        let mut members: Vec<Ranking> = Vec::new();
        for window in config.windows() {
            let key = f.span(window, Period::At(ts))?.key;
            let (member, _) = f.member_created(window, key, None, true)?.expect("created");
            members.push(member);
        }
        let states = members
            .iter()
            .map(Ranking::queue_state)
            .collect::<Result<Vec<_>>>()?;
        let items: Vec<[QueuedUpdate; 1]> = members
            .iter()
            .map(|m| [m.queued_update(player, Some(score))])
            .collect();
        let batches: Vec<(i64, &[QueuedUpdate])> = members
            .iter()
            .zip(&items)
            .map(|(m, i)| (m.inner.id, &i[..]))
            .collect();
        f.inner.boards.append_queues(&batches)?;
        for state in states {
            state.note_enqueued(1);
        }
        Ok(())
    }
}

impl Family {
    /// Applies every update queued on the family's member boards, board by
    /// board, on this thread ([`Worker::drain`](crate::ranking::Worker::drain)
    /// of each member with queued updates); the number applied. Members
    /// of expired periods are applied too (the drop comes after, from
    /// [`drop_expired`](Family::drop_expired)).
    ///
    /// # Errors
    ///
    /// The first error of a member's drain (what it applied before stays
    /// applied), or a store error.
    pub fn drain_queued(&self) -> Result<u64> {
        let mut applied = 0;
        let windows: Vec<_> = self.config().windows().collect();
        for window in windows {
            for span in self.periods(window)? {
                let at = Period::At(span.start.max(-1_000_000_000));
                let Some(board) = self.board(window, at, None)? else {
                    continue;
                };
                if board.queued()? > 0 {
                    applied += board.worker().drain()?.updates;
                }
            }
        }
        Ok(applied)
    }
}

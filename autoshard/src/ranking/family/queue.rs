//! Family submissions through the queue: ONE queue row per submission, on
//! the queue of the family's players board, which a family worker
//! (`worker.rs`) expands into every member's update in one transaction.
//!
//! The row carries what a direct submission carries: the player, the
//! score, and in its data the timestamp, the filter values and the entry
//! data. The members it writes and the boards it leaves are worked out
//! when it is applied, from the player's filter values as stored then, so
//! a queued submission ends where the same direct submission would.
//! docs/design/families.md ("Through the queue: the family worker") has the design
//! and the exactly-once argument.

use super::submit::{decode_values, encode_values, FamilyUpdate};
use super::{Family, FamilyConfig};
use crate::error::{Error, Result};
use crate::ranking::queue;
use crate::seam::QueuedRow;

impl FamilyUpdate<'_> {
    /// Queues the submission: one row on the family's queue, appended with
    /// other concurrent `enqueue` calls of this process in one transaction
    /// of the queue's storage (group commit), as [`Ranking::enqueue`]'s
    /// are. A [`FamilyWorker`](super::FamilyWorker) (or
    /// [`Family::drain_queued`]) applies it exactly once, to every member
    /// of its periods in ONE transaction with the player's stored filter
    /// values: a reader sees it on every member or on none, and it ends
    /// where [`submit`](FamilyUpdate::submit) would have put it, filter
    /// values left and entry data included. The periods are those of its
    /// timestamp ([`at`](FamilyUpdate::at), default the clock at `enqueue`).
    ///
    /// [`Ranking::enqueue`]: crate::ranking::Ranking::enqueue
    ///
    /// ```
    /// use autoshard::ranking::{Family, FamilyConfig, Period, Policy, RankingConfig, Window};
    /// # fn main() -> autoshard::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = autoshard::Sqlite::open(dir.path().join("game.db"))?;
    /// let points = RankingConfig::new(0..1_000_000).policy(Policy::Increment);
    /// let config = FamilyConfig::new(points)
    ///     .window(Window::AllTime)
    ///     .window(Window::Day)
    ///     .filter("league", ["gold", "silver"]);
    /// let game = Family::create(&db, "points", config)?;
    /// game.submission("ann", 10).filter("league", "gold").at(0).enqueue()?;
    /// game.submission("ann", 5).filter("league", "silver").at(86_400).enqueue()?;
    /// assert_eq!(game.drain_queued()?, 2); // 2 submissions
    /// let all = game.board(Window::AllTime, Period::At(86_400), None)?.unwrap();
    /// assert_eq!(all.score("ann")?, Some(15));
    /// let gold = game.board(Window::AllTime, Period::At(0), Some(("league", "gold")))?;
    /// assert_eq!(gold.unwrap().score("ann")?, None); // left for silver
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Before anything is queued: as [`submit`](FamilyUpdate::submit)'s
    /// checks. [`Error::RankingNotFound`] (naming the family) once the
    /// family is deleted, decided in the append's transaction, so an
    /// acknowledged submission is never left for a family that is gone. A
    /// store error if the append failed (then nothing is queued). An increment whose sum leaves the range is found by the
    /// worker, which moves the row to the family's
    /// [dead letters](Family::dead_letters).
    pub fn enqueue(self) -> Result<()> {
        let f = self.family;
        let (values, data, ts) = self.checked()?;
        let players = &f.inner.players;
        let mut item = queue::queued_update(players, self.player, Some(self.score));
        item.data = Some(encode_row(f.config(), ts, &values, data));
        // The players board's append refuses it once the family is deleted
        // (its hidden name must not reach the caller).
        match queue::queue_state(players)?.commit(players, item) {
            Err(Error::RankingNotFound { .. }) => Err(f.not_found()),
            other => other,
        }
    }
}

/// A queued family submission as a worker reads it back.
#[derive(Debug, Clone)]
pub(super) struct Queued {
    pub player: String,
    pub score: i64,
    pub ts: i64,
    pub values: Vec<Option<String>>,
    pub data: Option<Vec<u8>>,
}

impl Queued {
    pub fn values(&self) -> Vec<Option<&str>> {
        self.values.iter().map(|v| v.as_deref()).collect()
    }
}

/// `{ts} {0|1}\n{values}` then NUL and the entry data: filter values hold
/// no control character, so the first NUL ends the text.
fn encode_row(
    config: &FamilyConfig,
    ts: i64,
    values: &[Option<&str>],
    data: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = format!("{ts} {}\n", u8::from(data.is_some())).into_bytes();
    out.extend_from_slice(encode_values(config, values).as_bytes());
    out.push(0);
    out.extend_from_slice(data.unwrap_or_default());
    out
}

/// The submission a queue row holds, or why it is not one (a row written
/// behind the library's back: the worker sets it aside as a dead letter).
pub(super) fn decode_row(f: &Family, row: &QueuedRow) -> std::result::Result<Queued, String> {
    if let Some(why) = &row.unreadable {
        return Err(why.clone());
    }
    let config = f.config();
    crate::ranking::handle::check_player(&row.player).map_err(|e| e.to_string())?;
    let score = row.score.ok_or("a family row without a score")?;
    let board = config.board();
    let geometry = board.geometry().map_err(|e| e.to_string())?;
    board
        .rules()
        .check_value(&geometry, score)
        .map_err(|e| e.to_string())?;
    let raw = row
        .data
        .as_deref()
        .ok_or("a family row without its submission")?;
    let end = raw.iter().position(|&b| b == 0).ok_or("no end of text")?;
    let text = std::str::from_utf8(&raw[..end]).map_err(|e| e.to_string())?;
    let (head, values) = text.split_once('\n').ok_or("no header line")?;
    let (ts, has_data) = head.split_once(' ').ok_or("bad header line")?;
    let ts: i64 = ts.parse().map_err(|_| format!("bad timestamp {ts:?}"))?;
    super::window::check_timestamp(ts).map_err(|e| e.to_string())?;
    let values = decode_values(config, Some(values.as_bytes()));
    for (i, v) in values.iter().enumerate() {
        if let Some(v) = v {
            let dim = &config.filters()[i].0;
            config
                .check_filter(f.name(), dim, v)
                .map_err(|e| e.to_string())?;
        }
    }
    let data = raw[end + 1..].to_vec();
    if data.len() > board.entry_data() as usize {
        return Err(Error::EntryDataTooLarge {
            len: data.len(),
            max: board.entry_data() as usize,
        }
        .to_string());
    }
    Ok(Queued {
        player: row.player.clone(),
        score,
        ts,
        values,
        data: (has_data == "1").then_some(data),
    })
}

impl Family {
    /// Applies every submission queued on the family on this thread, each
    /// in one transaction with every member it writes (a
    /// [`FamilyWorker::drain`](super::FamilyWorker::drain)); the number of
    /// submissions applied. Updates queued on single members by an older
    /// version of this library are drained too, member by member.
    ///
    /// # Errors
    ///
    /// As [`FamilyWorker::drain`](super::FamilyWorker::drain); what was
    /// applied before the error stays applied.
    pub fn drain_queued(&self) -> Result<u64> {
        let mut applied = self.worker().drain()?.submissions;
        let windows: Vec<_> = self.config().windows().collect();
        for window in windows {
            for span in self.periods(window)? {
                let at = super::Period::At(span.start.max(-1_000_000_000));
                let Some(board) = self.board(window, at, None)? else {
                    continue;
                };
                // A period dropped meanwhile has nothing left to drain (a
                // deleted family fails at `board` above, naming itself).
                let drained = match board.queued() {
                    Ok(0) => continue,
                    Ok(_) => board.worker().drain().map(|s| s.updates),
                    Err(e) => Err(e),
                };
                match drained {
                    Ok(n) => applied += n,
                    Err(Error::RankingNotFound { .. }) => self.check_alive()?,
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(applied)
    }

    /// Queued submissions a worker could not apply, oldest first: an
    /// increment whose sum would leave the range on a member, or a row
    /// written behind the library's back. `player` and `score` are the
    /// submission's; [`delete_dead_letter`](Family::delete_dead_letter)
    /// removes one.
    ///
    /// # Errors
    ///
    /// A store error.
    pub fn dead_letters(&self) -> Result<Vec<crate::ranking::DeadLetter>> {
        self.inner.players.dead_letters().map_err(|e| self.named(e))
    }

    /// Deletes dead letter `id`; whether there was one.
    ///
    /// # Errors
    ///
    /// A store error; nothing is deleted then.
    pub fn delete_dead_letter(&self, id: i64) -> Result<bool> {
        self.inner
            .players
            .delete_dead_letter(id)
            .map_err(|e| self.named(e))
    }
}

#[cfg(test)]
mod tests {
    use crate::ranking::{Family, FamilyConfig, Period, Policy, RankingConfig, Window};
    use std::sync::Barrier;

    fn game(db: &crate::Sqlite) -> Family {
        let points = RankingConfig::new(0..100).policy(Policy::Increment);
        let config = FamilyConfig::new(points)
            .window(Window::AllTime)
            .window(Window::Day);
        Family::create(db, "game", config).unwrap()
    }

    /// The control is at the end: enqueued one at a time, every enqueue is
    /// a commit of its own, so the count is not vacuous.
    #[test]
    fn concurrent_enqueues_share_commits() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Sqlite::open(dir.path().join("g.db")).unwrap();
        let f = game(&db);
        let (threads, each) = (8, 50);
        let start = Barrier::new(threads);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (f, start) = (&f, &start);
                s.spawn(move || {
                    start.wait();
                    for _ in 0..each {
                        f.submission(&format!("p{t}"), 1).at(0).enqueue().unwrap();
                    }
                });
            }
        });
        let enqueues = (threads * each) as u64;
        let commits = f.inner.players.group_commits().unwrap();
        assert_eq!(f.queued().unwrap(), enqueues);
        assert!(
            commits < enqueues * 3 / 4,
            "{commits} commits for {enqueues}"
        );
        assert_eq!(f.drain_queued().unwrap(), enqueues);
        for _ in 0..10 {
            f.submission("alone", 1).at(0).enqueue().unwrap();
        }
        let alone = f.inner.players.group_commits().unwrap() - commits;
        assert_eq!(alone, 10, "one commit per enqueue without company");
    }

    /// An increment that would leave the range on a member is set aside
    /// whole (no member gets it); the submissions around it are applied.
    #[test]
    fn an_increment_out_of_range_is_a_dead_letter_on_no_member() {
        let db = crate::Sqlite::memory().unwrap();
        let f = game(&db);
        f.submission("ann", 60).at(0).enqueue().unwrap();
        f.submission("ann", 50).at(0).enqueue().unwrap(); // 110: out of 0..100
        f.submission("ann", 30).at(0).enqueue().unwrap();
        let stats = f.worker().drain().unwrap();
        assert_eq!((stats.submissions, stats.dead_letters), (2, 1));
        for w in [Window::AllTime, Window::Day] {
            let board = f.board(w, Period::At(0), None).unwrap().unwrap();
            assert_eq!(board.score("ann").unwrap(), Some(90));
        }
        let dead = f.dead_letters().unwrap();
        assert_eq!((dead.len(), dead[0].score), (1, Some(50)));
        assert!(f.delete_dead_letter(dead[0].id).unwrap());
        assert_eq!(f.queued().unwrap(), 0);
    }
}

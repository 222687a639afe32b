//! One submission to a family: every member of the current periods, the
//! boards of filter values the player leaves, and the player's stored
//! filter values, in one write transaction (or in one step where the
//! store can take it: `one_step.rs`).

use super::one_step::OneStep;
use super::window::{check_timestamp, now, Span, Window};
use super::Family;
use crate::error::{Error, Result};
use crate::ranking::handle::check_player;
use crate::ranking::policy;
use crate::ranking::{apply_updates, Ranking, Submission, Update};
use crate::seam::{Board, Storage};

/// How often a submission looks again: when the values read in its
/// transaction name a board to leave its look did not open (once after a
/// first look that opened only the value it read; then only for a board
/// created since), or a member board it meant to write was dropped
/// meanwhile.
const TRIES: u32 = 32;

/// One member board of a family: a window's period, overall or for one
/// filter value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Member {
    /// The period.
    pub span: Span,
    /// `(dimension, value)`, or `None` for the overall board.
    pub filter: Option<(String, String)>,
}

/// What one family submission did, per member board.
#[derive(Debug)]
#[non_exhaustive]
pub struct FamilySubmission {
    /// Every member written, with what the submission did there (ranks
    /// are on that member board).
    pub members: Vec<(Member, Submission)>,
    /// Filtered boards of the current periods the player left, because
    /// the submission carried another value for the dimension, or none.
    pub left: Vec<Member>,
    /// Member boards of expired periods this submission dropped after it
    /// committed (it opened a new period and the family drops
    /// automatically).
    pub dropped: usize,
    /// Why dropping expired periods failed, if it did: the submission
    /// itself committed all the same, and the next drop finishes.
    pub drop_error: Option<Error>,
}

impl FamilySubmission {
    /// What the submission did on `window`'s current member, overall
    /// (`filter` `None`) or for the `(dimension, value)` it carried.
    pub fn get(&self, window: Window, filter: Option<(&str, &str)>) -> Option<&Submission> {
        self.members.iter().find_map(|(m, s)| {
            let same = m.filter.as_ref().map(|(d, v)| (d.as_str(), v.as_str())) == filter;
            (m.span.window == window && same).then_some(s)
        })
    }
}

/// A submission being put together: see [`Family::submission`].
#[derive(Debug, Clone)]
#[must_use = "nothing is written until `submit`"]
pub struct FamilyUpdate<'a> {
    pub(super) family: &'a Family,
    pub(super) player: &'a str,
    pub(super) score: i64,
    filters: Vec<(&'a str, &'a str)>,
    pub(super) at: Option<i64>,
    pub(super) data: Option<&'a [u8]>,
}

impl Family {
    /// Starts a submission of `score` for `player`; add the player's filter
    /// values, a timestamp and entry data, then
    /// [`submit`](FamilyUpdate::submit).
    pub fn submission<'a>(&'a self, player: &'a str, score: i64) -> FamilyUpdate<'a> {
        FamilyUpdate {
            family: self,
            player,
            score,
            filters: Vec::new(),
            at: None,
            data: None,
        }
    }

    /// Starts a submission of one [`Update`]: its score (a tuple encoded
    /// as [`encode`](Family::encode) does) and its entry data; add filter
    /// values and a timestamp, then [`submit`](FamilyUpdate::submit) or
    /// [`enqueue`](FamilyUpdate::enqueue).
    ///
    /// ```
    /// use autoshard::ranking::{Dim, Family, FamilyConfig, Period, RankingConfig, Update, Window};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let levels = RankingConfig::dimensions([Dim::higher(0..100), Dim::lower(0..10)]);
    /// let daily = Family::create(&db, "levels", FamilyConfig::new(levels).window(Window::Day))?;
    /// daily.update(Update::dims("ann", &[12, 3]))?.submit()?;
    /// let today = daily.board(Window::Day, Period::Current, None)?.unwrap();
    /// assert_eq!(today.dims("ann")?, Some(vec![12, 3]));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`encode`](Family::encode) for a tuple; the rest is checked by
    /// `submit` or `enqueue`.
    pub fn update<'a>(&'a self, update: Update<'a>) -> Result<FamilyUpdate<'a>> {
        let score = update.score_by(|values| self.encode(values))?;
        let entry = self.submission(update.player(), score);
        Ok(match update.data() {
            Some(data) => entry.data(data),
            None => entry,
        })
    }
}

/// What [`FamilyUpdate::checked`] returns: filter values by dimension,
/// entry data, timestamp.
type Checked<'a> = (Vec<Option<&'a str>>, Option<&'a [u8]>, i64);

/// Test hooks (`__private::family_hooks`), per thread; only with the
/// `failpoints` feature (without it, the no-op twin below).
#[cfg(feature = "failpoints")]
pub(crate) mod hooks {
    use std::cell::RefCell;

    thread_local! {
        /// Runs between a submission's look at the player's values and its
        /// transaction, and between a family worker's peek and its batch's:
        /// a test changes the values there, deterministically.
        pub(crate) static BETWEEN_LOOK_AND_WRITE: RefCell<Option<Box<dyn FnMut()>>> =
            const { RefCell::new(None) };
    }

    /// Runs the hook, if any; a submission it makes itself runs none.
    pub(in crate::ranking::family) fn between_look_and_write() {
        let Some(mut hook) = BETWEEN_LOOK_AND_WRITE.with(|h| h.borrow_mut().take()) else {
            return;
        };
        hook();
        BETWEEN_LOOK_AND_WRITE.with(|h| {
            let mut h = h.borrow_mut();
            if h.is_none() {
                *h = Some(hook);
            }
        });
    }
}

/// Without `failpoints` there is no hook to run.
#[cfg(not(feature = "failpoints"))]
pub(crate) mod hooks {
    pub(in crate::ranking::family) fn between_look_and_write() {}
}

/// A member a submission writes, and why.
enum Role {
    /// The family's players board: the filter values.
    Players,
    /// A member of a current period, with its filter if any.
    Write(Member),
    /// A filtered member of a current period the player may leave: left if
    /// the values read under the player's lock in the transaction name it.
    Leave(Member),
}

impl<'a> FamilyUpdate<'a> {
    /// The player's value for filter `dimension`. A dimension the
    /// submission leaves out is one the player has no value for: they
    /// leave its boards of the current periods if they were on one.
    pub fn filter(mut self, dimension: &'a str, value: &'a str) -> Self {
        self.filters.push((dimension, value));
        self
    }

    /// When the effort happened (Unix seconds): which period of each window
    /// it counts for. Default: the system clock at `submit`. Any time
    /// within a million years is taken, also one ahead of the clock; with
    /// [`auto_drop`](super::FamilyConfig::auto_drop), expiry is judged by
    /// the earlier of this time and the clock, so a submission stamped in
    /// the future never drops the current periods' boards.
    pub fn at(mut self, unix_seconds: i64) -> Self {
        self.at = Some(unix_seconds);
        self
    }

    /// Entry data, stored with the score on every member as
    /// [`Ranking::submit_update`] stores it.
    pub fn data(mut self, data: &'a [u8]) -> Self {
        self.data = Some(data);
        self
    }

    /// Writes the submission: the current period of every window, overall
    /// and for each filter value given, in one transaction, under the
    /// members' [`Policy`](crate::ranking::Policy); the player leaves the
    /// current periods' boards of filter values they no longer have.
    /// Member boards of new periods are created first (empty, visible
    /// before the transaction commits), the current periods' boards of the
    /// filter values the player leaves too: the player may have been put on
    /// one since the submission looked.
    ///
    /// # Errors
    ///
    /// Checked before anything is written: [`Error::InvalidName`] for a bad
    /// player name, [`Error::ScoreOutOfRange`], [`Error::UnknownFilter`],
    /// [`Error::InvalidRanking`] for a dimension given twice or a timestamp
    /// beyond a million years, [`Error::EntryDataTooLarge`]. In the
    /// transaction: [`Error::ScoreOutOfRange`] for an increment whose sum
    /// leaves the range on any member (then no member is written), a
    /// store error, or [`Error::RankingNotFound`] once the family is
    /// deleted.
    pub fn submit(self) -> Result<FamilySubmission> {
        let (values, data, ts) = self.checked()?;
        let mut done = match self.in_one_step(ts, &values, data)? {
            OneStep::Done(done) => done,
            OneStep::Declined { opened } => {
                let mut done = self.in_transaction(ts, &values, data)?;
                done.dropped = done.dropped.max(usize::from(opened));
                done
            }
        };
        // Until here `dropped` says whether a new period was opened.
        let opened = std::mem::take(&mut done.dropped) > 0;
        if opened && self.family.config().drops_automatically() {
            match self.family.drop_expired_after(ts) {
                Ok(n) => done.dropped = n,
                Err(e) => done.drop_error = Some(e),
            }
        }
        Ok(done)
    }

    /// [`submit`](Self::submit) in one write transaction, looking again
    /// while the player's values move under it.
    fn in_transaction(
        &self,
        ts: i64,
        values: &[Option<&str>],
        data: Option<&[u8]>,
    ) -> Result<FamilySubmission> {
        let f = self.family;
        let (mut last, mut tries) = (None, 0u32);
        for _ in 0..TRIES {
            match self.attempt(ts, values, data, tries > 0) {
                Ok(Some(done)) => return Ok(done),
                // The player's values moved to a value whose board did not
                // exist at the look (created since, by the writer that put
                // the player there): again, looking at every value's board.
                // Rare: once per board created, not once per value change.
                Ok(None) => {
                    tries += 1;
                    let cap = 1u64 << tries.min(5);
                    std::thread::sleep(std::time::Duration::from_micros(crate::random::range(
                        0..cap * 500,
                    )));
                }
                // A member dropped meanwhile (a late submission to an
                // expired period): open it again, created anew.
                Err(Error::RankingNotFound { name }) if name != f.inner.players.name() => {
                    f.forget(Some(&name));
                    last = Some(Error::RankingNotFound { name });
                }
                Err(Error::RankingNotFound { .. }) => {
                    return Err(Error::RankingNotFound {
                        name: f.name().into(),
                    })
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Conflict { attempts: TRIES }))
    }

    /// Every check `submit` and `enqueue` make before anything is written:
    /// the filter values by dimension index, the entry data to store (none
    /// on a board that keeps none) and the timestamp.
    pub(super) fn checked(&self) -> Result<Checked<'a>> {
        let f = self.family;
        let config = f.config();
        check_player(self.player)?;
        config
            .board()
            .rules()
            .check_value(&config.board().geometry()?, self.score)?;
        let max = config.board().entry_data() as usize;
        let data = match self.data {
            Some(d) if d.len() > max => {
                return Err(Error::EntryDataTooLarge { len: d.len(), max });
            }
            // A board that keeps none has no column to write.
            d => d.filter(|_| max > 0),
        };
        let mut values: Vec<Option<&str>> = vec![None; config.filters().len()];
        for &(dim, value) in &self.filters {
            let i = config.check_filter(f.name(), dim, value)?;
            if values[i].replace(value).is_some() {
                return Err(Error::InvalidRanking {
                    reason: format!("filter {dim:?} given twice"),
                });
            }
        }
        let ts = self.at.unwrap_or_else(now);
        check_timestamp(ts)?;
        Ok((values, data, ts))
    }

    /// The members the submission writes, each window's current period
    /// overall and for each filter value it carries, created where absent;
    /// and whether one was created (a new period opened).
    pub(super) fn members_written(
        &self,
        ts: i64,
        values: &[Option<&str>],
    ) -> Result<(Vec<(Ranking, Member)>, bool)> {
        let (f, mut opened) = (self.family, false);
        let config = f.config();
        let mut members = Vec::new();
        for window in config.windows() {
            let span = f.span(window, super::Period::At(ts))?;
            let mut filters: Vec<Option<(&str, &str)>> = vec![None];
            for (i, (dim, _)) in config.filters().iter().enumerate() {
                filters.extend(values[i].map(|v| Some((dim.as_str(), v))));
            }
            for filter in filters {
                let (board, created) = f
                    .member_created(window, span.key, filter, true)?
                    .expect("created");
                opened |= created;
                members.push((board, member(span, filter)));
            }
        }
        Ok((members, opened))
    }

    /// One try: `None` if the values read in the transaction (under the
    /// player's lock) name a board to leave the transaction does not span.
    /// The boards to leave are guessed from the values read before it; with
    /// `wide` (after a wrong guess), every existing board of each declared
    /// value is spanned, so any value a concurrent writer set meanwhile is
    /// covered unless its board was created after this look. `dropped` of
    /// the result is 1 if a member was created (a new period opened).
    fn attempt(
        &self,
        ts: i64,
        values: &[Option<&str>],
        data: Option<&[u8]>,
        wide: bool,
    ) -> Result<Option<FamilySubmission>> {
        let f = self.family;
        let config = f.config();
        let players = &f.inner.players;
        // The look guesses which filtered boards the player leaves: a
        // family without filters has none to leave, and skips the read.
        let guess = match config.filters().is_empty() {
            true => Vec::new(),
            false => decode_values(config, stored_values(players, self.player)?.as_deref()),
        };
        let mut targets: Vec<(Ranking, Role)> = vec![(players.clone(), Role::Players)];
        let (written, mut opened) = self.members_written(ts, values)?;
        targets.extend(written.into_iter().map(|(b, m)| (b, Role::Write(m))));
        for window in config.windows() {
            let span = f.span(window, super::Period::At(ts))?;
            for (i, (dim, declared)) in config.filters().iter().enumerate() {
                let candidates: Vec<&str> = match wide {
                    true => declared.iter().map(String::as_str).collect(),
                    false => guess[i].as_deref().into_iter().collect(),
                };
                for was in candidates.into_iter().filter(|&was| Some(was) != values[i]) {
                    // The stored value's boards are spanned even where this
                    // look finds none: created, empty, since a submission of
                    // the same player with that value may create one and
                    // put them on it before this transaction. Other values'
                    // (a wide look's) only where they exist: `covered` finds
                    // a player on one made since, and the look runs again.
                    let filter = Some((dim.as_str(), was));
                    let create = guess[i].as_deref() == Some(was);
                    if let Some((board, created)) =
                        f.member_created(window, span.key, filter, create)?
                    {
                        opened |= created;
                        targets.push((board, Role::Leave(member(span, filter))));
                    }
                }
            }
        }
        // Ascending board id: the order every multi-board writer takes.
        targets.sort_by_key(|(board, _)| board.inner.id);
        let boards: Vec<Board<'_>> = targets.iter().map(|(b, _)| b.inner.board()).collect();
        let at = targets
            .iter()
            .position(|(_, role)| matches!(role, Role::Players))
            .expect("the players board");
        hooks::between_look_and_write();
        let encoded = encode_values(config, values);
        let mut stale = false;
        let mut out = None;
        let shard = crate::random::range(0..config.board().node_shards());
        let result = f.inner.boards.write_boards_alike(&boards, &mut |sts| {
            // The player's values, under the player's lock, before any
            // member is touched (as the family worker reads them).
            let pst = sts[at];
            // A queue worker's cache relies on every write moving it, first
            // thing.
            pst.bump_generation()?;
            pst.lock_players(&[self.player])?;
            let stored = read_values(pst, self.player)?;
            let old = decode_values(config, stored.as_deref());
            let leaves = |m: &Member| {
                let Some((dim, was)) = &m.filter else {
                    return false;
                };
                let i = config.filters().iter().position(|(d, _)| d == dim);
                i.is_some_and(|i| old[i].as_ref() == Some(was) && values[i] != Some(was.as_str()))
            };
            if !covered(config, &old, values, &targets) {
                stale = true;
                // Not a retryable error: the store must not run this body
                // again; `submit` looks again first.
                return Err(Error::InvalidRanking {
                    reason: "the player's filter values changed".into(),
                });
            }
            let (mut members, mut left) = (Vec::new(), Vec::new());
            for ((board, role), &st) in targets.iter().zip(sts) {
                match role {
                    Role::Players => {
                        if stored.as_deref() != Some(encoded.as_bytes()) {
                            // Replace: the data is written even when the
                            // score (always 0) stays.
                            let data = Some(encoded.as_bytes());
                            policy::submit_in(board, st, 0, self.player, 0, data)?;
                        }
                    }
                    Role::Write(m) => {
                        st.bump_generation()?;
                        let s = policy::submit_in(board, st, shard, self.player, self.score, data)?;
                        members.push((m.clone(), s));
                    }
                    // A candidate the player is not on: untouched.
                    Role::Leave(m) if !leaves(m) => {}
                    Role::Leave(m) => {
                        st.bump_generation()?;
                        let g = board.inner.geometry();
                        apply_updates(
                            st,
                            g,
                            board.inner.rules(),
                            shard,
                            &[(self.player, None)],
                            None,
                        )?;
                        left.push(m.clone());
                    }
                }
            }
            out = Some(FamilySubmission {
                members,
                left,
                dropped: usize::from(opened),
                drop_error: None,
            });
            Ok(())
        });
        match result {
            Err(_) if stale => Ok(None),
            Err(e) => Err(e),
            Ok(()) => Ok(out),
        }
    }
}

/// Whether the transaction spans every board the player must leave, by the
/// values `old` read under its lock: each value they leave has its board of
/// every window's period spanned. The look spans (creating them) the boards
/// of the value it read; a value set after the look (by a concurrent
/// submission or family worker) may miss one (`wide` off, or a board
/// created since), and the submission looks again.
///
/// Before, a dimension whose value was the one the look read counted as
/// covered whatever was spanned, on the reasoning that a board absent at
/// the look cannot hold the player. It can: a submission of the same
/// player with the same value may create it and put them on it meanwhile
/// (`a_board_of_the_old_value_created_after_the_look_is_left_too` failed
/// on every store, the player on two values' boards of the day).
fn covered(
    config: &super::FamilyConfig,
    old: &[Option<String>],
    values: &[Option<&str>],
    targets: &[(Ranking, Role)],
) -> bool {
    config.filters().iter().enumerate().all(|(i, (dim, _))| {
        let Some(was) = old[i].as_deref().filter(|&was| Some(was) != values[i]) else {
            return true;
        };
        config.windows().all(|window| {
            targets.iter().any(|(_, role)| match role {
                Role::Leave(m) => {
                    m.span.window == window
                        && m.filter.as_ref().is_some_and(|(d, v)| d == dim && v == was)
                }
                _ => false,
            })
        })
    })
}

pub(super) fn member(span: Span, filter: Option<(&str, &str)>) -> Member {
    Member {
        span,
        filter: filter.map(|(d, v)| (d.into(), v.into())),
    }
}

/// The player's filter values as stored (entry data of the players board).
pub(super) fn stored_values(players: &Ranking, player: &str) -> Result<Option<Vec<u8>>> {
    players.inner.read(|st, _| read_values(st, player))
}

pub(super) fn read_values(st: &dyn Storage, player: &str) -> Result<Option<Vec<u8>>> {
    let mut found = None;
    st.players_data(&[player], &mut |_, data| {
        found = Some(data.to_vec());
        Ok(())
    })?;
    Ok(found)
}

/// One line per dimension the player has a value for: `dimension U+0001
/// value` (neither holds a control character).
pub(super) fn encode_values(config: &super::FamilyConfig, values: &[Option<&str>]) -> String {
    let lines: Vec<String> = config
        .filters()
        .iter()
        .zip(values)
        .filter_map(|((dim, _), v)| v.map(|v| format!("{dim}\u{1}{v}")))
        .collect();
    lines.join("\n")
}

/// The stored values by dimension index; a dimension the family does not
/// declare (it cannot change, but data can be damaged) is ignored.
pub(super) fn decode_values(
    config: &super::FamilyConfig,
    stored: Option<&[u8]>,
) -> Vec<Option<String>> {
    let mut out = vec![None; config.filters().len()];
    let text = stored.map(String::from_utf8_lossy).unwrap_or_default();
    for line in text.lines() {
        if let Some((dim, value)) = line.split_once('\u{1}')
            && let Some(i) = config.filters().iter().position(|(d, _)| d == dim)
        {
            out[i] = Some(value.to_owned());
        }
    }
    out
}

//! Board families: periodic and filtered leaderboards fed by one
//! submission. What a user needs is on [`Family`]; docs/design/families.md ("Board
//! families") has the data model and invariants.

mod batch;
mod config;
mod dims;
mod one_step;
mod queue;
mod retention;
mod submit;
#[cfg(feature = "tokio")]
mod task;
mod window;
mod worker;
mod worker_handle;

#[cfg(feature = "failpoints")]
pub(crate) use self::submit::hooks;

pub use self::config::{
    FamilyConfig, MAX_FAMILY_NAME_LEN, MAX_FILTERS, MAX_FILTER_LEN, MAX_FILTER_VALUES, MAX_KEEP,
};
pub use self::submit::{FamilySubmission, FamilyUpdate, Member};
pub use self::window::{Period, Span, Weekday, Window};
pub use self::worker::{FamilyWorker, FamilyWorkerStats};
pub use self::worker_handle::FamilyWorkerHandle;

use self::config::check_label;
use super::{BoardConfig, Ranking, RankingConfig, RankingStore, MAX_ENTRY_DATA};
use crate::error::{Error, Result};
use crate::ranking::handle;
use crate::ranking::policy;
use crate::seam::{BoardStore, Placement};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The first character of every board name a family owns. Board names
/// [`Ranking::create`] accepts hold no control character.
pub(crate) const HIDDEN: char = '\u{2}';

/// The registry board of family `name`: its configuration, as entry data.
pub(super) fn registry_name(name: &str) -> String {
    format!("{HIDDEN}family{HIDDEN}{name}")
}

/// What every board of family `id` (the registry board's id) is named
/// with first: ids are never handed out twice, so a family created again
/// under the same name never meets an old one's boards.
fn member_prefix(id: i64) -> String {
    format!("{HIDDEN}{id}{HIDDEN}")
}

/// The board of family `id` holding each player's filter values.
fn players_name(id: i64) -> String {
    format!("{}players", member_prefix(id))
}

/// Registry and players boards: one score (0), room for the stored text.
fn hidden_config() -> BoardConfig {
    RankingConfig::new(0..1).entry_data(MAX_ENTRY_DATA).into()
}

/// A family of leaderboards: periodic and filtered boards fed by one
/// submission.
///
/// A [`Family`] is one board shape ([`RankingConfig`]) kept per window
/// (all-time, yearly, monthly, weekly, daily, hourly) and per period of
/// each window, overall and per value of each filter dimension (age group,
/// weight class, club): Strava's "this month, 35-44" board and seed 001's
/// daily / weekly / all-time boards. One [`submit`](FamilyUpdate::submit)
/// updates the current period of every window, overall and per filter
/// value the player has, in ONE write transaction: a reader of any member
/// sees the submission in all of them or in none. Period boards are
/// created on first use; old periods are dropped by
/// [`Family::drop_expired`] (and, by default, by the submission that opens
/// a new period).
///
/// Members are ordinary boards: [`Family::board`] hands out a [`Ranking`]
/// for a window, a period and optionally a filter value, and every query of
/// a board works on it. Their names start with U+0002, which no board name
/// [`Ranking::create`] accepts may hold, so they never collide with an
/// application's boards; [`Ranking::list`] leaves them out.
///
/// [`FamilyUpdate::enqueue`] queues a submission instead (one row, group
/// committed), which a [`FamilyWorker`] or [`Family::drain_queued`] applies
/// exactly once, to every member in one transaction as `submit` would.
///
/// On Redis Cluster a family's boards are created on one hash slot (the
/// family's), so that a submission, like a worker's batch, commits on all
/// of them with one script.
///
/// ```
/// use autoshard::ranking::{Family, FamilyConfig, ScoreOrder, Period, Policy, RankingConfig, Window};
///
/// # fn main() -> autoshard::Result<()> {
/// let db = autoshard::Sqlite::memory()?;
/// // Best elapsed seconds on a segment, this month and all time, by age group.
/// let segment = RankingConfig::new(1..86_400).policy(Policy::Best).order(ScoreOrder::LowerIsBetter);
/// let config = FamilyConfig::new(segment)
///     .window(Window::AllTime)
///     .window(Window::Month)
///     .filter("age_group", ["u35", "35-44", "45+"]);
/// let hawk_hill = Family::create(&db, "hawk-hill", config)?;
///
/// let nov_24 = 1_795_516_200; // 2026-11-24 10:30 UTC
/// hawk_hill.submission("ann", 301).filter("age_group", "35-44").at(nov_24).submit()?;
/// hawk_hill.submission("bo", 290).filter("age_group", "u35").at(nov_24).submit()?;
/// let pr = hawk_hill.submission("ann", 285).filter("age_group", "35-44").at(nov_24 + 60).submit()?;
/// assert!(pr.get(Window::Month, None).unwrap().new_best);
///
/// let month = hawk_hill.board(Window::Month, Period::At(nov_24), None)?.unwrap();
/// assert_eq!(month.top(1)?[0].player, "ann");
/// let group = hawk_hill.board(Window::Month, Period::At(nov_24), Some(("age_group", "35-44")))?;
/// assert_eq!(group.unwrap().len()?, 1);
/// // Nothing was submitted in October.
/// assert!(hawk_hill.board(Window::Month, Period::Before(nov_24), None)?.is_none());
/// # Ok(())
/// # }
/// ```
///
/// Cloning is cheap and shares the handle (and its cache of open members).
#[derive(Clone)]
pub struct Family {
    inner: Arc<Inner>,
}

struct Inner {
    boards: Arc<dyn BoardStore>,
    name: String,
    id: i64,
    config: FamilyConfig,
    /// Each player's filter values, as entry data.
    players: Ranking,
    /// Members opened so far, by board name.
    members: Mutex<HashMap<String, Ranking>>,
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.inner.name)
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Opens (or with `create`, creates where it says) a board no application
/// name can reach; `None` if absent and not created. The boolean: whether
/// this call created it.
fn hidden_board(
    boards: &Arc<dyn BoardStore>,
    name: &str,
    config: &BoardConfig,
    create: Option<Placement<'_>>,
) -> Result<Option<(Ranking, bool)>> {
    let geometry = config.geometry()?;
    let found = match (boards.open_board(name)?, create) {
        (Some((id, _)), _) => Some((id, false)),
        (None, Some(placement)) => match boards.create_board(name, &config.spec(), placement) {
            Ok(id) => Some((id, true)),
            // Created meanwhile by another handle.
            Err(Error::RankingExists { .. }) => boards.open_board(name)?.map(|(id, _)| (id, false)),
            Err(e) => return Err(e),
        },
        (None, None) => None,
    };
    Ok(found.map(|(id, created)| {
        let board = handle::with(boards.clone(), name, id, config.clone(), geometry);
        (board, created)
    }))
}

impl Family {
    /// Creates the family `name` (1 to [`MAX_FAMILY_NAME_LEN`] bytes, no
    /// control characters) in `db`, with no member board yet.
    ///
    /// # Errors
    ///
    /// [`Error::RankingExists`] if a family or a board is called `name`;
    /// [`Error::InvalidName`] for a bad name, filter dimension or value;
    /// [`Error::InvalidRanking`] for a board shape [`Ranking::create`]
    /// refuses, no window, an offset beyond ±18 hours, a filter without
    /// values or with one twice.
    /// Nothing is written on error, except that a create interrupted by a
    /// crash leaves a family [`open`](Family::open) reports as
    /// [`Error::Corrupt`] until it is [deleted](Family::delete).
    pub fn create(db: &impl RankingStore, name: &str, config: FamilyConfig) -> Result<Self> {
        check_label("family name", name)?;
        config.validate()?;
        let boards = db.__boards().0;
        if boards.open_board(name)?.is_some() {
            return Err(Error::RankingExists { name: name.into() });
        }
        let registry = registry_name(name);
        let id = match boards.create_board(&registry, &hidden_config().spec(), Placement::Anywhere)
        {
            Err(Error::RankingExists { .. }) => {
                return Err(Error::RankingExists { name: name.into() })
            }
            id => id?,
        };
        let registry = handle::with(
            boards.clone(),
            &registry,
            id,
            hidden_config(),
            hidden_config().geometry()?,
        );
        // A family writes its boards in one transaction: beside its
        // registry board.
        let beside = Some(Placement::With(id));
        hidden_board(&boards, &players_name(id), &hidden_config(), beside)?;
        // Written last: a family is complete once its configuration is.
        let text = config.encode();
        let chunks: Vec<(String, &[u8])> = text
            .as_bytes()
            .chunks(MAX_ENTRY_DATA as usize)
            .enumerate()
            .map(|(i, c)| (format!("{i:05}"), c))
            .collect();
        registry.inner.write_with(|st| {
            // Replace: each chunk's data is written with its score.
            for (player, data) in &chunks {
                policy::write_in(&registry, st, 0, player, 0, Some(data))?;
            }
            Ok(())
        })?;
        Self::open(db, name)
    }

    /// Opens the family `name`, created earlier by any handle or process.
    ///
    /// # Errors
    ///
    /// [`Error::RankingNotFound`] if there is none; [`Error::Corrupt`] if
    /// its stored configuration is unreadable or missing (a create that did
    /// not finish).
    pub fn open(db: &impl RankingStore, name: &str) -> Result<Self> {
        check_label("family name", name)?;
        let boards = db.__boards().0;
        let not_found = || Error::RankingNotFound { name: name.into() };
        let (registry, _) = hidden_board(&boards, &registry_name(name), &hidden_config(), None)?
            .ok_or_else(not_found)?;
        let corrupt = |reason: String| Error::Corrupt {
            kind: "ranking family",
            id: name.into(),
            field: "configuration".into(),
            reason,
        };
        let mut chunks: Vec<(String, Vec<u8>)> = registry
            .top(100_000)?
            .into_iter()
            .map(|e| (e.player, e.data.unwrap_or_default()))
            .collect();
        if chunks.is_empty() {
            return Err(corrupt(
                "missing: a create did not finish; delete the family and create it again".into(),
            ));
        }
        chunks.sort();
        let text: Vec<u8> = chunks.into_iter().flat_map(|(_, c)| c).collect();
        let text = String::from_utf8(text).map_err(|e| corrupt(e.to_string()))?;
        let config = FamilyConfig::decode(&text).map_err(corrupt)?;
        let id = registry.inner.id;
        let (players, _) = hidden_board(&boards, &players_name(id), &hidden_config(), None)?
            .ok_or_else(|| corrupt("its players board is missing".into()))?;
        Ok(Family {
            inner: Arc::new(Inner {
                boards,
                name: name.into(),
                id,
                config,
                players,
                members: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Opens the family `name` if it exists, checking that it was created
    /// with `config`, or creates it: for an application that declares its
    /// families in code.
    ///
    /// ```
    /// use autoshard::ranking::{Family, FamilyConfig, RankingConfig, Window};
    /// use autoshard::Error;
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let daily = FamilyConfig::new(RankingConfig::new(0..100)).window(Window::Day);
    /// Family::open_or_create(&db, "arena", daily.clone())?; // created
    /// Family::open_or_create(&db, "arena", daily.clone())?; // opened
    /// let weekly = daily.window(Window::Week);
    /// let other = Family::open_or_create(&db, "arena", weekly);
    /// assert!(matches!(other, Err(Error::RankingMismatch { .. })));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::RankingMismatch`] if the stored family differs from
    /// `config` (nothing is written then); otherwise as
    /// [`create`](Family::create) and [`open`](Family::open).
    pub fn open_or_create(
        db: &impl RankingStore,
        name: &str,
        config: FamilyConfig,
    ) -> Result<Self> {
        config.validate()?;
        let family = match Self::open(db, name) {
            Err(Error::RankingNotFound { .. }) => match Self::create(db, name, config.clone()) {
                // Created meanwhile by another handle: check that one;
                // unless a board has the name.
                Err(exists @ Error::RankingExists { .. }) => match Self::open(db, name) {
                    Err(Error::RankingNotFound { .. }) => return Err(exists),
                    opened => opened?,
                },
                created => return created,
            },
            opened => opened?,
        };
        if family.config() == &config {
            return Ok(family);
        }
        Err(Error::RankingMismatch {
            name: name.into(),
            reason: format!(
                "the family is stored as {:?}, not {config:?}",
                family.config()
            ),
        })
    }

    /// The names of the families in `db`, sorted.
    ///
    /// # Errors
    ///
    /// A store error.
    pub fn list(db: &impl RankingStore) -> Result<Vec<String>> {
        let prefix = registry_name("");
        let mut names: Vec<String> = db
            .__boards()
            .0
            .list_boards()?
            .into_iter()
            .filter_map(|n| n.strip_prefix(&prefix).map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Deletes the family `name` and every member board, board by board
    /// ([`Ranking::delete`]'s guarantees each), so other boards' writers
    /// never wait for more than one of them; whether there was one.
    /// Handles of the family fail with [`Error::RankingNotFound`] from the
    /// first delete on (its players board, which every submission writes).
    ///
    /// ```
    /// use autoshard::ranking::{Family, FamilyConfig, RankingConfig, Window};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let config = FamilyConfig::new(RankingConfig::new(0..100)).window(Window::Day);
    /// let daily = Family::create(&db, "daily", config)?;
    /// daily.submission("ann", 5).submit()?;
    /// assert_eq!(Family::list(&db)?, ["daily"]);
    /// assert!(Family::delete(&db, "daily")?);
    /// assert!(Family::list(&db)?.is_empty());
    /// assert!(daily.submission("ann", 6).submit().is_err());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a name `create` refuses, or a store
    /// error. An interrupted delete leaves the family listed (or, past the
    /// last step, unlisted boards nothing reads); deleting it again
    /// finishes, and so does any [`drop_expired`](Family::drop_expired).
    pub fn delete(db: &impl RankingStore, name: &str) -> Result<bool> {
        check_label("family name", name)?;
        let boards = db.__boards().0;
        let Some((id, _)) = boards.open_board(&registry_name(name))? else {
            return Ok(false);
        };
        // The players board first: from then on no submission commits, so
        // no member board is written behind the deletes below.
        boards.delete_board(&players_name(id))?;
        let prefix = member_prefix(id);
        for board in boards.list_boards()? {
            if board.starts_with(&prefix) {
                boards.delete_board(&board)?;
            }
        }
        boards.delete_board(&registry_name(name))
    }

    /// The family's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The family's configuration.
    pub fn config(&self) -> &FamilyConfig {
        &self.inner.config
    }

    /// The member board of `window`'s `period`, overall (`filter` `None`)
    /// or for one filter value (`Some((dimension, value))`); `None` if
    /// nobody submitted in that period (or it was dropped, also by another
    /// handle or process). A filter value's board may exist and be empty:
    /// a player who switched from that value in the period left it (the
    /// submission creates the board it leaves, so that no submission of
    /// theirs can put them there unseen). Asks the store each time (one
    /// lookup), not this handle's cache of boards it opened, which another
    /// handle's [`delete_period`](Family::delete_period) or
    /// [`drop_expired_at`](Family::drop_expired_at) leaves stale.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownWindow`], [`Error::UnknownFilter`], a timestamp
    /// beyond a million years ([`Error::InvalidRanking`]),
    /// [`Error::RankingNotFound`] (naming the family) once the family is
    /// deleted, or a store error.
    pub fn board(
        &self,
        window: Window,
        period: Period,
        filter: Option<(&str, &str)>,
    ) -> Result<Option<Ranking>> {
        let span = self.span(window, period)?;
        let filter = self.check_filter(filter)?;
        let name = self.member_name(window, span.key, filter);
        let config = self.inner.config.board();
        match hidden_board(&self.inner.boards, &name, config, None)? {
            Some((found, _)) => {
                let mut cache = self.cache();
                // The cached handle if it is still this board (it keeps
                // its queue state); a board created again replaces it.
                match cache.get(&name) {
                    Some(cached) if cached.inner.id == found.inner.id => Ok(Some(cached.clone())),
                    _ => {
                        cache.insert(name, found.clone());
                        Ok(Some(found))
                    }
                }
            }
            None => {
                self.forget(Some(&name));
                self.check_alive()?;
                Ok(None)
            }
        }
    }

    /// [`Error::RankingNotFound`] naming the family once it is deleted (its
    /// players board is the first thing a delete removes).
    pub(super) fn check_alive(&self) -> Result<()> {
        let players = &self.inner.players;
        match self.inner.boards.open_board(players.name())? {
            Some((id, _)) if id == players.inner.id => Ok(()),
            _ => Err(self.not_found()),
        }
    }

    /// The error a deleted family's handle meets: it names the family, not
    /// one of its hidden boards.
    pub(super) fn not_found(&self) -> Error {
        Error::RankingNotFound {
            name: self.inner.name.clone(),
        }
    }

    /// `e`, with a `RankingNotFound` of the players board (hidden) told as
    /// the family's.
    pub(super) fn named(&self, e: Error) -> Error {
        match e {
            Error::RankingNotFound { .. } => self.not_found(),
            e => e,
        }
    }

    /// The period `period` of `window` means, with the family's offset and
    /// first weekday.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownWindow`], or a timestamp beyond a million years.
    pub fn span(&self, window: Window, period: Period) -> Result<Span> {
        let c = &self.inner.config;
        c.check_window(&self.inner.name, window)?;
        window.span(period, c.offset_minutes(), c.first_weekday())
    }

    fn check_filter<'a>(
        &self,
        filter: Option<(&'a str, &'a str)>,
    ) -> Result<Option<(&'a str, &'a str)>> {
        if let Some((dim, value)) = filter {
            self.inner
                .config
                .check_filter(&self.inner.name, dim, value)?;
        }
        Ok(filter)
    }

    /// The name of a member board.
    fn member_name(&self, window: Window, key: i64, filter: Option<(&str, &str)>) -> String {
        let mut name = format!(
            "{}{}{HIDDEN}{key}",
            member_prefix(self.inner.id),
            window.as_str()
        );
        if let Some((dim, value)) = filter {
            name.push_str(&format!("{HIDDEN}{dim}{HIDDEN}{value}"));
        }
        name
    }

    /// A member board, from the cache or the store, created if absent and
    /// `create`; and whether this call created it.
    fn member_created(
        &self,
        window: Window,
        key: i64,
        filter: Option<(&str, &str)>,
        create: bool,
    ) -> Result<Option<(Ranking, bool)>> {
        let name = self.member_name(window, key, filter);
        if let Some(board) = self.cache().get(&name) {
            return Ok(Some((board.clone(), false)));
        }
        let config = self.inner.config.board();
        // Beside the registry board: one transaction writes them together.
        let placement = create.then_some(Placement::With(self.inner.id));
        let found = hidden_board(&self.inner.boards, &name, config, placement)?;
        if let Some((board, _)) = &found {
            self.cache().insert(name, board.clone());
        }
        Ok(found)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Ranking>> {
        self.inner
            .members
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Forgets cached member handles (after a delete made them stale).
    fn forget(&self, name: Option<&str>) {
        match name {
            Some(name) => drop(self.cache().remove(name)),
            None => self.cache().clear(),
        }
    }
}

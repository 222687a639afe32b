//! [`AsyncFamily`]: a [`Family`]'s calls as `async fn`s, and its
//! submission builder, each one job of the sync family on the store's
//! threads.

use super::ranking::AsyncRanking;
use super::store::AsyncStore;
use super::threads::OnThreads;
use crate::error::Result;
use crate::ranking::{
    DeadLetter, Family, FamilyConfig, FamilySubmission, Period, Span, Update, Window,
};
use std::sync::Arc;

/// A family of leaderboards for async code (feature `tokio`): the calls of
/// [`Family`] as `async fn`s with the same names and arguments, on the
/// threads of the [`AsyncStore`] it was created or opened through. Its
/// member boards are [`AsyncRanking`]s.
///
/// ```
/// use autoshard::ranking::{FamilyConfig, Period, RankingConfig, Window};
/// use autoshard::AsyncFamily;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> autoshard::Result<()> {
/// let db = autoshard::open_async("sqlite::memory:").await?;
/// let config = FamilyConfig::new(RankingConfig::new(0..1_000_000))
///     .window(Window::Day)
///     .window(Window::AllTime)
///     .filter("country", ["fr", "de"]);
/// let family = AsyncFamily::create(&db, "points", config).await?;
/// family.submission("alice", 120).filter("country", "fr").submit().await?;
/// family.submission("bob", 90).filter("country", "fr").submit().await?;
/// let fr = family
///     .board(Window::Day, Period::Current, Some(("country", "fr")))
///     .await?
///     .expect("submitted today");
/// assert_eq!(fr.top(1).await?[0].player, "alice");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct AsyncFamily {
    family: Arc<OnThreads<Family>>,
    db: AsyncStore,
}

impl std::fmt::Debug for AsyncFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AsyncFamily")
            .field(&self.family.get().name())
            .finish()
    }
}

impl AsyncFamily {
    fn wrap(db: &AsyncStore, family: Family) -> Self {
        AsyncFamily {
            family: Arc::new(OnThreads::new(family, db.threads().clone())),
            db: db.clone(),
        }
    }

    /// [`Family::create`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::create`].
    pub async fn create(db: &AsyncStore, name: &str, config: FamilyConfig) -> Result<Self> {
        let name = name.to_owned();
        let family = db
            .run(move |store| Family::create(store, &name, config))
            .await??;
        Ok(Self::wrap(db, family))
    }

    /// [`Family::open`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::open`].
    pub async fn open(db: &AsyncStore, name: &str) -> Result<Self> {
        let name = name.to_owned();
        let family = db.run(move |store| Family::open(store, &name)).await??;
        Ok(Self::wrap(db, family))
    }

    /// [`Family::open_or_create`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::open_or_create`].
    pub async fn open_or_create(db: &AsyncStore, name: &str, config: FamilyConfig) -> Result<Self> {
        let name = name.to_owned();
        let family = db
            .run(move |store| Family::open_or_create(store, &name, config))
            .await??;
        Ok(Self::wrap(db, family))
    }

    /// [`Family::list`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::list`].
    pub async fn list(db: &AsyncStore) -> Result<Vec<String>> {
        db.run(Family::list).await?
    }

    /// [`Family::delete`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::delete`].
    pub async fn delete(db: &AsyncStore, name: &str) -> Result<bool> {
        let name = name.to_owned();
        db.run(move |store| Family::delete(store, &name)).await?
    }

    /// The sync family, for its calls that need no store
    /// ([`Family::span`], ...) and for code on threads of its own.
    pub fn sync_family(&self) -> &Family {
        self.family.get()
    }

    /// The family's name.
    pub fn name(&self) -> &str {
        self.family.get().name()
    }

    /// The family's configuration.
    pub fn config(&self) -> &FamilyConfig {
        self.family.get().config()
    }

    pub(crate) fn store(&self) -> &AsyncStore {
        &self.db
    }

    async fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce(&Family) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let family = self.family.get().clone();
        self.db.threads().run(move || job(&family)).await?
    }

    /// [`Family::board`], on the store's threads: the member board as an
    /// [`AsyncRanking`].
    ///
    /// # Errors
    ///
    /// As [`Family::board`].
    pub async fn board(
        &self,
        window: Window,
        period: Period,
        filter: Option<(&str, &str)>,
    ) -> Result<Option<AsyncRanking>> {
        let filter = filter.map(|(d, v)| (d.to_owned(), v.to_owned()));
        let board = self
            .call(move |f| {
                let filter = filter.as_ref().map(|(d, v)| (d.as_str(), v.as_str()));
                f.board(window, period, filter)
            })
            .await?;
        Ok(board.map(|b| AsyncRanking::wrap(&self.db, b)))
    }

    /// [`Family::span`] (no store call).
    ///
    /// # Errors
    ///
    /// As [`Family::span`].
    pub fn span(&self, window: Window, period: Period) -> Result<Span> {
        self.family.get().span(window, period)
    }

    /// Starts a submission, as [`Family::submission`]; the builder owns its
    /// arguments, so it may be kept across awaits.
    pub fn submission(&self, player: &str, score: i64) -> AsyncFamilyUpdate {
        AsyncFamilyUpdate {
            family: self.clone(),
            player: player.to_owned(),
            score,
            filters: Vec::new(),
            at: None,
            data: None,
        }
    }

    /// Starts a submission of one [`Update`], as [`Family::update`] (a
    /// tuple is encoded here: the family's configuration needs no store).
    ///
    /// # Errors
    ///
    /// As [`Family::update`].
    pub fn update(&self, update: Update<'_>) -> Result<AsyncFamilyUpdate> {
        let score = update.score_by(|values| self.family.get().encode(values))?;
        let mut entry = self.submission(update.player(), score);
        entry.data = update.data().map(<[u8]>::to_vec);
        Ok(entry)
    }

    /// [`Family::queued`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::queued`].
    pub async fn queued(&self) -> Result<u64> {
        self.call(|f| f.queued()).await
    }

    /// [`Family::drain_queued`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::drain_queued`].
    pub async fn drain_queued(&self) -> Result<u64> {
        self.call(|f| f.drain_queued()).await
    }

    /// [`Family::dead_letters`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::dead_letters`].
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>> {
        self.call(|f| f.dead_letters()).await
    }

    /// [`Family::delete_dead_letter`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::delete_dead_letter`].
    pub async fn delete_dead_letter(&self, id: i64) -> Result<bool> {
        self.call(move |f| f.delete_dead_letter(id)).await
    }

    /// [`Family::periods`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::periods`].
    pub async fn periods(&self, window: Window) -> Result<Vec<Span>> {
        self.call(move |f| f.periods(window)).await
    }

    /// [`Family::drop_expired`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::drop_expired`].
    pub async fn drop_expired(&self) -> Result<usize> {
        self.call(|f| f.drop_expired()).await
    }

    /// [`Family::drop_expired_at`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::drop_expired_at`].
    pub async fn drop_expired_at(&self, unix_seconds: i64) -> Result<usize> {
        self.call(move |f| f.drop_expired_at(unix_seconds)).await
    }

    /// [`Family::delete_period`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Family::delete_period`].
    pub async fn delete_period(&self, window: Window, period: Period) -> Result<usize> {
        self.call(move |f| f.delete_period(window, period)).await
    }
}

/// A submission being put together: see [`AsyncFamily::submission`] and
/// [`FamilyUpdate`](crate::ranking::FamilyUpdate), whose calls it mirrors.
#[derive(Debug, Clone)]
#[must_use = "nothing is written until `submit` or `enqueue`"]
pub struct AsyncFamilyUpdate {
    family: AsyncFamily,
    player: String,
    score: i64,
    filters: Vec<(String, String)>,
    at: Option<i64>,
    data: Option<Vec<u8>>,
}

impl AsyncFamilyUpdate {
    /// [`FamilyUpdate::filter`](crate::ranking::FamilyUpdate::filter).
    pub fn filter(mut self, dimension: &str, value: &str) -> Self {
        self.filters.push((dimension.to_owned(), value.to_owned()));
        self
    }

    /// [`FamilyUpdate::at`](crate::ranking::FamilyUpdate::at).
    pub fn at(mut self, unix_seconds: i64) -> Self {
        self.at = Some(unix_seconds);
        self
    }

    /// [`FamilyUpdate::data`](crate::ranking::FamilyUpdate::data).
    pub fn data(mut self, data: &[u8]) -> Self {
        self.data = Some(data.to_vec());
        self
    }

    /// [`FamilyUpdate::submit`](crate::ranking::FamilyUpdate::submit), on the
    /// store's threads. Dropped once sent, it still commits or not as a
    /// whole.
    ///
    /// # Errors
    ///
    /// As [`FamilyUpdate::submit`](crate::ranking::FamilyUpdate::submit).
    pub async fn submit(self) -> Result<FamilySubmission> {
        let family = self.family.clone();
        family.call(move |f| self.build(f).submit()).await
    }

    /// [`FamilyUpdate::enqueue`](crate::ranking::FamilyUpdate::enqueue), on
    /// the store's threads.
    ///
    /// # Errors
    ///
    /// As [`FamilyUpdate::enqueue`](crate::ranking::FamilyUpdate::enqueue).
    pub async fn enqueue(self) -> Result<()> {
        let family = self.family.clone();
        family.call(move |f| self.build(f).enqueue()).await
    }

    fn build<'a>(&'a self, family: &'a Family) -> crate::ranking::FamilyUpdate<'a> {
        let mut entry = family.submission(&self.player, self.score);
        for (dimension, value) in &self.filters {
            entry = entry.filter(dimension, value);
        }
        if let Some(at) = self.at {
            entry = entry.at(at);
        }
        if let Some(data) = &self.data {
            entry = entry.data(data);
        }
        entry
    }
}

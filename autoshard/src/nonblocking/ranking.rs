//! [`AsyncRanking`]: a [`Ranking`]'s calls as `async fn`s, each one job of
//! the sync board on the store's threads.

use super::store::AsyncStore;
use super::threads::OnThreads;
use crate::error::{Error, Result};
use crate::ranking::{
    ApproxSnapshot, DeadLetter, Entry, OwnedUpdate, Ranking, RankingConfig, Refresh, Submission,
    Tie, Update, DEFAULT_FLUSH_TIMEOUT, FLUSH_POLL,
};
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A leaderboard for async code (feature `tokio`): the calls of [`Ranking`]
/// as `async fn`s with the same names and arguments, on the threads of the
/// [`AsyncStore`] it was created or opened through.
///
/// Results, errors and guarantees are the sync board's. A dropped future
/// leaves a write that was handed to the store's threads to run to its
/// end (a submission counts once or not at all); a read simply ends.
/// Cloning is cheap and shares the handle.
///
/// ```
/// use autoshard::ranking::{RankingConfig, Tie};
/// use autoshard::AsyncRanking;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> autoshard::Result<()> {
/// let db = autoshard::open_async("sqlite::memory:").await?;
/// let board = AsyncRanking::create(&db, "season-1", RankingConfig::new(0..10_000)).await?;
/// board.submit("alice", 30).await?;
/// board.set_score("bob", 40).await?;
/// let worker = board.spawn_worker(board.worker()).await?; // applies the queue
/// board.enqueue("carol", 35).await?;
/// board.flush().await?; // waits for the worker
/// worker.stop().await?;
/// assert_eq!(board.rank("alice", Tie::Standard).await?, Some(3));
/// let top = board.top(2).await?;
/// assert_eq!(top[0].player, "bob");
/// let board = AsyncRanking::open(&db, "season-1").await?; // any handle, any process
/// assert_eq!(board.len().await?, 3);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct AsyncRanking {
    board: Arc<OnThreads<Ranking>>,
    db: AsyncStore,
}

impl std::fmt::Debug for AsyncRanking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AsyncRanking")
            .field(self.board.get())
            .finish()
    }
}

/// An argument of a board call, owned to travel to the store's threads.
trait Ship {
    type Owned: Lend + Send + 'static;
    fn ship(self) -> Self::Owned;
}

/// An owned argument, lent back in the shape the sync call takes.
trait Lend {
    type Out<'a>
    where
        Self: 'a;
    fn lend(&self) -> Self::Out<'_>;
}

impl Ship for &str {
    type Owned = String;
    fn ship(self) -> String {
        self.to_owned()
    }
}

impl Lend for String {
    type Out<'a> = &'a str;
    fn lend(&self) -> &str {
        self
    }
}

impl<T: Copy + Send + 'static> Ship for &[T] {
    type Owned = Vec<T>;
    fn ship(self) -> Vec<T> {
        self.to_vec()
    }
}

impl<T: 'static> Lend for Vec<T> {
    type Out<'a> = &'a [T];
    fn lend(&self) -> &[T] {
        self
    }
}

macro_rules! by_value {
    ($($t:ty),*) => {$(
        impl Ship for $t {
            type Owned = $t;
            fn ship(self) -> $t {
                self
            }
        }
        impl Lend for $t {
            type Out<'a> = $t;
            fn lend(&self) -> $t {
                *self
            }
        }
    )*};
}
by_value!(i64, u64, f64, Tie, Duration);

impl Ship for Update<'_> {
    type Owned = OwnedUpdate;
    fn ship(self) -> OwnedUpdate {
        self.to_owned_update()
    }
}

impl Lend for OwnedUpdate {
    type Out<'a> = Update<'a>;
    fn lend(&self) -> Update<'_> {
        self.as_update()
    }
}

impl Ship for RangeInclusive<i64> {
    type Owned = RangeInclusive<i64>;
    fn ship(self) -> Self {
        self
    }
}

impl Lend for RangeInclusive<i64> {
    type Out<'a> = RangeInclusive<i64>;
    fn lend(&self) -> Self {
        self.clone()
    }
}

/// One async method per sync call of [`Ranking`] with the same name,
/// arguments and result.
macro_rules! calls {
    ($( $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty; )*) => {$(
        #[doc = concat!("[`Ranking::", stringify!($name), "`], on the store's threads.")]
        ///
        /// # Errors
        ///
        #[doc = concat!("As [`Ranking::", stringify!($name), "`].")]
        pub async fn $name(&self, $($arg: $ty),*) -> Result<$ret> {
            $(let $arg = Ship::ship($arg);)*
            self.call(move |b| b.$name($(Lend::lend(&$arg)),*)).await
        }
    )*};
}

impl AsyncRanking {
    /// [`Ranking::create`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Ranking::create`].
    pub async fn create(db: &AsyncStore, name: &str, config: RankingConfig) -> Result<Self> {
        let name = name.to_owned();
        let board = db
            .run(move |store| Ranking::create(store, &name, config))
            .await??;
        Ok(Self::wrap(db, board))
    }

    /// [`Ranking::open`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Ranking::open`].
    pub async fn open(db: &AsyncStore, name: &str) -> Result<Self> {
        let name = name.to_owned();
        let board = db.run(move |store| Ranking::open(store, &name)).await??;
        Ok(Self::wrap(db, board))
    }

    /// [`Ranking::list`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Ranking::list`].
    pub async fn list(db: &AsyncStore) -> Result<Vec<String>> {
        db.run(Ranking::list).await?
    }

    /// [`Ranking::delete`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Ranking::delete`].
    pub async fn delete(db: &AsyncStore, name: &str) -> Result<bool> {
        let name = name.to_owned();
        db.run(move |store| Ranking::delete(store, &name)).await?
    }

    pub(crate) fn wrap(db: &AsyncStore, board: Ranking) -> Self {
        AsyncRanking {
            board: Arc::new(OnThreads::new(board, db.threads().clone())),
            db: db.clone(),
        }
    }

    /// The sync board, for its calls that need no store ([`Ranking::name`],
    /// [`Ranking::encode`], ...) and for code on threads of its own.
    pub fn sync_board(&self) -> &Ranking {
        self.board.get()
    }

    /// The board's name.
    pub fn name(&self) -> &str {
        self.board.get().name()
    }

    /// The board's configuration.
    pub fn config(&self) -> &crate::ranking::BoardConfig {
        self.board.get().config()
    }

    pub(crate) fn store(&self) -> &AsyncStore {
        &self.db
    }

    /// Runs `job` on the store's threads with a handle of the board.
    pub(crate) async fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce(&Ranking) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let board = self.board.get().clone();
        self.db.threads().run(move || job(&board)).await?
    }

    calls! {
        submit(player: &str, score: i64) -> Submission;
        write(update: Update<'_>) -> ();
        submit_update(update: Update<'_>) -> Submission;
        enqueue_update(update: Update<'_>) -> ();
        set_score(player: &str, score: i64) -> ();
        remove(player: &str) -> bool;
        enqueue(player: &str, score: i64) -> ();
        enqueue_remove(player: &str) -> ();
        rank(player: &str, tie: Tie) -> Option<u64>;
        rank_of_score(score: i64) -> u64;
        score(player: &str) -> Option<i64>;
        score_at_rank(rank: u64) -> Option<i64>;
        top(n: u64) -> Vec<Entry>;
        page(from: u64, to: u64) -> Vec<Entry>;
        around(player: &str, k: u64) -> Vec<Entry>;
        entry(player: &str) -> Option<Entry>;
        count_between(scores: RangeInclusive<i64>) -> u64;
        between(scores: RangeInclusive<i64>, limit: u64) -> Vec<Entry>;
        percentile(player: &str) -> Option<f64>;
        score_at_percentile(p: f64) -> Option<i64>;
        page_number(n: u64, size: u64) -> Vec<Entry>;
        page_count(size: u64) -> u64;
        remove_data(player: &str) -> bool;
        remove_between(scores: RangeInclusive<i64>) -> u64;
        keep_top(n: u64) -> u64;
        len() -> u64;
        is_empty() -> bool;
        check_integrity() -> ();
        queued() -> u64;
        dead_letters() -> Vec<DeadLetter>;
        delete_dead_letter(id: i64) -> bool;
        reset() -> ();
        rank_of_dims(values: &[i64]) -> u64;
        dims(player: &str) -> Option<Vec<i64>>;
        dims_at_rank(rank: u64) -> Option<Vec<i64>>;
        approx_rank(score: i64) -> u64;
        approx_snapshot() -> Arc<ApproxSnapshot>;
        refresh() -> Refresh;
    }

    /// [`Ranking::flush`], waiting on the queue's wake-ups rather than on a
    /// thread: each look at the queue is a short job on the store's
    /// threads, and between looks the flush is an idle future, woken when
    /// a worker of this process applies a batch, or after 5 ms (a worker
    /// in another process cannot wake it). So any number of flushes at
    /// once leave the store's threads to the worker task started by
    /// [`spawn_worker`](AsyncRanking::spawn_worker), and hold no thread of
    /// their own.
    ///
    /// # Errors
    ///
    /// As [`Ranking::flush`].
    pub async fn flush(&self) -> Result<()> {
        self.flush_within(DEFAULT_FLUSH_TIMEOUT).await
    }

    /// [`Ranking::flush_within`], waiting as [`flush`](AsyncRanking::flush)
    /// does.
    ///
    /// # Errors
    ///
    /// As [`Ranking::flush_within`].
    pub async fn flush_within(&self, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        let boards = self.call(|b| Ok(b.queue_boards())).await?;
        // As the sync flush: queue board by queue board (a split board's
        // trees), within one time limit.
        for board in boards {
            let left = timeout.saturating_sub(started.elapsed());
            self.flush_one(Arc::new(board), left).await?;
        }
        Ok(())
    }

    /// The sync flush's loop (`Ranking::flush_within` of one queue board),
    /// its looks at the queue on the store's threads and its waits on the
    /// queue's `Notify`.
    async fn flush_one(&self, board: Arc<Ranking>, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        let threads = self.db.threads();
        let b = board.clone();
        let flush = Arc::new(threads.run(move || b.flush_start()).await??);
        let behind = |count: bool| {
            let (b, f) = (board.clone(), flush.clone());
            threads.run(move || b.flush_behind(&f, count))
        };
        loop {
            // Armed before the look, so a batch applied during it wakes the
            // wait below.
            let changed = flush.state.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let seen = flush.state.applied_batches();
            if behind(false).await?? == 0 {
                return Ok(());
            }
            let waited = started.elapsed();
            if waited >= timeout {
                let remaining = behind(true).await??;
                return Err(Error::FlushTimeout { remaining, waited });
            }
            let until = tokio::time::Instant::now() + FLUSH_POLL.min(timeout - waited);
            while flush.state.applied_batches() == seen {
                if tokio::time::timeout_at(until, changed.as_mut())
                    .await
                    .is_err()
                {
                    break;
                }
                changed.set(flush.state.changed());
                changed.as_mut().enable();
            }
        }
    }

    /// [`Ranking::set_scores`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Ranking::set_scores`].
    pub async fn set_scores(&self, scores: &[(&str, i64)]) -> Result<()> {
        let owned: Vec<(String, i64)> = scores.iter().map(|&(p, s)| (p.to_owned(), s)).collect();
        self.call(move |b| {
            let scores: Vec<(&str, i64)> = owned.iter().map(|(p, s)| (p.as_str(), *s)).collect();
            b.set_scores(&scores)
        })
        .await
    }

    /// [`Ranking::among`], on the store's threads.
    ///
    /// # Errors
    ///
    /// As [`Ranking::among`].
    pub async fn among(&self, players: &[&str]) -> Result<Vec<Entry>> {
        let owned: Vec<String> = players.iter().map(|&p| p.to_owned()).collect();
        self.call(move |b| {
            let players: Vec<&str> = owned.iter().map(String::as_str).collect();
            b.among(&players)
        })
        .await
    }
}

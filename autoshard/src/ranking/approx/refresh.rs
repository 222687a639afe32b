//! The refresh: summarizing the score index into buckets and publishing
//! them as a new snapshot; and a thread that refreshes periodically.

use super::super::Ranking;
use crate::error::{Error, Result};
use crate::job::{JobThread, Live};
use crate::seam::{Bucket, ScoreSink};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Buckets written per transaction: a refresh of many buckets does not hold
/// the write lock for all of them at once.
const CHUNK: u32 = 256;

/// Test hooks (`__private::approx_hooks`), process-wide; only with the
/// `failpoints` feature (without it, the no-op twin below).
#[cfg(feature = "failpoints")]
pub(crate) mod hooks {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

    /// Buckets per transaction (0: [`CHUNK`]).
    pub(crate) static CHUNK: AtomicU32 = AtomicU32::new(0);
    /// Sleep between two chunk transactions, in microseconds.
    pub(crate) static PAUSE_MICROS: AtomicU64 = AtomicU64::new(0);
    /// Write the buckets over the published snapshot's rows instead of a
    /// new snapshot's: the bug the snapshot protocol guards against, for the
    /// crash test's control.
    pub(crate) static IN_PLACE: AtomicBool = AtomicBool::new(false);

    pub(super) fn in_place() -> bool {
        IN_PLACE.load(Ordering::Relaxed)
    }

    pub(super) fn chunk() -> u32 {
        match CHUNK.load(Ordering::Relaxed) {
            0 => super::CHUNK,
            n => n,
        }
    }

    pub(super) fn pause() -> Duration {
        Duration::from_micros(PAUSE_MICROS.load(Ordering::Relaxed))
    }
}

/// Without `failpoints`: the refresh as it ships.
#[cfg(not(feature = "failpoints"))]
pub(crate) mod hooks {
    use super::*;

    pub(super) fn in_place() -> bool {
        false
    }

    pub(super) fn chunk() -> u32 {
        CHUNK
    }

    pub(super) fn pause() -> Duration {
        Duration::ZERO
    }
}

/// Buckets over runs of equal scores, best first. With an exact top of
/// `t` players, each run until `t` players are covered is a bucket of its
/// own (exact ranks there). Then equal-count buckets: a bucket closes at
/// the first run boundary where it holds at least `ceil((n - t) / b)`
/// players, so a score is never split, at most `b` such buckets come out,
/// and a bucket's interior (players neither at its best nor its worst
/// score) is below `ceil((n - t) / b) - 1`.
pub(crate) struct Builder {
    buckets: u32,
    /// Players ranked exactly at the top: each of their runs is a bucket.
    top: u64,
    /// Players in the exact top buckets so far.
    in_top: u64,
    /// Buckets of the exact top (one run each), which never grow.
    exact_buckets: usize,
    target: u64,
    total: u64,
    out: Vec<Bucket>,
    last: Option<i64>,
}

impl Builder {
    pub(crate) fn new(buckets: u32, top: u32) -> Self {
        Builder {
            buckets,
            top: u64::from(top),
            in_top: 0,
            exact_buckets: 0,
            target: 1,
            total: 0,
            out: Vec::new(),
            last: None,
        }
    }
}

impl ScoreSink for Builder {
    fn total(&mut self, players: u64) -> Result<()> {
        self.total = players;
        let rest = players.saturating_sub(self.top);
        self.target = rest.div_ceil(u64::from(self.buckets)).max(1);
        Ok(())
    }

    fn run(&mut self, score: i64, players: u64) -> Result<()> {
        if self.last.is_some_and(|last| last <= score) || players == 0 {
            return Err(Error::Corrupt {
                kind: "ranking",
                id: "approximate board".into(),
                field: format!("score index at {score}"),
                reason: "runs out of order".into(),
            });
        }
        self.last = Some(score);
        let exact = self.in_top < self.top;
        let open = self.out.len() > self.exact_buckets;
        match self.out.last_mut() {
            Some(b) if !exact && open && b.count < self.target => {
                b.lo = score;
                b.at_lo = players;
                b.count += players;
            }
            _ => self.out.push(Bucket {
                hi: score,
                lo: score,
                count: players,
                at_hi: players,
                at_lo: players,
            }),
        }
        if exact {
            self.in_top += players;
            self.exact_buckets = self.out.len();
        }
        Ok(())
    }
}

/// The buckets of `sorted` (tree scores, best first): `(players, buckets)`.
#[cfg(test)]
pub(crate) fn build(sorted: &[i64], buckets: u32, top: u32) -> (u64, Vec<Bucket>) {
    let mut builder = Builder::new(buckets, top);
    builder.total(sorted.len() as u64).unwrap();
    for run in sorted.chunk_by(|a, b| a == b) {
        builder.run(run[0], run.len() as u64).unwrap();
    }
    (builder.total, builder.out)
}

/// What a [`Ranking::refresh`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Refresh {
    /// The snapshot's number.
    pub snapshot: i64,
    /// Players it counted.
    pub players: u64,
    /// Buckets it made (at most the board's bucket count; fewer when there
    /// are fewer distinct scores or players).
    pub buckets: u32,
    /// Whether it is now the published snapshot: `false` when a refresh
    /// that started later published first (its snapshot is newer).
    pub published: bool,
}

/// [`Ranking::refresh`].
pub(in crate::ranking) fn refresh(ranking: &Ranking) -> Result<Refresh> {
    let store = super::approx_store(ranking, "refresh")?;
    let board = ranking.inner.id;
    let in_place = hooks::in_place();
    let snapshot = match store.approx_current(board)? {
        Some(current) if in_place => current,
        _ => store.approx_begin(board)?,
    };
    let config = &ranking.inner.config;
    let mut builder = Builder::new(config.approximate().unwrap_or(1), config.exact_top());
    store.approx_scores(board, &mut builder)?;
    let (chunk, pause) = (hooks::chunk(), hooks::pause());
    for (i, rows) in builder.out.chunks(chunk as usize).enumerate() {
        if i > 0 && !pause.is_zero() {
            std::thread::sleep(pause);
        }
        store.approx_put(board, snapshot, i as u32 * chunk, rows)?;
    }
    let buckets = builder.out.len() as u32;
    if in_place {
        // The bug: stale rows past the new count stay published too.
        return Ok(Refresh {
            snapshot,
            players: builder.total,
            buckets,
            published: true,
        });
    }
    let published = store.approx_publish(board, snapshot, builder.total, buckets)?;
    Ok(Refresh {
        snapshot,
        players: builder.total,
        buckets,
        published,
    })
}

/// [`Ranking::refresher`].
pub(in crate::ranking) fn refresher(ranking: &Ranking, interval: Duration) -> Refresher {
    Refresher {
        ranking: ranking.clone(),
        interval: interval.max(Duration::from_millis(1)),
    }
}

/// Refreshes an approximate board periodically; made by
/// [`Ranking::refresher`].
#[derive(Debug, Clone)]
pub struct Refresher {
    ranking: Ranking,
    interval: Duration,
}

/// What a [`Refresher`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RefresherStats {
    /// Refreshes that published a new snapshot.
    pub published: u64,
    /// Refreshes whose snapshot was not published because one that started
    /// later (another refresher, a `refresh` call) published first.
    pub superseded: u64,
    /// Refreshes that met a retryable store error, tried again at the next
    /// interval.
    pub retries: u64,
}

/// A running [`Refresher`]. Dropping it stops the thread after its current
/// refresh and waits for it; [`stop`](RefresherHandle::stop) does the same
/// and reports how it ended.
#[derive(Debug)]
#[must_use = "dropping the handle stops the refresher"]
pub struct RefresherHandle {
    stop: Arc<(Mutex<bool>, Condvar)>,
    live: Arc<Live<RefresherStats>>,
    thread: JobThread<RefresherStats>,
}

impl Refresher {
    /// Starts the thread: a refresh right away, then one every interval.
    /// A retryable store error ([`Error::is_retryable`]) is tried again at
    /// the next interval; any other error ends the thread, and
    /// [`stop`](RefresherHandle::stop) returns it.
    ///
    /// # Errors
    ///
    /// [`Error::ApproximateBoard`] on an exact board (checked before the
    /// thread starts); [`Error::Spawn`] if no thread can be started.
    pub fn spawn(self) -> Result<RefresherHandle> {
        super::approx_store(&self.ranking, "refresher")?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let live = Live::new(RefresherStats::default());
        let thread = JobThread::spawn("refresher", "autoshard-refresher".into(), {
            let (stop, live) = (stop.clone(), live.clone());
            move || self.run(&stop, &live)
        })?;
        Ok(RefresherHandle { stop, live, thread })
    }

    fn run(
        &self,
        stop: &(Mutex<bool>, Condvar),
        live: &Live<RefresherStats>,
    ) -> Result<RefresherStats> {
        let mut stats = RefresherStats::default();
        loop {
            match self.ranking.refresh() {
                Ok(r) if r.published => stats.published += 1,
                Ok(_) => stats.superseded += 1,
                Err(e) if e.is_retryable() => stats.retries += 1,
                Err(e) => return Err(e),
            }
            live.publish(&stats);
            let stopped = stop.0.lock().unwrap_or_else(|p| p.into_inner());
            let (stopped, _) = stop
                .1
                .wait_timeout_while(stopped, self.interval, |s| !*s)
                .unwrap_or_else(|p| p.into_inner());
            if *stopped {
                return Ok(stats);
            }
        }
    }
}

impl RefresherHandle {
    /// What the refresher did so far, while it runs and after it ended.
    pub fn stats(&self) -> RefresherStats {
        self.live.get()
    }

    /// Stops the thread after its current refresh: what it did, or the
    /// error that had already ended it.
    ///
    /// # Errors
    ///
    /// The error that ended the thread; a panic in it is resumed here.
    pub fn stop(mut self) -> Result<RefresherStats> {
        self.request_stop();
        self.finish()
    }

    /// Waits for the thread to end by itself (at an error that is not
    /// retryable), then as [`stop`](RefresherHandle::stop).
    ///
    /// # Errors
    ///
    /// As [`stop`](RefresherHandle::stop).
    pub fn join(mut self) -> Result<RefresherStats> {
        self.finish()
    }

    /// Whether the thread has ended (after an error).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    fn request_stop(&self) {
        signal_stop(&self.stop);
    }

    fn finish(&mut self) -> Result<RefresherStats> {
        self.thread.join().expect("joined once")
    }
}

crate::job::impl_job!(RefresherHandle, RefresherStats);

impl Drop for RefresherHandle {
    fn drop(&mut self) {
        let stop = &self.stop;
        self.thread.stop_dropped(false, || signal_stop(stop));
    }
}

/// Wakes the refresher's wait between refreshes with the stop flag set.
fn signal_stop(stop: &(Mutex<bool>, Condvar)) {
    *stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
    stop.1.notify_all();
}

//! The family worker: applies queued family submissions, each batch in ONE
//! transaction over the players board (whose queue holds the rows and
//! whose marks say what is applied) and every member the batch writes.
//!
//! A batch first looks at the queue outside any transaction (the peek) to
//! learn which members its rows write and leave, creating members of new
//! periods as a direct submission does; then opens the transaction on the
//! players board and those members, takes the rows again above the marks,
//! and works each row's members out again from the stored filter values
//! it reads there. A row whose members are not all in the transaction
//! (the values or the queue changed since the peek) ends its queue shard's
//! part of the batch; the next batch peeks again.

use super::queue::{decode_row, Queued};
use super::submit::{encode_values, read_values};
use super::window::Period;
use super::worker_handle::FamilyWorkerHandle;
use super::{Family, Window};
use crate::counters;
use crate::error::{Error, Result};
use crate::job::{JobThread, Live};
use crate::ranking::queue::{deletable, Env, OnThread, QueueState};
use crate::ranking::{apply_updates, Ranking};
use crate::seam::{Board, QueuedRow, Storage};
use crate::trace;
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long the worker waits after a busy store or a queue shard another
/// worker holds.
const PAUSE: Duration = Duration::from_millis(2);

/// How often a batch peeks again because its rows' members changed before
/// its transaction, before it reports [`Error::Conflict`].
const TRIES: u32 = 16;

/// Applies a family's queued submissions ([`FamilyUpdate::enqueue`]): made
/// by [`Family::worker`]; [`spawn`](FamilyWorker::spawn) runs it on a
/// thread, [`drain`](FamilyWorker::drain) on the caller's until the queue
/// is empty. Each batch is one write transaction over every member its
/// submissions write and the family's players board, so any number of
/// workers, in any number of processes, may run at once.
///
/// [`FamilyUpdate::enqueue`]: super::FamilyUpdate::enqueue
///
/// ```
/// use autoshard::ranking::{Family, FamilyConfig, Period, RankingConfig, Window};
/// # fn main() -> autoshard::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = autoshard::Sqlite::open(dir.path().join("game.db"))?;
/// let config = FamilyConfig::new(RankingConfig::new(0..100)).window(Window::Week);
/// let game = Family::create(&db, "game", config)?;
/// let worker = game.worker().batch_size(100).spawn()?;
/// game.submission("ann", 42).at(0).enqueue()?;
/// while game.queued()? > 0 {
///     std::thread::sleep(std::time::Duration::from_millis(5));
/// }
/// assert_eq!(worker.stop()?.submissions, 1);
/// let week = game.board(Window::Week, Period::At(0), None)?.unwrap();
/// assert_eq!(week.score("ann")?, Some(42));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FamilyWorker {
    family: Family,
    batch_size: usize,
    idle_timeout: Duration,
}

/// What a family worker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FamilyWorkerStats {
    /// Transactions that applied at least one submission.
    pub batches: u64,
    /// Submissions applied (each to every member it writes).
    pub submissions: u64,
    /// Rows moved to the family's [dead letters](Family::dead_letters).
    pub dead_letters: u64,
    /// Transactions tried again: a busy store, or members that changed
    /// between a batch's peek and its transaction.
    pub retries: u64,
}

impl Family {
    /// A worker for the family's queued submissions (batches of up to 1,000).
    pub fn worker(&self) -> FamilyWorker {
        FamilyWorker {
            family: self.clone(),
            batch_size: 1_000,
            idle_timeout: Duration::from_millis(20),
        }
    }

    /// Submissions queued and not applied yet.
    ///
    /// # Errors
    ///
    /// A store error.
    pub fn queued(&self) -> Result<u64> {
        self.inner.players.queued().map_err(|e| self.named(e))
    }
}

impl FamilyWorker {
    #[cfg(feature = "tokio")]
    pub(super) fn family(&self) -> &Family {
        &self.family
    }

    /// Most submissions applied per transaction (default 1,000, at least 1).
    /// A submission writes one row per member, so a batch writes up to
    /// this many times the members of a period.
    pub fn batch_size(mut self, submissions: usize) -> Self {
        self.batch_size = submissions.max(1);
        self
    }

    /// How long an idle spawned worker sleeps before it looks at the queue
    /// again (default 20 ms): an enqueue of this process wakes it at once,
    /// one of another process is seen within this long.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Applies queued submissions on this thread until the queue is empty.
    ///
    /// # Errors
    ///
    /// The first error that is not a busy store: a store error,
    /// [`Error::RankingNotFound`] once the family is deleted, or
    /// [`Error::Conflict`] if a batch's members kept changing under it.
    /// Batches committed before stay applied.
    pub fn drain(self) -> Result<FamilyWorkerStats> {
        let state = self.family.inner.players.queue_state()?;
        let (stop, live) = (
            AtomicBool::new(false),
            Live::new(FamilyWorkerStats::default()),
        );
        crate::compactor::run_to_end(self.run_in(&OnThread, &state, &stop, &live, true))
    }

    /// Starts the worker on a thread of its own; it runs until the handle
    /// is stopped or dropped, or its first error that is not a busy store.
    ///
    /// # Errors
    ///
    /// A store error creating the queue tables on first use.
    pub fn spawn(self) -> Result<FamilyWorkerHandle> {
        let state = self.family.inner.players.queue_state()?;
        let stop = Arc::new(AtomicBool::new(false));
        let live = Live::new(FamilyWorkerStats::default());
        let thread = JobThread::spawn(
            "family worker",
            format!("autoshard-family-worker-{}", self.family.name()),
            {
                let (state, stop, live) = (state.clone(), stop.clone(), live.clone());
                move || {
                    crate::compactor::run_to_end(
                        self.run_in(&OnThread, &state, &stop, &live, false),
                    )
                }
            },
        )?;
        Ok(FamilyWorkerHandle::of_thread(state, stop, live, thread))
    }

    /// The worker's one loop, on a thread ([`OnThread`]) or in a tokio
    /// task (`task.rs`), whose `RankingNotFound` (met on the players
    /// board, a member, or the queue, wherever the delete caught the
    /// worker) names the family: the one name the caller gave.
    pub(super) async fn run_in(
        &self,
        env: &impl Env,
        state: &QueueState,
        stop: &AtomicBool,
        live: &Live<FamilyWorkerStats>,
        exit_when_idle: bool,
    ) -> Result<FamilyWorkerStats> {
        let worked = async {
            let queues = self.family.inner.players.queues().max(1);
            let mut stats = FamilyWorkerStats::default();
            let (mut first, mut sweep) = (0, true);
            while !stop.load(Ordering::Acquire) {
                live.publish(&stats);
                let seen = state.enqueued();
                // The batch's counts travel with it and back: one at a time.
                let (family, max) = (self.family.clone(), self.batch_size);
                let (done, back) = env
                    .run(move || {
                        let mut stats = stats;
                        (family.traced_batch((max, first, sweep), &mut stats), stats)
                    })
                    .await?;
                stats = back;
                let done = match done {
                    Err(e) if e.is_retryable() => {
                        stats.retries += 1;
                        {
                            // Closed before the pause: an entered span cannot
                            // cross an await.
                            let _retry = trace::retry!(family = self.family.name(),
                            attempt = stats.retries, error = %e);
                        }
                        env.pause(PAUSE).await;
                        continue;
                    }
                    done => done?,
                };
                counters::WORKER_BATCHES.add(u64::from(done.applied > 0));
                counters::UPDATES_APPLIED.add(done.applied as u64);
                counters::DEAD_LETTERED.add(done.dead_letters as u64);
                sweep = false;
                first = (first + 1) % queues;
                if done.taken > 0 {
                    stats.batches += u64::from(done.applied > 0);
                    stats.submissions += done.applied as u64;
                    stats.dead_letters += done.dead_letters as u64;
                    continue;
                }
                if done.contended {
                    env.pause(PAUSE).await;
                } else if exit_when_idle {
                    break;
                } else {
                    env.wait_enqueued(state, stop, seen, self.idle_timeout)
                        .await;
                }
            }
            live.publish(&stats);
            Ok::<_, Error>(stats)
        };
        match worked.await {
            Err(Error::RankingNotFound { .. }) => Err(self.family.not_found()),
            other => other,
        }
    }
}

/// What one batch did.
#[derive(Debug, Default)]
struct Batch {
    taken: usize,
    applied: usize,
    dead_letters: usize,
    /// Some queue shard was held by another worker.
    contended: bool,
    /// `(shard, mark, whether rows were taken)` of each shard claimed.
    marks: Vec<(u32, i64, bool)>,
    /// Latest timestamp applied, for the drop of expired periods.
    latest: Option<i64>,
}

/// A member board's handle and its storage in the batch's transaction, by
/// member name.
type MemberStorage<'m> = dyn Fn(&str) -> Option<(&'m Ranking, &'m dyn Storage)> + 'm;

/// One member a submission writes or leaves.
#[derive(Debug, Clone)]
struct Target {
    window: Window,
    key: i64,
    filter: Option<(String, String)>,
    leave: bool,
}

impl Target {
    fn filter(&self) -> Option<(&str, &str)> {
        self.filter.as_ref().map(|(d, v)| (d.as_str(), v.as_str()))
    }
}

/// The boards a batch's transaction spans, by member name; and the names
/// of boards to leave that did not exist at the peek (nothing to leave).
#[derive(Default)]
struct Members {
    boards: HashMap<String, Ranking>,
    absent: HashSet<String>,
    opened: bool,
}

impl Family {
    /// The members submission `q` writes and leaves, for a player whose
    /// stored filter values are `old`: what `submit`'s attempt computes.
    fn targets(&self, q: &Queued, old: &[Option<String>]) -> Result<Vec<Target>> {
        let config = self.config();
        let mut out = Vec::new();
        for window in config.windows() {
            let key = self.span(window, Period::At(q.ts))?.key;
            out.push(Target {
                window,
                key,
                filter: None,
                leave: false,
            });
            for (i, (dim, _)) in config.filters().iter().enumerate() {
                if let Some(v) = &q.values[i] {
                    let filter = Some((dim.clone(), v.clone()));
                    out.push(Target {
                        window,
                        key,
                        filter,
                        leave: false,
                    });
                }
                if let Some(was) = old[i].as_ref().filter(|&w| Some(w) != q.values[i].as_ref()) {
                    let filter = Some((dim.clone(), was.clone()));
                    out.push(Target {
                        window,
                        key,
                        filter,
                        leave: true,
                    });
                }
            }
        }
        Ok(out)
    }

    /// The peek: the rows a batch will likely take and the members they
    /// need, opened (members to write created, as `submit` creates them).
    fn peek(&self, max: usize, first: u32) -> Result<Members> {
        let players = &self.inner.players;
        let queues = players.queues().max(1);
        let (rows, stored) = players.read(|st, _| {
            let mut rows: Vec<(u32, QueuedRow)> = Vec::new();
            for k in 0..queues {
                let queue = (first + k) % queues;
                let mut taken = Vec::new();
                let room = max.saturating_sub(rows.len());
                st.take_queued(queue, st.applied_through(queue)?, room, &mut taken)?;
                rows.extend(taken.into_iter().map(|r| (queue, r)));
            }
            let mut stored = HashMap::new();
            for (_, row) in &rows {
                if !stored.contains_key(&row.player) {
                    let values = read_values(st, &row.player)?;
                    stored.insert(row.player.clone(), values);
                }
            }
            Ok((rows, stored))
        })?;
        let mut values: HashMap<String, Vec<Option<String>>> = stored
            .into_iter()
            .map(|(p, v)| (p, super::submit::decode_values(self.config(), v.as_deref())))
            .collect();
        let mut members = Members::default();
        for (_, row) in &rows {
            let Ok(q) = decode_row(self, row) else {
                continue;
            };
            let old = values.get(&q.player).cloned().unwrap_or_default();
            let old = if old.is_empty() {
                vec![None; q.values.len()]
            } else {
                old
            };
            for t in self.targets(&q, &old)? {
                let name = self.member_name(t.window, t.key, t.filter());
                if members.boards.contains_key(&name) || members.absent.contains(&name) {
                    continue;
                }
                match self.member_created(t.window, t.key, t.filter(), !t.leave)? {
                    Some((board, created)) => {
                        members.opened |= created;
                        members.boards.insert(name, board);
                    }
                    None => drop(members.absent.insert(name)),
                }
            }
            values.insert(q.player.clone(), q.values.clone());
        }
        Ok(members)
    }

    /// [`batch`](Family::batch) in its span, entered and left where the
    /// batch runs.
    fn traced_batch(
        &self,
        (max, first, sweep): (usize, u32, bool),
        stats: &mut FamilyWorkerStats,
    ) -> Result<Batch> {
        let span = trace::span!(
            DEBUG,
            "autoshard.family_batch",
            family = self.name(),
            taken = tracing::field::Empty,
            applied = tracing::field::Empty,
            dead_letters = tracing::field::Empty,
            error = tracing::field::Empty
        );
        let done = self.batch(max, first, sweep, stats);
        match &done {
            Ok(done) => {
                span.record("taken", done.taken);
                span.record("applied", done.applied);
                span.record("dead_letters", done.dead_letters);
            }
            Err(e) => span.record("error", trace::display(e)),
        }
        done
    }

    /// One batch: peek, then the transaction, then the delete of the rows
    /// it applied (with `sweep`, also rows below the marks a crashed
    /// worker left).
    fn batch(
        &self,
        max: usize,
        first: u32,
        sweep: bool,
        stats: &mut FamilyWorkerStats,
    ) -> Result<Batch> {
        // Submissions a try found an increment out of range in, with why.
        let mut poisoned: HashMap<(u32, i64), String> = HashMap::new();
        let mut tries = 0;
        let done = loop {
            tries += 1;
            if tries > TRIES {
                return Err(Error::Conflict { attempts: TRIES });
            }
            let members = self.peek(max, first)?;
            let failed = Cell::new(None);
            match self.apply(&members, max, first, &poisoned, &failed) {
                Ok(Some(done)) => break (done, members.opened),
                // Nothing applied: the members changed since the peek.
                Ok(None) => stats.retries += 1,
                Err(e @ Error::ScoreOutOfRange { .. }) if failed.get().is_some() => {
                    // Applied again with that submission set aside.
                    poisoned.insert(failed.get().expect("set"), e.to_string());
                    stats.retries += 1;
                    tries -= 1;
                }
                Err(Error::RankingNotFound { name }) if name != self.inner.players.name() => {
                    // A member dropped meanwhile: created anew by the peek.
                    self.forget(Some(&name));
                    stats.retries += 1;
                }
                Err(Error::RankingNotFound { .. }) => {
                    return Err(Error::RankingNotFound {
                        name: self.name().into(),
                    })
                }
                Err(e) => return Err(e),
            }
        };
        let (done, opened) = done;
        let through = deletable(&done.marks, sweep);
        if !through.is_empty() {
            let players = &self.inner.players;
            match self.inner.boards.delete_queued(players.inner.id, &through) {
                // Applied and marked: rows left below the marks are never
                // taken again, and a later delete of their shard removes
                // them.
                Err(e) if e.is_retryable() => {}
                other => other?,
            }
        }
        if let (true, Some(ts)) = (opened && self.config().drops_automatically(), done.latest) {
            // As after a direct submission that opened a period; a failed
            // drop is finished by the next one.
            let _ = self.drop_expired_after(ts);
        }
        Ok(done)
    }

    /// The batch's transaction; `None` if it took rows but could apply
    /// none of them (their members changed since the peek).
    fn apply(
        &self,
        members: &Members,
        max: usize,
        first: u32,
        poisoned: &HashMap<(u32, i64), String>,
        failed: &Cell<Option<(u32, i64)>>,
    ) -> Result<Option<Batch>> {
        let players = &self.inner.players;
        let mut boards: Vec<&Ranking> = members.boards.values().collect();
        boards.push(players);
        // Ascending board id: the order every multi-board writer takes.
        boards.sort_by_key(|b| b.inner.id);
        let index: HashMap<i64, usize> = boards
            .iter()
            .enumerate()
            .map(|(i, b)| (b.inner.id, i))
            .collect();
        let seam: Vec<Board<'_>> = boards.iter().map(|b| b.board()).collect();
        let queues = players.queues().max(1);
        let shard = crate::random::range(0..self.config().board().node_shards());
        let mut out = None;
        self.inner.boards.write_boards(&seam, &mut |sts| {
            for st in sts {
                // A queue worker's cache relies on every write moving it.
                st.bump_generation()?;
            }
            let pst = sts[index[&players.inner.id]];
            let st_of = |name: &str| {
                members
                    .boards
                    .get(name)
                    .map(|b| (b, sts[index[&b.inner.id]]))
            };
            let mut batch = Batch::default();
            for k in 0..queues {
                let room = max.saturating_sub(batch.taken);
                if room == 0 {
                    break;
                }
                let queue = (first + k) % queues;
                if !pst.claim_queue(queue)? {
                    batch.contended = true;
                    continue;
                }
                let mark = pst.applied_through(queue)?;
                let mut rows = Vec::new();
                pst.take_queued(queue, mark, room, &mut rows)?;
                let mut last = mark;
                for row in &rows {
                    if row.seq <= last {
                        return Err(pst.corrupt(
                            format!("queued submission (queue {queue}, seq {})", row.seq),
                            format!("taken after seq {last}: the queue is out of order"),
                        ));
                    }
                    let decoded = match poisoned.get(&(queue, row.seq)) {
                        Some(why) => Err(why.clone()),
                        None => decode_row(self, row),
                    };
                    let q = match decoded {
                        Ok(q) => q,
                        Err(why) => {
                            pst.dead_letter(queue, row.seq, &row.player, row.score, &why)?;
                            batch.dead_letters += 1;
                            last = row.seq;
                            continue;
                        }
                    };
                    failed.set(Some((queue, row.seq)));
                    if !self.apply_one(pst, &st_of, members, &q, shard)? {
                        // Its members are not all here: the rest of the
                        // shard waits for the next batch's peek.
                        break;
                    }
                    failed.set(None);
                    batch.applied += 1;
                    batch.latest = batch.latest.max(Some(q.ts));
                    last = row.seq;
                }
                let took = last != mark;
                if took {
                    pst.set_applied_through(queue, last)?;
                }
                batch.taken += rows.len();
                batch.marks.push((queue, last, took));
            }
            let stuck = batch.applied + batch.dead_letters == 0 && batch.taken > 0;
            out = Some((!stuck).then_some(batch));
            Ok(())
        })?;
        Ok(out.expect("ran"))
    }

    /// Applies one submission as `submit`'s attempt does: the player's
    /// stored values, every member to write, every board to leave; `false`
    /// (nothing written) if one of its members is not in the transaction.
    fn apply_one<'m>(
        &self,
        pst: &dyn Storage,
        st_of: &MemberStorage<'m>,
        members: &Members,
        q: &Queued,
        shard: u32,
    ) -> Result<bool> {
        let config = self.config();
        let player = q.player.as_str();
        pst.lock_players(&[player])?;
        let stored = read_values(pst, player)?;
        let old = super::submit::decode_values(config, stored.as_deref());
        let mut writes = Vec::new();
        for t in self.targets(q, &old)? {
            let name = self.member_name(t.window, t.key, t.filter());
            match st_of(&name) {
                Some(found) => writes.push((found, t.leave)),
                None if t.leave && members.absent.contains(&name) => {}
                None => return Ok(false),
            }
        }
        let encoded = encode_values(config, &q.values());
        if stored.as_deref() != Some(encoded.as_bytes()) {
            let players = &self.inner.players;
            players.write_in(pst, 0, player, 0, Some(encoded.as_bytes()))?;
        }
        for ((board, st), leave) in writes {
            if leave {
                let (g, rules) = (board.geometry(), board.rules());
                apply_updates(st, g, rules, shard, &[(player, None)], None)?;
            } else {
                board.write_in(st, shard, player, q.score, q.data.as_deref())?;
            }
        }
        Ok(true)
    }
}

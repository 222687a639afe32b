//! One batch of the family worker (`worker.rs`): the peek outside any
//! transaction, then ONE write transaction over the players board and
//! every member the batch's rows write, which takes the rows again above
//! the marks and applies each (`worker.rs`'s module docs say why twice).

use super::queue::{decode_row, Queued};
use super::submit::{encode_values, read_values};
use super::window::Period;
use super::worker::FamilyWorkerStats;
use super::{Family, Window};
use crate::error::{Error, Result};
use crate::ranking::policy;
use crate::ranking::queue::deletable;
use crate::ranking::{apply_updates, Ranking};
use crate::seam::{Board, QueuedRow, Storage};
use crate::trace;
use std::cell::Cell;
use std::collections::HashMap;

/// How often a batch peeks again because its rows' members changed before
/// its transaction, before it reports [`Error::Conflict`].
const TRIES: u32 = 16;

/// What one batch did.
#[derive(Debug, Default)]
pub(super) struct Batch {
    pub(super) taken: usize,
    pub(super) applied: usize,
    pub(super) dead_letters: usize,
    /// Some queue shard was held by another worker.
    pub(super) contended: bool,
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

/// The boards a batch's transaction spans, by member name.
#[derive(Default)]
struct Members {
    boards: HashMap<String, Ranking>,
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
    /// need, opened: created if absent, the members to leave too, as
    /// `submit` creates them (a submission of the same player may create
    /// one and put them on it before the batch's transaction).
    fn peek(&self, max: usize, first: u32) -> Result<Members> {
        let players = &self.inner.players;
        let queues = players.inner.queues().max(1);
        let (rows, stored) = players.inner.read(|st, _| {
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
                if members.boards.contains_key(&name) {
                    continue;
                }
                let (board, created) = self
                    .member_created(t.window, t.key, t.filter(), true)?
                    .expect("created");
                members.opened |= created;
                members.boards.insert(name, board);
            }
            values.insert(q.player.clone(), q.values.clone());
        }
        Ok(members)
    }

    /// [`batch`](Family::batch) in its span, entered and left where the
    /// batch runs.
    pub(super) fn traced_batch(
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
            super::submit::hooks::between_look_and_write();
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
        let seam: Vec<Board<'_>> = boards.iter().map(|b| b.inner.board()).collect();
        let queues = players.inner.queues().max(1);
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
                    if !self.apply_one(pst, &st_of, &q, shard)? {
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
                None => return Ok(false),
            }
        }
        let encoded = encode_values(config, &q.values());
        if stored.as_deref() != Some(encoded.as_bytes()) {
            let players = &self.inner.players;
            policy::write_in(players, pst, 0, player, 0, Some(encoded.as_bytes()))?;
        }
        for ((board, st), leave) in writes {
            if leave {
                let (g, rules) = (board.inner.geometry(), board.inner.rules());
                apply_updates(st, g, rules, shard, &[(player, None)], None)?;
            } else {
                policy::write_in(board, st, shard, player, q.score, q.data.as_deref())?;
            }
        }
        Ok(true)
    }
}

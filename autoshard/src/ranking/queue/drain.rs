//! The drain transaction: one worker batch over the seam's queue
//! primitives, applied with the code direct writes use.

use super::hooks;
use crate::counters;
use crate::error::{Error, Result};
use crate::ranking::apply::{apply_updates_from, store_entry_data, Refused};
use crate::ranking::cache::{CachedTx, NodeCache};
use crate::ranking::handle::check_player;
use crate::ranking::policy::Rules;
use crate::ranking::shape;
use crate::ranking::tree::Geometry;
use crate::ranking::Ranking;
use crate::seam::{QueuedRow, Storage, NOTHING_APPLIED};
use crate::trace;

/// What one worker transaction did.
pub(in crate::ranking) struct Drained {
    /// Rows taken from the queue: applied or set aside.
    pub(in crate::ranking) taken: usize,
    /// Updates applied.
    pub(super) applied: usize,
    /// Rows moved to the dead letters.
    pub(super) dead_letters: usize,
    /// Whether a queue shard was skipped because another worker held it:
    /// the queue may not be empty although nothing was taken.
    pub(super) contended: bool,
    /// The claimed shards' applied-through marks after the batch, and
    /// whether the batch took rows from each: what the queue's delete
    /// removes once the batch committed.
    pub(super) marks: Vec<(u32, i64, bool)>,
    /// Whether the batch stopped at its [`Bound`] rather than at the end of
    /// the queue: more may be waiting, so the worker goes on at once.
    pub(super) bounded: bool,
}

/// How much one worker batch takes: everything queued above the marks, up
/// to `updates` rows and about `bytes` of memory (rows are taken in chunks
/// of [`CHUNK`], and taking stops once the rows taken reach the bound, so a
/// batch may pass it by one chunk). A batch always takes at least one row
/// if one is queued.
#[derive(Debug, Clone, Copy)]
pub(in crate::ranking) struct Bound {
    pub(in crate::ranking) updates: usize,
    pub(in crate::ranking) bytes: usize,
}

/// Rows read from a queue shard per `take_queued` call: small enough that
/// the memory bound is checked often, big enough that a batch of 100,000
/// costs a handful of reads of the queue.
const CHUNK: usize = 4_096;

/// What one queued row costs the batch in memory, as the bound counts it:
/// the row, its name and data, and its share of the apply's overlay (an
/// entry in the players, net-effect and step tables). An estimate, on the
/// high side for short names.
fn row_bytes(row: &QueuedRow) -> usize {
    const OVERLAY: usize = 192;
    std::mem::size_of::<QueuedRow>()
        + row.player.len()
        + row.data.as_ref().map_or(0, Vec::len)
        + OVERLAY
}

/// One worker batch: its board transaction ([`drain_in_from`]), then the
/// queue's delete of what it applied; with `dead_letter` false, a row
/// that cannot be applied fails it instead of being set aside. With
/// `sweep`, the delete also covers claimed shards the batch took nothing
/// from: rows a worker that crashed before its delete left behind.
pub(in crate::ranking) fn drain_batch(
    ranking: &Ranking,
    (max, first, dead_letter, sweep): (Bound, u32, bool, bool),
    cache: Option<&mut NodeCache>,
) -> Result<Drained> {
    let span = trace::span!(
        DEBUG,
        "autoshard.worker_batch",
        board = ranking.name(),
        taken = tracing::field::Empty,
        applied = tracing::field::Empty,
        dead_letters = tracing::field::Empty,
        error = tracing::field::Empty
    );
    let drained = drain_batch_in(ranking, max, first, dead_letter, sweep, cache);
    match &drained {
        Ok(drained) => {
            if drained.applied > 0 {
                counters::WORKER_BATCHES.add(1);
            }
            counters::UPDATES_APPLIED.add(drained.applied as u64);
            counters::DEAD_LETTERED.add(drained.dead_letters as u64);
            span.record("taken", drained.taken);
            span.record("applied", drained.applied);
            span.record("dead_letters", drained.dead_letters);
        }
        Err(e) => span.record("error", trace::display(e)),
    }
    drained
}

fn drain_batch_in(
    ranking: &Ranking,
    max: Bound,
    first: u32,
    dead_letter: bool,
    sweep: bool,
    cache: Option<&mut NodeCache>,
) -> Result<Drained> {
    let (queues, rules) = (ranking.inner.queues().max(1), ranking.inner.rules());
    let with_data = (rules, ranking.config().entry_data());
    let mut staged = None;
    let floor = &|n| shape::arrival_floor(ranking, n);
    let outcome = ranking.inner.write_generation(|st: &dyn Storage, before| {
        let g = ranking.inner.geometry();
        let cached = cache
            .as_deref()
            .and_then(|c| CachedTx::begin(st, c, before));
        let Some(cached) = cached else {
            return drain_in_from(st, g, with_data, queues, max, first, dead_letter, floor);
        };
        let drained = drain_in_from(
            &cached,
            g,
            with_data,
            queues,
            max,
            first,
            dead_letter,
            floor,
        )?;
        staged = Some(cached.finish());
        Ok(drained)
    });
    if let Some(cache) = cache {
        match (&outcome, staged) {
            (Ok(_), Some(staged)) => cache.commit(staged),
            // Failed, or in doubt: the next batch reads afresh.
            _ => cache.clear(),
        }
    }
    let drained = outcome?;
    let through = deletable(&drained.marks, sweep);
    if !through.is_empty() {
        hooks::before_delete();
        match ranking
            .inner
            .boards
            .delete_queued(ranking.inner.id, &through)
        {
            // The batch is applied and marked: rows left queued below
            // the marks are never taken again, and the next delete of
            // their shard removes them.
            Err(e) if e.is_retryable() => {}
            other => other?,
        }
    }
    Ok(drained)
}

/// [`drain_in_from`] handing out the arrival numbers of a board of one
/// tree, for the tests.
#[cfg(test)]
pub(super) fn drain_in(
    st: &dyn Storage,
    g: &Geometry,
    rules: (Rules, u32),
    queues: u32,
    max: usize,
    first: u32,
    dead_letter: bool,
) -> Result<Drained> {
    let max = Bound {
        updates: max,
        bytes: usize::MAX,
    };
    drain_in_from(st, g, rules, queues, max, first, dead_letter, &|_| 0)
}

/// One worker transaction over any storage: from each queue shard no
/// other worker holds, taken in turn from `first`, the oldest rows above the
/// shard's applied-through mark (up to the bound `max` in all: the whole
/// backlog unless it is larger, so a bigger backlog is applied in one
/// transaction and its fixed costs, the commit's fsync and the tree's top
/// rows, are paid once for more updates); those that cannot be
/// applied (an invalid player name, a score outside the board, a row the
/// store cannot read) moved to the dead letters, or with `dead_letter`
/// false reported as [`Error::Corrupt`]; the others applied in queue order
/// under the board's policy with the code direct writes use (inner-node deltas to shard 0: the
/// worker writes in big batches, so it need not spread); then each shard's
/// mark moved to the last row taken. All in the caller's transaction, so
/// applied (or set aside) and marked together. Deleting the rows is the
/// caller's, after the commit. An increment whose sum would leave the
/// range (which `enqueue` cannot know) is refused where it falls in the
/// player's sequence: moved to the dead letters, the player's later updates
/// applied without it; or with `dead_letter` false the batch fails with
/// [`Error::ScoreOutOfRange`]. Entry data queued with an update is stored
/// as `submit_update` would store it (on a board that keeps data: `limit` is
/// its most bytes, 0 for none).
///
/// A shard's rows must come in increasing sequence order above the mark:
/// a queue index that damage put out of order would otherwise hand out a
/// row the mark then skips, or one it already covers.
///
///
/// `floor(n)` is the lowest arrival number the batch's `n` updates may
/// take (`Ranking::arrival_floor`).
#[allow(clippy::too_many_arguments)] // one call site, each a distinct knob
fn drain_in_from(
    st: &dyn Storage,
    g: &Geometry,
    (rules, limit): (Rules, u32),
    queues: u32,
    max: Bound,
    first: u32,
    dead_letter: bool,
    floor: &dyn Fn(usize) -> u64,
) -> Result<Drained> {
    let mut rows = Vec::new();
    // Per queue shard read: the shard, its mark, and its rows' range in
    // `rows`.
    let mut taken = Vec::new();
    let mut marks = Vec::new();
    let mut contended = false;
    let (mut bytes, mut bounded) = (0, false);
    for k in 0..queues {
        if bounded {
            break;
        }
        let queue = (first + k) % queues;
        if !st.claim_queue(queue)? {
            contended = true;
            continue;
        }
        let mark = st.applied_through(queue)?;
        let after = if hooks::ignore_marks() {
            NOTHING_APPLIED
        } else {
            mark
        };
        let start = rows.len();
        // Chunk after chunk, each above the last row taken: a shard's rows
        // appear in sequence order, so the chunks are the oldest rows
        // above the mark, as one read would have returned them.
        let mut above = after;
        loop {
            let room = max.updates.saturating_sub(rows.len());
            if room == 0 || bytes >= max.bytes {
                bounded = true;
                break;
            }
            let want = room.min(CHUNK);
            let before = rows.len();
            st.take_queued(queue, above, want, &mut rows)?;
            bytes += rows[before..].iter().map(row_bytes).sum::<usize>();
            match rows.last() {
                Some(last) if rows.len() - before == want => above = last.seq,
                // The shard is empty above the mark.
                _ => break,
            }
        }
        if rows.len() > start {
            taken.push((queue, after, start..rows.len()));
        } else {
            marks.push((queue, mark, false));
        }
    }
    let row_name = |queue: u32, seq: i64| format!("queued update (queue {queue}, seq {seq})");
    for (queue, after, range) in &taken {
        let mut last = *after;
        for row in &rows[range.clone()] {
            if row.seq <= last {
                return Err(st.corrupt(
                    row_name(*queue, row.seq),
                    format!("taken after seq {last}: the queue is out of order"),
                ));
            }
            last = row.seq;
        }
    }
    let mut updates = Vec::with_capacity(rows.len());
    // The queue shard and row of each update.
    let mut origins = Vec::with_capacity(rows.len());
    let mut dead_letters = 0;
    for (queue, _, range) in &taken {
        for row in &rows[range.clone()] {
            let Some(reason) = unappliable(g, (rules, limit), row) else {
                updates.push((row.player.as_str(), row.score));
                origins.push((*queue, row));
                continue;
            };
            if !dead_letter {
                return Err(st.corrupt(row_name(*queue, row.seq), reason));
            }
            st.dead_letter(*queue, row.seq, &row.player, row.score, &reason)?;
            dead_letters += 1;
        }
    }
    let mut refused = Refused::new();
    if !updates.is_empty() {
        let refusals = dead_letter.then_some(&mut refused);
        let base = floor(updates.len());
        let floor = |i: usize| if base == 0 { 0 } else { base + i as u64 };
        let steps = apply_updates_from(st, g, rules, 0, &updates, refusals, &floor)?;
        if limit > 0 {
            let data = origins.iter().map(|(_, row)| row.data.as_deref());
            store_entry_data(st, rules, &updates, data, &steps, &refused)?;
        }
    }
    for (i, why) in &refused {
        let (queue, row) = origins[*i];
        st.dead_letter(queue, row.seq, &row.player, row.score, &why.to_string())?;
    }
    dead_letters += refused.len();
    for (queue, _, range) in taken {
        let last = rows[range.end - 1].seq;
        st.set_applied_through(queue, last)?;
        marks.push((queue, last, true));
    }
    Ok(Drained {
        taken: rows.len(),
        applied: updates.len() - refused.len(),
        dead_letters,
        contended,
        marks,
        bounded,
    })
}

/// Why a queued row cannot be applied, if it cannot: what `enqueue` would
/// have refused it for, or why the store could not read it.
fn unappliable(g: &Geometry, (rules, limit): (Rules, u32), row: &QueuedRow) -> Option<String> {
    if let Some(why) = &row.unreadable {
        return Some(why.clone());
    }
    if let Some(data) = row.data.as_ref().filter(|d| d.len() > limit as usize) {
        let (len, max) = (data.len(), limit as usize);
        return Some(Error::EntryDataTooLarge { len, max }.to_string());
    }
    let refused = check_player(&row.player).and_then(|()| match row.score {
        Some(value) => rules.check_value(g, value),
        None => Ok(()),
    });
    refused.err().map(|e| e.to_string())
}

/// What the queue's delete removes after a batch committed with `marks`
/// (each claimed shard's applied-through mark, and whether the batch took
/// rows from it): the rows through the marks of the shards it took from,
/// or with `sweep` of every claimed shard (rows a worker that crashed
/// before its delete left below the marks).
pub(in crate::ranking) fn deletable(marks: &[(u32, i64, bool)], sweep: bool) -> Vec<(u32, i64)> {
    marks
        .iter()
        .filter(|&&(_, mark, took)| (took || sweep) && mark != NOTHING_APPLIED)
        .map(|&(queue, mark, _)| (queue, mark))
        .collect()
}

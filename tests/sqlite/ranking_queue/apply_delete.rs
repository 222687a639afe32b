//! A worker child that dies between a batch's commit and the queue's
//! delete (issue 13): the applied-through marks keep a restarted worker
//! from applying the stranded rows twice; the control ignores the marks
//! and is caught.

use super::mid_drain::{applied_marks, check_mid_state, fill, CRASH_PLAYERS};
use super::oracle::{apply_as, assert_board, read_scores, Scores, RANGE};
use super::{
    common, queue_rows, seed, serial, spawn, spawn_with, sync_for, Mode, QueueRow, BOARD,
    ENV_ABORT_AT,
};
use crate::child::kills;
use autoshard::ranking::{Policy, Ranking, RankingConfig};
use autoshard::{Sqlite, Synchronous};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeSet;

#[derive(Debug, Default)]
struct WindowKills {
    kills: u64,
    /// Applied rows the killed worker left queued, in all rounds.
    stranded: u64,
    /// Rounds where a direct write overtook a stranded update.
    overtaken: u64,
}

/// Fills the queue, runs a worker child that aborts between the commit of
/// its 1st to 3rd batch and that batch's queue delete (the hook makes the
/// window certain, where a random kill hits it rarely), checks the
/// mid-state, then overtakes a stranded update with a newer direct write
/// and drains the rest in a second child (`restart`: `Drain`, or the
/// control's `DrainIgnoringMarks`). Every acknowledged update must be
/// applied exactly once: the restarted worker applies exactly the rows
/// above the marks, and the board equals the oracle with the direct write
/// on top.
fn kill_between_apply_and_delete(
    restart: Mode,
    want: u64,
) -> std::result::Result<WindowKills, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("window.db");
    let db = Sqlite::builder(&path)
        .synchronous(Synchronous::Normal)
        .open()
        .unwrap();
    let config = RankingConfig::new(RANGE)
        .branching(16)
        .node_shards(4)
        .queues(4);
    let board = Ranking::create(&db, BOARD, config).unwrap();
    board.queued().unwrap();
    let raw_board = common::raw(&path);
    let raw = common::raw(&common::queue_file(&path));
    let players: Vec<String> = (0..CRASH_PLAYERS).map(|p| format!("p{p}")).collect();
    let all: BTreeSet<String> = players.iter().cloned().collect();
    let mut rng = SmallRng::seed_from_u64(seed());
    let mut stats = WindowKills::default();
    let mut before = Scores::new();
    const UPDATES: usize = 400;
    while stats.kills < want {
        let players_ref: Vec<&String> = players.iter().collect();
        fill(&board, &players_ref, &mut rng, UPDATES, |rng| {
            rng.random_range(RANGE)
        });
        let queued = queue_rows(&raw);
        assert_eq!(queued.len(), UPDATES);
        let mut expected = before.clone();
        for row in &queued {
            apply_as(Policy::Replace, &mut expected, &row.player, row.score);
        }

        let child = stats.kills;
        let at = rng.random_range(1..=3u64).to_string();
        let run = spawn_with(
            &path,
            Mode::AbortBeforeDelete,
            child,
            sync_for(child),
            &[(ENV_ABORT_AT, at.clone())],
        )
        .finish();
        use std::os::unix::process::ExitStatusExt;
        if run.status.signal() != Some(6) {
            return Err(format!(
                "child {child} did not abort at batch {at}: {:?}",
                run.status
            ));
        }
        stats.kills += 1;
        let left = queue_rows(&raw);
        let marks = applied_marks(&raw_board);
        let (prefix, applied, stranded) =
            check_mid_state(Policy::Replace, &before, &queued, &left, &marks)
                .map_err(|e| format!("child {child}: {e}"))?;
        if stranded == 0 {
            return Err(format!(
                "child {child}: the abort left no applied row queued"
            ));
        }
        stats.stranded += stranded as u64;
        if read_scores(&board, &all) != prefix {
            return Err(format!(
                "child {child}: the board is not the board before plus the {applied} rows \
                 through the applied marks"
            ));
        }
        board
            .check_integrity()
            .map_err(|e| format!("child {child}: integrity after the abort: {e}"))?;

        // A stranded update whose player has nothing queued above the
        // marks: a newer direct write must survive the restarted worker.
        let above = |r: &&QueueRow| r.seq > marks.get(&r.queue).copied().unwrap_or(-1);
        let pending: BTreeSet<&str> = left
            .iter()
            .filter(above)
            .map(|r| r.player.as_str())
            .collect();
        let overtaken = left
            .iter()
            .filter(|r| !above(r))
            .map(|r| r.player.clone())
            .find(|p| !pending.contains(p.as_str()));
        if let Some(player) = &overtaken {
            board.set_score(player, RANGE.end - 1).unwrap();
            expected.insert(player.clone(), RANGE.end - 1);
            stats.overtaken += 1;
        }

        let run = spawn(&path, restart, child, "normal").finish();
        assert!(
            run.status.success(),
            "restart child {child}: {:?}",
            run.status
        );
        let drained: usize = run
            .lines
            .iter()
            .find_map(|l| l.strip_prefix("drained "))
            .expect("the child reports its count")
            .parse()
            .unwrap();
        let unapplied = left.iter().filter(above).count();
        if drained != unapplied {
            return Err(format!(
                "child {child}: the restarted worker applied {drained} updates, but {unapplied} \
                 were left unapplied: stranded updates were applied twice"
            ));
        }
        let now = read_scores(&board, &all);
        if now != expected {
            return Err(format!(
                "child {child}: after the restart the board is not the oracle (overtaken: \
                 {overtaken:?}): an update was applied twice"
            ));
        }
        if board.queued().unwrap() != 0 || !queue_rows(&raw).is_empty() {
            return Err(format!(
                "child {child}: the queue is not empty after the restart"
            ));
        }
        board.check_integrity().unwrap();
        before = expected;
    }
    assert_board(&board, &before, &all);
    Ok(stats)
}

/// Issue 13: a worker process dies between a batch's commit (apply and
/// applied-through mark) and the queue's delete of its rows, 20 times, at
/// batch 1 to 3. After each: the board is the board before plus exactly
/// the rows through the marks, the rows above them are all still queued,
/// and a restarted worker applies exactly those (none of the stranded
/// ones, which a newer direct write overtook), empties the queue and
/// leaves a tree that passes `check_integrity` and equals the oracle.
#[test]
fn worker_aborted_20_times_between_apply_and_delete_applies_every_update_once() {
    let _serial = serial();
    let stats =
        kill_between_apply_and_delete(Mode::Drain, kills(20)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("apply/delete window kills: {stats:?}");
    assert!(
        stats.overtaken > 0,
        "no round overtook a stranded update: {stats:?}"
    );
}

/// Control: without the applied-through marks (a restarted worker that
/// takes every queued row) the stranded updates are applied a second time,
/// and caught.
#[test]
fn control_a_worker_ignoring_the_applied_marks_applies_twice_and_is_caught() {
    let _serial = serial();
    let err = kill_between_apply_and_delete(Mode::DrainIgnoringMarks, 5)
        .expect_err("updates applied twice went unnoticed");
    assert!(err.contains("applied twice"), "{err}");
    eprintln!("ignoring the marks caught: {err}");
}

//! The test hooks (`autoshard::__private::*_hooks`), only with the cargo
//! feature `failpoints`: each sets a switch or reads a counter of the layer
//! it belongs to, for the crash and oracle tests' children and controls.
//! A build without the feature has none of them.

/// Hooks of the ranking queue's crash tests (`tests/sqlite/ranking_queue/`),
/// process-wide: a child process sets them before it starts a worker.
/// This and the other `*_hooks` exist only with the `failpoints` feature
/// (the workspace's tests turn it on): a build without it has no abort, no
/// switch that double-applies or mis-merges, and no statement counter.
#[cfg(feature = "failpoints")]
pub mod queue_hooks {
    use crate::ranking::queue_hooks as hooks;
    use std::sync::atomic::Ordering;

    /// The process aborts between the `batches`-th committed worker batch
    /// from now and that batch's queue delete (0: never), so a test can hit
    /// the window between the two deterministically.
    pub fn abort_before_delete(batches: u64) {
        hooks::ABORT_BEFORE_DELETE.store(batches, Ordering::Relaxed);
    }

    /// Workers take every queued row, ignoring the applied-through marks:
    /// the bug the marks guard against, for the crash test's control.
    pub fn ignore_applied_marks(ignore: bool) {
        hooks::IGNORE_MARKS.store(ignore, Ordering::Relaxed);
    }
}

/// Hooks of the approximate boards' refresh tests
/// (`tests/crash/approx_crash.rs`), process-wide.
#[cfg(feature = "failpoints")]
pub mod approx_hooks {
    use crate::ranking::approx_hooks as hooks;
    use std::sync::atomic::Ordering;

    /// Buckets a refresh writes per transaction (0: the default), and how
    /// long it sleeps between two of them: a test stretches a refresh so a
    /// kill or a reader lands in the middle of it.
    pub fn refresh_chunks(buckets: u32, pause: std::time::Duration) {
        hooks::CHUNK.store(buckets, Ordering::Relaxed);
        hooks::PAUSE_MICROS.store(pause.as_micros() as u64, Ordering::Relaxed);
    }

    /// Refreshes write over the published snapshot's rows: the bug the
    /// snapshot protocol guards against, for the crash test's control.
    pub fn refresh_in_place(on: bool) {
        hooks::IN_PLACE.store(on, Ordering::Relaxed);
    }
}

/// Hooks of the family tests (`tests/suites/stores_ranking_family_queue.rs`).
#[cfg(feature = "failpoints")]
pub mod family_hooks {
    /// On this thread, `hook` runs in every family submission between its
    /// look at the player's filter values and its transaction (`None`
    /// removes it; a submission the hook makes runs none): a test changes
    /// the player's values there, an interleaving threads hit only by
    /// chance.
    pub fn between_look_and_write(hook: Option<Box<dyn FnMut()>>) {
        crate::ranking::family_hooks::BETWEEN_LOOK_AND_WRITE.with(|h| *h.borrow_mut() = hook);
    }
}

/// What the PostgreSQL statement-count tests read
/// (`tests/suites/stores_ranking/pg_round_trips.rs`).
#[cfg(all(feature = "postgres", feature = "failpoints"))]
pub mod pg_hooks {
    /// Round trips (statements, prepares, `BEGIN`/`ROLLBACK` batches) this
    /// thread's PostgreSQL store calls have sent so far; compare two reads.
    pub fn round_trips() -> u64 {
        crate::stores::postgres::tx::round_trips()
    }

    /// The texts of `db`'s one-statement board read (`rank`,
    /// `rank_of_score`, `score`), without and with the player's arrival
    /// path, to check the plans PostgreSQL keeps for them. Parameters:
    /// board id, player, score, the board's minimum, branching, depth,
    /// whether to read part B at the leaf and above it.
    pub fn planned_read_sql(db: &crate::Postgres) -> [String; 2] {
        db.planned_read_sql().map(str::to_owned)
    }

    /// On this thread, `hook` runs in every save, insert or delete of a
    /// kind with a ranked field between its entity writes and its board
    /// writes, inside its transaction (`None` removes it; a save the hook makes runs
    /// none): a test commits another session's write there, after the
    /// save's snapshot, an interleaving threads hit only by chance.
    pub fn before_board_writes_in_save(hook: Option<Box<dyn FnMut()>>) {
        use crate::stores::postgres::ranked::save_hooks::BEFORE_BOARD_WRITES;
        BEFORE_BOARD_WRITES.with(|h| *h.borrow_mut() = hook);
    }

    /// On this thread, an `Optimistic` save's board writes load their rows
    /// without locking them: the bug `FOR KEY SHARE` fixed, for a test's
    /// control.
    pub fn unlocked_loads_in_save(on: bool) {
        use crate::stores::postgres::ranked::save_hooks::UNLOCKED_LOADS;
        UNLOCKED_LOADS.with(|u| u.set(on));
    }

    /// Process-wide: connections opened while on plan every statement
    /// afresh on every call (`plan_cache_mode = force_custom_plan`) instead
    /// of letting PostgreSQL keep a generic plan; a benchmark's "before".
    pub fn custom_plans(on: bool) {
        use std::sync::atomic::Ordering;
        crate::stores::postgres::CUSTOM_PLANS.store(on, Ordering::Relaxed);
    }
}

/// What the Redis round-trip tests read (`tests/redis/redis_ranking.rs`,
/// `every_write_to_a_native_board_is_one_round_trip`).
#[cfg(all(feature = "redis", feature = "failpoints"))]
pub mod redis_hooks {
    /// Requests (commands, scripts, pipelines, `WAIT`s, resends) this
    /// thread's Redis Cluster store calls have sent so far; compare two
    /// reads.
    pub fn round_trips() -> u64 {
        crate::stores::redis::exec::round_trips()
    }

    /// On this thread, a save, insert or delete of a kind with a ranked
    /// field pauses this long between its pieces and its board writes: a
    /// test's kill then often lands where a board write is owed
    /// (`tests/crash/entity_board_crash.rs`).
    pub fn pause_before_board_writes(pause: std::time::Duration) {
        crate::stores::redis::ranked_hooks::PAUSE.set(pause);
    }

    /// On this thread, such a write returns after its pieces, its board
    /// writes owed, as a writer killed there leaves them
    /// (`tests/redis/redis_entity_board.rs`).
    pub fn leave_board_writes_owed(on: bool) {
        use crate::stores::redis::ranked_hooks::{Owe, OWE};
        OWE.set(if on { Owe::All } else { Owe::Nothing });
    }

    /// On this thread, `hook` runs in every delete between the removal of
    /// the entity's document and of its buckets (`None` removes it): a
    /// test saves the entity there, as a concurrent writer may.
    pub fn before_buckets_deleted(hook: Option<Box<dyn FnMut()>>) {
        crate::stores::redis::ranked_hooks::BEFORE_BUCKETS_DELETED.with(|h| *h.borrow_mut() = hook);
    }

    /// On this thread, such a write applies its board writes but keeps
    /// their intents, as a writer killed before clearing them does: a
    /// recovery must then find them applied.
    pub fn keep_paid_intents(on: bool) {
        use crate::stores::redis::ranked_hooks::{Owe, OWE};
        OWE.set(if on { Owe::Intents } else { Owe::Nothing });
    }
}

/// Hooks of the split boards' oracle tests (`tests/suites/stores_ranking_trees.rs`).
#[cfg(feature = "failpoints")]
pub mod tree_hooks {
    /// On this thread, queries of split boards order tied players tree
    /// after tree instead of by who reached the score first: the wrong
    /// merge the oracle tests' control shows they catch.
    pub fn concatenate_ties(on: bool) {
        crate::ranking::trees_hooks::CONCATENATE_TIES.set(on);
    }

    /// Process-wide, trees of split boards hand out arrival numbers from
    /// their scores' counters alone (ties across trees then rank wrongly):
    /// a benchmark's diagnostic of what board-wide arrival numbers cost.
    pub fn local_arrivals(on: bool) {
        use std::sync::atomic::Ordering;
        crate::ranking::trees_hooks::LOCAL_ARRIVALS.store(on, Ordering::Relaxed);
    }

    /// The tree of `player` among `trees`: a test picks names that all
    /// land in one tree (a board whose trees are far from equal).
    pub fn tree_of(player: &str, trees: usize) -> usize {
        crate::ranking::trees_hooks::tree_of(player, trees)
    }
}

/// Hooks of the trims' tests (`tests/suites/stores_ranking_new_calls.rs`).
#[cfg(feature = "failpoints")]
pub mod trim_hooks {
    /// On this thread, trims remove at most `players` per batch (write
    /// transaction) instead of [`TRIM_BATCH`](crate::ranking::TRIM_BATCH),
    /// at least 1: so a test of a few hundred players crosses batches.
    pub fn batch(players: u64) {
        crate::ranking::trim_hooks::BATCH.set(players.max(1));
    }

    /// Trim batches this thread ran as one store step each (on Redis
    /// Cluster, one script per batch of a native board) since the last
    /// call, which resets the count.
    pub fn native_batches() -> u64 {
        crate::ranking::trim_hooks::NATIVE_BATCHES.replace(0)
    }
}

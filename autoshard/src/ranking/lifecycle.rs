//! A board's lifecycle: listing the boards of a store, deleting one,
//! emptying one.
//!
//! Board ids are never handed out twice (SQLite keeps a deleted board's row
//! as a tombstone, PostgreSQL ids are an identity column, Redis ids are
//! random and a deleted board's version key a tombstone), and every
//! transaction of a handle first checks that its id still names its board.
//! So a handle of a deleted board fails with [`Error::RankingNotFound`]
//! instead of reading or writing under the old id, and a board created
//! again under the same name starts empty, whatever a crash in the middle
//! of a delete left behind. `docs/design/ranking-tree.md` ("Board lifecycle") has the
//! invariants per store.

use super::handle::check_board_name;
use super::queue;
use super::shape;
use super::{Ranking, RankingStore};
use crate::error::{Error, Result};
use std::time::Duration;

/// How often [`Ranking::reset`] tries to claim every queue shard while
/// workers hold some, and how long it waits between tries.
const RESET_TRIES: u32 = 200;
const RESET_PAUSE: Duration = Duration::from_millis(10);

/// [`Ranking::list`].
pub(in crate::ranking) fn list(db: &impl RankingStore) -> Result<Vec<String>> {
    let mut names = db.__boards().0.list_boards()?;
    names.retain(|name| super::shape::is_user_board(name));
    Ok(names)
}

/// [`Ranking::delete`].
pub(in crate::ranking) fn delete(db: &impl RankingStore, name: &str) -> Result<bool> {
    check_board_name(name)?;
    let boards = db.__boards().0;
    super::shape::delete(&boards, name, || boards.delete_board(name))
}

/// [`Ranking::reset`].
pub(in crate::ranking) fn reset(ranking: &Ranking) -> Result<()> {
    shape::of(ranking).writes().reset(ranking)
}

pub(in crate::ranking) fn one_tree_reset(ranking: &Ranking) -> Result<()> {
    let boards = &ranking.inner.boards;
    // Queue shards' heads before the reset: everything below them was
    // queued before it, and is dropped.
    let heads = match ranking.inner.queues() {
        0 => Vec::new(),
        _ => {
            queue::queue_state(ranking)?;
            boards.queue_marks(ranking.inner.id)?
        }
    };
    for _ in 0..RESET_TRIES {
        let mut busy = false;
        let outcome = ranking.inner.write_with(|st| {
            st.clear()?;
            for &(queue, next) in &heads {
                // A worker holding the shard read its mark before this
                // transaction and would write it back behind ours.
                if !st.claim_queue(queue)? {
                    busy = true;
                    return Err(shard_busy());
                }
                if st.applied_through(queue)? < next - 1 {
                    st.set_applied_through(queue, next - 1)?;
                }
            }
            Ok(())
        });
        match outcome {
            Err(_) if busy => std::thread::sleep(RESET_PAUSE),
            Err(e) => return Err(e),
            Ok(()) => {
                let through: Vec<(u32, i64)> =
                    heads.iter().map(|&(q, next)| (q, next - 1)).collect();
                if !through.is_empty() {
                    boards.delete_queued(ranking.inner.id, &through)?;
                }
                return Ok(());
            }
        }
    }
    Err(shard_busy())
}

fn shard_busy() -> Error {
    Error::InvalidRanking {
        reason: "queue workers kept a queue shard of the board throughout the reset".into(),
    }
}

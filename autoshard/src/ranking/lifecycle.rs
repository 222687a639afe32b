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
use super::{Ranking, RankingStore};
use crate::error::{Error, Result};
use std::time::Duration;

/// How often [`Ranking::reset`] tries to claim every queue shard while
/// workers hold some, and how long it waits between tries.
const RESET_TRIES: u32 = 200;
const RESET_PAUSE: Duration = Duration::from_millis(10);

impl Ranking {
    /// The names of the boards in `db`, sorted; the member boards of
    /// [families](super::Family) are not listed (see [`Family::list`](super::Family::list)).
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// assert!(Ranking::list(&db)?.is_empty());
    /// Ranking::create(&db, "weekly", RankingConfig::new(0..100))?;
    /// Ranking::create(&db, "daily", RankingConfig::new(0..100))?;
    /// assert_eq!(Ranking::list(&db)?, ["daily", "weekly"]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A store error.
    pub fn list(db: &impl RankingStore) -> Result<Vec<String>> {
        let mut names = db.__boards().0.list_boards()?;
        names.retain(|name| super::shape::is_user_board(name));
        Ok(names)
    }

    /// Deletes the board `name`: its players and entry data, its tree, its
    /// queued updates, applied-through marks and dead letters. Whether there
    /// was one (`Ok(false)`: nothing to delete). Other boards' writers do not
    /// wait for it: on PostgreSQL it takes only this board's lock and
    /// deletes only its rows, in one transaction; on SQLite (one writer per
    /// file) it marks the board deleted and then deletes its rows in
    /// batches of a few thousand, each its own short transaction; on Redis
    /// Cluster it is one script on the board's slot.
    ///
    /// Handles of the deleted board fail with [`Error::RankingNotFound`]
    /// from then on, also after a board of the same name is created, which
    /// starts empty, [`enqueue`](Ranking::enqueue) included: the append
    /// checks in its own transaction or script (no extra round trip), so an
    /// enqueue racing the delete is either deleted with the board's queue
    /// or refused, never acknowledged and left behind.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// use autoshard::Error;
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let old = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// old.set_score("alice", 42)?;
    /// assert!(Ranking::delete(&db, "season")?);
    /// assert!(!Ranking::delete(&db, "season")?);
    /// assert!(matches!(old.len(), Err(Error::RankingNotFound { .. })));
    /// let new = Ranking::create(&db, "season", RankingConfig::new(0..100))?;
    /// assert!(matches!(old.set_score("bob", 1), Err(Error::RankingNotFound { .. })));
    /// assert_eq!(new.len()?, 0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a name [`create`](Ranking::create) would
    /// refuse, or a store error. A failed delete on SQLite may have marked
    /// the board deleted and left some of its rows: the next delete of any
    /// board finishes them. On Redis Cluster it may have deleted the board
    /// and left its name registered: deleting it again finishes.
    pub fn delete(db: &impl RankingStore, name: &str) -> Result<bool> {
        check_board_name(name)?;
        let boards = db.__boards().0;
        super::shape::delete(&boards, name, || boards.delete_board(name))
    }

    /// Empties the board and keeps its configuration. Updates queued
    /// before the reset are dropped, not applied (the queue shards'
    /// applied-through marks move past them in the reset's transaction);
    /// updates queued while it runs may land either side of it. Dead
    /// letters go too.
    ///
    /// One write transaction holding the whole board: on PostgreSQL the
    /// board's writers wait for it (other boards' do not); on SQLite every
    /// writer of the file does, so resetting a huge board there is as slow
    /// as deleting its rows. On Redis Cluster it is one commit that unlinks
    /// the board's keys, and the board's writers run again after it.
    ///
    /// ```
    /// use autoshard::ranking::{Ranking, RankingConfig};
    /// # fn main() -> autoshard::Result<()> {
    /// let db = autoshard::Sqlite::memory()?;
    /// let board = Ranking::create(&db, "daily", RankingConfig::new(0..100))?;
    /// board.set_scores(&[("alice", 10), ("bob", 20)])?;
    /// board.reset()?;
    /// assert_eq!(board.len()?, 0);
    /// board.set_score("carol", 5)?;
    /// assert_eq!(board.rank_of_score(5)?, 1);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::RankingNotFound`] if the board was deleted; a store error
    /// as any write; [`Error::InvalidRanking`] if queue workers kept a queue
    /// shard for two seconds.
    pub fn reset(&self) -> Result<()> {
        self.shape().writes().reset(self)
    }

    pub(in crate::ranking) fn one_tree_reset(&self) -> Result<()> {
        let boards = &self.inner.boards;
        // Queue shards' heads before the reset: everything below them was
        // queued before it, and is dropped.
        let heads = match self.queues() {
            0 => Vec::new(),
            _ => {
                self.queue_state()?;
                boards.queue_marks(self.inner.id)?
            }
        };
        for _ in 0..RESET_TRIES {
            let mut busy = false;
            let outcome = self.write_with(|st| {
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
                        boards.delete_queued(self.inner.id, &through)?;
                    }
                    return Ok(());
                }
            }
        }
        Err(shard_busy())
    }
}

fn shard_busy() -> Error {
    Error::InvalidRanking {
        reason: "queue workers kept a queue shard of the board throughout the reset".into(),
    }
}

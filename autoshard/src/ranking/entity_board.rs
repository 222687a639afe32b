//! Entity boards: the ranking side of `#[shard(ranked = "board")]`.
//!
//! A store runs this module's board writer inside the transaction that
//! writes the entity (`seam/ranked.rs`), so a board follows its field's
//! folded total exactly:
//! the board write commits with the save or not at all, and a save retried
//! by its store is retried with its board write, never counted twice. On
//! Redis Cluster, where a save is pieces on several slots, the board write
//! follows the pieces, exactly once under its own operation id; a process
//! killed in between leaves it owed to the kind's next compaction pass
//! (docs/design/store-redis.md, "Entity boards on Redis Cluster").
//!
//! The application creates the board, once, with [`Policy::Increment`]
//! (the field's total moves by each save's delta, so the board adds it):
//!
//! ```
//! use autoshard::ranking::{Policy, Ranking, RankingConfig};
//! use autoshard::{Pending, Shardable, Sqlite, Store};
//!
//! #[derive(Shardable)]
//! struct Question {
//!     #[shard(id)]
//!     id: u64,
//!     #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum, ranked = "top-questions")]
//!     votes: i64,
//!     #[shard(pending)]
//!     pending: Pending<Self>,
//! }
//!
//! impl Question {
//!     #[autoshard::shard_method]
//!     fn upvote(&mut self) {
//!         self.votes += 1;
//!     }
//! }
//!
//! # fn main() -> autoshard::Result<()> {
//! let db = Sqlite::memory()?;
//! let config = RankingConfig::new(-1_000_000..1_000_000).policy(Policy::Increment);
//! let board = Ranking::create(&db, "top-questions", config)?;
//!
//! let mut q = Question { id: 7, votes: 0, pending: Pending::new() };
//! db.insert(&q)?; // enters the board with its total, 0
//! q.upvote();
//! q.upvote();
//! db.save(&mut q)?; // adds 2, in the save's transaction
//! db.save_delta::<Question, _>(&7, "votes", &3i64)?;
//! assert_eq!(board.score("7")?, Some(5));
//! db.delete::<Question>(&7)?; // leaves the board
//! assert_eq!(board.score("7")?, None);
//! # Ok(())
//! # }
//! ```
//!
//! The player is the entity's id as text (`7`, or a string id as it is).
//! Compaction moves no total, so it writes no board. A save to a board
//! that does not exist fails with [`Error::RankingNotFound`], one to a
//! board of another policy with [`Error::RankingMismatch`], one whose new
//! total leaves the board's range with [`Error::ScoreOutOfRange`]: in each
//! case nothing of the save is written. Entities inserted before the board
//! was created are not on it. An [approximate](super::RankingConfig::approximate)
//! board is fed the same way, through its own write path (the player's row
//! only); a board [split into trees](super::RankingConfig::trees) is refused with
//! [`Error::RankingMismatch`].

use super::apply::apply_updates;
use super::board_config::BoardConfig;
use super::policy::Policy;
use crate::error::{Error, Result};
use crate::seam::{Board, BoardTx, BoardWrite};

/// Applies a save's board writes, board by board in name order (so two
/// saves that write the same boards lock them in one order), each as one
/// batch under the board's `Increment` policy.
pub(crate) fn apply(tx: &dyn BoardTx, writes: &[BoardWrite]) -> Result<()> {
    let mut names: Vec<&'static str> = writes.iter().map(|w| w.board).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let updates: Vec<(&str, Option<i64>)> = writes
            .iter()
            .filter(|w| w.board == name)
            .map(|w| (w.player.as_str(), w.change))
            .collect();
        for &(player, _) in &updates {
            super::handle::check_player(player)?;
        }
        write_board(tx, name, &updates)?;
    }
    Ok(())
}

fn write_board(tx: &dyn BoardTx, name: &str, updates: &[(&str, Option<i64>)]) -> Result<()> {
    let (id, spec) = tx
        .open(name)?
        .ok_or_else(|| Error::RankingNotFound { name: name.into() })?;
    let corrupt = |reason: String| Error::Corrupt {
        kind: "ranking",
        id: name.into(),
        field: "configuration".into(),
        reason,
    };
    let config = BoardConfig::from_spec(spec).map_err(corrupt)?;
    if config.policy() != Policy::Increment {
        return Err(Error::RankingMismatch {
            name: name.into(),
            reason: format!(
                "policy is {:?}, and a board fed by a ranked field must be Policy::Increment",
                config.policy()
            ),
        });
    }
    if config.trees() > 1 {
        // Its trees are other databases (SQLite files): not the save's
        // transaction, and the board's own rows are never read.
        return Err(Error::RankingMismatch {
            name: name.into(),
            reason: format!(
                "it is split into {} trees, and a board fed by a ranked field is one tree",
                config.trees()
            ),
        });
    }
    let geometry = config.geometry()?;
    let rules = config.rules();
    let shard = crate::random::range(0..config.node_shards());
    let board = Board { id, name };
    tx.with_board(board, &mut |st| {
        // Every board write moves the generation (a queue worker's cache
        // relies on it: `cache.rs`).
        st.bump_generation()?;
        apply_updates(st, &geometry, rules, shard, updates, None).map(drop)
    })
}

/// What a ranked field's type must be: an integer type whose every value a
/// board's `i64` score holds.
#[diagnostic::on_unimplemented(
    message = "a `ranked` field must be an integer type a board score holds, not `{Self}`",
    label = "not one of i8, i16, i32, i64, u8, u16, u32",
    note = "a board keeps `i64` scores; `u64` and `usize` totals may not fit"
)]
pub trait RankedScore {}
impl RankedScore for i8 {}
impl RankedScore for i16 {}
impl RankedScore for i32 {}
impl RankedScore for i64 {}
impl RankedScore for u8 {}
impl RankedScore for u16 {}
impl RankedScore for u32 {}

/// The board writer of every ranked field, as the derive wires it to a
/// kind's ranked fields (`seam::RankedHook`): the stores below only call it.
pub const RANKED_HOOK: crate::seam::RankedHook = crate::seam::RankedHook(apply);

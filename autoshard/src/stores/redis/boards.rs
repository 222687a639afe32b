//! Ranking boards are not implemented on Redis Cluster yet: every board
//! operation fails with [`Error::InvalidRanking`], saying so.
//!
//! The ranking tree's writers read leaves, arrival nodes and player rows
//! and decide from their exact values, which needs a transaction over all
//! of them (or a lock per board); on Redis Cluster that means putting a
//! board's leaves and players in one slot and its inner shard rows on
//! others, with the same piece-by-piece exactly-once machinery as entities.
//! See `docs/design.md`, "Redis Cluster".

use super::RedisCluster;
use crate::error::{Error, Result};
use crate::seam::{Board, BoardSpec, BoardStore, DeadLetter, QueuedUpdate, Storage};

fn unsupported() -> Error {
    Error::InvalidRanking {
        reason: "ranking boards are not implemented on the Redis Cluster store yet".into(),
    }
}

impl BoardStore for RedisCluster {
    fn create_board(&self, _name: &str, _spec: &BoardSpec) -> Result<i64> {
        Err(unsupported())
    }

    fn open_board(&self, _name: &str) -> Result<Option<(i64, BoardSpec)>> {
        Err(unsupported())
    }

    fn read_board(
        &self,
        _board: Board<'_>,
        _f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        Err(unsupported())
    }

    fn write_board(
        &self,
        _board: Board<'_>,
        _f: &mut dyn FnMut(&dyn Storage) -> Result<()>,
    ) -> Result<()> {
        Err(unsupported())
    }

    fn prepare_queue(&self) -> Result<Option<String>> {
        Err(unsupported())
    }

    fn append_queue(&self, _board: i64, _items: &[QueuedUpdate]) -> Result<()> {
        Err(unsupported())
    }

    fn queued(&self, _board: i64) -> Result<u64> {
        Err(unsupported())
    }

    fn queue_marks(&self, _board: i64) -> Result<Vec<(u32, i64)>> {
        Err(unsupported())
    }

    fn dead_letters(&self, _board: i64) -> Result<Vec<DeadLetter>> {
        Err(unsupported())
    }

    fn delete_dead_letter(&self, _board: i64, _id: i64) -> Result<bool> {
        Err(unsupported())
    }

    fn queued_below(&self, _board: i64, _marks: &[(u32, i64)], _count: bool) -> Result<u64> {
        Err(unsupported())
    }
}

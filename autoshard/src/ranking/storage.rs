//! The narrow interface between the ranking algorithms and a database, and
//! the node encoding every backend shares.
//!
//! A [`Storage`] is one open transaction on one board. The algorithms in
//! `query.rs`, `apply.rs` and `integrity.rs` only ever talk to this trait, so
//! a new backend implements these methods (and board create/open) and
//! nothing else.
//!
//! Node vectors are stored as little-endian `i64`s with trailing zeros
//! trimmed (a missing entry reads as 0): a fresh arrival tree or a sparse
//! leaf costs a few bytes instead of `8 * B`.

use crate::error::{Error, Result};
use crate::sqlite::Sqlite;

/// The database a board lives in. Public in name only (this module is
/// private): it appears in the sealed [`RankingStore`](super::RankingStore)
/// trait.
#[derive(Clone)]
pub enum Backend {
    /// An embedded SQLite database.
    Sqlite(Sqlite),
    /// A PostgreSQL schema, with the board statements for it.
    #[cfg(feature = "postgres")]
    Postgres(super::postgres::PgBoards),
}

/// Which vector of a score-tree node a row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Part {
    /// Players per child.
    A = 0,
    /// Distinct scores per child (inner nodes) or arrival counters (leaves).
    B = 1,
}

impl Part {
    pub fn from_stored(value: i64) -> Option<Self> {
        match value {
            0 => Some(Part::A),
            1 => Some(Part::B),
            _ => None,
        }
    }
}

/// Callback for one stored score-tree row: `(height, part, shard, vector)`.
pub(crate) type NodeRow<'f> = dyn FnMut(u32, Part, u32, &[u8]) -> Result<()> + 'f;

/// Callback for one row of a full score-tree scan: `((height, idx), part,
/// shard, vector)`.
pub(crate) type ScannedNode<'f> = dyn FnMut((u32, u64), Part, u32, &[u8]) -> Result<()> + 'f;

/// Callback for one row of a full arrival-tree scan: `(score, height, idx,
/// vector)`.
pub(crate) type ScannedArrival<'f> = dyn FnMut(i64, u32, u64, &[u8]) -> Result<()> + 'f;

/// One transaction on one board. Positions (`idx`, arrivals) are below
/// `2^63`, so every backend can store them as signed 64-bit integers. An
/// all-zero vector is never stored: writing an empty (encoded) vector
/// deletes the row.
///
/// Writers read a player row, leaves (shard 0) and arrival nodes and then
/// decide from their exact values, so two write transactions must not
/// interleave on them: SQLite has one writer at a time anyway; a backend
/// with row locks must lock what a write transaction reads (`FOR UPDATE`)
/// or serialize writers per board. Inner shard rows only receive deltas.
///
/// A write transaction announces what it will read, in this order, so a
/// locking backend can lock in one canonical order (no deadlocks): all its
/// players ([`lock_players`](Storage::lock_players)) before reading any of
/// them, then every leaf it will change ([`lock_leaves`](Storage::lock_leaves);
/// a leaf's lock also covers the arrival trees of its scores), then inner
/// shard rows one at a time in `(height, idx)` order through
/// [`node_shard`](Storage::node_shard).
pub(crate) trait Storage {
    /// Before a write transaction reads these players' rows: a locking
    /// backend locks them (present or not) until commit.
    fn lock_players(&self, _players: &[&str]) -> Result<()> {
        Ok(())
    }

    /// Before a write transaction reads these leaves (score-tree nodes at
    /// height 1) and the arrival trees of their scores: a locking backend
    /// locks them (present or not) until commit.
    fn lock_leaves(&self, _leaves: &[u64]) -> Result<()> {
        Ok(())
    }

    /// Calls `f` for every shard row of part A of each node `(height, idx,
    /// with_b)` in `path`, and of part B too where `with_b`; in one round
    /// trip where the backend can (a root-to-leaf path is known up front).
    fn path_rows(&self, path: &[(u32, u64, bool)], f: &mut NodeRow<'_>) -> Result<()>;

    /// Calls `f(part, vector)` for the rows of shard `shard` of node
    /// `(height, idx)`. Only write transactions call it; backends that lock
    /// rows lock this shard row (present or not) until commit.
    fn node_shard(
        &self,
        height: u32,
        idx: u64,
        shard: u32,
        f: &mut dyn FnMut(Part, &[u8]) -> Result<()>,
    ) -> Result<()>;

    /// Replaces one shard row of one part; an empty vector deletes it.
    fn put_node_part(&self, height: u32, idx: u64, part: Part, shard: u32, v: &[u8]) -> Result<()>;

    /// Calls `f(height, vector)` for each existing arrival-tree node
    /// `(score, height, idx)` with `(height, idx)` in `path`.
    fn arrival_path(
        &self,
        score: i64,
        path: &[(u32, u64)],
        f: &mut dyn FnMut(u32, &[u8]) -> Result<()>,
    ) -> Result<()>;

    /// Replaces one arrival-tree node; an empty vector deletes it.
    fn put_arrival_node(&self, score: i64, height: u32, idx: u64, v: &[u8]) -> Result<()>;

    /// The player's `(score, arrival)`.
    fn player(&self, player: &str) -> Result<Option<(i64, u64)>>;

    /// Inserts or replaces the player's row.
    fn put_player(&self, player: &str, score: i64, arrival: u64) -> Result<()>;

    /// Deletes the player's row (no-op if absent).
    fn delete_player(&self, player: &str) -> Result<()>;

    /// Appends up to `limit` players at `score` with arrival `>= arrival`,
    /// by arrival, as `(player, score)`.
    fn entries_at(
        &self,
        score: i64,
        arrival: u64,
        limit: u64,
        out: &mut Vec<(String, i64)>,
    ) -> Result<()>;

    /// Appends up to `limit` players with a score below `score`, in ranking
    /// order (score descending, then arrival).
    fn entries_below(&self, score: i64, limit: u64, out: &mut Vec<(String, i64)>) -> Result<()>;

    /// Calls `f(score, arrival)` for every player, in any order.
    fn scan_players(&self, f: &mut dyn FnMut(i64, u64) -> Result<()>) -> Result<()>;

    /// Calls `f` for every score-tree row, ordered by `(height, idx, part,
    /// shard)`; `idx` is passed with the height as `(height, idx)`.
    fn scan_nodes(&self, f: &mut ScannedNode<'_>) -> Result<()>;

    /// Calls `f(score, height, idx, vector)` for every arrival-tree node,
    /// ordered by `(score, height, idx)`.
    fn scan_arrival_nodes(&self, f: &mut ScannedArrival<'_>) -> Result<()>;

    /// The board's name, for error messages.
    fn board_name(&self) -> &str;

    /// A [`Error::Corrupt`] about this board.
    fn corrupt(&self, field: String, reason: String) -> Error {
        Error::Corrupt {
            kind: "ranking",
            id: self.board_name().to_owned(),
            field,
            reason,
        }
    }
}

/// Entry `i` of an encoded vector (0 past its end).
pub(crate) fn get(blob: &[u8], i: usize) -> i64 {
    match blob.get(8 * i..8 * i + 8) {
        Some(bytes) => i64::from_le_bytes(bytes.try_into().expect("8 bytes")),
        None => 0,
    }
}

/// The stored entries of an encoded vector, from index 0.
pub(crate) fn entries(blob: &[u8]) -> impl Iterator<Item = i64> + '_ {
    blob.chunks_exact(8)
        .map(|bytes| i64::from_le_bytes(bytes.try_into().expect("8 bytes")))
}

/// Sum of entries `from..` (to the end of the vector).
pub(crate) fn sum_from(blob: &[u8], from: usize) -> i128 {
    let start = (8 * from).min(blob.len());
    entries(&blob[start..]).map(i128::from).sum()
}

/// Sum of entries `..to`.
pub(crate) fn sum_to(blob: &[u8], to: usize) -> i128 {
    let end = (8 * to).min(blob.len());
    entries(&blob[..end]).map(i128::from).sum()
}

/// Whether `blob` is a well-formed vector of at most `b` entries.
pub(crate) fn well_formed(blob: &[u8], b: usize) -> bool {
    blob.len().is_multiple_of(8) && blob.len() <= 8 * b
}

/// Adds an encoded vector into `out` (which has `B` entries).
pub(crate) fn add_into(blob: &[u8], out: &mut [i64]) -> Option<()> {
    for (slot, value) in out.iter_mut().zip(entries(blob)) {
        *slot = slot.checked_add(value)?;
    }
    Some(())
}

/// Encodes `v` into `out` (cleared first), trailing zeros trimmed.
pub(crate) fn encode(v: &[i64], out: &mut Vec<u8>) {
    out.clear();
    let len = v.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    for x in &v[..len] {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_trims_trailing_zeros_and_reads_them_back() {
        let mut blob = Vec::new();
        encode(&[3, 0, -7, 0, 0], &mut blob);
        assert_eq!(blob.len(), 24);
        assert_eq!(
            (0..6).map(|i| get(&blob, i)).collect::<Vec<_>>(),
            [3, 0, -7, 0, 0, 0]
        );
        assert_eq!(
            (sum_from(&blob, 1), sum_from(&blob, 9), sum_to(&blob, 1)),
            (-7, 0, 3)
        );
        encode(&[0, 0], &mut blob);
        assert!(blob.is_empty());
        encode(&[i64::MIN, i64::MAX], &mut blob);
        assert_eq!(sum_from(&blob, 0), -1);
        assert!(well_formed(&blob, 2) && !well_formed(&blob, 1) && !well_formed(&blob[1..], 2));
        let mut out = [1, 1, 1];
        assert_eq!(add_into(&blob, &mut out), None, "i64::MAX + 1 overflows");
    }
}

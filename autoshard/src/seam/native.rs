//! Boards a store orders natively: the board operations a store implements
//! when it has order statistics of its own (Redis's sorted sets), so that
//! no count tree is stored for the board.
//!
//! A [`Storage`](super::Storage) whose board is stored natively returns one
//! of these from [`Storage::native`](super::Storage::native); the ranking
//! layer then plans a batch as for the tree (policy, net effect, entry
//! data: `ranking/apply/`) and hands the store each player's net move
//! instead of tree rows, and answers every exact read from the calls
//! below, each one round trip. Scores here are *tree scores* (better is
//! higher, whatever the board's order), as the tree stores them.

use crate::error::Result;

/// Which rank of a player [`NativeBoard::rank_of`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RankKind {
    /// 1 + players strictly better.
    Standard,
    /// 1 + distinct scores strictly better.
    Dense,
    /// 1 + players ahead in ranking order.
    Ordinal,
}

/// Where [`NativeBoard::counts_at`] found a player.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placed {
    /// At the place the caller gave.
    There,
    /// Not on the board.
    Absent,
    /// At another place.
    Elsewhere,
}

/// A member of a board's order: `(tree score, arrival, player)`.
pub(crate) type Member = (i64, u64, String);

/// What [`NativeBoard::read_from`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NativeRead {
    /// The players before each place asked.
    pub counts: Vec<u64>,
    /// The members from the start on.
    pub members: Vec<Member>,
    /// The distinct tree scores better than the start's, best first
    /// (empty unless asked).
    pub distinct: Vec<i64>,
}

/// One entry of a range of the ranking order, with its ranks counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NativeEntry {
    pub player: String,
    /// The tree score.
    pub score: i64,
    /// Standard rank: 1 + players strictly better.
    pub rank: u64,
    /// Dense rank: 1 + distinct scores strictly better.
    pub dense: u64,
    /// Ordinal rank, 1-based.
    pub position: u64,
    /// The player's arrival at their score: ties are ordered by it.
    pub arrival: u64,
}

/// The native operations on one board, inside one transaction of
/// [`BoardStore`](super::BoardStore). Writes are buffered and committed
/// with the transaction (one script on Redis); reads see the committed
/// state only, not the transaction's own buffered writes.
pub(crate) trait NativeBoard {
    /// Moves `player` from `from` (their stored `(tree score, arrival)`,
    /// `None` if absent) to tree score `to` (`None`: removes them, entry
    /// data included). The store hands out the arrival, at least `floor`:
    /// later moves of the transaction, and of later transactions, arrive
    /// later (a tree of a split board passes board-wide floors,
    /// `ranking/trees/arrival.rs`; any other board 0).
    fn place(
        &self,
        player: &str,
        from: Option<(i64, u64)>,
        to: Option<i64>,
        floor: u64,
    ) -> Result<()>;

    /// Players with a tree score strictly better than `score`, and with
    /// `distinct` the distinct scores strictly better too (else 0).
    fn above(&self, score: i64, distinct: bool) -> Result<(u64, u64)>;

    /// Players with a tree score strictly better than each of `scores`,
    /// in one read (a submission's old and new rank).
    fn above_each(&self, scores: &[i64]) -> Result<Vec<u64>>;

    /// Players ahead of each `(tree score, arrival)` in ranking order
    /// (better score, or the same score reached with a lower arrival), in
    /// one read: a split board's ordinal ranks across its trees.
    fn before_each(&self, places: &[(i64, u64)]) -> Result<Vec<u64>>;

    /// With `on`, this transaction's native reads are peeks: read outside
    /// its snapshot (its version neither taken nor checked), so a read
    /// that only guides a later, checked one cannot make the snapshot
    /// stale. Off again before the checked reads.
    fn peeking(&self, on: bool);

    /// In one read: the players before each of `places` (as
    /// [`counts_at`](NativeBoard::counts_at)), the first `n` members in
    /// ranking order from the place `start` on, and with `distinct` every
    /// distinct tree score better than `start`'s.
    fn read_from(
        &self,
        start: (i64, u64),
        n: u64,
        places: &[(i64, Option<u64>)],
        distinct: bool,
    ) -> Result<NativeRead>;

    /// The board's size and its members at each of the 0-based ranks
    /// `ranks` (none past the end), in one read: the pivots from which a
    /// split board's page looks for its place.
    fn members_at(&self, ranks: &[u64]) -> Result<(u64, Vec<Member>)>;

    /// `player`'s `(tree score, arrival)` as the board holds it now,
    /// outside the transaction's snapshot (its version is neither taken
    /// nor checked): where a split board's rank then looks, in one read
    /// of every tree that checks the player is still there.
    fn peek_place(&self, player: &str) -> Result<Option<(i64, u64)>>;

    /// Where `player` is against `place`, the players ahead of each of
    /// `places` (as [`before_each`](NativeBoard::before_each); a place
    /// with arrival `None` counts the players of better scores) and, with
    /// `distinct`, the distinct tree scores better than `place`'s, in one
    /// read.
    fn counts_at(
        &self,
        player: &str,
        place: (i64, u64),
        places: &[(i64, Option<u64>)],
        distinct: bool,
    ) -> Result<(Placed, NativeRead)>;

    /// Up to `limit` of the distinct tree scores strictly better than
    /// `score`, best first, starting after `after` (`None`: from the
    /// best): a split board counts the union of its trees' distinct
    /// scores, which no per-tree count gives.
    fn distinct_better(&self, score: i64, after: Option<i64>, limit: u64) -> Result<Vec<i64>>;

    /// `player`'s rank of kind `kind` (counting only that), `None` if they
    /// are not on the board.
    fn rank_of(&self, player: &str, kind: RankKind) -> Result<Option<u64>>;

    /// The entries at ordinal ranks `from..=to` (1-based; fewer past the
    /// end), ranks counted.
    fn range(&self, from: u64, to: u64) -> Result<Vec<NativeEntry>>;

    /// `player`'s entry with up to `k` entries either side; empty if they
    /// are not on the board.
    fn around(&self, player: &str, k: u64) -> Result<Vec<NativeEntry>>;

    /// The players with a tree score of at most `hi` and strictly better
    /// than `below` (`None`: down to the lowest), counted, with the first
    /// `limit` of them in ranking order, ranks counted (none for 0): a
    /// score range in one call.
    fn between(&self, hi: i64, below: Option<i64>, limit: u64) -> Result<(u64, Vec<NativeEntry>)>;

    /// Players on the board.
    fn len(&self) -> Result<u64>;

    /// Checks that the store's structures agree with each other (players,
    /// order, distinct scores); [`Error::Corrupt`](crate::Error::Corrupt)
    /// naming the first disagreement.
    fn check(&self) -> Result<()>;
}

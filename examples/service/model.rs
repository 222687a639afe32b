//! What the service stores and what it speaks: the Moderator's question
//! (votes sharded statically and fed to the "top-questions" entity board
//! in each save's transaction) and the JSON bodies of the routes.
//!
//! The load generator (`benches`, `service-load`) includes this file too,
//! so its in-process side calls the store with the very entity the
//! service saves.

use autoshard::ranking::{Policy, RankingConfig, ScoreOrder};
use autoshard::{Pending, Shardable};
use serde::{Deserialize, Serialize};

/// The entity board of the questions' vote totals (as `votes` declares it).
pub const QUESTIONS_BOARD: &str = "top-questions";
/// The game's leaderboard: each player's best score.
pub const GAME_BOARD: &str = "game";
/// Longest question text accepted, in bytes.
pub const MAX_TEXT: usize = 500;
/// Game scores are in `0..MAX_SCORE`.
pub const MAX_SCORE: i64 = 1_000_000_000;
/// Most entries one list route returns (`?n=` / `?k=`).
pub const MAX_LIST: u64 = 100;

/// A question of the paper's Moderator: everyone votes on the hot ones at
/// once, so `votes` is split over ten shard rows and a vote adds +1 to one
/// of them (`save_delta`), never reading the others.
#[derive(Shardable, Debug, Clone)]
pub struct Question {
    #[shard(id)]
    pub id: u64,
    pub text: String,
    #[shard(neutral = 0, shards = 10, fold = autoshard::fold::checked_sum, ranked = "top-questions")]
    pub votes: i64,
    #[shard(pending)]
    pub pending: Pending<Self>,
}

/// The questions' board: `Increment` is what an entity board needs (each
/// save adds its delta); a vote total never goes below 0.
pub fn questions_board_config() -> RankingConfig {
    RankingConfig::new(0..i64::MAX).policy(Policy::Increment)
}

/// The game's board: a player keeps their best score, higher is better.
pub fn game_board_config() -> RankingConfig {
    RankingConfig::new(0..MAX_SCORE)
        .policy(Policy::Best)
        .order(ScoreOrder::HigherIsBetter)
}

/// `POST /questions`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Ask {
    pub text: String,
}

/// A question with its vote total and, where the board was read, its rank.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct QuestionView {
    pub id: u64,
    pub text: String,
    pub votes: i64,
    pub rank: Option<u64>,
}

/// `POST /game/scores`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Score {
    pub player: String,
    pub score: i64,
}

/// A player's place on the game board.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct PlayerView {
    pub player: String,
    pub score: i64,
    pub rank: u64,
}

/// Every error body: `{"error": "...", "status": 404}`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ErrorBody {
    pub error: String,
    pub status: u16,
}

/// The tokio `spawn` latency probe's figures (`GET /probe`), in
/// microseconds: how long a spawned task waited for a worker thread.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct ProbeView {
    pub samples: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// What the service checked at shutdown, after the game queue was flushed
/// and the compactor stopped (`ServiceHandle::shutdown`; printed as JSON).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct ShutdownReport {
    /// Votes acknowledged (200) during this run.
    pub votes_acked: u64,
    /// The board's vote total now minus at start: equals `votes_acked`
    /// when every acknowledged vote was counted once.
    pub votes_counted: i64,
    /// Questions voted on this run whose loaded total differs from their
    /// board score (0 when the board equals the totals).
    pub board_mismatches: u64,
    /// Game scores acknowledged (202) this run, and still queued after the
    /// flush (0 when every one reached the board).
    pub scores_acked: u64,
    pub scores_queued_after_flush: u64,
    pub probe: ProbeView,
}

impl ShutdownReport {
    /// Every acknowledged vote and score counted exactly once.
    pub fn exact(&self) -> bool {
        self.votes_counted == self.votes_acked as i64
            && self.board_mismatches == 0
            && self.scores_queued_after_flush == 0
    }
}

//! The service's one door to autoshard: every route's store work is an
//! `async fn` here, so the HTTP layer never sees a blocking call.
//!
//! Today each call runs the sync API on tokio's blocking pool
//! (`spawn_blocking`): a runtime worker thread never waits for SQLite's
//! fsync, a PostgreSQL round trip or Redis, which the `spawn` probe
//! (`probe.rs`) checks. The game board's worker and the compactor are
//! the library's own threads, stopped (after a flush) by
//! [`Backend::shutdown`].

use crate::model::*;
use crate::probe::Probe;
use autoshard::ranking::{Ranking, Tie};
use autoshard::{AnyStore, CompactorHandle, Error, Store};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long shutdown waits for the game queue to drain.
const FLUSH_LIMIT: Duration = Duration::from_secs(60);

/// The store, its two boards and the background jobs; shared by every
/// request (`Arc<Backend>`).
pub struct Backend {
    store: AnyStore,
    /// `None` on Redis Cluster: entity boards are `Error::Unsupported` there.
    questions: Option<Ranking>,
    game: Ranking,
    jobs: Mutex<Option<Jobs>>,
    next_id: AtomicU64,
    votes_acked: AtomicU64,
    scores_acked: AtomicU64,
    /// Questions voted on this run, checked against the board at shutdown.
    voted: Mutex<BTreeSet<u64>>,
    /// The questions board's total at start (earlier runs' votes).
    votes_at_start: i64,
    pub probe: Probe,
}

struct Jobs {
    worker: autoshard::ranking::WorkerHandle,
    compactor: Option<CompactorHandle>,
}

/// Runs `f` on the blocking pool: the sync API must not hold a worker.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> autoshard::Result<T> + Send + 'static,
) -> autoshard::Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(join) => std::panic::resume_unwind(join.into_panic()),
    }
}

impl Backend {
    /// Opens the store at `url`, creates the boards on first use and
    /// starts the game board's worker and the questions' compactor.
    pub async fn open(url: String) -> autoshard::Result<Arc<Backend>> {
        let backend = blocking(move || Backend::open_blocking(&url)).await?;
        Ok(Arc::new(backend))
    }

    fn open_blocking(url: &str) -> autoshard::Result<Backend> {
        let store = autoshard::open(url)?;
        let game = Ranking::open_or_create(&store, GAME_BOARD, game_board_config())?;
        let questions = if store.scheme() == "redis-cluster" {
            None
        } else {
            Some(Ranking::open_or_create(
                &store,
                QUESTIONS_BOARD,
                questions_board_config(),
            )?)
        };
        let (next_id, votes_at_start) = match &questions {
            Some(board) => (board.len()? + 1, board_total(board)?),
            None => (1, 0),
        };
        let worker = game.worker().spawn()?;
        let compactor = questions
            .as_ref()
            .map(|_| store.compactor::<Question>().spawn());
        Ok(Backend {
            store,
            questions,
            game,
            jobs: Mutex::new(Some(Jobs { worker, compactor })),
            next_id: AtomicU64::new(next_id),
            votes_acked: AtomicU64::new(0),
            scores_acked: AtomicU64::new(0),
            voted: Mutex::new(BTreeSet::new()),
            votes_at_start,
            probe: Probe::default(),
        })
    }

    /// Which store this is (`"sqlite"`, `"postgres"`, `"redis-cluster"`).
    pub fn scheme(&self) -> &'static str {
        self.store.scheme()
    }

    fn questions(&self) -> autoshard::Result<Ranking> {
        self.questions.clone().ok_or(Error::Unsupported {
            store: "redis-cluster",
            operation: "entity boards (`ranked = ...`), so the Moderator's questions \
                        (use SQLite or PostgreSQL; the game leaderboard works here)",
        })
    }

    /// Stores a new question with 0 votes (and so puts it on the board).
    pub async fn ask(self: &Arc<Self>, text: String) -> autoshard::Result<QuestionView> {
        self.questions()?;
        let me = self.clone();
        blocking(move || loop {
            let id = me.next_id.fetch_add(1, Relaxed);
            let q = Question {
                id,
                text: text.clone(),
                votes: 0,
                pending: Default::default(),
            };
            // Another process on the same store may have taken the id.
            match me.store.insert(&q) {
                Ok(()) => {
                    return Ok(QuestionView {
                        id,
                        text,
                        votes: 0,
                        rank: None,
                    })
                }
                Err(Error::AlreadyExists { .. }) => continue,
                Err(e) => return Err(e),
            }
        })
        .await
    }

    /// One vote: +1 on one of the question's ten shard rows, and on the
    /// board, in one transaction. `Error::NotFound` for a missing question.
    pub async fn vote(self: &Arc<Self>, id: u64) -> autoshard::Result<()> {
        self.questions()?;
        let me = self.clone();
        blocking(move || me.store.save_delta::<Question, _>(&id, "votes", &1i64)).await?;
        self.votes_acked.fetch_add(1, Relaxed);
        lock(&self.voted).insert(id);
        Ok(())
    }

    /// A question with its loaded total and its board rank.
    pub async fn question(self: &Arc<Self>, id: u64) -> autoshard::Result<QuestionView> {
        let board = self.questions()?;
        let me = self.clone();
        blocking(move || {
            let q = me
                .store
                .load::<Question>(&id)?
                .ok_or_else(|| Error::NotFound {
                    kind: "Question",
                    id: id.to_string(),
                })?;
            let rank = board.rank(&id.to_string(), Tie::Standard)?;
            Ok(QuestionView {
                id,
                text: q.text,
                votes: q.votes,
                rank,
            })
        })
        .await
    }

    /// The `n` most voted questions, from the entity board.
    pub async fn top_questions(self: &Arc<Self>, n: u64) -> autoshard::Result<Vec<QuestionView>> {
        let board = self.questions()?;
        let me = self.clone();
        blocking(move || {
            let mut out = Vec::new();
            for e in board.top(n)? {
                let id: u64 = e.player.parse().map_err(|_| Error::Corrupt {
                    kind: "Question",
                    id: e.player.clone(),
                    field: QUESTIONS_BOARD.into(),
                    reason: "a board entry that is not a question id".into(),
                })?;
                // A question deleted behind the board's back is skipped.
                if let Some(q) = me.store.load::<Question>(&id)? {
                    let rank = Some(e.rank);
                    out.push(QuestionView {
                        id,
                        text: q.text,
                        votes: e.score,
                        rank,
                    });
                }
            }
            Ok(out)
        })
        .await
    }

    /// Queues a game score; the board's worker applies it (best kept).
    pub async fn submit(self: &Arc<Self>, s: Score) -> autoshard::Result<()> {
        let board = self.game.clone();
        blocking(move || board.enqueue(&s.player, s.score)).await?;
        self.scores_acked.fetch_add(1, Relaxed);
        Ok(())
    }

    /// The player's score and rank; `None` when not on the board (yet).
    pub async fn player(&self, player: String) -> autoshard::Result<Option<PlayerView>> {
        Ok(self.around(player, 0).await?.into_iter().next())
    }

    /// The player with up to `k` players above and below.
    pub async fn around(&self, player: String, k: u64) -> autoshard::Result<Vec<PlayerView>> {
        let board = self.game.clone();
        let entries = blocking(move || board.around(&player, k)).await?;
        Ok(entries.into_iter().map(player_view).collect())
    }

    /// The game's top `n`.
    pub async fn game_top(&self, n: u64) -> autoshard::Result<Vec<PlayerView>> {
        let board = self.game.clone();
        let entries = blocking(move || board.top(n)).await?;
        Ok(entries.into_iter().map(player_view).collect())
    }

    /// Flushes the game queue, stops its worker and the compactor, then
    /// checks every acknowledged vote and score against the boards.
    /// Call once no request is in flight (after the server stopped).
    pub async fn shutdown(self: &Arc<Self>) -> autoshard::Result<ShutdownReport> {
        let me = self.clone();
        let probe = self.probe.view();
        blocking(move || me.shutdown_blocking(probe)).await
    }

    fn shutdown_blocking(&self, probe: ProbeView) -> autoshard::Result<ShutdownReport> {
        let jobs = lock(&self.jobs).take();
        let flushed = self.game.flush_within(FLUSH_LIMIT);
        if let Some(jobs) = jobs {
            jobs.worker.stop()?;
            if let Some(c) = jobs.compactor {
                c.stop()?;
            }
        }
        flushed?;
        let mut report = ShutdownReport {
            votes_acked: self.votes_acked.load(Relaxed),
            scores_acked: self.scores_acked.load(Relaxed),
            scores_queued_after_flush: self.game.queued()?,
            questions_enabled: self.questions.is_some(),
            probe,
            ..ShutdownReport::default()
        };
        if let Some(board) = &self.questions {
            report.votes_counted = board_total(board)? - self.votes_at_start;
            for id in lock(&self.voted).iter() {
                let loaded = self.store.load::<Question>(id)?.map(|q| q.votes);
                if loaded != board.score(&id.to_string())? {
                    report.board_mismatches += 1;
                }
            }
        }
        Ok(report)
    }
}

/// The sum of every score on the board, read a page at a time.
fn board_total(board: &Ranking) -> autoshard::Result<i64> {
    let (len, mut total, mut from) = (board.len()?, 0i64, 1u64);
    while from <= len {
        let page = board.page(from, from + 999)?;
        if page.is_empty() {
            break;
        }
        total += page.iter().map(|e| e.score).sum::<i64>();
        from += 1000;
    }
    Ok(total)
}

fn player_view(e: autoshard::ranking::Entry) -> PlayerView {
    PlayerView {
        player: e.player,
        score: e.score,
        rank: e.rank,
    }
}

/// A poisoned lock only means a request panicked; the data is a plain set.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

//! The service's one door to autoshard: every route's store work is an
//! `async fn` here, on the async API (`autoshard::open_async`, feature
//! `tokio`), whose calls run on the store's own threads: a runtime worker
//! never waits for SQLite's fsync, a PostgreSQL round trip or Redis, which
//! the `spawn` probe (`probe.rs`) checks.
//!
//! The game board's worker and the questions' compactor run as the async
//! API's background jobs (`spawn_worker`, `spawn_compactor`: tokio tasks on
//! the service's runtime, their batches on the store's threads, their
//! `stop` awaited), stopped after a flush by
//! [`Backend::shutdown`].

use crate::model::*;
use crate::probe::Probe;
use autoshard::ranking::{BoardWorkerHandle, RankingConfig, Tie};
use autoshard::{AsyncRanking, AsyncStore, Background, Error, StoreMetrics};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long shutdown waits for the game queue to drain.
const FLUSH_LIMIT: Duration = Duration::from_secs(60);

/// The store, its two boards and the background jobs; shared by every
/// request (`Arc<Backend>`).
pub struct Backend {
    store: AsyncStore,
    questions: AsyncRanking,
    game: AsyncRanking,
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
    worker: Background<BoardWorkerHandle>,
    /// The compactor's stop: a task that holds its handle until told to
    /// stop it, so this file never names the handle's type (the async
    /// layer's compactor handle is still changing).
    compactor: Option<(oneshot::Sender<()>, JoinHandle<autoshard::Result<()>>)>,
}

/// Opens the board, creating it on first use (by any process: a lost race
/// to create opens the winner's).
async fn open_or_create(
    db: &AsyncStore,
    name: &str,
    config: RankingConfig,
) -> autoshard::Result<AsyncRanking> {
    match AsyncRanking::open(db, name).await {
        Err(Error::RankingNotFound { .. }) => match AsyncRanking::create(db, name, config).await {
            Err(Error::RankingExists { .. }) => AsyncRanking::open(db, name).await,
            created => created,
        },
        opened => opened,
    }
}

impl Backend {
    /// Opens the store at `url`, creates the boards on first use and
    /// starts the game board's worker and the questions' compactor.
    pub async fn open(url: String) -> autoshard::Result<Arc<Backend>> {
        // Its calls run on threads of its own (`autoshard::DEFAULT_THREADS`,
        // 8: the load generator's 8 clients' calls in flight at once).
        let store = autoshard::open_async(&url).await?;
        let game = open_or_create(&store, GAME_BOARD, game_board_config()).await?;
        let questions = open_or_create(&store, QUESTIONS_BOARD, questions_board_config()).await?;
        let (next_id, votes_at_start) =
            (questions.len().await? + 1, board_total(&questions).await?);
        let worker = game.spawn_worker(game.worker()).await?;
        let compactor = {
            let running = store.spawn_compactor(store.compactor::<Question>());
            let (stop, stopped) = oneshot::channel::<()>();
            let task = tokio::spawn(async move {
                let _ = stopped.await;
                running.stop().await.map(|_| ())
            });
            Some((stop, task))
        };
        let jobs = Jobs { worker, compactor };
        Ok(Arc::new(Backend {
            store,
            questions,
            game,
            jobs: Mutex::new(Some(jobs)),
            next_id: AtomicU64::new(next_id),
            votes_acked: AtomicU64::new(0),
            scores_acked: AtomicU64::new(0),
            voted: Mutex::new(BTreeSet::new()),
            votes_at_start,
            probe: Probe::default(),
        }))
    }

    /// Which store this is (`"sqlite"`, `"postgres"`, `"redis-cluster"`).
    pub fn scheme(&self) -> &'static str {
        self.store.scheme()
    }

    /// Stores a new question with 0 votes (and so puts it on the board).
    pub async fn ask(&self, text: String) -> autoshard::Result<QuestionView> {
        loop {
            let id = self.next_id.fetch_add(1, Relaxed);
            let q = Question {
                id,
                text: text.clone(),
                votes: 0,
                pending: Default::default(),
            };
            // Another process on the same store may have taken the id.
            match self.store.insert(&q).await {
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
        }
    }

    /// One vote: +1 on one of the question's ten shard rows, and on the
    /// board, in one transaction. `Error::NotFound` for a missing question.
    pub async fn vote(&self, id: u64) -> autoshard::Result<()> {
        self.store
            .save_delta::<Question, _>(&id, "votes", &1i64)
            .await?;
        self.votes_acked.fetch_add(1, Relaxed);
        lock(&self.voted).insert(id);
        Ok(())
    }

    /// A question with its loaded total and its board rank.
    pub async fn question(&self, id: u64) -> autoshard::Result<QuestionView> {
        let board = &self.questions;
        let q = self
            .store
            .load::<Question>(&id)
            .await?
            .ok_or_else(|| Error::NotFound {
                kind: "Question",
                id: id.to_string(),
            })?;
        let rank = board.rank(&id.to_string(), Tie::Standard).await?;
        Ok(QuestionView {
            id,
            text: q.text,
            votes: q.votes,
            rank,
        })
    }

    /// The `n` most voted questions, from the entity board.
    pub async fn top_questions(&self, n: u64) -> autoshard::Result<Vec<QuestionView>> {
        let mut out = Vec::new();
        for e in self.questions.top(n).await? {
            let id: u64 = e.player.parse().map_err(|_| Error::Corrupt {
                kind: "Question",
                id: e.player.clone(),
                field: QUESTIONS_BOARD.into(),
                reason: "a board entry that is not a question id".into(),
            })?;
            // A question deleted behind the board's back is skipped.
            if let Some(q) = self.store.load::<Question>(&id).await? {
                out.push(QuestionView {
                    id,
                    text: q.text,
                    votes: e.score,
                    rank: Some(e.rank),
                });
            }
        }
        Ok(out)
    }

    /// Queues a game score; the board's worker applies it (best kept).
    pub async fn submit(&self, s: Score) -> autoshard::Result<()> {
        self.game.enqueue(&s.player, s.score).await?;
        self.scores_acked.fetch_add(1, Relaxed);
        Ok(())
    }

    /// The player's score and rank; `None` when not on the board (yet).
    pub async fn player(&self, player: String) -> autoshard::Result<Option<PlayerView>> {
        Ok(self.around(player, 0).await?.into_iter().next())
    }

    /// The player with up to `k` players above and below.
    pub async fn around(&self, player: String, k: u64) -> autoshard::Result<Vec<PlayerView>> {
        let entries = self.game.around(&player, k).await?;
        Ok(entries.into_iter().map(player_view).collect())
    }

    /// The game's top `n`.
    pub async fn game_top(&self, n: u64) -> autoshard::Result<Vec<PlayerView>> {
        Ok(self
            .game
            .top(n)
            .await?
            .into_iter()
            .map(player_view)
            .collect())
    }

    /// The store's metrics snapshot (queues, dead letters, this process's
    /// counters). It has no async form yet, so it runs on a thread of its
    /// own: the sync API must not run on a runtime worker.
    pub async fn metrics(&self) -> autoshard::Result<StoreMetrics> {
        let db = self.store.sync_store().clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = tx.send(StoreMetrics::snapshot(&db));
        });
        rx.await.unwrap_or_else(|_| {
            Err(Error::Unsupported {
                store: "any",
                operation: "a metrics snapshot (its thread panicked)",
            })
        })
    }

    /// Flushes the game queue, stops its worker and the compactor, then
    /// checks every acknowledged vote and score against the boards.
    /// Call once no request is in flight (after the server stopped).
    pub async fn shutdown(&self) -> autoshard::Result<ShutdownReport> {
        let flushed = self.game.flush_within(FLUSH_LIMIT).await;
        let jobs = lock(&self.jobs).take();
        if let Some(jobs) = jobs {
            jobs.worker.stop().await?;
            if let Some((stop, task)) = jobs.compactor {
                let _ = stop.send(());
                match task.await {
                    Ok(stopped) => stopped?,
                    Err(join) => std::panic::resume_unwind(join.into_panic()),
                }
            }
        }
        flushed?;
        let mut report = ShutdownReport {
            votes_acked: self.votes_acked.load(Relaxed),
            scores_acked: self.scores_acked.load(Relaxed),
            scores_queued_after_flush: self.game.queued().await?,
            probe: self.probe.view(),
            ..ShutdownReport::default()
        };
        {
            let board = &self.questions;
            report.votes_counted = board_total(board).await? - self.votes_at_start;
            let voted: Vec<u64> = lock(&self.voted).iter().copied().collect();
            for id in voted {
                let loaded = self.store.load::<Question>(&id).await?.map(|q| q.votes);
                if loaded != board.score(&id.to_string()).await? {
                    report.board_mismatches += 1;
                }
            }
        }
        Ok(report)
    }
}

/// The sum of every score on the board, read a page at a time.
async fn board_total(board: &AsyncRanking) -> autoshard::Result<i64> {
    let (len, mut total, mut from) = (board.len().await?, 0i64, 1u64);
    while from <= len {
        let page = board.page(from, from + 999).await?;
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

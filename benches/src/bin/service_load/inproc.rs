//! The in-process side: the same operations the routes perform
//! (`save_delta` +1 on the hot question, `enqueue` of a score), called on
//! the sync API from one OS thread per client, on a fresh store of the
//! same kind, with the board's worker running as in the service.

use crate::model::*;
use crate::{Latencies, Load, Side};
use autoshard::ranking::Ranking;
use autoshard::Store;
use std::time::Instant;

const HOT: u64 = 1;

pub fn run(url: &str, load: Load) -> Result<Side, String> {
    let e = |e: autoshard::Error| e.to_string();
    let db = autoshard::open(url).map_err(e)?;
    let game = Ranking::open_or_create(&db, GAME_BOARD, game_board_config()).map_err(e)?;
    if load.votes {
        Ranking::open_or_create(&db, QUESTIONS_BOARD, questions_board_config()).map_err(e)?;
        let q = Question {
            id: HOT,
            text: "the hot question".into(),
            votes: 0,
            pending: Default::default(),
        };
        db.insert(&q).map_err(e)?;
    }
    let worker = game.worker().spawn().map_err(e)?;
    let started = Instant::now();
    let deadline = started + load.limit;
    let results: Vec<Result<Latencies, String>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..load.clients)
            .map(|c| {
                let (db, game) = (&db, &game);
                s.spawn(move || {
                    let (mut votes, mut scores) = (Vec::new(), Vec::new());
                    for i in 0..load.requests {
                        if Instant::now() >= deadline {
                            break;
                        }
                        let t = Instant::now();
                        match load.op(c, i) {
                            None => {
                                db.save_delta::<Question, _>(&HOT, "votes", &1i64)
                                    .map_err(e)?;
                                votes.push(t.elapsed());
                            }
                            Some((player, score)) => {
                                game.enqueue(&player, score).map_err(e)?;
                                scores.push(t.elapsed());
                            }
                        }
                    }
                    Ok((votes, scores))
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("a client panicked".into())))
            .collect()
    });
    let mut side = Side {
        elapsed: started.elapsed(),
        ..Side::default()
    };
    for r in results {
        let (votes, scores) = r?;
        side.votes.extend(votes);
        side.scores.extend(scores);
    }
    side.votes_sent = side.votes.len() as u64;
    game.flush().map_err(e)?;
    worker.stop().map_err(e)?;
    side.exact = game.queued().map_err(e)? == 0;
    if load.votes {
        let stored = db.load::<Question>(&HOT).map_err(e)?.map(|q| q.votes);
        side.exact &= stored == Some(side.votes_sent as i64);
    }
    Ok(side)
}

/// The same operations through the async API (`open_async`, the calls the
/// service's routes make) from one tokio task per client: what the service
/// costs over it is HTTP alone.
pub fn run_async(url: &str, load: Load) -> Result<Side, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let e = |e: autoshard::Error| e.to_string();
        let db = autoshard::open_async(url).await.map_err(e)?;
        let game = autoshard::AsyncRanking::create(&db, GAME_BOARD, game_board_config())
            .await
            .map_err(e)?;
        if load.votes {
            autoshard::AsyncRanking::create(&db, QUESTIONS_BOARD, questions_board_config())
                .await
                .map_err(e)?;
            let q = Question {
                id: HOT,
                text: "the hot question".into(),
                votes: 0,
                pending: Default::default(),
            };
            db.insert(&q).await.map_err(e)?;
        }
        let worker = game.spawn_worker(game.worker()).await.map_err(e)?;
        let started = Instant::now();
        let deadline = started + load.limit;
        let mut tasks = tokio::task::JoinSet::new();
        for c in 0..load.clients {
            let (db, game) = (db.clone(), game.clone());
            tasks.spawn(async move {
                let (mut votes, mut scores) = (Vec::new(), Vec::new());
                for i in 0..load.requests {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let t = Instant::now();
                    match load.op(c, i) {
                        None => {
                            db.save_delta::<Question, _>(&HOT, "votes", &1i64)
                                .await
                                .map_err(e)?;
                            votes.push(t.elapsed());
                        }
                        Some((player, score)) => {
                            game.enqueue(&player, score).await.map_err(e)?;
                            scores.push(t.elapsed());
                        }
                    }
                }
                Ok::<_, String>((votes, scores))
            });
        }
        let mut side = Side::default();
        while let Some(done) = tasks.join_next().await {
            let (votes, scores) = done.map_err(|e| e.to_string())??;
            side.votes.extend(votes);
            side.scores.extend(scores);
        }
        side.elapsed = started.elapsed();
        side.votes_sent = side.votes.len() as u64;
        game.flush().await.map_err(e)?;
        worker.stop().await.map_err(e)?;
        side.exact = game.queued().await.map_err(e)? == 0;
        if load.votes {
            let stored = db.load::<Question>(&HOT).await.map_err(e)?.map(|q| q.votes);
            side.exact &= stored == Some(side.votes_sent as i64);
        }
        Ok(side)
    })
}

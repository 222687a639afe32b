//! The voting service (`examples/service`, issue 19 item 5) over real
//! HTTP: each test starts it on a loopback port of its own, on a real
//! multi-threaded tokio runtime, and talks to it with hyper's client; the
//! store is real (a SQLite file, a PostgreSQL schema, the Redis Cluster),
//! and what the service acknowledged is checked by reading the store
//! directly after its graceful shutdown.
//!
//! In the example itself (`cargo test --example service`), not a test
//! binary of its own: the service's code is compiled once, for both.

use super::{app, client, model};
use autoshard::ranking::Ranking;
use autoshard::Store;
use client::{BoxError, Client};
use model::*;
use std::collections::BTreeMap;
use std::net::SocketAddr;

type TestResult = Result<(), BoxError>;

/// Starts the service on `url` at a free loopback port.
async fn start(url: &str) -> Result<app::Running, BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    app::start(url.to_owned(), listener).await
}

/// Runs `f` off the runtime: the sync API's PostgreSQL client must not
/// run (or be dropped) on a runtime worker.
async fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("the blocking check panicked")
}

/// A fresh SQLite file; the directory lives as long as the guard.
fn sqlite() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite:{}", dir.path().join("service.db").display());
    (dir, url)
}

/// A fresh PostgreSQL schema, dropped when the guard drops.
struct PgSchema {
    url: String,
    base: String,
    schema: String,
}

impl PgSchema {
    fn new() -> PgSchema {
        let base = autoshard_test_servers::postgres_url();
        let schema = format!("svc_{}_{}", std::process::id(), rand::random::<u32>());
        let glue = if base.contains('?') { '&' } else { '?' };
        PgSchema {
            url: format!("{base}{glue}schema={schema}"),
            base,
            schema,
        }
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let (base, schema) = (self.base.clone(), self.schema.clone());
        // Its own thread: the blocking client must not run on a runtime.
        let _ = std::thread::spawn(move || {
            if let Ok(mut c) = postgres::Client::connect(&base, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        })
        .join();
    }
}

/// Asks a question; its id.
async fn ask(c: &mut Client, text: &str) -> Result<u64, BoxError> {
    let body = serde_json::json!({ "text": text }).to_string();
    let r = c.post("/questions", Some(&body)).await?;
    assert_eq!(r.status, 201, "{}", r.body);
    Ok(r.json::<QuestionView>()?.id)
}

/// `status` with a JSON error body that says `status` too.
fn assert_error(r: &client::Reply, status: u16) {
    assert_eq!(r.status, status, "{}", r.body);
    let e: ErrorBody = r.json().expect("a JSON error body");
    assert_eq!(e.status, status);
    assert!(!e.error.is_empty());
}

/// The routes, what they answer, and every refusal as a status with a JSON
/// body: a missing question or player 404, bad input 400.
async fn routes_suite(url: &str) -> TestResult {
    let running = start(url).await?;
    assert_eq!(running.scheme, url.split(':').next().unwrap_or_default());
    let mut c = Client::connect(running.addr).await?;
    let a = ask(&mut c, "Why shard a counter?").await?;
    let b = ask(&mut c, "What is a count tree?").await?;
    for _ in 0..3 {
        assert_eq!(
            c.post(&format!("/questions/{b}/vote"), None).await?.status,
            200
        );
    }
    assert_eq!(
        c.post(&format!("/questions/{a}/vote"), None).await?.status,
        200
    );
    let top: Vec<QuestionView> = c.get("/questions/top?n=5").await?.json()?;
    let got: Vec<_> = top.iter().map(|q| (q.id, q.votes, q.rank)).collect();
    assert_eq!(got, [(b, 3, Some(1)), (a, 1, Some(2))]);
    let one: QuestionView = c.get(&format!("/questions/{a}")).await?.json()?;
    assert_eq!(
        (one.text.as_str(), one.votes, one.rank),
        ("Why shard a counter?", 1, Some(2))
    );

    for (player, score) in [
        ("ann", 40),
        ("bo", 70),
        ("cy", 55),
        ("ann", 90),
        ("ann", 10),
    ] {
        let body = serde_json::json!({ "player": player, "score": score }).to_string();
        assert_eq!(c.post("/game/scores", Some(&body)).await?.status, 202);
    }
    // The queue's worker applies the scores (each player's in order, the
    // players' in no promised order); wait until all are (bounded).
    let want = [("ann", 90, 1), ("bo", 70, 2), ("cy", 55, 3)];
    let mut top = Vec::new();
    for _ in 0..500 {
        top = c.get("/game/top?n=5").await?.json::<Vec<PlayerView>>()?;
        if top.iter().map(|p| (&*p.player, p.score, p.rank)).eq(want) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        top.iter().map(|p| (&*p.player, p.score, p.rank)).eq(want),
        "{top:?}"
    );
    let cy: PlayerView = c.get("/game/players/cy").await?.json()?;
    assert_eq!((cy.score, cy.rank), (55, 3));
    let near: Vec<PlayerView> = c.get("/game/players/bo/around?k=1").await?.json()?;
    assert_eq!(near.iter().map(|p| p.rank).collect::<Vec<_>>(), [1, 2, 3]);

    // The store's metrics snapshot: both boards, and this process's
    // enqueued scores (counters are per process, and the tests share one).
    // Not `saves`: the async API's save_delta does not count there yet.
    let metrics: serde_json::Value = c.get("/metrics").await?.json()?;
    let boards: Vec<&str> = metrics["boards"]
        .as_array()
        .ok_or("no boards in /metrics")?
        .iter()
        .filter_map(|b| b["board"].as_str())
        .collect();
    assert!(
        boards.contains(&GAME_BOARD) && boards.contains(&QUESTIONS_BOARD),
        "{metrics}"
    );
    assert!(
        metrics["counters"]["enqueued"].as_u64() >= Some(5),
        "{metrics}"
    );

    // Missing things: 404 with a JSON body.
    assert_error(&c.post("/questions/999/vote", None).await?, 404);
    assert_error(&c.get("/questions/999").await?, 404);
    assert_error(&c.get("/game/players/nobody").await?, 404);
    assert_error(&c.get("/game/players/nobody/around").await?, 404);
    assert_error(&c.get("/no/such/route").await?, 404);
    // Bad input: 400 with a JSON body, and nothing stored.
    assert_error(&c.post("/questions/abc/vote", None).await?, 400);
    assert_error(&c.post("/questions/-1/vote", None).await?, 400);
    assert_error(
        &c.post("/questions", Some("{\"text\": \"  \"}")).await?,
        400,
    );
    assert_error(&c.post("/questions", Some("not json")).await?, 400);
    assert_error(&c.post("/questions", None).await?, 400);
    let long = serde_json::json!({ "text": "x".repeat(MAX_TEXT + 1) }).to_string();
    assert_error(&c.post("/questions", Some(&long)).await?, 400);
    assert_error(
        &c.post("/game/scores", Some("{\"player\": \"ann\", \"score\": -1}"))
            .await?,
        400,
    );
    let too_high = format!("{{\"player\": \"ann\", \"score\": {MAX_SCORE}}}");
    assert_error(&c.post("/game/scores", Some(&too_high)).await?, 400);
    assert_error(
        &c.post("/game/scores", Some("{\"player\": \"\", \"score\": 1}"))
            .await?,
        400,
    );
    assert_error(
        &c.post("/game/scores", Some("{\"player\": \"ann\"}"))
            .await?,
        400,
    );
    assert_error(&c.get("/questions/top?n=101").await?, 400);
    assert_error(&c.get("/game/top?n=many").await?, 400);

    drop(c);
    let report = running.shutdown().await?;
    assert!(report.exact(), "{report:?}");
    assert_eq!(
        (
            report.votes_acked,
            report.votes_counted,
            report.scores_acked
        ),
        (4, 4, 5)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_answer_and_refuse_with_json_statuses_on_sqlite() -> TestResult {
    let (_dir, url) = sqlite();
    routes_suite(&url).await
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_answer_and_refuse_with_json_statuses_on_postgres() -> TestResult {
    let pg = off_runtime(PgSchema::new).await;
    routes_suite(&pg.url).await
}

/// Clients voting at once, and submitting scores.
const CLIENTS: usize = 8;
/// Requests each client sends.
const REQUESTS: usize = 60;

/// What the clients saw acknowledged: votes per question, each player's
/// best acknowledged score.
#[derive(Default)]
struct Tally {
    votes: BTreeMap<u64, i64>,
    best: BTreeMap<String, i64>,
}

/// `CLIENTS` clients, each on its own connection, at once: three of four
/// requests vote (mostly on the hot question), the fourth submits a score.
/// Every request must be acknowledged.
async fn hammer(addr: SocketAddr, questions: &[u64], votes: bool) -> Result<Tally, BoxError> {
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..CLIENTS {
        let questions = questions.to_vec();
        tasks.spawn(async move {
            let mut c = Client::connect(addr).await?;
            let mut tally = Tally::default();
            let player = format!("player-{client}");
            for i in 0..REQUESTS {
                if votes && i % 4 != 3 {
                    // The hot question gets two votes of three.
                    let q = if i % 3 == 2 {
                        questions[1 + (client + i) % (questions.len() - 1)]
                    } else {
                        questions[0]
                    };
                    let r = c.post(&format!("/questions/{q}/vote"), None).await?;
                    assert_eq!(r.status, 200, "vote: {}", r.body);
                    *tally.votes.entry(q).or_default() += 1;
                } else {
                    let score = ((client * 7919 + i * 104_729) % 100_000) as i64;
                    let body = serde_json::json!({ "player": player, "score": score }).to_string();
                    let r = c.post("/game/scores", Some(&body)).await?;
                    assert_eq!(r.status, 202, "score: {}", r.body);
                    let best = tally.best.entry(player.clone()).or_insert(score);
                    *best = (*best).max(score);
                }
            }
            Ok::<_, BoxError>(tally)
        });
    }
    let mut total = Tally::default();
    while let Some(done) = tasks.join_next().await {
        let t = done??;
        for (q, n) in t.votes {
            *total.votes.entry(q).or_default() += n;
        }
        total.best.extend(t.best);
    }
    Ok(total)
}

/// Every vote and score the clients saw acknowledged, counted exactly
/// once: by the service's own check at shutdown (after the flush), and by
/// loading every question and reading the boards from a new handle.
async fn exactly_once_suite(url: &str) -> TestResult {
    let running = start(url).await?;
    let mut c = Client::connect(running.addr).await?;
    let mut questions = Vec::new();
    for text in ["the hot one", "cold 1", "cold 2", "cold 3"] {
        questions.push(ask(&mut c, text).await?);
    }
    let tally = hammer(running.addr, &questions, true).await?;
    drop(c);
    let report = running.shutdown().await?;
    let acked: i64 = tally.votes.values().sum();
    assert!(report.exact(), "{report:?}");
    assert_eq!(report.votes_acked as i64, acked);
    assert_eq!(
        report.scores_acked as usize,
        CLIENTS * REQUESTS - acked as usize
    );

    let url = url.to_owned();
    off_runtime(move || -> TestResult {
        let db = autoshard::open(&url)?;
        let board = Ranking::open(&db, QUESTIONS_BOARD)?;
        for q in questions {
            let loaded = db.load::<Question>(&q)?.ok_or("a question is gone")?.votes;
            let want = tally.votes.get(&q).copied().unwrap_or(0);
            assert_eq!(loaded, want, "question {q}");
            assert_eq!(
                board.score(&q.to_string())?,
                Some(want),
                "question {q} on the board"
            );
        }
        let game = Ranking::open(&db, GAME_BOARD)?;
        assert_eq!(game.queued()?, 0);
        for (player, best) in &tally.best {
            assert_eq!(game.score(player)?, Some(*best), "{player}");
        }
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vote_and_score_counted_exactly_on_sqlite() -> TestResult {
    let (_dir, url) = sqlite();
    exactly_once_suite(&url).await
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vote_and_score_counted_exactly_on_postgres() -> TestResult {
    let pg = off_runtime(PgSchema::new).await;
    exactly_once_suite(&pg.url).await
}

/// The same on Redis Cluster, where a vote's board write follows the
/// vote's pieces (`stores/redis/ranked.rs`).
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vote_and_score_counted_exactly_on_redis_cluster() -> TestResult {
    let base = off_runtime(autoshard_test_servers::redis_cluster_url).await;
    let glue = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{glue}prefix=svc{}", rand::random::<u32>());
    exactly_once_suite(&url).await
}

/// The control of the shutdown check: a vote written behind the service's
/// back (another handle on the same file) is one the service never
/// acknowledged, and its check says the totals do not add up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_check_fails_on_a_vote_the_service_did_not_acknowledge() -> TestResult {
    let (_dir, url) = sqlite();
    let running = start(&url).await?;
    let mut c = Client::connect(running.addr).await?;
    let q = ask(&mut c, "counted?").await?;
    for _ in 0..5 {
        assert_eq!(
            c.post(&format!("/questions/{q}/vote"), None).await?.status,
            200
        );
    }
    let behind = url.clone();
    off_runtime(move || autoshard::open(&behind)?.save_delta::<Question, _>(&q, "votes", &1i64))
        .await?;
    drop(c);
    let report = running.shutdown().await?;
    assert_eq!((report.votes_acked, report.votes_counted), (5, 6));
    assert!(
        !report.exact(),
        "the check missed a vote it never acknowledged"
    );
    Ok(())
}

/// What `/` serves: the page, its vote button and the script that reads
/// the top questions and posts the votes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_serves_the_top_questions_script_and_vote_button() -> TestResult {
    let (_dir, url) = sqlite();
    let running = start(&url).await?;
    let mut c = Client::connect(running.addr).await?;
    let page = c.get("/").await?;
    assert_eq!(page.status, 200);
    for needle in [
        "<script>",
        "fetch(\"/questions/top",
        "button.className = \"vote\"",
        "\"/vote\", { method: \"POST\" }",
        "setInterval(refresh",
        "<ol id=\"top\">",
    ] {
        assert!(page.body.contains(needle), "the page lacks {needle:?}");
    }
    drop(c);
    running.shutdown().await?;
    Ok(())
}

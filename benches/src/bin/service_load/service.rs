//! The HTTP side: the service as its own process (the release build of
//! `examples/service`), N hyper clients on keep-alive connections.

use crate::client::Client;
use crate::model::{ProbeView, Question, QuestionView, ShutdownReport};
use crate::{Latencies, Load, Side};
use autoshard::Store;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

fn binary() -> Result<String, String> {
    let path = std::env::var("AUTOSHARD_SERVICE_BIN").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../target/release/examples/service"
        )
        .into()
    });
    if std::path::Path::new(&path).exists() {
        Ok(path)
    } else {
        Err(format!(
            "no service binary at {path}: run `cargo build --release --example service` first"
        ))
    }
}

/// Runs the load over HTTP; the side's figures and the service's probe.
pub fn run(url: &str, load: Load) -> Result<(Side, ProbeView), String> {
    let mut child = Command::new(binary()?)
        .args(["--store", url, "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the service: {e}"))?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let addr: Result<SocketAddr, String> = first
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.split(' ').next())
        .ok_or(format!("the service said {first:?}"))
        .and_then(|a| a.parse().map_err(|e| format!("{a}: {e}")));
    let addr = match addr {
        Ok(addr) => addr,
        Err(e) => {
            stop(&mut child);
            return Err(e);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let driven = rt.block_on(drive(addr, load));
    drop(rt);
    stop(&mut child);
    let report = lines
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("shutdown ").map(str::to_owned))
        .ok_or("the service printed no shutdown report")
        .and_then(|json| {
            serde_json::from_str::<ShutdownReport>(&json).map_err(|_| "a bad shutdown report")
        });
    let status = child.wait().map_err(|e| e.to_string())?;
    let (mut side, probe, hot) = driven?;
    let report = report?;
    let scores = side.scores.len() as u64;
    side.exact = report.exact()
        && status.success()
        && report.votes_acked == side.votes_sent
        && report.scores_acked == scores;
    if let Some(hot) = hot {
        // The votes as stored, read back through a handle of our own.
        let db = autoshard::open(url).map_err(|e| e.to_string())?;
        let stored = db
            .load::<Question>(&hot)
            .map_err(|e| e.to_string())?
            .map(|q| q.votes);
        side.exact &= stored == Some(side.votes_sent as i64);
    }
    if !side.exact {
        side.note = format!("service: {report:?}, exit {status}");
    }
    Ok((side, probe))
}

/// SIGTERM, as a service manager stops it: the graceful path.
fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}

type Driven = (Side, ProbeView, Option<u64>);

async fn drive(addr: SocketAddr, load: Load) -> Result<Driven, String> {
    let e = |e: crate::client::BoxError| e.to_string();
    let mut admin = Client::connect(addr).await.map_err(e)?;
    let hot = if load.votes {
        let r = admin
            .post("/questions", Some("{\"text\": \"the hot question\"}"))
            .await
            .map_err(e)?;
        Some(r.json::<QuestionView>().map_err(e)?.id)
    } else {
        None
    };
    admin.post("/probe/reset", None).await.map_err(e)?;
    let started = Instant::now();
    let deadline = started + load.limit;
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..load.clients {
        tasks.spawn(client(addr, load, c, hot, deadline));
    }
    let mut side = Side::default();
    while let Some(done) = tasks.join_next().await {
        let (votes, scores) = done.map_err(|e| e.to_string())??;
        side.votes.extend(votes);
        side.scores.extend(scores);
    }
    side.elapsed = started.elapsed();
    side.votes_sent = side.votes.len() as u64;
    let probe = admin
        .get("/probe")
        .await
        .map_err(e)?
        .json::<ProbeView>()
        .map_err(e)?;
    Ok((side, probe, hot))
}

async fn client(
    addr: SocketAddr,
    load: Load,
    c: usize,
    hot: Option<u64>,
    deadline: Instant,
) -> Result<Latencies, String> {
    let mut http = Client::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut votes, mut scores) = (Vec::new(), Vec::new());
    let vote_path = format!("/questions/{}/vote", hot.unwrap_or(0));
    for i in 0..load.requests {
        if Instant::now() >= deadline {
            break;
        }
        let t = Instant::now();
        match load.op(c, i) {
            None => {
                let r = http
                    .post(&vote_path, None)
                    .await
                    .map_err(|e| e.to_string())?;
                if r.status != 200 {
                    return Err(format!("vote: {} {}", r.status, r.body));
                }
                votes.push(t.elapsed());
            }
            Some((player, score)) => {
                let body = format!("{{\"player\": \"{player}\", \"score\": {score}}}");
                let r = http
                    .post("/game/scores", Some(&body))
                    .await
                    .map_err(|e| e.to_string())?;
                if r.status != 202 {
                    return Err(format!("score: {} {}", r.status, r.body));
                }
                scores.push(t.elapsed());
            }
        }
    }
    Ok((votes, scores))
}

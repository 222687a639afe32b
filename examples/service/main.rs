//! A real voting service on autoshard (issue 19): the paper's Moderator
//! (questions whose votes are sharded, the top questions from an entity
//! board) and a game leaderboard (a score queue, my rank, around me, top),
//! JSON over HTTP with axum, plus a page at `/` that shows the top
//! questions with a vote button.
//!
//! ```text
//! cargo run --release --example service                       # SQLite file ./autoshard-service.db
//! cargo run --release --example service -- --store postgres://postgres@127.0.0.1/test
//! AUTOSHARD_SERVICE_STORE=redis-cluster://127.0.0.1:7000 cargo run --release --example service
//! ```
//!
//! `--addr` (or `AUTOSHARD_SERVICE_ADDR`) picks the address, default
//! 127.0.0.1:3000 (port 0: any free one). Ctrl-C or SIGTERM stops it
//! gracefully: the server finishes the requests in flight, the game queue
//! is flushed, the worker and the compactor stop, and the service prints
//! its checks (every acknowledged vote counted once) as one JSON line.
//! Routes: docs/guide/service.md.

mod app;
mod backend;
#[cfg(test)]
mod client;
mod model;
mod probe;
mod routes;
#[cfg(test)]
mod tests;

use std::process::ExitCode;

const DEFAULT_STORE: &str = "sqlite:autoshard-service.db";
const DEFAULT_ADDR: &str = "127.0.0.1:3000";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("service: some acknowledged vote or score was not counted exactly");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("service: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<bool, Box<dyn std::error::Error + Send + Sync>> {
    let (store, addr) = options()?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let running = app::start(store.clone(), listener).await?;
    // One line a script can wait for (the load generator reads the port).
    println!(
        "listening on http://{} (store {})",
        running.addr, running.scheme
    );
    stop_signal().await?;
    eprintln!("service: stopping (flushing the game queue, stopping the compactor)");
    let report = running.shutdown().await?;
    println!("shutdown {}", serde_json::to_string(&report)?);
    Ok(report.exact())
}

/// `--store URL` and `--addr HOST:PORT`, else their environment
/// variables, else the defaults.
fn options() -> Result<(String, String), String> {
    let mut store = std::env::var("AUTOSHARD_SERVICE_STORE").unwrap_or(DEFAULT_STORE.into());
    let mut addr = std::env::var("AUTOSHARD_SERVICE_ADDR").unwrap_or(DEFAULT_ADDR.into());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let slot = match arg.as_str() {
            "--store" => &mut store,
            "--addr" => &mut addr,
            _ => {
                return Err(format!(
                    "unknown argument {arg:?}; usage: service [--store URL] [--addr HOST:PORT]"
                ))
            }
        };
        *slot = args.next().ok_or(format!("{arg} needs a value"))?;
    }
    Ok((store, addr))
}

/// Ctrl-C or SIGTERM.
async fn stop_signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}

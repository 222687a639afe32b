//! The command line: what a run may change (voters, duration or vote
//! count, the hot question's share, the database file, `synchronous`), so
//! `main.rs` reads as the scenario and not as flag parsing.

use super::Result;
use autoshard::Synchronous;
use std::path::PathBuf;

pub(super) struct Options {
    pub(super) voters: usize,
    pub(super) seconds: f64,
    pub(super) votes: Option<u64>,
    pub(super) hot: f64,
    pub(super) db: Option<PathBuf>,
    pub(super) synchronous: Synchronous,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            voters: 8,
            seconds: 10.0,
            votes: None,
            hot: 0.5,
            db: None,
            synchronous: Synchronous::Full,
        }
    }
}

const USAGE: &str = "\
usage: cargo run --release --example voting -- [options]

  --voters N      voter threads, each with its own Sqlite handle (default 8)
  --seconds S     how long to vote (default 10)
  --votes N       stop after N acknowledged votes instead
  --hot P         share of votes that go to question 1, 0 to 1 (default 0.5)
  --db PATH       database file to use and keep (default: a temporary file)
  --sync MODE     PRAGMA synchronous: full (default), normal or off";

pub(super) fn parse_args() -> Result<Options> {
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n\n{USAGE}"))?;
        match flag.as_str() {
            "--voters" => options.voters = value.parse::<usize>()?.max(1),
            "--seconds" => options.seconds = value.parse()?,
            "--votes" => options.votes = Some(value.parse()?),
            "--hot" => options.hot = value.parse::<f64>()?.clamp(0.0, 1.0),
            "--db" => options.db = Some(value.into()),
            "--sync" => {
                options.synchronous = match value.as_str() {
                    "full" => Synchronous::Full,
                    "normal" => Synchronous::Normal,
                    "off" => Synchronous::Off,
                    _ => {
                        return Err(
                            format!("--sync expects full, normal or off, not {value:?}").into()
                        )
                    }
                }
            }
            _ => return Err(format!("unknown option {flag}\n\n{USAGE}").into()),
        }
    }
    Ok(options)
}

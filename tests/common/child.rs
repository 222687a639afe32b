//! The child side of the crash tests: the test binary re-executed to run one
//! `#[ignore]`d test, which talks to the parent in lines on stdout ("ready",
//! then whatever it acknowledges) until the parent SIGKILLs it.
#![allow(dead_code)] // not every crash test uses every helper

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// `Child::kill` sends SIGKILL on Unix.
const SIGKILL: i32 = 9;

/// Overrides every crash test's kill count, for a soak
/// (`AUTOSHARD_KILLS=1000`) or a quick local run (`AUTOSHARD_KILLS=5`).
pub const ENV_KILLS: &str = "AUTOSHARD_KILLS";

/// How many kills a crash test makes: [`ENV_KILLS`] if set, else its
/// default (100 where a round costs well under a second, so a CI run kills
/// every cheap write path at least 100 times).
pub fn kills(default: u64) -> u64 {
    match std::env::var(ENV_KILLS) {
        Ok(n) => n
            .parse()
            .unwrap_or_else(|_| panic!("{ENV_KILLS}={n:?} is not a number")),
        Err(_) => default,
    }
}

/// A running child; killed and reaped on drop, so a parent that panics
/// leaves nothing behind.
pub struct Child {
    process: std::process::Child,
    ready: mpsc::Receiver<()>,
    output: Option<thread::JoinHandle<Vec<String>>>,
}

/// What a child printed and how it ended.
pub struct Run {
    pub lines: Vec<String>,
    pub status: ExitStatus,
}

impl Run {
    /// Whether the parent's SIGKILL is what ended the child.
    pub fn killed(&self) -> bool {
        self.status.signal() == Some(SIGKILL)
    }

    /// The numbers the child acknowledged, in order: its `ack N` lines.
    pub fn acks(&self) -> impl Iterator<Item = u64> + '_ {
        self.lines.iter().filter_map(|l| {
            l.strip_prefix("ack ")
                .map(|op| op.parse().unwrap_or_else(|_| panic!("bad line {l:?}")))
        })
    }

    /// Whether the child printed `word` on a line of its own.
    pub fn said(&self, word: &str) -> bool {
        self.lines.iter().any(|l| l == word)
    }
}

impl Child {
    /// Starts `command` with stdin closed and stderr shared with the parent.
    /// Stdout is read while the child runs: a full pipe would stall it.
    pub fn spawn(command: &mut Command) -> Child {
        let mut process = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child");
        let stdout = process.stdout.take().expect("piped stdout");
        let (ready_tx, ready) = mpsc::channel();
        let output = thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let line = line.expect("child stdout");
                if line == "ready" {
                    let _ = ready_tx.send(());
                }
                lines.push(line);
            }
            lines
        });
        Child {
            process,
            ready,
            output: Some(output),
        }
    }

    /// Blocks until the child printed "ready"; panics if it exits or hangs
    /// first (its stderr is in the test output).
    pub fn wait_ready(&self) {
        if let Err(e) = self.ready.recv_timeout(Duration::from_secs(60)) {
            panic!("the child exited or hung before it was ready ({e:?}); its stderr is above");
        }
    }

    /// SIGKILLs the child `delay` after it is ready, then reaps it.
    pub fn kill_after(mut self, delay: Duration) -> Run {
        self.wait_ready();
        thread::sleep(delay);
        // Fails only if the child is already reaped, which `wait` reports.
        let _ = self.process.kill();
        self.finish()
    }

    /// SIGKILLs the child at the first moment `now(pid)` holds, polled from
    /// `delay` after the child is ready, or after `within` more whatever it
    /// says; then reaps it. Also returns whether `now` held: a test uses it
    /// to kill a child in the middle of something (a transaction) rather
    /// than at a random moment.
    pub fn kill_when(
        mut self,
        delay: Duration,
        within: Duration,
        mut now: impl FnMut(u32) -> bool,
    ) -> (Run, bool) {
        self.wait_ready();
        thread::sleep(delay);
        let pid = self.process.id();
        let deadline = Instant::now() + within;
        let held = loop {
            if now(pid) {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            thread::sleep(Duration::from_micros(50));
        };
        let _ = self.process.kill();
        (self.finish(), held)
    }

    /// Waits for the child to end by itself.
    pub fn finish(mut self) -> Run {
        let status = self.process.wait().expect("reap the child");
        let lines = self
            .output
            .take()
            .expect("finished once")
            .join()
            .expect("stdout reader");
        Run { lines, status }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The name libtest knows a test by, for `--exact`: `module` is the
/// caller's `module_path!()`, less its first segment (the test binary's own
/// name, which libtest leaves out). A child named this way is found however
/// deep its module sits in a grouped test binary.
pub fn test_path(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{test}"),
        None => test.to_string(),
    }
}

/// In a child: a panic aborts the process (the parent sees a signal, not
/// an exit code a test harness chose), after the usual report.
pub fn abort_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
}

/// In a child: one line to the parent, flushed at once.
pub fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("parent closed the pipe");
    out.flush().expect("parent closed the pipe");
}

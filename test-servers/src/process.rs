//! Processes by identity: a pid alone may be reused, so a process is its
//! pid and its start time (`/proc/<pid>/stat`, field 22), and a server is
//! only signalled after its command line says it is ours.

use std::io;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A process: its pid and start time (clock ticks after boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Proc {
    pub pid: u32,
    pub start: u64,
}

impl Proc {
    pub fn me() -> Proc {
        Proc::of(std::process::id()).expect("/proc/self/stat is readable")
    }

    /// The process `pid` if it exists and has not exited (a zombie has).
    pub fn of(pid: u32) -> Option<Proc> {
        let (state, fields) = stat(pid)?;
        if state == "Z" || state == "X" {
            return None;
        }
        // After "pid (comm) ", the fields count from 3 (state): start time
        // is the 22nd field overall.
        let start = fields.get(22 - 3)?.parse().ok()?;
        Some(Proc { pid, start })
    }

    pub fn parent(self) -> Option<Proc> {
        let (_, fields) = stat(self.pid)?;
        let ppid: u32 = fields.get(4 - 3)?.parse().ok()?;
        if ppid <= 1 {
            return None;
        }
        Proc::of(ppid)
    }

    pub fn is_alive(self) -> bool {
        Proc::of(self.pid) == Some(self)
    }

    /// The executable's short name (`/proc/<pid>/comm`).
    pub fn comm(self) -> String {
        std::fs::read_to_string(format!("/proc/{}/comm", self.pid))
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default()
    }

    /// `pid-start`, as the run directory and the watchdog spell it.
    pub fn key(self) -> String {
        format!("{}-{}", self.pid, self.start)
    }
}

/// The state (`R`, `S`, `Z`, ...) and the fields from the state on; the
/// command name in parentheses may hold spaces, so split after its `)`.
fn stat(pid: u32) -> Option<(String, Vec<String>)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
    Some((fields.first()?.clone(), fields))
}

/// The command line of `pid`, arguments joined by spaces.
pub(crate) fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Sends `signal` to `pid` if its command line contains `expect`.
pub(crate) fn signal_if(pid: u32, expect: &str, signal: i32) -> bool {
    if !cmdline(pid).contains(expect) {
        return false;
    }
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid as libc::pid_t, signal) == 0 }
}

/// Whether we run as root (PostgreSQL's `initdb` refuses to).
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `n` distinct ports free on 127.0.0.1 now, from the OS: all bound at
/// once so none repeats, then released for the servers to bind.
pub(crate) fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect()
}

/// Runs `command` to completion, its output captured, killed after
/// `timeout`: a tool that hangs fails the start instead of the run.
pub(crate) fn run(command: &mut Command, timeout: Duration) -> Result<String, String> {
    let shown = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{shown} did not finish within {timeout:?}"));
            }
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{shown}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{shown} failed ({}): {text}", out.status))
    }
}

/// Polls `ready` every 100 ms until it holds or `timeout` passes.
pub(crate) fn wait_until(
    what: &str,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while !ready() {
        if Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

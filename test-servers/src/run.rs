//! The run: a directory under the temporary directory that holds what one
//! `cargo test` started, the pids of the test processes that use it, and
//! the watchdog that stops it all.
//!
//! `$TMPDIR/autoshard-test-servers/run-<owner pid>-<owner start>/`
//!   `users/<pid>-<start>`  one empty file per test process using a server
//!   `watchdog.sh`, `watchdog.pid`
//!   `redis/`, `pg/`        the servers' data, pid files and logs
//!   `redis-<name>/`        a cluster of its own (`private_redis_cluster`)
//!
//! The owner is the nearest `cargo` ancestor (so the test binaries of one
//! `cargo test`, which run one after another, share the servers), or the
//! test process itself when no `cargo` started it. A process whose
//! ancestor already owns a run joins that one: a crash test's child
//! reaches its parent's servers.

use crate::process::Proc;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Stops the servers by the pids in their own pid files once neither the
/// owner nor any registered user lives. `sh`, so that it needs nothing
/// built and survives whatever kills the test process; started in the
/// background of a non-interactive shell, it ignores the terminal's
/// SIGINT and outlives the Ctrl-C that ends the run.
const WATCHDOG: &str = r#"
dir=$1; owner=$2
echo $$ > "$dir/watchdog.pid"
# alive PID-START: that process exists, is no zombie, started then.
alive() {
  pid=${1%-*}; start=${1##*-}
  set -- $(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null)
  [ -n "$1" ] && [ "$1" != Z ] && [ "$1" != X ] && [ "${20}" = "$start" ]
}
busy() {
  alive "$owner" && return 0
  for user in "$dir"/users/*; do
    [ -e "$user" ] && alive "${user##*/}" && return 0
  done
  return 1
}
while busy; do sleep 1; done
# No new user can join a run whose owner is gone (see run.rs), so from
# here on nothing starts a server in this directory.
for pidfile in "$dir"/redis*/*/redis.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  case $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) in
    redis-server*) kill -9 "$pid" ;;
  esac
done
if [ -f "$dir/pg/data/postmaster.pid" ]; then
  pid=$(head -n1 "$dir/pg/data/postmaster.pid")
  case $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) in
    *postgres*"$dir"*)
      # Fast shutdown, then immediate, then SIGKILL, 10 s each at most.
      for sig in INT QUIT KILL; do
        kill -s $sig "$pid" 2>/dev/null || break
        n=0
        while kill -0 "$pid" 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
        kill -0 "$pid" 2>/dev/null || break
      done ;;
  esac
fi
rm -rf "$dir" "$dir.lock"
"#;

/// The run this process belongs to, locked while it is held: a server is
/// started by one process at a time, and the others find its URL after.
pub(crate) struct Run {
    pub dir: PathBuf,
    _lock: File,
}

impl Run {
    /// Finds or creates this process's run, registers this process as a
    /// user and makes sure a watchdog guards the run.
    pub fn join() -> Result<Run, String> {
        let base = std::env::temp_dir().join("autoshard-test-servers");
        fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
        let me = Proc::me();
        let owner = ancestors(me)
            .find(|p| base.join(format!("run-{}", p.key())).is_dir())
            .or_else(|| {
                ancestors(me)
                    .skip(1)
                    .find(|p| p.comm().starts_with("cargo"))
            })
            .unwrap_or(me);
        let dir = base.join(format!("run-{}", owner.key()));
        let lock = File::create(dir.with_extension("lock"))
            .map_err(|e| format!("cannot create the lock beside {}: {e}", dir.display()))?;
        lock.lock()
            .map_err(|e| format!("cannot lock {}.lock: {e}", dir.display()))?;
        fs::create_dir_all(dir.join("users"))
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        // Registered before any server starts: the watchdog then waits for
        // this process even if the owner is already gone.
        File::create(dir.join("users").join(me.key()))
            .map_err(|e| format!("cannot register in {}: {e}", dir.display()))?;
        let watchdog_alive = fs::read_to_string(dir.join("watchdog.pid"))
            .ok()
            .and_then(|pid| Proc::of(pid.trim().parse().ok()?))
            .is_some_and(|p| crate::process::cmdline(p.pid).contains("watchdog.sh"));
        if !watchdog_alive {
            spawn_watchdog(&dir, owner)?;
        }
        Ok(Run { dir, _lock: lock })
    }
}

/// This process, its parent, its grandparent, ... (up to, not including,
/// pid 1).
fn ancestors(me: Proc) -> impl Iterator<Item = Proc> {
    std::iter::successors(Some(me), |p| p.parent())
}

fn spawn_watchdog(dir: &Path, owner: Proc) -> Result<(), String> {
    let script = dir.join("watchdog.sh");
    // A dead watchdog's pid file would end the wait below at once.
    let _ = fs::remove_file(dir.join("watchdog.pid"));
    fs::write(&script, WATCHDOG).map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    // The inner `sh` runs in the background of the outer one, which exits
    // at once: the watchdog is nobody's child to reap, holds none of the
    // test's file descriptors (a `cargo test | tee` would wait for it),
    // and waits until `watchdog.pid` names it before we go on.
    let status = Command::new("sh")
        .arg("-c")
        .arg(r#"sh "$0" "$1" "$2" </dev/null >/dev/null 2>&1 &
            n=0; while [ ! -s "$1/watchdog.pid" ] && [ $n -lt 100 ]; do sleep 0.05; n=$((n + 1)); done"#)
        .arg(&script)
        .arg(dir)
        .arg(owner.key())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot start the watchdog (sh): {e}"))?;
    if !status.success() || !dir.join("watchdog.pid").exists() {
        return Err(format!("the watchdog for {} did not start", dir.display()));
    }
    Ok(())
}

//! PostgreSQL for the tests: the machine's server at the default URL when
//! one answers there, else a throwaway one for the run from the installed
//! binaries, in the run's directory, on a free port.

use crate::process::{free_ports, is_root, run, wait_until};
use crate::run::Run;
use std::fs;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The URL tried first. `AUTOSHARD_PG_DEFAULT_URL` replaces it (a test of
/// this fallback points it at a port where nothing listens).
fn default_url() -> String {
    std::env::var("AUTOSHARD_PG_DEFAULT_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

pub(crate) fn default_or_throwaway() -> Result<String, String> {
    let url = default_url();
    if answers(&url) {
        return Ok(url);
    }
    let run = Run::join()?;
    let dir = run.dir.join("pg");
    if let Ok(url) = fs::read_to_string(dir.join("url")) {
        return Ok(url);
    }
    let began = Instant::now();
    let started = start(&dir).map_err(|e| {
        format!(
            "AUTOSHARD_PG_URL is not set, nothing answers at {url}, and no throwaway PostgreSQL \
             could be started: install PostgreSQL (its `initdb` and `pg_ctl`, e.g. `apt-get \
             install postgresql`), or start a server and export AUTOSHARD_PG_URL. {e}"
        )
    })?;
    fs::write(dir.join("url"), &started)
        .map_err(|e| format!("cannot write {}: {e}", dir.join("url").display()))?;
    eprintln!(
        "autoshard-test-servers: nothing answers at {url}; started a throwaway PostgreSQL \
         ({started}) in {:.1?}, data in {}",
        began.elapsed(),
        dir.display()
    );
    Ok(started)
}

/// Whether something accepts connections at the URL's host and port.
fn answers(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let hostport = rest.split(['/', '?']).next().unwrap_or("");
    let hostport = if hostport.contains(':') {
        hostport.to_owned()
    } else {
        format!("{hostport}:5432")
    };
    hostport
        .to_socket_addrs()
        .into_iter()
        .flatten()
        .any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
}

fn start(dir: &Path) -> Result<String, String> {
    let bin = bindir()?;
    let data = dir.join("data");
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // initdb refuses to run as root: as root, the server runs as the
    // `postgres` user, which must own its directory.
    let user = if is_root() {
        let (uid, gid) = postgres_user()?;
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))
            .map_err(|e| format!("cannot chown {} to postgres: {e}", dir.display()))?;
        Some("postgres")
    } else {
        None
    };
    let as_user = |tool: &str| {
        let mut command = match user {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(bin.join(tool));
                c
            }
            None => Command::new(bin.join(tool)),
        };
        command.current_dir(dir);
        command
    };
    run(
        as_user("initdb").arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ]),
        Duration::from_secs(120),
    )?;
    let port = free_ports(1).map_err(|e| format!("no free port: {e}"))?[0];
    // fsync off: the data is thrown away, and no test crashes the server
    // itself (the crash tests kill clients). Connections as the machine's
    // server allows (100).
    let options = format!(
        "-p {port} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=100",
        dir.display()
    );
    run(
        as_user("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("server.log"))
            .args(["-w", "-t", "60", "-o", &options, "start"]),
        Duration::from_secs(90),
    )?;
    run(
        Command::new(bin.join("createdb")).args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "test",
        ]),
        Duration::from_secs(30),
    )?;
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    wait_until(
        "the throwaway server to accept connections",
        Duration::from_secs(30),
        || answers(&url),
    )?;
    Ok(url)
}

/// The newest `/usr/lib/postgresql/<version>/bin` (Debian, Ubuntu), else
/// the directory of an `initdb` on the PATH.
fn bindir() -> Result<PathBuf, String> {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
        .ok_or_else(|| "no initdb found in /usr/lib/postgresql/*/bin or on the PATH".into())
}

/// The uid and gid of the `postgres` user, from /etc/passwd.
fn postgres_user() -> Result<(u32, u32), String> {
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&"postgres") && f.len() > 3)
        .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
        .ok_or_else(|| {
            "running as root, and initdb refuses root: a `postgres` user is needed \
             (the postgresql package creates it)"
                .into()
        })
}

//! The run's Redis Cluster: 3 masters + 3 replicas of the installed
//! `redis-server`, configured as `scripts/redis-cluster` configures its
//! long-lived one (so a test sees the same cluster either way), but on
//! free ports the OS gives, each with an explicit bus port (`cluster-port`,
//! Redis 7), so that it runs beside any other cluster on the machine.

use crate::process::{free_ports, run, signal_if, wait_until, Proc};
use crate::run::Run;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const NODES: usize = 6;
const MASTERS: usize = 3;

/// The run's cluster URL, starting the cluster if this run has none yet.
pub(crate) fn shared_cluster() -> Result<String, String> {
    cluster("redis")
}

/// The URL of the run's cluster in directory `name` (`redis`, the shared
/// one, or `redis-<name>`, a private one), starting it if it is not there.
pub(crate) fn cluster(name: &str) -> Result<String, String> {
    let run = Run::join()?;
    let dir = run.dir.join(name);
    if let Ok(url) = fs::read_to_string(dir.join("url")) {
        return Ok(url);
    }
    let began = Instant::now();
    let mut failures = Vec::new();
    // A port the OS gave may be taken before the server binds it: retry
    // with new ones.
    for _ in 0..3 {
        stop_all(&dir);
        let _ = fs::remove_dir_all(&dir);
        match start(&dir) {
            Ok(url) => {
                fs::write(dir.join("url"), &url)
                    .map_err(|e| format!("cannot write {}: {e}", dir.join("url").display()))?;
                eprintln!(
                    "autoshard-test-servers: started a Redis Cluster ({url}) in {:.1?}, data in {}",
                    began.elapsed(),
                    dir.display()
                );
                return Ok(url);
            }
            Err(e) => failures.push(e),
        }
    }
    stop_all(&dir);
    Err(format!(
        "AUTOSHARD_REDIS_CLUSTER_URL is not set and no Redis Cluster could be started for the \
         tests: install Redis 7 (`redis-server` and `redis-cli`, e.g. `apt-get install \
         redis-server`), or start one with `scripts/redis-cluster start` and export \
         AUTOSHARD_REDIS_CLUSTER_URL=redis-cluster://127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103. \
         Attempts: {}",
        failures.join(" | ")
    ))
}

fn start(dir: &Path) -> Result<String, String> {
    let ports = free_ports(2 * NODES).map_err(|e| format!("no free ports: {e}"))?;
    let (clients, buses) = ports.split_at(NODES);
    for (&port, &bus) in clients.iter().zip(buses) {
        let conf = write_config(dir, port, bus)?;
        launch(&conf)?;
    }
    for &port in clients {
        wait_until(
            &format!("node {port} to answer PING"),
            Duration::from_secs(30),
            || command(port, &["PING"]).is_ok(),
        )?;
    }
    let nodes: Vec<String> = clients.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    run(
        Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&nodes)
            .args(["--cluster-replicas", "1", "--cluster-yes"]),
        Duration::from_secs(60),
    )?;
    wait_healthy(clients)?;
    Ok(format!("redis-cluster://{}", nodes[..MASTERS].join(",")))
}

fn write_config(dir: &Path, port: u16, bus: u16) -> Result<std::path::PathBuf, String> {
    let node = dir.join(port.to_string());
    fs::create_dir_all(&node).map_err(|e| format!("cannot create {}: {e}", node.display()))?;
    let node = node.display();
    let conf = format!(
        "bind 127.0.0.1
port {port}
cluster-port {bus}
daemonize yes
pidfile {node}/redis.pid
logfile {node}/redis.log
dir {node}
cluster-enabled yes
cluster-config-file nodes.conf
# As scripts/redis-cluster: below ~2 s a busy 2-core machine gets nodes
# marked as failed; every acknowledged write fsynced (a restarted node
# loses nothing); no rewrite forks; a stopping master waits 1 s at most.
cluster-node-timeout 3000
appendonly yes
appendfsync always
auto-aof-rewrite-percentage 0
save \"\"
shutdown-timeout 1
"
    );
    let path = dir.join(port.to_string()).join("redis.conf");
    fs::write(&path, conf).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Starts a node from its configuration; it daemonizes (so it is no
/// process's child to reap) and writes its own pid file, which the
/// watchdog reads.
fn launch(conf: &Path) -> Result<(), String> {
    run(
        Command::new("redis-server").arg(conf),
        Duration::from_secs(10),
    )
    .map(drop)
}

/// Every node reports `cluster_state:ok` and every replica's link to its
/// master is up (the roles settle only after `--cluster create` returns).
fn wait_healthy(ports: &[u16]) -> Result<(), String> {
    wait_until(
        "cluster_state:ok on every node and every replica linked",
        Duration::from_secs(60),
        || {
            let ok = ports.iter().all(|&p| {
                command(p, &["CLUSTER", "INFO"]).is_ok_and(|i| i.contains("cluster_state:ok"))
            });
            let linked = ports
                .iter()
                .filter(|&&p| {
                    command(p, &["INFO", "replication"]).is_ok_and(|i| {
                        i.contains("role:slave") && i.contains("master_link_status:up")
                    })
                })
                .count();
            ok && linked == NODES - MASTERS
        },
    )
}

/// The ports of the run's nodes, from its data directories.
fn ports(dir: &Path) -> Vec<u16> {
    let mut ports: Vec<u16> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    ports.sort_unstable();
    ports
}

/// SIGKILLs every node of `dir` that is still ours (a failed start).
fn stop_all(dir: &Path) {
    for port in ports(dir) {
        kill_node(dir, port);
    }
}

fn kill_node(dir: &Path, port: u16) -> bool {
    let pidfile = dir.join(port.to_string()).join("redis.pid");
    let Some(pid) = fs::read_to_string(&pidfile)
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
    else {
        return false;
    };
    let Some(node) = Proc::of(pid) else {
        return false;
    };
    if !signal_if(
        pid,
        &format!("redis-server 127.0.0.1:{port}"),
        libc::SIGKILL,
    ) {
        return false;
    }
    let _ = wait_until("a killed node to exit", Duration::from_secs(10), || {
        !node.is_alive()
    });
    let _ = fs::remove_file(pidfile);
    true
}

/// SIGKILLs node `port` of the run's cluster (a failover test's victim).
///
/// # Panics
///
/// When the cluster is not this crate's (`AUTOSHARD_REDIS_CLUSTER_URL` is
/// set) or `port` is none of its nodes.
pub fn kill_redis_node(port: u16) {
    let dir = cluster_of(port);
    assert!(
        kill_node(&dir, port),
        "node {port} is not a running node of the tests' cluster in {}",
        dir.display()
    );
}

/// Restarts node `port` after [`kill_redis_node`] (it rejoins as a
/// replica) and returns once the whole cluster is healthy again.
///
/// # Panics
///
/// As [`kill_redis_node`], or when the node does not come back within a
/// minute.
pub fn revive_redis_node(port: u16) {
    let dir = cluster_of(port);
    let conf = dir.join(port.to_string()).join("redis.conf");
    assert!(conf.exists(), "node {port} is none of {}", dir.display());
    launch(&conf)
        .and_then(|()| {
            wait_until(
                &format!("node {port} to answer PING"),
                Duration::from_secs(30),
                || command(port, &["PING"]).is_ok(),
            )
        })
        .and_then(|()| wait_healthy(&ports(&dir)))
        .unwrap_or_else(|e| panic!("revive node {port}: {e}"));
}

/// The directory of the run's cluster (shared or private) that has node
/// `port`.
fn cluster_of(port: u16) -> std::path::PathBuf {
    let run = Run::join().unwrap_or_else(|e| panic!("{e}"));
    let found = fs::read_dir(&run.dir)
        .into_iter()
        .flatten()
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|d| {
            d.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("redis"))
        })
        .find(|d| d.join(port.to_string()).is_dir());
    found.unwrap_or_else(|| {
        assert!(
            crate::redis_cluster_is_ours(),
            "AUTOSHARD_REDIS_CLUSTER_URL names a cluster these tests did not start"
        );
        run.dir.join("redis")
    })
}

/// One command on node `port` (plain RESP over loopback, no client
/// library): the reply as text, an error reply as `Err`.
fn command(port: u16, args: &[&str]) -> Result<String, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let fail = |e: std::io::Error| format!("node {port}: {e}");
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(fail)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(fail)?;
    let mut request = format!("*{}\r\n", args.len());
    for a in args {
        request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    (&stream).write_all(request.as_bytes()).map_err(fail)?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(fail)?;
    let line = line.trim_end();
    match line.split_at(line.len().min(1)) {
        ("+" | ":", rest) => Ok(rest.to_owned()),
        ("$", len) => {
            let len: usize = len
                .parse()
                .map_err(|_| format!("node {port}: bad reply {line}"))?;
            let mut body = vec![0; len + 2];
            reader.read_exact(&mut body).map_err(fail)?;
            body.truncate(len);
            Ok(String::from_utf8_lossy(&body).into_owned())
        }
        _ => Err(format!("node {port}: {line}")),
    }
}

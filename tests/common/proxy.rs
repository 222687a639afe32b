//! A loopback TCP proxy between the store and PostgreSQL that cuts
//! connections around `COMMIT`, for real: it forwards the wire protocol byte
//! for byte, recognises the `COMMIT` that ends one of the store's write
//! transactions (a simple-query message `Q "COMMIT"` after a
//! `BEGIN ISOLATION LEVEL ...`), and applies the fault its plan names for
//! that commit. The store sees a genuinely broken connection; the server
//! genuinely commits, or does not.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What happens to one write transaction's `COMMIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// Forwarded and answered normally.
    None,
    /// The connection is cut before `COMMIT` reaches the server: the
    /// server rolls back when it sees the socket close. Never applied.
    DropBefore,
    /// `COMMIT` is forwarded, the server's answer is read but not relayed,
    /// then the connection is cut. Always applied; the client never learns.
    DropAfter,
    /// `COMMIT` is held back and the backend is killed with
    /// `pg_terminate_backend`; the client gets the server's FATAL error
    /// instead of an answer. Never applied.
    TerminateBefore,
    /// `COMMIT` is forwarded and the backend killed at once: a race the
    /// test does not control. Applied or not.
    TerminateAfter,
}

/// Picks the fault for the `n`th write commit; may set "refusing".
type Plan = Box<dyn Fn(u64, &AtomicBool) -> Fault + Send + Sync>;

struct Shared {
    upstream: SocketAddr,
    admin_url: String,
    plan: Plan,
    commits: AtomicU64,
    applied: Mutex<BTreeMap<Fault, u64>>,
    open: Mutex<Vec<TcpStream>>,
    /// New connections are closed at once: the server is unreachable.
    refusing: AtomicBool,
    closed: AtomicBool,
}

pub struct Proxy {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    /// `plan(n, refusing)` picks the fault for the `n`th write `COMMIT`
    /// (from 0), and may set `refusing` to make the server unreachable from
    /// then on; `admin_url` is used for `pg_terminate_backend`.
    pub fn start(
        upstream: SocketAddr,
        admin_url: &str,
        plan: impl Fn(u64, &AtomicBool) -> Fault + Send + Sync + 'static,
    ) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            upstream,
            admin_url: admin_url.to_owned(),
            plan: Box::new(plan),
            commits: AtomicU64::new(0),
            applied: Mutex::new(BTreeMap::new()),
            open: Mutex::new(Vec::new()),
            refusing: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        });
        let accepting = shared.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.closed.load(Ordering::Acquire) {
                    return;
                }
                let Ok(client) = client else { continue };
                if accepting.refusing.load(Ordering::Acquire) {
                    drop(client);
                    continue;
                }
                let shared = accepting.clone();
                thread::spawn(move || {
                    let _ = connection(shared, client);
                });
            }
        });
        Proxy { addr, shared }
    }

    /// How many faults of each kind were applied so far.
    pub fn applied(&self) -> BTreeMap<Fault, u64> {
        self.shared.applied.lock().unwrap().clone()
    }

    /// Write `COMMIT`s seen so far.
    pub fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::Relaxed)
    }

    /// Cuts every connection now (the server going away, as the client
    /// sees it).
    pub fn cut_all(&self) {
        for stream in self.shared.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// While `on`, the server is unreachable: new connections are closed
    /// as soon as they are accepted.
    pub fn refuse(&self, on: bool) {
        self.shared.refusing.store(on, Ordering::Release);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        // Wakes the acceptor, which then sees `closed`.
        let _ = TcpStream::connect(self.addr);
        self.cut_all();
    }
}

/// Per-connection state shared by its two directions.
struct Link {
    client: TcpStream,
    server: TcpStream,
    /// Backend process id, from the server's BackendKeyData.
    pid: Mutex<Option<i32>>,
    /// `DropAfter`: swallow the answer to COMMIT, then cut.
    swallow: AtomicBool,
}

impl Link {
    fn cut(&self) {
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }
}

fn connection(shared: Arc<Shared>, client: TcpStream) -> io::Result<()> {
    let server = TcpStream::connect(shared.upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    {
        let mut open = shared.open.lock().unwrap();
        open.push(client.try_clone()?);
        open.push(server.try_clone()?);
    }
    let link = Arc::new(Link {
        client: client.try_clone()?,
        server: server.try_clone()?,
        pid: Mutex::new(None),
        swallow: AtomicBool::new(false),
    });
    let upstream = {
        let link = link.clone();
        thread::spawn(move || {
            let _ = server_to_client(&link);
            link.cut();
        })
    };
    let _ = client_to_server(&shared, &link);
    link.cut();
    let _ = upstream.join();
    Ok(())
}

fn read_message(from: &mut impl Read, typed: bool) -> io::Result<Vec<u8>> {
    let header = if typed { 5 } else { 4 };
    let mut message = vec![0; header];
    from.read_exact(&mut message)?;
    let len = u32::from_be_bytes(message[header - 4..header].try_into().unwrap()) as usize;
    if len < 4 {
        return Err(io::Error::other("bad message length"));
    }
    message.resize(header + len - 4, 0);
    from.read_exact(&mut message[header..])?;
    Ok(message)
}

fn client_to_server(shared: &Shared, link: &Link) -> io::Result<()> {
    let mut from = &link.client;
    let mut to = &link.server;
    // The startup message has no type byte.
    to.write_all(&read_message(&mut from, false)?)?;
    let mut in_write_transaction = false;
    loop {
        let message = read_message(&mut from, true)?;
        if message[0] == b'Q' {
            let query = String::from_utf8_lossy(&message[5..message.len() - 1]).to_string();
            if query.starts_with("BEGIN ISOLATION LEVEL") {
                in_write_transaction = true;
            } else if query == "COMMIT" && in_write_transaction {
                in_write_transaction = false;
                let n = shared.commits.fetch_add(1, Ordering::Relaxed);
                let fault = (shared.plan)(n, &shared.refusing);
                if fault != Fault::None {
                    *shared.applied.lock().unwrap().entry(fault).or_default() += 1;
                }
                match fault {
                    Fault::None => {}
                    Fault::DropBefore => return Ok(()),
                    Fault::DropAfter => link.swallow.store(true, Ordering::Release),
                    Fault::TerminateBefore => {
                        terminate(shared, link);
                        // The server's FATAL error reaches the client via
                        // the other direction; COMMIT never goes out.
                        return Ok(());
                    }
                    Fault::TerminateAfter => {
                        to.write_all(&message)?;
                        terminate(shared, link);
                        continue;
                    }
                }
            } else if query == "ROLLBACK" {
                in_write_transaction = false;
            }
        }
        to.write_all(&message)?;
    }
}

fn server_to_client(link: &Link) -> io::Result<()> {
    let mut from = &link.server;
    let mut to = &link.client;
    loop {
        let message = read_message(&mut from, true)?;
        match message[0] {
            b'K' => {
                let pid = i32::from_be_bytes(message[5..9].try_into().unwrap());
                *link.pid.lock().unwrap() = Some(pid);
            }
            // ReadyForQuery after the swallowed COMMIT: the server is done.
            b'Z' if link.swallow.load(Ordering::Acquire) => return Ok(()),
            _ if link.swallow.load(Ordering::Acquire) => continue,
            _ => {}
        }
        to.write_all(&message)?;
    }
}

fn terminate(shared: &Shared, link: &Link) {
    let pid = link
        .pid
        .lock()
        .unwrap()
        .expect("BackendKeyData seen at startup");
    let mut admin = postgres::Client::connect(&shared.admin_url, postgres::NoTls)
        .expect("admin connection for pg_terminate_backend");
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .expect("pg_terminate_backend");
    // Give the server's FATAL error time to travel to the client side.
    thread::sleep(Duration::from_millis(5));
}

/// A connection string to the server at `url`, but through the proxy.
pub fn via(url: &str, proxy: &Proxy) -> String {
    let config: postgres::Config = url.parse().expect("AUTOSHARD_PG_URL");
    let mut out = format!(
        "host={} port={} sslmode=disable",
        proxy.addr.ip(),
        proxy.addr.port()
    );
    if let Some(user) = config.get_user() {
        out.push_str(&format!(" user={user}"));
    }
    if let Some(db) = config.get_dbname() {
        out.push_str(&format!(" dbname={db}"));
    }
    if let Some(password) = config.get_password() {
        out.push_str(&format!(" password={}", String::from_utf8_lossy(password)));
    }
    out
}

/// The server's address from a connection URL (TCP hosts only).
pub fn upstream(url: &str) -> SocketAddr {
    use std::net::ToSocketAddrs;
    let config: postgres::Config = url.parse().expect("AUTOSHARD_PG_URL");
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    (host.as_str(), port)
        .to_socket_addrs()
        .expect("resolve the PostgreSQL host")
        .next()
        .expect("an address")
}

//! A loopback TCP proxy in front of a Redis node that cuts connections
//! around script calls, for real: it forwards RESP byte for byte,
//! recognises a request that calls a script (`EVALSHA` or `EVAL`; the
//! store sends one command at a time on its write path), and applies the
//! fault its plan names for that call. The store sees a genuinely broken
//! connection; the node genuinely runs the script, or never sees it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

/// What happens to one script call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forwarded and answered normally.
    None,
    /// The connection is cut before the call reaches the node: never run.
    DropBefore,
    /// The call is forwarded, the node's reply is read but not relayed,
    /// then the connection is cut: the script ran, the client never learns.
    DropAfter,
}

/// The plan and the counts, shared by the proxies of one cluster so that
/// script calls are numbered across nodes.
pub struct Faults {
    plan: Box<dyn Fn(u64) -> Fault + Send + Sync>,
    calls: AtomicU64,
    pub dropped_before: AtomicU64,
    /// Replies swallowed: each is a script the node ran and the client did
    /// not hear about.
    pub dropped_after: AtomicU64,
}

impl Faults {
    pub fn new(plan: impl Fn(u64) -> Fault + Send + Sync + 'static) -> Arc<Faults> {
        Arc::new(Faults {
            plan: Box::new(plan),
            calls: AtomicU64::new(0),
            dropped_before: AtomicU64::new(0),
            dropped_after: AtomicU64::new(0),
        })
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

pub struct Proxy {
    pub addr: SocketAddr,
    closed: Arc<AtomicBool>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr, faults: Arc<Faults>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().unwrap();
        let closed = Arc::new(AtomicBool::new(false));
        let accepting = closed.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                connection(client, server, faults.clone());
            }
        });
        Proxy { addr, closed }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn is_script_call(chunk: &[u8]) -> bool {
    let upper = chunk.to_ascii_uppercase();
    upper.windows(9).any(|w| w == b"\r\nEVALSHA") || upper.windows(8).any(|w| w == b"\r\nEVAL\r\n")
}

fn cut(a: &TcpStream, b: &TcpStream) {
    let _ = a.shutdown(Shutdown::Both);
    let _ = b.shutdown(Shutdown::Both);
}

fn connection(client: TcpStream, server: TcpStream, faults: Arc<Faults>) {
    let swallow = Arc::new(AtomicBool::new(false));
    {
        let (mut from, mut to) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let (client, server) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let (faults, swallow) = (faults.clone(), swallow.clone());
        thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) | Err(_) => return cut(&client, &server),
                    Ok(n) => n,
                };
                let chunk = &buf[..n];
                if is_script_call(chunk) {
                    let call = faults.calls.fetch_add(1, Ordering::SeqCst);
                    match (faults.plan)(call) {
                        Fault::None => {}
                        Fault::DropBefore => {
                            faults.dropped_before.fetch_add(1, Ordering::SeqCst);
                            return cut(&client, &server);
                        }
                        Fault::DropAfter => swallow.store(true, Ordering::SeqCst),
                    }
                }
                if to.write_all(chunk).is_err() {
                    return cut(&client, &server);
                }
            }
        });
    }
    let (mut from, mut to) = (server.try_clone().unwrap(), client.try_clone().unwrap());
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => return cut(&client, &server),
                Ok(n) => n,
            };
            // The store waits for each reply before its next command, so
            // the bytes after a swallowed call are that call's reply: the
            // script has run.
            if swallow.load(Ordering::SeqCst) {
                faults.dropped_after.fetch_add(1, Ordering::SeqCst);
                return cut(&client, &server);
            }
            if to.write_all(&buf[..n]).is_err() {
                return cut(&client, &server);
            }
        }
    });
}

//! A small blocking connection pool, the same for every store: callers
//! beyond `size` open connections wait for one to come back, and so do
//! callers whose new connection the server refused for now (a connection
//! limit), each for at most the pool's timeout.

use crate::error::{Error, Result};
use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// After the server refused a connection, how long callers wait for one of
/// the pool's own before one of them tries to open another.
const RETRY_REFUSED: Duration = Duration::from_millis(100);

/// A pooled connection.
pub(crate) trait Pooled {
    /// Whether the connection may serve another caller once released: a
    /// closed connection, or one released while its caller panicked
    /// mid-transaction, may not (an embedded database that lives in its
    /// connection always may).
    fn reusable(&self) -> bool;
}

pub(crate) struct Pool<C> {
    state: Mutex<State<C>>,
    returned: Condvar,
    size: usize,
    /// How long a caller waits for a connection; `None`: for as long as it
    /// takes.
    timeout: Option<Duration>,
    /// Whether a failed connection attempt means the server takes no more
    /// connections for now (so wait for one of ours) rather than an error.
    refused: fn(&Error) -> bool,
}

struct State<C> {
    idle: Vec<C>,
    /// Connections open, idle or checked out.
    open: usize,
    /// Set when the server refused a connection: open no more than
    /// `allowed` until `retry_at`, then let one caller try again.
    limit: Option<Limit>,
}

struct Limit {
    allowed: usize,
    retry_at: Instant,
}

impl<C: Pooled> Pool<C> {
    /// A pool of at most `size` connections (at least 1), holding `first`,
    /// whose callers wait for a connection as long as it takes.
    pub fn new(size: usize, first: C) -> Self {
        Pool {
            state: Mutex::new(State {
                idle: vec![first],
                open: 1,
                limit: None,
            }),
            returned: Condvar::new(),
            size: size.max(1),
            timeout: None,
            refused: |_| false,
        }
    }

    /// Callers wait at most `timeout` for a connection, then fail with
    /// [`Error::PoolTimeout`]; a connection attempt failing with an error
    /// for which `refused` holds makes the caller wait too.
    pub fn waiting(mut self, timeout: Duration, refused: fn(&Error) -> bool) -> Self {
        self.timeout = Some(timeout);
        self.refused = refused;
        self
    }

    fn state(&self) -> MutexGuard<'_, State<C>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection, a new one from `connect` while fewer than `size`
    /// are open (and the server has not refused one lately), or else the
    /// next one released.
    pub fn checkout(&self, mut connect: impl FnMut() -> Result<C>) -> Result<Checkout<'_, C>> {
        let started = Instant::now();
        let deadline = self.timeout.and_then(|t| started.checked_add(t));
        let mut refused = None;
        let mut state = self.state();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(self.lend(conn));
            }
            let now = Instant::now();
            if state.open < self.size && state.may_open(now) {
                state.open += 1;
                if let Some(limit) = &mut state.limit {
                    // This caller retries; the others keep waiting.
                    limit.retry_at = now + RETRY_REFUSED;
                }
                drop(state);
                match connect() {
                    Ok(conn) => {
                        self.state().limit = None;
                        return Ok(self.lend(conn));
                    }
                    Err(e) if (self.refused)(&e) => {
                        state = self.state();
                        state.open -= 1;
                        state.limit = Some(Limit {
                            allowed: state.open,
                            retry_at: Instant::now() + RETRY_REFUSED,
                        });
                        refused = Some(e);
                        continue;
                    }
                    Err(e) => {
                        self.discard();
                        return Err(e);
                    }
                }
            }
            let retry_at = match &state.limit {
                Some(limit) if state.open < self.size => Some(limit.retry_at),
                _ => None,
            };
            let wake = match (deadline, retry_at) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            };
            if deadline.is_some_and(|d| now >= d) {
                return Err(Error::PoolTimeout {
                    waited: now - started,
                    open: state.open,
                    refused: refused.map(|e| Box::new(e) as _),
                });
            }
            state = match wake {
                Some(wake) => {
                    let wait = wake.saturating_duration_since(now);
                    let (state, _) = self
                        .returned
                        .wait_timeout(state, wait)
                        .unwrap_or_else(|p| p.into_inner());
                    state
                }
                None => self.returned.wait(state).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }

    fn lend(&self, conn: C) -> Checkout<'_, C> {
        Checkout {
            pool: self,
            conn: Some(conn),
        }
    }

    fn checkin(&self, conn: C) {
        self.state().idle.push(conn);
        self.returned.notify_one();
    }

    /// A connection was lost or closed: make room for a new one.
    fn discard(&self) {
        self.state().open -= 1;
        self.returned.notify_one();
    }

    /// After a lost connection the idle ones are probably dead too (the
    /// server restarted): drop them rather than spend attempts finding out.
    #[allow(dead_code)] // an embedded store never loses its connections
    pub fn drop_idle(&self) {
        drop(self.take_idle());
    }

    /// The idle connections, out of the pool, for the caller to close
    /// where it must (`postgres/runtime.rs`).
    #[allow(dead_code)] // an embedded store never loses its connections
    pub fn take_idle(&self) -> Vec<C> {
        let idle = {
            let mut state = self.state();
            let idle = std::mem::take(&mut state.idle);
            state.open -= idle.len();
            idle
        };
        self.returned.notify_all();
        idle
    }
}

impl<C> State<C> {
    /// Whether the server's last refusal still holds new connections back.
    fn may_open(&self, now: Instant) -> bool {
        self.limit
            .as_ref()
            .is_none_or(|limit| self.open < limit.allowed || now >= limit.retry_at)
    }
}

/// A checked-out connection: back to the pool when dropped, or discarded if
/// it is no longer [`reusable`](Pooled::reusable) or was marked
/// [`broken`](Checkout::broken).
pub(crate) struct Checkout<'a, C: Pooled> {
    pool: &'a Pool<C>,
    conn: Option<C>,
}

impl<C: Pooled> Checkout<'_, C> {
    /// The connection failed: close it instead of returning it.
    pub fn broken(&mut self) {
        if self.conn.take().is_some() {
            self.pool.discard();
        }
    }
}

impl<C: Pooled> Deref for Checkout<'_, C> {
    type Target = C;
    fn deref(&self) -> &C {
        self.conn.as_ref().expect("not used after `broken`")
    }
}

impl<C: Pooled> DerefMut for Checkout<'_, C> {
    fn deref_mut(&mut self) -> &mut C {
        self.conn.as_mut().expect("not used after `broken`")
    }
}

impl<C: Pooled> Drop for Checkout<'_, C> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if conn.reusable() {
                self.pool.checkin(conn);
            } else {
                drop(conn);
                self.pool.discard();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    struct Conn {
        id: usize,
        healthy: bool,
    }

    impl Pooled for Conn {
        fn reusable(&self) -> bool {
            self.healthy
        }
    }

    /// A new healthy connection, numbered from `opened`.
    fn numbered(opened: &AtomicUsize) -> Result<Conn> {
        Ok(Conn {
            id: opened.fetch_add(1, Ordering::SeqCst),
            healthy: true,
        })
    }

    #[test]
    fn reuses_opens_up_to_size_and_waits_beyond() {
        let opened = AtomicUsize::new(1);
        let connect = || numbered(&opened);
        let pool = Pool::new(
            2,
            Conn {
                id: 0,
                healthy: true,
            },
        );
        let a = pool.checkout(connect).unwrap();
        let b = pool.checkout(connect).unwrap();
        assert_eq!((a.id, b.id), (0, 1));
        std::thread::scope(|s| {
            let waiter = s.spawn(|| pool.checkout(connect).unwrap().id);
            std::thread::sleep(Duration::from_millis(50));
            assert!(!waiter.is_finished(), "a third caller must wait");
            drop(a);
            assert_eq!(waiter.join().unwrap(), 0, "it gets the released one");
        });
        drop(b);
        assert_eq!(
            opened.load(Ordering::SeqCst),
            2,
            "never more than two opened"
        );
    }

    #[test]
    fn broken_and_unusable_connections_make_room() {
        let opened = AtomicUsize::new(1);
        let connect = || numbered(&opened);
        let pool = Pool::new(
            1,
            Conn {
                id: 0,
                healthy: true,
            },
        );
        let mut a = pool.checkout(connect).unwrap();
        a.broken();
        drop(a);
        let mut b = pool.checkout(connect).unwrap();
        assert_eq!(b.id, 1, "a new connection replaced the broken one");
        b.healthy = false;
        drop(b);
        assert_eq!(pool.checkout(connect).unwrap().id, 2);
        let failed = pool.checkout(|| Err(crate::Error::InvalidUrl { reason: "x".into() }));
        assert!(failed.is_ok(), "the idle one is taken first");
    }

    /// A server that takes at most `limit` connections: `connect` for a
    /// pool whose refusals are `Error::InvalidUrl` (any variant would do).
    struct Server {
        limit: usize,
        open: AtomicUsize,
        attempts: AtomicUsize,
    }

    impl Server {
        fn new(limit: usize) -> Self {
            Server {
                limit,
                open: AtomicUsize::new(1),
                attempts: AtomicUsize::new(0),
            }
        }

        fn connect(&self) -> Result<Conn> {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            let id = self.open.fetch_add(1, Ordering::SeqCst);
            if id >= self.limit {
                self.open.fetch_sub(1, Ordering::SeqCst);
                return Err(crate::Error::InvalidUrl {
                    reason: "too many connections".into(),
                });
            }
            Ok(Conn { id, healthy: true })
        }
    }

    fn full(error: &crate::Error) -> bool {
        matches!(error, crate::Error::InvalidUrl { .. })
    }

    fn limited_pool(size: usize, timeout: Duration) -> Pool<Conn> {
        Pool::new(
            size,
            Conn {
                id: 0,
                healthy: true,
            },
        )
        .waiting(timeout, full)
    }

    #[test]
    fn a_refused_connection_waits_for_a_returned_one() {
        let server = Server::new(2);
        let pool = limited_pool(8, Duration::from_secs(10));
        let a = pool.checkout(|| server.connect()).unwrap();
        let b = pool.checkout(|| server.connect()).unwrap();
        assert_eq!((a.id, b.id), (0, 1));
        std::thread::scope(|s| {
            let waiters: Vec<_> = (0..3)
                .map(|_| s.spawn(|| pool.checkout(|| server.connect()).unwrap().id))
                .collect();
            std::thread::sleep(Duration::from_millis(50));
            assert!(waiters.iter().all(|w| !w.is_finished()), "they must wait");
            drop(a);
            for waiter in waiters {
                assert_eq!(waiter.join().unwrap(), 0, "each gets the returned one");
            }
        });
        drop(b);
        assert_eq!(
            server.open.load(Ordering::SeqCst),
            2,
            "never past the limit"
        );
        // Refusals hold further attempts back: a few retries in those 50 ms,
        // not a busy loop.
        assert!(server.attempts.load(Ordering::SeqCst) < 12);
    }

    #[test]
    fn a_freed_server_slot_is_found_without_a_returned_connection() {
        let server = Server::new(1);
        let pool = limited_pool(2, Duration::from_secs(10));
        let _a = pool.checkout(|| server.connect()).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| pool.checkout(|| server.connect()).unwrap().id);
            std::thread::sleep(Duration::from_millis(20));
            assert!(!waiter.is_finished());
            // Another client of the server disconnects.
            server.open.fetch_sub(1, Ordering::SeqCst);
            assert_eq!(
                waiter.join().unwrap(),
                0,
                "a new connection, opened on retry"
            );
        });
    }

    #[test]
    fn waiting_callers_give_up_after_the_timeout() {
        let server = Server::new(1);
        let pool = limited_pool(4, Duration::from_millis(150));
        let _a = pool.checkout(|| server.connect()).unwrap();
        let began = std::time::Instant::now();
        let err = pool.checkout(|| server.connect()).err().unwrap();
        assert!(began.elapsed() >= Duration::from_millis(150));
        match &err {
            crate::Error::PoolTimeout { open, refused, .. } => {
                assert_eq!(*open, 1);
                assert!(refused.is_some(), "the refusal is the source");
            }
            _ => panic!("{err:?}"),
        }
        assert!(err.is_retryable());

        // A full pool (no refusal) times out the same way.
        let pool = limited_pool(1, Duration::from_millis(50));
        let _b = pool.checkout(|| server.connect()).unwrap();
        let err = pool.checkout(|| server.connect()).err().unwrap();
        assert!(
            matches!(
                err,
                crate::Error::PoolTimeout {
                    open: 1,
                    refused: None,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

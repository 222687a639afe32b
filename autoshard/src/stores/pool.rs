//! A small blocking connection pool, the same for every store: callers
//! beyond `size` open connections wait for one to come back.

use crate::error::Result;
use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard};

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
}

struct State<C> {
    idle: Vec<C>,
    /// Connections open, idle or checked out.
    open: usize,
}

impl<C: Pooled> Pool<C> {
    /// A pool of at most `size` connections (at least 1), holding `first`.
    pub fn new(size: usize, first: C) -> Self {
        Pool {
            state: Mutex::new(State {
                idle: vec![first],
                open: 1,
            }),
            returned: Condvar::new(),
            size: size.max(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<C>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection, a new one from `connect` while fewer than `size`
    /// are open, or else the next one released.
    pub fn checkout(&self, connect: impl FnOnce() -> Result<C>) -> Result<Checkout<'_, C>> {
        let mut state = self.state();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Checkout {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.open < self.size {
                state.open += 1;
                drop(state);
                return match connect() {
                    Ok(conn) => Ok(Checkout {
                        pool: self,
                        conn: Some(conn),
                    }),
                    Err(e) => {
                        self.discard();
                        Err(e)
                    }
                };
            }
            state = self.returned.wait(state).unwrap_or_else(|p| p.into_inner());
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
        let idle = {
            let mut state = self.state();
            let idle = std::mem::take(&mut state.idle);
            state.open -= idle.len();
            idle
        };
        self.returned.notify_all();
        drop(idle);
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
}

//! The sync store called from inside a tokio runtime (issue 19 item 2).
//!
//! The `postgres` crate's blocking client runs each call on a runtime of
//! its own, and tokio panics when a runtime starts (or is dropped) on a
//! thread that drives another ("Cannot start a runtime from within a
//! runtime"). So every transaction of the store runs through [`blocking`]:
//!
//! - outside any runtime (every non-async user): the call as it was, after
//!   one thread-local read;
//! - on a multi-thread runtime: in `block_in_place`, which hands the
//!   worker's tasks to another thread and leaves the runtime's context for
//!   the call (it works, blocking this thread, as documented);
//! - on a current-thread runtime's own thread, which has nobody to hand its
//!   tasks to: refused with [`Error::InsideRuntime`], which names the async
//!   API; on that runtime's `spawn_blocking` threads it works.
//!
//! Connections the store drops while a runtime is current are dropped on a
//! thread of their own, for the same reason (see [`drop_off_runtime`]).

use crate::error::{Error, Result};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs one operation of the store where its driver may block: see the
/// module docs.
pub(crate) fn blocking<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    let Ok(handle) = Handle::try_current() else {
        return f();
    };
    match handle.runtime_flavor() {
        RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => on_current_thread(f),
    }
}

/// On a current-thread runtime, `block_in_place` runs `f` on a thread that
/// is not the runtime's (one of its `spawn_blocking` threads) and panics,
/// before calling `f`, on the runtime's own thread; tokio offers no other
/// way to tell the two apart. The panic is turned into the typed error
/// (the panic hook still prints tokio's message once per refused call).
fn on_current_thread<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    let mut f = Some(f);
    let ran = catch_unwind(AssertUnwindSafe(|| {
        tokio::task::block_in_place(|| (f.take().expect("called once"))())
    }));
    match ran {
        Ok(out) => out,
        Err(_) if f.is_some() => Err(Error::InsideRuntime { store: "postgres" }),
        Err(panic) => resume_unwind(panic),
    }
}

/// Drops `value` (connections) where no runtime is current: on a thread of
/// its own if one is, since each connection drops a runtime of its own.
pub(crate) fn drop_off_runtime<T: Send + 'static>(value: T) {
    if Handle::try_current().is_ok() {
        // Detached: nothing waits for the sessions to close.
        let _ = std::thread::Builder::new()
            .name("autoshard-pg-drop".into())
            .spawn(move || drop(value));
    } else {
        drop(value);
    }
}

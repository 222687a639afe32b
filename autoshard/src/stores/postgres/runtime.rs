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
//!   tasks to (and in a `LocalSet`, whose tasks cannot move): refused with
//!   [`Error::InsideRuntime`], which names the async API; on that
//!   runtime's `spawn_blocking` threads it works.
//!
//! tokio offers no way to ask which of these a thread is short of trying
//! `block_in_place`, which panics where it cannot run. That panic is caught
//! and typed; so that it does not also print a panic message (a refusal is
//! an error, not a crash), the first refusal installs a panic hook that
//! stays silent for exactly that panic, on that thread, and hands every
//! other panic to the hook that was installed before it.
//!
//! Connections the store drops while a runtime is current are dropped on a
//! thread of their own, for the same reason (see [`drop_off_runtime`]).

use crate::error::{Error, Result};
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Once;
use tokio::runtime::Handle;

/// Runs one operation of the store where its driver may block: see the
/// module docs.
pub(crate) fn blocking<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    if Handle::try_current().is_err() {
        return f();
    }
    in_place_or_refused(f)
}

/// `block_in_place` runs `f` where it can (a multi-thread runtime's
/// threads, any runtime's `spawn_blocking` threads) and panics, before
/// calling `f`, where it cannot (a current-thread runtime's own thread, a
/// `LocalSet`); tokio offers no other way to tell these apart. That panic
/// is turned into the typed error, silently (see the module docs); a panic
/// of `f` itself resumes, and prints as any panic does.
fn in_place_or_refused<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    silence_refusals();
    let mut f = Some(f);
    TRYING.set(true);
    let ran = catch_unwind(AssertUnwindSafe(|| {
        tokio::task::block_in_place(|| {
            TRYING.set(false);
            (f.take().expect("called once"))()
        })
    }));
    TRYING.set(false);
    match ran {
        Ok(out) => out,
        Err(_) if f.is_some() => Err(Error::InsideRuntime { store: "postgres" }),
        Err(panic) => resume_unwind(panic),
    }
}

thread_local! {
    /// Set while this thread is inside `block_in_place` but not yet in the
    /// store's call: a panic then is tokio's refusal, which becomes
    /// [`Error::InsideRuntime`].
    static TRYING: Cell<bool> = const { Cell::new(false) };
}

/// Installs, once per process, the hook that keeps tokio's refusal quiet;
/// every other panic goes to the hook installed before (the default one
/// prints it). A hook the application installs later replaces this one,
/// and refusals print again: nothing else changes.
fn silence_refusals() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !TRYING.get() {
                before(info);
            }
        }));
    });
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

//! Running a piece: one single-slot script of an operation, applied
//! exactly once under its operation id, and in `Durability::Replicated`
//! mode acknowledged by the slot's replicas (see `scripts.rs` for the
//! scripts' side of the protocol).

use super::error::{classify, Class};
use super::{backoff, keys, Conn, Durability, RedisCluster};
use crate::error::{Error, Result};
use crate::seam::{NativeRefused, NativeSubmitted};
use crate::trace;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use std::time::Instant;

/// One single-slot script of an operation.
pub(crate) struct Piece<'a> {
    pub script: &'static redis::Script,
    /// `KEYS[1]`.
    pub key: &'a str,
    pub slot: u16,
    /// `ARGV[4..]`.
    pub args: Vec<String>,
    /// Binary arguments after `args`.
    pub binary: Vec<Vec<u8>>,
    /// `KEYS[3..]`: more keys of the same slot.
    pub more_keys: &'a [String],
}

/// A script's status word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    Ok,
    /// An earlier send of this piece was applied.
    Dup,
    Gone,
    Exists,
    NotInt,
    Overflow,
    Conflict,
    /// A trim batch removed this many players (`native_scripts::native_trim`).
    Trimmed(u64),
    /// A native write applied, this many of its players found on the board
    /// (`native_scripts::native_write`; also a resend's answer).
    Applied(u64),
    /// A native submission applied, with what it did
    /// (`native_scripts::native_write`; also a resend's answer).
    Submitted(NativeSubmitted),
    /// A submission to several native boards applied, with each board's
    /// report but the guard's (`native_scripts::native_together`).
    Together(Vec<NativeSubmitted>),
    /// A native write refused an increment out of range, and wrote
    /// nothing (`native_scripts::native_write`).
    Refused(NativeRefused),
    /// A submission to several native boards found its guard's data
    /// changed, and wrote nothing.
    Moved,
}

impl Reply {
    fn parse(word: &str) -> Result<Reply> {
        Ok(match word {
            "OK" => Reply::Ok,
            "DUP" => Reply::Dup,
            "GONE" => Reply::Gone,
            "EXISTS" => Reply::Exists,
            "NOTINT" => Reply::NotInt,
            "OVERFLOW" => Reply::Overflow,
            "CONFLICT" => Reply::Conflict,
            "MOVED" => Reply::Moved,
            other => {
                let counted = match other.split_once(' ') {
                    Some(("TRIMMED", n)) => n.parse().ok().map(Reply::Trimmed),
                    Some(("APPLIED", n)) => n.parse().ok().map(Reply::Applied),
                    Some(("SUBMITTED", fields)) => {
                        super::native_writes::parse_submitted(fields).map(Reply::Submitted)
                    }
                    Some(("REFUSED", fields)) => {
                        super::native_writes::parse_refused(fields).map(Reply::Refused)
                    }
                    Some(("TOGETHER", all)) => all
                        .split(';')
                        .map(super::native_writes::parse_submitted)
                        .collect::<Option<Vec<_>>>()
                        .map(Reply::Together),
                    _ => None,
                };
                counted.ok_or_else(|| Error::SchemaMismatch {
                    kind: "redis script".into(),
                    reason: format!("unexpected reply {other:?}"),
                })?
            }
        })
    }

    /// Applied, by this send or an earlier one.
    pub fn applied(&self) -> bool {
        matches!(
            self,
            Reply::Ok
                | Reply::Dup
                | Reply::Trimmed(_)
                | Reply::Applied(_)
                | Reply::Submitted(_)
                | Reply::Together(_)
        )
    }
}

#[cfg(feature = "failpoints")]
thread_local! {
    /// Requests this thread's store calls sent (a command, a script, a
    /// pipeline, a `WAIT`; every resend again): what the round-trip tests
    /// bound (`__private::redis_hooks`). Only with the `failpoints`
    /// feature; a build without it counts nothing.
    static ROUND_TRIPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub(crate) fn count_round_trip() {
    #[cfg(feature = "failpoints")]
    ROUND_TRIPS.set(ROUND_TRIPS.get() + 1);
}

/// See `ROUND_TRIPS`.
#[cfg(feature = "failpoints")]
pub(crate) fn round_trips() -> u64 {
    ROUND_TRIPS.get()
}

/// Retention of writer marks, in seconds: far longer than any in-doubt
/// resend of a piece can take.
const MARK_RETENTION_S: u64 = 24 * 3600;

impl RedisCluster {
    /// A new operation id on `conn`.
    pub(crate) fn next_seq(&self, conn: &mut Conn) -> (i64, i64) {
        conn.seq += 1;
        (conn.writer, conn.seq)
    }

    /// Runs one piece with operation id `(writer, seq)`, exactly once: a
    /// send whose reply is lost is resent with the same id (the script
    /// answers `DUP` if the first send was applied) until an answer comes
    /// or `in_doubt_timeout` passes ([`Error::InDoubt`]). A piece that was
    /// certainly not sent, or refused by a cluster in failover, is retried
    /// up to `max_attempts` ([`Error::Unavailable`]).
    pub(crate) fn run(&self, conn: &mut Conn, piece: &Piece<'_>, id: (i64, i64)) -> Result<Reply> {
        let options = self.options();
        let (writer, seq) = id;
        let writer_arg = if options.exactly_once {
            writer.to_string()
        } else {
            String::new()
        };
        let wkey = keys::writers(&options.prefix, piece.slot);
        let mut invocation = piece.script.prepare_invoke();
        invocation
            .key(piece.key)
            .key(&wkey)
            .arg(&writer_arg)
            .arg(seq)
            .arg(MARK_RETENTION_S);
        for key in piece.more_keys {
            invocation.key(key);
        }
        for arg in &piece.args {
            invocation.arg(arg);
        }
        for arg in &piece.binary {
            invocation.arg(arg.as_slice());
        }
        let deadline = Instant::now() + options.in_doubt_timeout;
        let mut maybe_sent = false;
        let mut refusals = 0;
        let mut attempt = 0;
        loop {
            attempt += 1;
            count_round_trip();
            let outcome = conn
                .cluster(&self.inner.client)
                .and_then(|c| invocation.invoke::<String>(c));
            let error = match outcome {
                Ok(word) => {
                    let reply = Reply::parse(&word)?;
                    if reply.applied() {
                        self.replicate(conn, piece.slot, id)?;
                    }
                    return Ok(reply);
                }
                Err(e) => e,
            };
            match classify(&error) {
                Class::Other => return Err(error.into()),
                Class::Lost => {
                    maybe_sent = true;
                    conn.cluster = None;
                }
                Class::NotSent => {
                    conn.cluster = None;
                    refusals += 1;
                }
                Class::Transient => {
                    // `MOVED` after a failover: the slot map is stale.
                    conn.cluster = None;
                    refusals += 1;
                }
            }
            if maybe_sent && Instant::now() >= deadline {
                return Err(Error::InDoubt {
                    writer,
                    seq,
                    source: Box::new(error),
                });
            }
            if !maybe_sent && refusals >= options.max_attempts {
                return Err(super::gave_up(&options.nodes, refusals, error));
            }
            let _retry = trace::retry!(store = "redis", attempt, error = %error);
            backoff(attempt);
        }
    }

    /// In [`Durability::Replicated`] mode, waits for the replicas of the
    /// master of `slot` to acknowledge this connection's writes.
    fn replicate(&self, conn: &mut Conn, slot: u16, id: (i64, i64)) -> Result<()> {
        let Durability::Replicated { replicas, timeout } = self.options().durability else {
            return Ok(());
        };
        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
            slot,
            SlotAddr::Master,
        )));
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout.as_millis() as u64);
        count_round_trip();
        let acked = conn
            .cluster(&self.inner.client)
            .and_then(|c| c.route_command(&wait, route))
            .and_then(|v| redis::from_redis_value::<i64>(v).map_err(Into::into));
        match acked {
            Ok(n) if n >= i64::from(replicas) => Ok(()),
            Ok(n) => Err(Error::InDoubt {
                writer: id.0,
                seq: id.1,
                source: format!(
                    "applied on the master, acknowledged by {n} of {replicas} replicas within {timeout:?}"
                )
                .into(),
            }),
            Err(e) => {
                conn.cluster = None;
                Err(Error::InDoubt {
                    writer: id.0,
                    seq: id.1,
                    source: Box::new(e),
                })
            }
        }
    }
}

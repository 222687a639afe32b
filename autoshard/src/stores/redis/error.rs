//! Redis's errors in the crate's error type, and which of them a retry can
//! cure.

use crate::error::{Error, Retryable};
use redis::{ErrorKind, RedisError, ServerErrorKind};

impl From<RedisError> for Error {
    fn from(error: RedisError) -> Self {
        Error::Redis(error)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// The connection failed before the request could have been sent
    /// (refused): nothing was applied.
    NotSent,
    /// The connection broke or timed out after the request may have been
    /// sent: the piece may or may not have been applied.
    Lost,
    /// The cluster answered that it cannot serve the slot right now
    /// (`TRYAGAIN`, `CLUSTERDOWN`, `MOVED`/`ASK` beyond the client's
    /// redirections, a replica that is `READONLY` after a failover): not
    /// applied, worth retrying once the cluster settles.
    Transient,
    Other,
}

pub(crate) fn classify(error: &RedisError) -> Class {
    if error.is_connection_refusal() {
        return Class::NotSent;
    }
    if error.is_io_error() || error.is_timeout() || error.is_connection_dropped() {
        return Class::Lost;
    }
    match error.kind() {
        ErrorKind::Server(
            ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::BusyLoading,
        ) => Class::Transient,
        ErrorKind::ClusterConnectionNotFound => Class::NotSent,
        _ => Class::Other,
    }
}

/// Lost connections and a cluster that is failing over.
impl Retryable for RedisError {
    fn is_retryable(&self) -> bool {
        classify(self) != Class::Other
    }
}

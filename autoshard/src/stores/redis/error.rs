//! Redis's errors in the crate's error type, and which of them a retry can
//! cure.

use crate::error::{Error, Retryable};
use redis::{ErrorKind, RedisError, ServerErrorKind};

impl From<RedisError> for Error {
    fn from(error: RedisError) -> Self {
        match denied(&error) {
            true => Error::AccessDenied {
                source: Box::new(error),
            },
            false => Error::Redis(error),
        }
    }
}

/// Whether the server refused the credentials (a wrong password or user,
/// none given where one is required) or the user's permissions (an ACL
/// without a command the store runs): no retry can help. [`classify`]
/// counts these as [`Class::Other`], so every loop gives up on them.
pub(crate) fn denied(error: &RedisError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm)
    ) || matches!(error.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
}

/// Why no startup node took a connection, when it was the credentials:
/// the cluster client reports that as an I/O error with the causes only
/// in its message, which a retry would meet again and again, so one
/// plain connection per node (with the same credentials) asks again, with
/// the client's typed error.
pub(crate) fn refused_credentials(urls: &[String]) -> Option<RedisError> {
    urls.iter().find_map(|url| {
        let client = redis::Client::open(url.as_str()).ok()?;
        let outcome = client
            .get_connection_with_timeout(std::time::Duration::from_secs(2))
            .and_then(|mut conn| redis::cmd("PING").query::<String>(&mut conn));
        outcome.err().filter(denied)
    })
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

//! PostgreSQL's errors in the crate's error type, and which of them a
//! retry can cure.

use crate::error::{Error, Retryable};

impl From<postgres::Error> for Error {
    fn from(error: postgres::Error) -> Self {
        match classify(&error) {
            Class::Denied => Error::AccessDenied {
                source: Box::new(error),
            },
            _ => Error::Postgres(error),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Serialization failure (40001) or deadlock (40P01): the transaction
    /// was rolled back and may succeed if run again.
    Conflict,
    /// The connection is gone (I/O error, closed, or the server ended the
    /// session: SQLSTATE classes 08 and 57P).
    Lost,
    /// A lock stayed held by another transaction for the whole
    /// `lock_timeout` (55P03): [`Error::Busy`].
    LockTimeout,
    /// The server cancelled the statement: `statement_timeout`, or an
    /// operator's `pg_cancel_backend` (57014): [`Error::Cancelled`].
    Cancelled,
    /// The server refused a new connection: a role's or the server's
    /// connection limit (53300). Only a connection attempt meets it; the
    /// pool then waits for one of its own connections.
    TooManyConnections,
    /// The server refused the credentials or the role's rights: a wrong
    /// password (28P01), a role that does not exist or may not log in
    /// (28000), a database that does not exist (3D000), a missing
    /// privilege (42501): [`Error::AccessDenied`], never retried.
    Denied,
    Other,
}

pub(crate) fn classify(error: &postgres::Error) -> Class {
    if let Some(code) = error.code() {
        return match code.code() {
            "40001" | "40P01" => Class::Conflict,
            "55P03" => Class::LockTimeout,
            "57014" => Class::Cancelled,
            "53300" => Class::TooManyConnections,
            "28P01" | "28000" | "3D000" | "42501" => Class::Denied,
            c if c.starts_with("08") || c.starts_with("57P") => Class::Lost,
            _ => Class::Other,
        };
    }
    let io = std::error::Error::source(error).is_some_and(|s| s.is::<std::io::Error>());
    if error.is_closed() || io {
        Class::Lost
    } else {
        Class::Other
    }
}

/// The typed error for a server error that has one, after `attempts`
/// attempts: a lock timeout is [`Error::Busy`], a cancelled statement
/// [`Error::Cancelled`]; anything else is returned as it is.
pub(crate) fn typed(error: Error, attempts: u32) -> Error {
    match error {
        Error::Postgres(e) => match classify(&e) {
            Class::LockTimeout => Error::Busy { attempts },
            Class::Cancelled => Error::Cancelled {
                source: Box::new(e),
            },
            _ => Error::Postgres(e),
        },
        other => other,
    }
}

/// Whether a failed connection attempt means "wait for one of the pool's
/// connections" rather than "fail": the server is at a connection limit.
pub(crate) fn refused_for_now(error: &Error) -> bool {
    matches!(error, Error::Postgres(e) if classify(e) == Class::TooManyConnections)
}

/// Serialization failures, deadlocks, lost connections, lock timeouts and
/// connection limits; never a refusal of the credentials or rights.
impl Retryable for postgres::Error {
    fn is_retryable(&self) -> bool {
        !matches!(
            classify(self),
            Class::Cancelled | Class::Denied | Class::Other
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real server error, from the test server.
    fn server_error(sql: &str) -> postgres::Error {
        let url = autoshard_test_servers::postgres_url();
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client.batch_execute(sql).unwrap_err()
    }

    #[test]
    fn lock_and_statement_timeouts_get_their_variants() {
        let lock = server_error(
            "DO $$ BEGIN RAISE EXCEPTION 'held' USING ERRCODE = 'lock_not_available'; END $$",
        );
        assert_eq!(classify(&lock), Class::LockTimeout);
        assert!(lock.is_retryable());
        let err = typed(lock.into(), 3);
        assert!(matches!(err, Error::Busy { attempts: 3 }), "{err:?}");

        let cancelled = server_error("SET statement_timeout = 10; SELECT pg_sleep(1)");
        assert_eq!(classify(&cancelled), Class::Cancelled);
        assert!(!cancelled.is_retryable());
        let err = typed(cancelled.into(), 1);
        assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("57014"), "{err}");

        let other = server_error("SELECT 1/0");
        assert!(matches!(typed(other.into(), 1), Error::Postgres(_)));
    }

    #[test]
    fn a_server_error_displays_what_the_server_said() {
        let err = Error::from(server_error(
            "DO $$ BEGIN RAISE EXCEPTION 'out of votes' \
             USING DETAIL = 'question 7', HINT = 'wait a day'; END $$",
        ));
        assert_eq!(
            err.to_string(),
            "PostgreSQL ERROR P0001: out of votes; detail: question 7; hint: wait a day"
        );
        assert!(std::error::Error::source(&err).is_some(), "still wrapped");
    }
}

//! PostgreSQL's errors in the crate's error type, and which of them a
//! retry can cure.

use crate::error::{Error, Retryable};

impl From<postgres::Error> for Error {
    fn from(error: postgres::Error) -> Self {
        Error::Postgres(error)
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
    Other,
}

pub(crate) fn classify(error: &postgres::Error) -> Class {
    if let Some(code) = error.code() {
        return match code.code() {
            "40001" | "40P01" => Class::Conflict,
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

/// Serialization failures, deadlocks and lost connections.
impl Retryable for postgres::Error {
    fn is_retryable(&self) -> bool {
        classify(self) != Class::Other
    }
}

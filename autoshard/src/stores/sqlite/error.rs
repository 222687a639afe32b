//! SQLite's errors in the crate's error type.

use crate::error::{Error, Retryable};
use rusqlite::ErrorCode;

impl From<rusqlite::Error> for Error {
    fn from(error: rusqlite::Error) -> Self {
        Error::Sqlite(error)
    }
}

/// Lock contention (`SQLITE_BUSY` or `SQLITE_LOCKED`) goes away when the
/// other writer commits.
impl Retryable for rusqlite::Error {
    fn is_retryable(&self) -> bool {
        matches!(
            self.sqlite_error_code(),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        )
    }
}

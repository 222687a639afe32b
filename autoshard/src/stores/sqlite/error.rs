//! SQLite's errors in the crate's error type.

use crate::error::{Error, Retryable};
use rusqlite::ErrorCode;

impl From<rusqlite::Error> for Error {
    fn from(error: rusqlite::Error) -> Self {
        Error::Sqlite(error)
    }
}

/// `SQLITE_READONLY` in any of its forms: the file, its directory or its
/// `-shm` could not be written when the connection was opened (SQLite then
/// opens it read-only, for good), or the file was moved or deleted under
/// it. A connection opened anew may work; this one never will.
pub(super) fn needs_reopening(error: &rusqlite::Error) -> bool {
    error.sqlite_error_code() == Some(ErrorCode::ReadOnly)
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

//! The one error type of the crate.

use std::fmt;

/// `Result` with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in autoshard.
///
/// Conditions worth retrying (lock contention) answer `true` to
/// [`Error::is_retryable`]; everything else is a bug in the input or the data
/// and will fail the same way again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `save` or `shard_count` named an entity that is not stored (never
    /// inserted, or deleted meanwhile). Nothing was written.
    #[error("no {kind} with id {id}")]
    NotFound {
        /// The entity kind.
        kind: &'static str,
        /// The id, rendered for display.
        id: String,
    },

    /// `insert` of an id that is already stored. Nothing was written.
    #[error("{kind} with id {id} already exists")]
    AlreadyExists {
        /// The entity kind.
        kind: &'static str,
        /// The id, rendered for display.
        id: String,
    },

    /// The store stayed locked by other writers through every retry. Nothing
    /// was written; the object still holds its pending changes, so the same
    /// call can simply be made again.
    #[error("the store is busy: {}", busy_detail(*attempts))]
    Busy {
        /// How many times the transaction was tried; 0 when it never got its
        /// turn among this process's writers to the same file.
        attempts: u32,
    },

    /// A stored value could not be decoded into the field's type: the row
    /// was written by another program or an incompatible version of the
    /// struct.
    #[error("corrupt {kind} {id}: field `{field}`: {reason}")]
    Corrupt {
        /// The entity kind.
        kind: &'static str,
        /// The id, rendered for display.
        id: String,
        /// The field whose stored value is bad (`<document>` for the main row).
        field: String,
        /// What was wrong with it.
        reason: String,
    },

    /// A value cannot be stored faithfully (a NaN or infinite float), or
    /// could not be serialized. Nothing was written.
    #[error("{kind}.{field}: {reason}")]
    InvalidValue {
        /// The entity kind.
        kind: &'static str,
        /// The field holding the value.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },

    /// A fold returned an error (for example [`fold::Overflow`] from one of
    /// the checked folds). Nothing was written; the pending delta is kept.
    ///
    /// [`fold::Overflow`]: crate::fold::Overflow
    #[error("{kind}.{field}: fold failed: {source}")]
    Fold {
        /// The entity kind.
        kind: &'static str,
        /// The sharded field.
        field: &'static str,
        /// The error the fold returned.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// An identifier given to the store (kind name, id) is not allowed, or
    /// two kinds would share one table. Nothing was written.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The offending name.
        name: String,
        /// Which rule it broke.
        reason: String,
    },

    /// The database holds tables for this kind that disagree with the struct
    /// (for example the id changed from an integer to a string).
    #[error("schema mismatch for {kind}: {reason}")]
    SchemaMismatch {
        /// The entity kind.
        kind: String,
        /// What disagrees.
        reason: String,
    },

    /// A shard method panicked part-way, so the object's aggregate and
    /// pending values can no longer be trusted. Load the entity again.
    #[error("{kind}: a shard method panicked; reload the entity before saving")]
    Poisoned {
        /// The entity kind.
        kind: &'static str,
    },

    /// An error from SQLite that none of the variants above describes.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

fn busy_detail(attempts: u32) -> String {
    match attempts {
        0 => "other writers in this process held it for the whole busy timeout".into(),
        n => format!("the write lock stayed taken through {n} attempts"),
    }
}

impl Error {
    /// Whether making the same call again may succeed: the store was busy.
    /// Errors about the input or the data are final.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Busy { .. } => true,
            Error::Sqlite(e) => crate::sqlite::is_busy(e),
            _ => false,
        }
    }

    pub(crate) fn not_found(kind: &'static str, id: impl fmt::Display) -> Self {
        Error::NotFound {
            kind,
            id: id.to_string(),
        }
    }
}

//! The kind registry every store keeps: which kind owns which table names
//! and with which id type, checked once per kind and handle.
//!
//! Each store records `(kind, base, id_type)` in its own `autoshard_kinds`
//! table; the rules for what it finds there are here, and so is the cache
//! of a handle's per-kind tables (or statements).

use crate::entity::KeyKind;
use crate::error::{Error, Result};
use crate::seam::Kind;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What a store prepares per kind: anything that remembers the id type it
/// was made for.
pub(crate) trait KindTables: Send + Sync {
    fn key_kind(&self) -> KeyKind;
}

/// A handle's tables per kind, made (and registered) on first use.
pub(crate) struct KindCache<T> {
    kinds: Mutex<HashMap<&'static str, Arc<T>>>,
}

impl<T> Default for KindCache<T> {
    fn default() -> Self {
        KindCache {
            kinds: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: KindTables> KindCache<T> {
    /// The tables of `kind`; `create` makes and registers them the first
    /// time (two racing callers may both run it: it must be idempotent).
    pub fn get(&self, kind: &Kind, create: impl FnOnce() -> Result<T>) -> Result<Arc<T>> {
        let cached = self
            .kinds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(kind.name)
            .cloned();
        if let Some(tables) = cached {
            // Two structs may share a kind; the registry check ran for the
            // first, so the second must still agree on the id type.
            check_key_kind(kind, tables.key_kind())?;
            return Ok(tables);
        }
        let tables = Arc::new(create()?);
        self.kinds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kind.name, tables.clone());
        Ok(tables)
    }
}

fn check_key_kind(kind: &Kind, stored: KeyKind) -> Result<()> {
    if stored == kind.key_kind {
        return Ok(());
    }
    Err(mismatch(kind, stored.registry_name()))
}

fn mismatch(kind: &Kind, stored: &str) -> Error {
    Error::SchemaMismatch {
        kind: kind.name.to_owned(),
        reason: format!(
            "ids are stored as {stored}, the struct's id is {}",
            kind.key_kind.registry_name()
        ),
    }
}

/// Decides on the registry row a store found for table base `base`:
/// `owner` is its `(kind, id_type)`, if any. `Ok(true)`: no row, register
/// the kind; `Ok(false)`: registered as it should be. Refuses a kind whose
/// table names another kind already owns (table names ignore case) or whose
/// id type changed.
pub(crate) fn check_owner(kind: &Kind, owner: Option<(String, String)>) -> Result<bool> {
    match owner {
        None => Ok(true),
        Some((other, _)) if other != kind.name => Err(Error::InvalidName {
            name: kind.name.to_owned(),
            reason: format!(
                "kind `{other}` already uses the same tables (table names ignore case)"
            ),
        }),
        Some((_, stored)) if stored != kind.key_kind.registry_name() => {
            Err(mismatch(kind, &stored))
        }
        Some(_) => Ok(false),
    }
}

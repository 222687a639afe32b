//! The databases of split boards' trees on SQLite.
//!
//! Tree `t` of every split board of a database lives in the file
//! `<database>-tree<t>` next to it (its queue in `<database>-tree<t>-queue`),
//! opened with this handle's options: SQLite has one writer per file, and
//! trees in one file would apply one at a time. An in-memory database's
//! trees are private in-memory databases of their own, kept by the handle,
//! so that every clone of it sees them.

use super::{Sqlite, SqliteBuilder};
use crate::error::Result;
use std::collections::HashMap;
use std::path::PathBuf;

/// Tree databases opened so far, by tree.
pub(super) type TreeDbs = parking_lot::Mutex<HashMap<u32, Sqlite>>;

impl Sqlite {
    /// The database of tree `tree`, opened on first use.
    pub(crate) fn tree_db(&self, tree: u32) -> Result<Sqlite> {
        let mut trees = self.inner.trees.lock();
        if let Some(db) = trees.get(&tree) {
            return Ok(db.clone());
        }
        let options = &self.inner.options;
        let path = options.path.as_ref().map(|p| {
            let mut name = p.clone().into_os_string();
            name.push(format!("-tree{tree}"));
            PathBuf::from(name)
        });
        let db = SqliteBuilder {
            path,
            ..options.clone()
        }
        .open()?;
        trees.insert(tree, db.clone());
        Ok(db)
    }
}

//! Where a board's shape is made: creating, opening, listing and deleting a
//! board are the engine's (`handle.rs`, `lifecycle.rs`), and what a shape
//! keeps beside the board's row (a split board's trees, an approximate
//! board's snapshot cache) or reserves in the catalog (a family's hidden
//! registry, a tree's name) is asked here, the one place outside the
//! shapes' own folders that names them. The engine then imports none of
//! its extensions.

use crate::error::{Error, Result};
use crate::ranking::{approx, family, trees, Ranking};
use crate::seam::BoardStore;
use std::sync::Arc;

/// The extensions' configuration checks, for `config.rs`.
pub(in crate::ranking) use crate::ranking::approx::check_config as check_approx_config;
pub(in crate::ranking) use crate::ranking::trees::check_trees;

/// The first of `n` arrival numbers a write takes (board-wide on a split
/// board's tree, `trees/arrival.rs`), and the refusal of the calls an
/// approximate board cannot serve, for the engine's writes.
pub(in crate::ranking) use crate::ranking::approx::exact_only;
pub(in crate::ranking) use crate::ranking::trees::arrival_floor;

/// An approximate board's apply, its score index instead of a count tree,
/// for `apply/` (which picks it by the board's rules inside the write's
/// transaction, as it picks the store's native board).
pub(in crate::ranking) use crate::ranking::approx::apply_updates as approx_apply;

/// What an approximate board keeps in its handle (`approx/`): its
/// published snapshot, cached.
pub(in crate::ranking) type ApproxCache = approx::Cache;

/// Refuses `name` for a new board if an extension holds it: a family lives
/// under a hidden name (one name, one leaderboard).
pub(in crate::ranking) fn check_name_free(boards: &Arc<dyn BoardStore>, name: &str) -> Result<()> {
    if boards.open_board(&family::registry_name(name))?.is_some() {
        return Err(Error::RankingExists { name: name.into() });
    }
    Ok(())
}

/// Whether a stored board name is a user's board, not an extension's
/// (a family's hidden boards, a split board's trees).
pub(in crate::ranking) fn is_user_board(name: &str) -> bool {
    !name.starts_with(family::HIDDEN) && !trees::is_tree_name(name)
}

/// Deletes what board `name`'s shape keeps beside its row; `delete` runs
/// `row` (deleting the row) first, so that a crash in between leaves
/// trees nobody opens, which the next `create` of that name deletes.
pub(in crate::ranking) fn delete(
    boards: &Arc<dyn BoardStore>,
    name: &str,
    row: impl FnOnce() -> Result<bool>,
) -> Result<bool> {
    let k = trees::trees_of(boards, name)?;
    let deleted = row()?;
    if k > 1 {
        trees::delete(boards, name, k)?;
    }
    Ok(deleted)
}

/// Adds what the board's configuration asks beside its row, made
/// (`created`) or opened: a split board's trees.
pub(in crate::ranking) fn with_shape(mut ranking: Ranking, created: bool) -> Result<Ranking> {
    if ranking.config().trees() > 1 {
        let (boards, name, config) = (&ranking.inner.boards, ranking.name(), ranking.config());
        let made = match created {
            true => trees::create(boards, name, config)?,
            false => trees::open(boards, name, config)?,
        };
        Arc::get_mut(&mut ranking.inner)
            .expect("not shared yet")
            .trees = made;
    }
    Ok(ranking)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    const EXTENSIONS: [&str; 3] = ["trees", "approx", "family"];

    /// The engine's files: `ranking/` but its `mod.rs` (which declares the
    /// extensions), `facade.rs` (the API of the engine and its extensions
    /// together, which calls both), the extensions' folders, `shape/`
    /// (which names them) and the oracle (`memory/`).
    fn engine_files() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ranking");
        let skip = [
            "mod.rs",
            "facade.rs",
            "trees",
            "approx",
            "family",
            "shape",
            "memory",
        ];
        let mut files = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_str().unwrap();
                if dir == root && skip.contains(&name) {
                    continue;
                }
                if path.is_dir() {
                    dirs.push(path);
                } else if name.ends_with(".rs") {
                    files.push(path);
                }
            }
        }
        files
    }

    fn is_ident(c: char) -> bool {
        c.is_alphanumeric() || c == '_'
    }

    /// What the engine may not say: a path through an extension (`trees::`,
    /// also inside a grouped `use super::{trees, ..}`), or a split board's
    /// hand-written branch.
    fn reaches_an_extension(source: &str) -> Option<String> {
        if source.contains(".split()") {
            return Some(".split()".into());
        }
        let mut in_use = false;
        for (i, line) in source.lines().enumerate() {
            let line = line.trim_start();
            in_use |= line.starts_with("use ") || line.starts_with("pub(crate) use ");
            for ext in EXTENSIONS {
                let path = format!("{ext}::");
                let at_path = line
                    .match_indices(&path)
                    .any(|(at, _)| !line[..at].ends_with(is_ident));
                let named = in_use && line.split(|c: char| !is_ident(c)).any(|w| w == ext);
                if at_path || named {
                    return Some(format!("line {}: {line}", i + 1));
                }
            }
            in_use &= !line.contains(';');
        }
        None
    }

    #[test]
    fn the_engine_imports_none_of_its_extensions_and_branches_on_no_split() {
        let files = engine_files();
        assert!(files.len() > 20, "found the engine's files: {files:?}");
        for file in files {
            let source = std::fs::read_to_string(&file).unwrap();
            let found = reaches_an_extension(&source);
            assert_eq!(found, None, "{} reaches an extension", file.display());
        }
        // Controls: the check finds what the engine said before.
        let handle = "use super::{\n    approx, family, trees, RankingConfig,\n};";
        assert!(reaches_an_extension(handle).is_some());
        assert!(reaches_an_extension("let t = super::trees::create(b)?;").is_some());
        assert!(reaches_an_extension("if let Some(s) = self.split() {").is_some());
        assert_eq!(
            reaches_an_extension("if rules.approx { a_family_trees() }"),
            None
        );
    }
}

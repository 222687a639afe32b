//! `autoshard::__private`: what the code `#[derive(Shardable)]` and
//! `#[shard_method]` generate names, re-exported from where it lives, and
//! the test hooks of feature `failpoints`. Not part of the API: anything
//! here may change in any release.

pub use serde;

// The traits and types generated code implements and names.
pub use crate::entity::FieldSpec;
pub use crate::fold::FoldError;
pub use crate::value::ShardValue;

// What generated code calls: the save's check, the document, folds and the
// shard method's two runs (`entity/`).
pub use crate::entity::check::{check_field, Checked};
pub use crate::entity::document::{DocumentWriter, Parts};
pub use crate::entity::support::*;

/// The seam's public face, for a wrapper type that delegates to a store
/// (the shared test suites run the PostgreSQL store twice this way).
pub use crate::seam::{Backend, Boards, Entities};

/// The ranked fields of a kind (`#[shard(ranked = "board")]`), and the
/// ranking layer's writer the derive wires to them: the derive sits above
/// ranking, so it may name it; the stores below only call the hook.
pub use crate::ranking::entity_board::{RankedScore, RANKED_HOOK};
pub use crate::seam::{Ranked, RankedHook};

#[cfg(feature = "failpoints")]
pub use crate::failpoints::*;

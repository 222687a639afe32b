//! Checks that need the whole struct: exactly one id, a pending field when
//! anything is sharded, a kind name the stores will accept.

use crate::ast::{Input, Role};
use crate::attr::Errors;

/// Mirrors the runtime's table-name allow-list so a bad literal fails at
/// compile time instead of at first use.
pub const MAX_KIND_LEN: usize = 48;

pub fn validate(input: &Input) -> syn::Result<()> {
    let mut errors = Errors::default();
    check_one(input, &mut errors, |r| matches!(r, Role::Id), "id", true);
    let sharded = input.sharded().next().is_some();
    check_one(input, &mut errors, |r| matches!(r, Role::Pending), "pending", sharded);
    if let Some(kind) = &input.kind {
        if let Err(why) = check_kind(&kind.value()) {
            errors.error(kind.span(), why);
        }
    }
    errors.finish()
}

fn check_one(
    input: &Input,
    errors: &mut Errors,
    want: fn(&Role) -> bool,
    key: &str,
    required: bool,
) {
    let mut found = input.with_role(want);
    match (found.next(), required) {
        (None, true) if key == "id" => errors.error(
            input.ident.span(),
            "`Shardable` needs exactly one `#[shard(id)]` field; none found",
        ),
        (None, true) => errors.error(
            input.ident.span(),
            "a struct with sharded fields needs a `#[shard(pending)] pending: autoshard::Pending<Self>` field to hold unsaved shard deltas",
        ),
        _ => {}
    }
    for extra in found {
        errors.error(
            extra.span,
            format!("duplicate `#[shard({key})]` field; a struct has at most one"),
        );
    }
}

pub fn check_kind(kind: &str) -> Result<(), String> {
    let mut chars = kind.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !starts_well
        || !kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || kind.len() > MAX_KIND_LEN
    {
        return Err(format!(
            "`kind` must be 1 to {MAX_KIND_LEN} ASCII letters, digits or `_`, starting with a letter or `_`"
        ));
    }
    Ok(())
}

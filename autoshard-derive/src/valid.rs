//! Checks that need the whole struct: exactly one id, a pending field when
//! anything is sharded, a kind name the stores will accept.

use crate::ast::{Field, Input, Role};
use crate::attr::Errors;

/// Mirrors the runtime's table-name allow-list so a bad literal fails at
/// compile time instead of at first use.
pub const MAX_KIND_LEN: usize = 48;

pub fn validate(input: &Input) -> syn::Result<()> {
    let mut errors = Errors::default();
    check_one(input, &mut errors, |r| matches!(r, Role::Id), "id", true);
    let unmarked = unmarked_pending(input);
    if let Some(field) = unmarked {
        errors.error(
            field.ident.span(),
            "this field holds the unsaved shard deltas and needs `#[shard(pending)]`",
        );
    }
    let sharded = input.sharded().next().is_some();
    let pending = |r: &Role| matches!(r, Role::Pending);
    check_one(
        input,
        &mut errors,
        pending,
        "pending",
        sharded && unmarked.is_none(),
    );
    for field in input.with_role(|r| matches!(r, Role::Pending)) {
        if !is_pending_of_self(input, field.ty) {
            errors.error_spanned(
                field.ty,
                "the `#[shard(pending)]` field must have type `autoshard::Pending<Self>`",
            );
        }
    }
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
        (None, true) if key == "id" => match unmarked_id(input) {
            Some(field) => errors.error(
                field.ident.span(),
                "`Shardable` needs exactly one `#[shard(id)]` field; if this is the id, mark it `#[shard(id)]`",
            ),
            None => errors.error(
                input.ident.span(),
                "`Shardable` needs exactly one `#[shard(id)]` field; none found",
            ),
        },
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

/// `Pending<Self>`, or `Pending<Name..>` naming the struct itself. Checked
/// here because a wrong type would otherwise fail in several generated
/// places, each reported at `#[derive(Shardable)]`.
fn is_pending_of_self(input: &Input, ty: &syn::Type) -> bool {
    let syn::Type::Path(path) = ty else {
        return false;
    };
    let Some(last) = path.path.segments.last() else {
        return false;
    };
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return false;
    };
    let mut args = args.args.iter();
    let (Some(syn::GenericArgument::Type(syn::Type::Path(arg))), None) = (args.next(), args.next())
    else {
        return false;
    };
    let names_self = arg.qself.is_none()
        && arg
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Self" || s.ident == *input.ident);
    last.ident == "Pending" && names_self
}

/// A plain field of type `Pending<..>`: the user declared the field but
/// forgot its attribute.
fn unmarked_pending<'a>(input: &'a Input) -> Option<&'a Field<'a>> {
    input
        .with_role(|r| matches!(r, Role::Plain))
        .find(|f| match f.ty {
            syn::Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Pending"),
            _ => false,
        })
}

/// A plain field named `id`: probably the id, missing its attribute.
fn unmarked_id<'a>(input: &'a Input) -> Option<&'a Field<'a>> {
    input
        .with_role(|r| matches!(r, Role::Plain))
        .find(|f| f.name() == "id")
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

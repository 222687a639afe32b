//! Parsing of the `#[shard(...)]` attribute vocabulary.
//!
//! Every key is parsed even after an error so that one derive reports every
//! mistake at once (as serde does), each pointing at its own token.

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, LitInt, LitStr, Path};

/// Upper bound on static shards: insert writes one row per shard, so an
/// accidental `shards = 1000000` would turn every insert into a bulk load.
pub const MAX_SHARDS: u32 = 10_000;

const FIELD_KEYS: &str = "`id`, `pending`, `neutral`, `shards`, `fold`";

/// What `#[shard(...)]` said about one field. Each key keeps its own span
/// so that errors point at the key that is wrong.
#[derive(Default)]
pub struct FieldAttrs {
    pub id: Option<Span>,
    pub pending: Option<Span>,
    pub neutral: Option<(Expr, Span)>,
    pub shards: Option<(u32, Span)>,
    pub fold: Option<(Path, Span)>,
    /// The first `shard` attribute, for errors about the field as a whole.
    pub attr: Option<Attribute>,
}

impl FieldAttrs {
    /// The first key that makes the field sharded, for errors that say it
    /// cannot be.
    pub fn sharding_key(&self) -> Option<(&'static str, Span)> {
        let neutral = self.neutral.as_ref().map(|(_, s)| ("neutral", *s));
        let shards = self.shards.map(|(_, s)| ("shards", s));
        let fold = self.fold.as_ref().map(|(_, s)| ("fold", *s));
        neutral.or(shards).or(fold)
    }
}

/// What `#[shard(...)]` said about the struct.
#[derive(Default)]
pub struct ContainerAttrs {
    pub kind: Option<LitStr>,
}

/// Folds errors into one so the caller can report all of them.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub fn error(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// An error underlining all of `tokens`, not just their first token.
    pub fn error_spanned(&mut self, tokens: impl ToTokens, message: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    pub fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

fn is_shard(attr: &Attribute) -> bool {
    attr.path().is_ident("shard")
}

fn key_name(key: &Path) -> String {
    key.to_token_stream().to_string().replace(' ', "")
}

fn duplicate(errors: &mut Errors, key: &Path) {
    let name = key_name(key);
    errors.error(key.span(), format!("duplicate `shard` key `{name}`"));
}

pub fn field_attrs(attrs: &[Attribute], errors: &mut Errors) -> FieldAttrs {
    let mut out = FieldAttrs::default();
    for attr in attrs.iter().filter(|a| is_shard(a)) {
        if out.attr.is_none() {
            out.attr = Some(attr.clone());
        }
        let parsed = attr.parse_nested_meta(|meta| {
            let key = &meta.path;
            if key.is_ident("id") {
                set_flag(&mut out.id, key, errors);
            } else if key.is_ident("pending") {
                set_flag(&mut out.pending, key, errors);
            } else if key.is_ident("neutral") {
                let expr: Expr = meta.value()?.parse()?;
                set_once(&mut out.neutral, (expr, key.span()), key, errors);
            } else if key.is_ident("shards") {
                let lit: LitInt = meta.value()?.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "`shards` expects an integer literal, e.g. `shards = 10`",
                    )
                })?;
                let shards = parse_shards(&lit, errors);
                set_once(&mut out.shards, (shards, key.span()), key, errors);
            } else if key.is_ident("fold") {
                let path: Path = meta.value()?.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "`fold` expects a path to a function, e.g. `fold = autoshard::fold::checked_sum`",
                    )
                })?;
                set_once(&mut out.fold, (path, key.span()), key, errors);
            } else {
                let name = key_name(key);
                return Err(meta.error(format!(
                    "unknown `shard` key `{name}`; expected one of {FIELD_KEYS}"
                )));
            }
            Ok(())
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    out
}

pub fn container_attrs(attrs: &[Attribute], errors: &mut Errors) -> ContainerAttrs {
    let mut out = ContainerAttrs::default();
    for attr in attrs.iter().filter(|a| is_shard(a)) {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("kind") {
                let lit: LitStr = meta.value()?.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "`kind` expects a string literal, e.g. `kind = \"Question\"`",
                    )
                })?;
                set_once(&mut out.kind, lit, &meta.path, errors);
                Ok(())
            } else {
                let name = key_name(&meta.path);
                Err(meta.error(format!(
                    "unknown `shard` key `{name}` on a struct; expected `kind = \"Name\"`"
                )))
            }
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    out
}

fn set_flag(slot: &mut Option<Span>, key: &Path, errors: &mut Errors) {
    set_once(slot, key.span(), key, errors);
}

fn set_once<T>(slot: &mut Option<T>, value: T, key: &Path, errors: &mut Errors) {
    if slot.is_some() {
        duplicate(errors, key);
    } else {
        *slot = Some(value);
    }
}

fn parse_shards(lit: &LitInt, errors: &mut Errors) -> u32 {
    match lit.base10_parse::<u32>() {
        Ok(n) if (1..=MAX_SHARDS).contains(&n) => n,
        _ => {
            errors.error(
                lit.span(),
                format!(
                    "`shards` must be between 1 and {MAX_SHARDS}; omit it for dynamic sharding"
                ),
            );
            1
        }
    }
}

//! Parsing of the `#[shard(...)]` attribute vocabulary.
//!
//! Every key is parsed even after an error so that one derive reports every
//! mistake at once (as serde does), each pointing at its own token.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, LitInt, LitStr, Path};

/// Upper bound on static shards: insert writes one row per shard, so an
/// accidental `shards = 1000000` would turn every insert into a bulk load.
pub const MAX_SHARDS: u32 = 10_000;

const FIELD_KEYS: &str = "`id`, `pending`, `neutral`, `shards`, `fold`";

/// What `#[shard(...)]` said about one field.
#[derive(Default)]
pub struct FieldAttrs {
    pub id: Option<Span>,
    pub pending: Option<Span>,
    pub neutral: Option<Expr>,
    pub shards: Option<(u32, Span)>,
    pub fold: Option<Path>,
    /// Span of the first `shard` attribute, for errors about the field as a whole.
    pub span: Option<Span>,
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

    pub fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

fn is_shard(attr: &Attribute) -> bool {
    attr.path().is_ident("shard")
}

fn duplicate(errors: &mut Errors, key: &Path) {
    let name = key.get_ident().map_or_else(String::new, ToString::to_string);
    errors.error(key.span(), format!("duplicate `shard` key `{name}`"));
}

pub fn field_attrs(attrs: &[Attribute], errors: &mut Errors) -> FieldAttrs {
    let mut out = FieldAttrs::default();
    for attr in attrs.iter().filter(|a| is_shard(a)) {
        out.span.get_or_insert(attr.span());
        let parsed = attr.parse_nested_meta(|meta| {
            let key = &meta.path;
            if key.is_ident("id") {
                set_flag(&mut out.id, key, errors);
            } else if key.is_ident("pending") {
                set_flag(&mut out.pending, key, errors);
            } else if key.is_ident("neutral") {
                let expr: Expr = meta.value()?.parse()?;
                set_once(&mut out.neutral, expr, key, errors);
            } else if key.is_ident("shards") {
                let lit: LitInt = meta
                    .value()?
                    .parse()
                    .map_err(|e| syn::Error::new(e.span(), "`shards` expects an integer literal, e.g. `shards = 10`"))?;
                let shards = parse_shards(&lit, errors);
                set_once(&mut out.shards, (shards, lit.span()), key, errors);
            } else if key.is_ident("fold") {
                let path: Path = meta.value()?.parse()?;
                set_once(&mut out.fold, path, key, errors);
            } else {
                let name = key.get_ident().map_or_else(|| "?".into(), ToString::to_string);
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
                let lit: LitStr = meta.value()?.parse()?;
                set_once(&mut out.kind, lit, &meta.path, errors);
                Ok(())
            } else {
                Err(meta.error("unknown `shard` key on a struct; expected `kind = \"Name\"`"))
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
            errors.error(lit.span(), format!("`shards` must be between 1 and {MAX_SHARDS}"));
            1
        }
    }
}

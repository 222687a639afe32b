//! Parsing of the `#[shard(...)]` attribute vocabulary.
//!
//! Every key is parsed even after an error so that one derive reports every
//! mistake at once (as serde does), each pointing at its own token.

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, ExprRange, Lit, LitStr, Path, RangeLimits};

/// Upper bound on static shards: insert writes one row per shard, so an
/// accidental `shards = 1000000` would turn every insert into a bulk load.
pub const MAX_SHARDS: u32 = 10_000;

const FIELD_KEYS: &str = "`id`, `pending`, `neutral`, `shards`, `fold`, `ranked`";

/// What `#[shard(...)]` said about one field. Each key keeps its own span
/// so that errors point at the key that is wrong.
#[derive(Default)]
pub struct FieldAttrs {
    pub id: Option<Span>,
    pub pending: Option<Span>,
    pub neutral: Option<(Expr, Span)>,
    pub shards: Option<(Shards, Span)>,
    pub fold: Option<(Path, Span)>,
    /// `ranked = "board"`: the board the field's total feeds.
    pub ranked: Option<LitStr>,
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

/// `shards = N` or `shards = LOW..=HIGH`.
#[derive(Clone, Copy)]
pub enum Shards {
    Fixed(u32),
    /// An automatic count: each entity starts at the low end and the store
    /// raises it under observed contention, up to the high end.
    Auto(u32, u32),
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
                let expr: Expr = meta.value()?.parse().map_err(|e| {
                    syn::Error::new(e.span(), SHARDS_EXPECTED)
                })?;
                let shards = parse_shards(&expr, errors);
                set_once(&mut out.shards, (shards, key.span()), key, errors);
            } else if key.is_ident("fold") {
                let path: Path = meta.value()?.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "`fold` expects a path to a function, e.g. `fold = autoshard::fold::checked_sum`",
                    )
                })?;
                set_once(&mut out.fold, (path, key.span()), key, errors);
            } else if key.is_ident("ranked") {
                let lit: LitStr = meta.value()?.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "`ranked` expects a string literal naming the board, e.g. `ranked = \"top-questions\"`",
                    )
                })?;
                if let Err(why) = check_board(&lit.value()) {
                    errors.error(lit.span(), why);
                }
                set_once(&mut out.ranked, lit, key, errors);
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

/// Mirrors the ranking layer's board-name rule (`ranking::check_board_name`)
/// so a bad literal fails at compile time instead of at the first save.
fn check_board(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 128 {
        Err("a board name must be 1 to 128 bytes long")
    } else if name.chars().any(char::is_control) {
        Err("a board name may not contain control characters")
    } else {
        Ok(())
    }
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

const SHARDS_EXPECTED: &str =
    "`shards` expects an integer literal or an inclusive range of them, e.g. `shards = 10` or `shards = 1..=256`";

/// `shards = N` or `shards = LOW..=HIGH`; after an error, a valid stand-in
/// so that the rest of the derive still expands (one mistake, one message).
fn parse_shards(expr: &Expr, errors: &mut Errors) -> Shards {
    match expr {
        Expr::Range(range) => parse_range(range, errors),
        _ => match shard_literal(expr, errors) {
            Some(n) if (1..=u64::from(MAX_SHARDS)).contains(&n) => Shards::Fixed(n as u32),
            Some(_) => {
                errors.error_spanned(
                    expr,
                    format!(
                        "`shards` must be between 1 and {MAX_SHARDS}; omit it for dynamic sharding"
                    ),
                );
                Shards::Fixed(1)
            }
            None => Shards::Fixed(1),
        },
    }
}

/// `LOW..=HIGH` with `1 <= LOW < HIGH <= MAX_SHARDS`, both literals.
fn parse_range(range: &ExprRange, errors: &mut Errors) -> Shards {
    let fallback = Shards::Auto(1, 2);
    let (Some(start), Some(end)) = (&range.start, &range.end) else {
        errors.error_spanned(
            range,
            "an automatic shard count needs both ends, e.g. `shards = 1..=256`",
        );
        return fallback;
    };
    if let RangeLimits::HalfOpen(dots) = range.limits {
        errors.error_spanned(
            dots,
            "an automatic shard count is an inclusive range: write `..=`, e.g. `shards = 1..=256`",
        );
        return fallback;
    }
    let (Some(low), Some(high)) = (shard_literal(start, errors), shard_literal(end, errors)) else {
        return fallback;
    };
    if low == 0 {
        errors.error_spanned(
            start,
            "an automatic shard count starts at 1 or more: an entity always has a row to write into",
        );
        return fallback;
    }
    if high > u64::from(MAX_SHARDS) {
        errors.error_spanned(
            end,
            format!("an automatic shard count goes up to {MAX_SHARDS} at most"),
        );
        return fallback;
    }
    if low >= high {
        errors.error_spanned(
            range,
            format!(
                "the low end of an automatic shard count must be below its high end; \
                 for a fixed count write `shards = {low}`"
            ),
        );
        return fallback;
    }
    Shards::Auto(low as u32, high as u32)
}

/// An integer literal (`u64::MAX` for one beyond it); `None` after
/// reporting that it is not one.
fn shard_literal(expr: &Expr, errors: &mut Errors) -> Option<u64> {
    let Expr::Lit(ExprLit {
        lit: Lit::Int(lit), ..
    }) = expr
    else {
        errors.error_spanned(expr, SHARDS_EXPECTED);
        return None;
    };
    Some(lit.base10_parse::<u64>().unwrap_or(u64::MAX))
}

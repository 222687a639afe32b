//! The derive input reduced to what the expansion needs.

use crate::attr::{self, Errors};
use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Expr, Fields, Ident, LitStr, Path, Type};

pub struct Input<'a> {
    pub ident: &'a Ident,
    pub vis: &'a syn::Visibility,
    pub generics: &'a syn::Generics,
    pub kind: Option<LitStr>,
    pub fields: Vec<Field<'a>>,
}

pub struct Field<'a> {
    pub ident: &'a Ident,
    pub vis: &'a syn::Visibility,
    pub ty: &'a Type,
    pub role: Role,
    /// The `id` or `pending` key that gave the field its role, or the
    /// field's name: where an error about the field as a whole points.
    pub span: Span,
}

// A handful of these live for one macro expansion; boxing buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum Role {
    Id,
    Pending,
    Sharded(Sharded),
    Plain,
}

pub struct Sharded {
    pub neutral: Expr,
    /// `None`: dynamic.
    pub shards: Option<crate::attr::Shards>,
    /// `None`: the conventional `Self::fold_<field>`.
    pub fold: Option<Path>,
    /// `ranked = "board"`: the board the field's folded total feeds.
    pub ranked: Option<LitStr>,
}

impl<'a> Input<'a> {
    pub fn from_syn(input: &'a DeriveInput) -> syn::Result<Self> {
        let named = match &input.data {
            Data::Struct(data) => match &data.fields {
                Fields::Named(named) => named,
                Fields::Unnamed(tuple) => {
                    return Err(not_a_named_struct(tuple.paren_token.span.join()))
                }
                Fields::Unit => return Err(not_a_named_struct(input.ident.span())),
            },
            Data::Enum(data) => return Err(not_a_named_struct(data.enum_token.span)),
            Data::Union(data) => return Err(not_a_named_struct(data.union_token.span)),
        };
        let mut errors = Errors::default();
        let container = attr::container_attrs(&input.attrs, &mut errors);
        let fields = named
            .named
            .iter()
            .map(|field| Field::from_syn(field, &mut errors))
            .collect();
        errors.finish()?;
        Ok(Input {
            ident: &input.ident,
            vis: &input.vis,
            generics: &input.generics,
            kind: container.kind,
            fields,
        })
    }

    pub fn sharded(&self) -> impl Iterator<Item = (&Field<'a>, &Sharded)> {
        self.fields.iter().filter_map(|f| match &f.role {
            Role::Sharded(s) => Some((f, s)),
            _ => None,
        })
    }

    pub fn with_role(&self, want: fn(&Role) -> bool) -> impl Iterator<Item = &Field<'a>> {
        self.fields.iter().filter(move |f| want(&f.role))
    }
}

fn not_a_named_struct(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        "`Shardable` can only be derived for structs with named fields",
    )
}

impl<'a> Field<'a> {
    fn from_syn(field: &'a syn::Field, errors: &mut Errors) -> Self {
        let ident = field.ident.as_ref().expect("named field");
        let attrs = attr::field_attrs(&field.attrs, errors);
        let span = attrs.id.or(attrs.pending).unwrap_or_else(|| ident.span());
        let role = role(attrs, errors);
        Field {
            ident,
            vis: &field.vis,
            ty: &field.ty,
            role,
            span,
        }
    }

    /// The field's name as stored: `r#type` is stored as `type`.
    pub fn name(&self) -> String {
        self.ident.unraw().to_string()
    }
}

fn role(attrs: attr::FieldAttrs, errors: &mut Errors) -> Role {
    let sharding = attrs.sharding_key();
    if let Some(ranked) = attrs
        .ranked
        .as_ref()
        .filter(|_| sharding.is_none() || attrs.id.is_some() || attrs.pending.is_some())
    {
        errors.error(
            ranked.span(),
            "`ranked` feeds a board with a sharded field's total, and this field is not sharded; \
             declare it e.g. `#[shard(neutral = 0, shards = 10, ranked = \"top-questions\")]`",
        );
    }
    if attrs.id.is_some() {
        if let Some(pending) = attrs.pending {
            errors.error(pending, "a field cannot be both `id` and `pending`");
        }
        if let Some((key, span)) = sharding {
            errors.error(
                span,
                format!("the `id` field cannot be sharded; remove `{key}`"),
            );
        }
        return Role::Id;
    }
    if attrs.pending.is_some() {
        if let Some((key, span)) = sharding {
            errors.error(
                span,
                format!("the `pending` field cannot be sharded; remove `{key}`"),
            );
        }
        return Role::Pending;
    }
    let Some(key) = sharding else {
        return Role::Plain;
    };
    let Some((neutral, _)) = attrs.neutral else {
        let message = "a sharded field needs `neutral = <expr>`, the identity element of its fold (e.g. `neutral = 0` for a sum)";
        match &attrs.attr {
            Some(attr) => errors.error_spanned(attr, message),
            None => errors.error(key.1, message),
        }
        return Role::Plain;
    };
    Role::Sharded(Sharded {
        neutral,
        shards: attrs.shards.map(|(n, _)| n),
        fold: attrs.fold.map(|(path, _)| path),
        ranked: attrs.ranked,
    })
}

//! The derive input reduced to what the expansion needs.

use crate::attr::{self, Errors};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Expr, Fields, Ident, LitStr, Path, Type};

pub struct Input<'a> {
    pub ident: &'a Ident,
    pub generics: &'a syn::Generics,
    pub kind: Option<LitStr>,
    pub fields: Vec<Field<'a>>,
}

pub struct Field<'a> {
    pub ident: &'a Ident,
    pub ty: &'a Type,
    pub role: Role,
    /// Span of the field's `#[shard]` attribute, or of the field itself.
    pub span: Span,
}

pub enum Role {
    Id,
    Pending,
    Sharded(Sharded),
    Plain,
}

pub struct Sharded {
    pub neutral: Expr,
    pub shards: Option<u32>,
    /// `None`: the conventional `Self::fold_<field>`.
    pub fold: Option<Path>,
}

impl<'a> Input<'a> {
    pub fn from_syn(input: &'a DeriveInput) -> syn::Result<Self> {
        let named = match &input.data {
            Data::Struct(data) => match &data.fields {
                Fields::Named(named) => named,
                _ => return Err(not_a_named_struct(input.ident.span())),
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
        let span = attrs.span.unwrap_or_else(|| field.span());
        let role = role(attrs, span, errors);
        Field {
            ident,
            ty: &field.ty,
            role,
            span,
        }
    }
}

fn role(attrs: attr::FieldAttrs, span: Span, errors: &mut Errors) -> Role {
    let sharding = attrs.neutral.is_some() || attrs.shards.is_some() || attrs.fold.is_some();
    if let Some(id) = attrs.id {
        if sharding || attrs.pending.is_some() {
            errors.error(id, "the `id` field cannot also be `pending` or sharded");
        }
        return Role::Id;
    }
    if let Some(pending) = attrs.pending {
        if sharding {
            errors.error(pending, "the `pending` field cannot also be sharded");
        }
        return Role::Pending;
    }
    if !sharding {
        return Role::Plain;
    }
    let Some(neutral) = attrs.neutral else {
        errors.error(
            attrs.shards.map_or(span, |(_, s)| s),
            "a sharded field needs `neutral = <expr>`, the identity element of its fold (e.g. `neutral = 0` for a sum)",
        );
        return Role::Plain;
    };
    Role::Sharded(Sharded {
        neutral,
        shards: attrs.shards.map(|(n, _)| n),
        fold: attrs.fold,
    })
}

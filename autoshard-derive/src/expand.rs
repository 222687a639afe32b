//! Generates `impl ::autoshard::Shardable`.
//!
//! Everything the stores need is expressed through the trait's hidden items,
//! indexed by sharded-field position, so the runtime stays non-generic over
//! field layout and the generated code stays small.

use crate::ast::{Field, Input, Role, Sharded};
use crate::attr::Shards;
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Index;

pub fn derive(input: &Input) -> TokenStream {
    let ident = input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let bounds = bounds(input);
    // Rebuilt from the predicates: a user's trailing comma or empty `where`
    // must not leave `,,` or a bare `,` behind.
    let predicates = where_clause.into_iter().flat_map(|w| &w.predicates);
    let where_clause = quote!(where #(#predicates,)* #(#bounds,)*);
    let kind = match &input.kind {
        Some(lit) => quote!(#lit),
        None => {
            let name = syn::ext::IdentExt::unraw(ident).to_string();
            quote!(#name)
        }
    };
    let id_field = input.with_role(|r| matches!(r, Role::Id)).next();
    let id_ident = id_field.map(|f| f.ident);
    let id_ty = id_field.map(|f| f.ty);
    let pending = pending_access(input);
    let (pending_mut, pending_ref) = match &pending {
        Some(p) => (
            quote!(::core::option::Option::Some(&mut #p)),
            quote!(::core::option::Option::Some(&#p)),
        ),
        None => (
            quote!(::core::option::Option::None),
            quote!(::core::option::Option::None),
        ),
    };
    let bind_pending = match &pending {
        Some(p) if input.sharded().next().is_some() => {
            quote!(let __pending = ::autoshard::__private::pending_values::<Self>(&mut #p);)
        }
        _ => quote!(),
    };
    let sharded: Vec<_> = input.sharded().collect();
    let pending_ty = sharded.iter().map(|(f, _)| f.ty);
    let neutrals = sharded.iter().map(|(_, s)| &s.neutral);
    let specs = sharded.iter().map(|(f, s)| {
        let name = f.name();
        let some = |n: u32| quote!(::core::option::Option::Some(#n));
        let none = quote!(::core::option::Option::None);
        let (shards, min_shards) = match s.shards {
            Some(Shards::Fixed(n)) => (some(n), none.clone()),
            Some(Shards::Auto(low, high)) => (some(high), some(low)),
            None => (none.clone(), none),
        };
        quote!(::autoshard::__private::FieldSpec {
            name: #name,
            shards: #shards,
            min_shards: #min_shards,
        })
    });
    let swap = swap_fields(&sharded, &pending);
    let encode_document = encode_document(input);
    let encode_field = per_field(&sharded, |i, f, _| {
        let field = f.ident;
        let name = f.name();
        quote!(#i => ::autoshard::__private::encode_field(Self::KIND, #name, &self.#field))
    });
    let encode_pending = per_field(&sharded, |i, f, s| {
        let name = f.name();
        let slot = Index::from(i);
        let neutral = &s.neutral;
        quote!(#i => ::autoshard::__private::encode_pending(Self::KIND, #name, &__pending.#slot, &#neutral))
    });
    let check_field = per_field(&sharded, |i, f, s| {
        let field = f.ident;
        let name = f.name();
        let fold_fn = fold_fn(f, s);
        quote!(#i => ::autoshard::__private::check_field(
            Self::KIND, #name, &self.#field, __base, __delta, #fold_fn,
        ))
    });
    let fold = per_field(&sharded, |i, f, s| {
        let fold_fn = fold_fn(f, s);
        let neutral = &s.neutral;
        quote!(#i => ::autoshard::__private::fold_values(__values, #neutral, #fold_fn))
    });
    let ranked = ranked(&sharded);
    let construct = construct(input);
    let fields = crate::fields::derive(input, &where_clause);

    quote! {
        #[automatically_derived]
        impl #impl_generics ::autoshard::Shardable for #ident #ty_generics #where_clause {
            type Id = #id_ty;
            // The tuple carries the fields' own spans, so clippy would blame
            // the user's field declarations for its length.
            #[doc(hidden)]
            #[allow(clippy::type_complexity)]
            type __Pending = (#(#pending_ty,)*);
            const KIND: &'static str = #kind;
            #[doc(hidden)]
            const __FIELDS: &'static [::autoshard::__private::FieldSpec] = &[#(#specs),*];
            #ranked

            fn id(&self) -> &Self::Id {
                &self.#id_ident
            }

            #[doc(hidden)]
            // A struct without sharded fields has `()` here, which clippy
            // would flag in the user's crate.
            #[allow(clippy::unused_unit)]
            fn __neutral() -> Self::__Pending {
                (#(#neutrals,)*)
            }

            #[doc(hidden)]
            fn __pending_mut(&mut self) -> ::core::option::Option<&mut ::autoshard::Pending<Self>> {
                #pending_mut
            }

            #[doc(hidden)]
            fn __pending_ref(&self) -> ::core::option::Option<&::autoshard::Pending<Self>> {
                #pending_ref
            }

            #[doc(hidden)]
            fn __swap_pending(&mut self) {
                #swap
            }

            #[doc(hidden)]
            fn __encode_document(&self) -> ::autoshard::Result<::std::string::String> {
                #encode_document
            }

            #[doc(hidden)]
            fn __encode_field(&self, __field: usize) -> ::autoshard::Result<::autoshard::Value> {
                match __field {
                    #(#encode_field,)*
                    _ => ::autoshard::__private::no_such_field(Self::KIND, __field),
                }
            }

            #[doc(hidden)]
            fn __encode_pending(
                &mut self,
                __field: usize,
            ) -> ::autoshard::Result<::core::option::Option<::autoshard::Value>> {
                #bind_pending
                match __field {
                    #(#encode_pending,)*
                    _ => ::autoshard::__private::no_such_field(Self::KIND, __field),
                }
            }

            #[doc(hidden)]
            fn __check_field(
                &self,
                __field: usize,
                __base: &::autoshard::Value,
                __delta: ::core::option::Option<&::autoshard::Value>,
            ) -> ::autoshard::Result<::autoshard::__private::Checked> {
                match __field {
                    #(#check_field,)*
                    _ => ::autoshard::__private::no_such_field(Self::KIND, __field),
                }
            }

            #[doc(hidden)]
            fn __fold(
                __field: usize,
                __values: &mut dyn ::core::iter::Iterator<Item = ::autoshard::Value>,
            ) -> ::core::result::Result<::autoshard::Value, ::autoshard::__private::FoldError> {
                match __field {
                    #(#fold,)*
                    _ => ::core::result::Result::Err(::autoshard::__private::FoldError::NoSuchField(__field)),
                }
            }

            #[doc(hidden)]
            fn __from_parts(
                __id: Self::Id,
                __parts: &mut ::autoshard::__private::Parts,
            ) -> ::autoshard::Result<Self> {
                #construct
            }
        }

        #fields
    }
}

/// `const __RANKED` for a struct with ranked fields (the default, none,
/// otherwise): each field's index and board, and the ranking layer's
/// writer, which the stores below it cannot name themselves.
fn ranked(sharded: &[(&Field, &Sharded)]) -> TokenStream {
    let fields: Vec<_> = sharded
        .iter()
        .enumerate()
        .filter_map(|(i, (_, s))| s.ranked.as_ref().map(|board| quote!((#i, #board))))
        .collect();
    if fields.is_empty() {
        return quote!();
    }
    quote! {
        #[doc(hidden)]
        const __RANKED: ::autoshard::__private::Ranked = ::autoshard::__private::Ranked {
            fields: &[#(#fields),*],
            hook: ::core::option::Option::Some(::autoshard::__private::RANKED_HOOK),
        };
    }
}

/// `self.pending`; validation guarantees it exists when anything is sharded.
fn pending_access(input: &Input) -> Option<TokenStream> {
    input
        .with_role(|r| matches!(r, Role::Pending))
        .next()
        .map(|f| {
            let ident = f.ident;
            quote_spanned!(f.ty_span()=> self.#ident)
        })
}

fn per_field(
    sharded: &[(&Field, &Sharded)],
    arm: impl Fn(usize, &Field, &Sharded) -> TokenStream,
) -> Vec<TokenStream> {
    sharded
        .iter()
        .enumerate()
        .map(|(i, (f, s))| arm(i, f, s))
        .collect()
}

/// The fold as a typed fn pointer. A missing or mistyped `fold_<field>` is
/// reported at the field's name, the expected signature at its type; an
/// explicit `fold = path` is reported at the path.
fn fold_fn(field: &Field, sharded: &Sharded) -> TokenStream {
    let ty = field.ty;
    let ident_span = field.ident.span();
    let path = match &sharded.fold {
        Some(path) => quote!(#path),
        None => {
            let name = format_ident!("fold_{}", field.ident, span = ident_span);
            quote_spanned!(ident_span=> Self::#name)
        }
    };
    let fn_ty = quote_spanned!(field.ty_span()=> fn(#ty, #ty) -> _);
    quote_spanned!(ident_span=> {
        // Spanned at the field's type, so clippy would blame the field.
        #[allow(clippy::type_complexity)]
        let __fold: #fn_ty = #path;
        __fold
    })
}

fn swap_fields(sharded: &[(&Field, &Sharded)], pending: &Option<TokenStream>) -> TokenStream {
    let Some(pending) = pending.as_ref().filter(|_| !sharded.is_empty()) else {
        return quote!();
    };
    let swaps = sharded.iter().enumerate().map(|(i, (f, _))| {
        let field = f.ident;
        let slot = Index::from(i);
        quote!(::core::mem::swap(&mut self.#field, &mut __pending.#slot);)
    });
    quote! {
        let __pending = ::autoshard::__private::pending_values::<Self>(&mut #pending);
        #(#swaps)*
    }
}

fn encode_document(input: &Input) -> TokenStream {
    let puts = input.with_role(|r| matches!(r, Role::Plain)).map(|f| {
        let field = f.ident;
        let name = f.name();
        quote!(__doc.put(#name, &self.#field)?;)
    });
    quote! {
        let mut __doc = ::autoshard::__private::DocumentWriter::new(Self::KIND);
        #(#puts)*
        ::core::result::Result::Ok(__doc.finish())
    }
}

fn construct(input: &Input) -> TokenStream {
    let mut sharded_index = 0usize;
    let inits = input.fields.iter().map(|f| {
        let field = f.ident;
        let name = f.name();
        let value = match &f.role {
            Role::Id => quote!(__id),
            Role::Pending => quote!(::autoshard::Pending::__loaded(__parts.document())),
            Role::Plain => quote!(__parts.take(#name)?),
            Role::Sharded(s) => {
                let i = sharded_index;
                sharded_index += 1;
                let fold_fn = fold_fn(f, s);
                let neutral = &s.neutral;
                quote!(__parts.fold(#i, #neutral, #fold_fn)?)
            }
        };
        quote!(#field: #value)
    });
    quote!(::core::result::Result::Ok(Self { #(#inits,)* }))
}

/// Bounds on field types, spanned at each type so an unsupported type is
/// reported on its own field.
fn bounds(input: &Input) -> Vec<TokenStream> {
    input
        .fields
        .iter()
        .filter_map(|f| {
            let ty = f.ty;
            // The bound's own tokens carry the span too: rustc underlines
            // the bound, and a `quote!` one would point at `#[derive]`.
            let span = f.ty_span();
            let bound = match f.role {
                Role::Id => quote_spanned!(span=> ::autoshard::EntityId),
                Role::Pending => return None,
                Role::Plain => quote_spanned!(span=> ::autoshard::__private::Document),
                Role::Sharded(Sharded {
                    ranked: Some(_), ..
                }) => quote_spanned!(span=> ::autoshard::__private::ShardValue + ::autoshard::__private::RankedScore),
                Role::Sharded(_) => quote_spanned!(span=> ::autoshard::__private::ShardValue),
            };
            Some(quote_spanned!(span=> #ty: #bound))
        })
        .collect()
}

impl Field<'_> {
    fn ty_span(&self) -> proc_macro2::Span {
        syn::spanned::Spanned::span(self.ty)
    }
}

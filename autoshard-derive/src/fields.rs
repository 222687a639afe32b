//! Generates `impl ::autoshard::Queryable`: a struct of field handles, one
//! per field and named like it, that query closures receive
//! (`.filter(|q| q.votes.ge(50))`), so a misspelled field or a value of
//! the wrong type is a compile error.
//!
//! The struct is declared inside `const _: () = { .. };`: it cannot be named
//! and so cannot collide with the user's items, yet the trait's associated
//! type exposes it. Privacy is per module, not per block, so each handle
//! keeps its field's visibility.

use crate::ast::{Input, Role};
use proc_macro2::TokenStream;
use quote::quote;

pub fn derive(input: &Input, where_clause: &TokenStream) -> TokenStream {
    let ident = input.ident;
    let vis = input.vis;
    let (impl_generics, ty_generics, _) = input.generics.split_for_impl();
    let params = &input.generics.params;
    let this = quote!(#ident #ty_generics);
    let mut sharded_index = 0usize;
    let mut decls = Vec::new();
    let mut inits = Vec::new();
    for field in &input.fields {
        let (name, field_ident, ty, field_vis) = (field.name(), field.ident, field.ty, field.vis);
        let (constructor, args) = match &field.role {
            Role::Pending => continue,
            Role::Id => (quote!(__id), quote!(#name)),
            Role::Plain => (quote!(__document), quote!(#name)),
            Role::Sharded(_) => {
                let index = sharded_index;
                sharded_index += 1;
                (quote!(__sharded), quote!(#name, #index))
            }
        };
        let doc = format!("The handle of field `{name}`.");
        decls.push(quote! {
            #[doc = #doc]
            #field_vis #field_ident: ::autoshard::Field<#this, #ty>
        });
        inits.push(quote! {
            #field_ident: ::autoshard::Field::#constructor(#args, |__e: &#this| &__e.#field_ident)
        });
    }
    let doc = format!("Field handles of [`{ident}`] for queries (`autoshard::Queryable`).");
    quote! {
        const _: () = {
            #[doc = #doc]
            // Handles of fields no query names are never read.
            #[allow(dead_code)]
            #vis struct __Fields<#params> #where_clause {
                #(#decls,)*
            }

            #[automatically_derived]
            impl #impl_generics ::autoshard::Queryable for #this #where_clause {
                type Fields = __Fields #ty_generics;
                #[doc(hidden)]
                fn __fields() -> Self::Fields {
                    __Fields { #(#inits,)* }
                }
            }
        };
    }
}

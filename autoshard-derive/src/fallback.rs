//! When the input has errors, emit the errors plus a stub impl so that the
//! rest of the user's crate (shard methods, `db.load::<T>()`) still type-checks
//! and the user sees one message per mistake instead of a cascade.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Type};

pub fn expand(input: &DeriveInput, error: syn::Error) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let error = error.into_compile_error();
    // The declared id type, so that `db.load::<T>(&1)` elsewhere still
    // type-checks; `Never` only when no id field can be found.
    let (id_ty, id_bound) = match id_type(input) {
        Some(ty) => (
            quote!(#ty),
            quote_spanned!(ty.span()=> #ty: ::autoshard::EntityId,),
        ),
        None => (quote!(::autoshard::__private::Never), quote!()),
    };
    let predicates = where_clause.into_iter().flat_map(|w| &w.predicates);
    let where_clause = quote!(where #(#predicates,)* #id_bound);
    quote! {
        #error
        #[automatically_derived]
        impl #impl_generics ::autoshard::Shardable for #ident #ty_generics #where_clause {
            type Id = #id_ty;
            #[doc(hidden)]
            type __Pending = ();
            const KIND: &'static str = "";
            #[doc(hidden)]
            const __FIELDS: &'static [::autoshard::__private::FieldSpec] = &[];
            fn id(&self) -> &Self::Id { ::core::unimplemented!() }
            fn __neutral() -> Self::__Pending {}
            fn __pending_mut(&mut self) -> ::core::option::Option<&mut ::autoshard::Pending<Self>> { ::core::option::Option::None }
            fn __pending_ref(&self) -> ::core::option::Option<&::autoshard::Pending<Self>> { ::core::option::Option::None }
            fn __swap_pending(&mut self) {}
            fn __encode_document(&self) -> ::autoshard::Result<::std::string::String> { ::core::unimplemented!() }
            fn __encode_field(&self, _: usize) -> ::autoshard::Result<::autoshard::Value> { ::core::unimplemented!() }
            fn __encode_pending(&mut self, _: usize) -> ::autoshard::Result<::core::option::Option<::autoshard::Value>> { ::core::unimplemented!() }
            fn __check_field(
                &self,
                _: usize,
                _: &::autoshard::Value,
                _: ::core::option::Option<&::autoshard::Value>,
            ) -> ::autoshard::Result<::autoshard::__private::Checked> { ::core::unimplemented!() }
            fn __fold(
                _: usize,
                _: &mut dyn ::core::iter::Iterator<Item = ::autoshard::Value>,
            ) -> ::core::result::Result<::autoshard::Value, ::autoshard::__private::FoldError> { ::core::unimplemented!() }
            fn __from_parts(
                _: Self::Id,
                _: &mut ::autoshard::__private::Parts,
            ) -> ::autoshard::Result<Self> { ::core::unimplemented!() }
        }
    }
}

/// The type of the first field marked `#[shard(id)]`, read leniently: the
/// attribute may be the very thing that failed to parse.
fn id_type(input: &DeriveInput) -> Option<&Type> {
    let Data::Struct(data) = &input.data else {
        return None;
    };
    let Fields::Named(fields) = &data.fields else {
        return None;
    };
    fields
        .named
        .iter()
        .find(|field| field.attrs.iter().any(marks_id))
        .map(|field| &field.ty)
}

fn marks_id(attr: &syn::Attribute) -> bool {
    let syn::Meta::List(list) = &attr.meta else {
        return false;
    };
    attr.path().is_ident("shard")
        && list
            .tokens
            .clone()
            .into_iter()
            .any(|token| matches!(token, proc_macro2::TokenTree::Ident(ident) if ident == "id"))
}

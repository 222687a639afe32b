//! When the input has errors, emit the errors plus a stub impl so that the
//! rest of the user's crate (shard methods, `db.load::<T>()`) still type-checks
//! and the user sees one message per mistake instead of a cascade.

use proc_macro2::TokenStream;
use quote::quote;
use syn::DeriveInput;

pub fn expand(input: &DeriveInput, error: syn::Error) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let error = error.into_compile_error();
    quote! {
        #error
        #[automatically_derived]
        impl #impl_generics ::autoshard::Shardable for #ident #ty_generics #where_clause {
            type Id = ::autoshard::__private::Never;
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

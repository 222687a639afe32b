//! Macros for [`autoshard`](https://docs.rs/autoshard). Depend on `autoshard`
//! and use them from there; the generated code names `::autoshard` paths.
//!
//! The derive is split by compiler phase: `ast` parses, `valid` checks
//! the struct as a whole, `expand` generates (and `fields` the field
//! handles queries name), and `fallback` emits a stub impl next to the
//! errors so one mistake gives one message.

mod ast;
mod attr;
mod expand;
mod fallback;
mod fields;
mod method;
mod valid;

use proc_macro::TokenStream;
use syn::{parse_macro_input, DeriveInput, ImplItemFn};

/// See `autoshard::Shardable` for the attribute reference.
#[proc_macro_derive(Shardable, attributes(shard))]
pub fn derive_shardable(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    let result = ast::Input::from_syn(&input).and_then(|ast| {
        valid::validate(&ast)?;
        Ok(expand::derive(&ast))
    });
    result
        .unwrap_or_else(|error| fallback::expand(&input, error))
        .into()
}

/// See `autoshard::shard_method`.
#[proc_macro_attribute]
pub fn shard_method(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = parse_macro_input!(item as ImplItemFn);
    method::shard_method(args.into(), item.clone())
        .unwrap_or_else(|error| keep_item(error, &item))
        .into()
}

/// See `autoshard::shard_fold`.
#[proc_macro_attribute]
pub fn shard_fold(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = parse_macro_input!(item as ImplItemFn);
    method::shard_fold(args.into(), item.clone())
        .unwrap_or_else(|error| method::fold_stub(error, &item))
        .into()
}

/// Emitting the item unchanged beside the error keeps its callers compiling,
/// so the user sees the one real mistake.
fn keep_item(error: syn::Error, item: &ImplItemFn) -> proc_macro2::TokenStream {
    let mut tokens = error.into_compile_error();
    quote::ToTokens::to_tokens(item, &mut tokens);
    tokens
}

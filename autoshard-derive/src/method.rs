//! `#[shard_method]` and `#[shard_fold]`.
//!
//! A shard method's body is moved verbatim into a hidden sibling and the
//! original name becomes a wrapper that runs it twice (the paper's Figure 4):
//! first with every sharded field swapped with its pending slot, so the
//! pending delta captures the change, then on the aggregate. Moving instead of
//! rewriting keeps `return`, `?`, generics and `Self` working unchanged.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ImplItemFn, Pat, PatIdent, ReceiverKind, ReturnType, Type};

pub fn shard_method(args: TokenStream, item: ImplItemFn) -> syn::Result<TokenStream> {
    no_arguments("shard_method", args)?;
    let sig = &item.sig;
    if let Some(token) = sig.asyncness {
        return Err(syn::Error::new(token.span, "`#[shard_method]` cannot be `async`: the body runs twice and must finish before the object is saved"));
    }
    if let Some(token) = sig.constness {
        return Err(syn::Error::new(
            token.span,
            "`#[shard_method]` cannot be `const`",
        ));
    }
    check_receiver(sig)?;

    let hidden = format_ident!("__autoshard_{}", sig.ident);
    let mut inner = item.clone();
    inner.sig.ident = hidden.clone();
    inner.vis = syn::Visibility::Inherited;
    inner.attrs.retain(|a| !a.path().is_ident("doc"));

    let mut wrapper_sig = sig.clone();
    let mut first_args = Vec::new();
    let mut second_args = Vec::new();
    for (i, arg) in wrapper_sig.inputs.iter_mut().skip(1).enumerate() {
        let FnArg::Typed(typed) = arg else {
            unreachable!("receiver is first")
        };
        // Spanned at the argument's type, so a by-value argument that is not
        // `Clone` is reported there and not at `#[shard_method]`.
        let name = format_ident!("__autoshard_arg{}", i, span = typed.ty.span());
        first_args.push(first_run_arg(&name, &typed.ty));
        second_args.push(quote!(#name));
        *typed.pat = Pat::Ident(PatIdent {
            attrs: Vec::new(),
            by_ref: None,
            mutability: None,
            ident: name,
            subpat: None,
        });
    }
    let attrs = item.attrs.iter().filter(|a| !a.path().is_ident("inline"));
    let vis = &item.vis;
    Ok(quote! {
        #[doc(hidden)]
        #[allow(clippy::needless_pass_by_ref_mut, clippy::too_many_arguments)]
        #inner

        #(#attrs)*
        #vis #wrapper_sig {
            if ::autoshard::__private::begin_shard_run(self) {
                let _ = Self::#hidden(self, #(#first_args),*);
                ::autoshard::__private::begin_aggregate_run(self);
                let __result = Self::#hidden(self, #(#second_args),*);
                ::autoshard::__private::end_shard_method(self);
                __result
            } else {
                // Called from inside another shard method: the outer call
                // already chose which view this run updates.
                Self::#hidden(self, #(#second_args),*)
            }
        }
    })
}

/// The first run must not consume what the second run needs: shared
/// references are `Copy`, unique ones are reborrowed, owned values cloned.
fn first_run_arg(name: &syn::Ident, ty: &Type) -> TokenStream {
    match ty {
        Type::Reference(r) if r.mutability.is_some() => quote!(&mut *#name),
        Type::Reference(_) => quote!(#name),
        _ => quote_spanned!(ty.span()=> ::core::clone::Clone::clone(&#name)),
    }
}

/// `&mut self`, or the same spelled `self: &mut Self`.
fn check_receiver(sig: &syn::Signature) -> syn::Result<()> {
    let message =
        "`#[shard_method]` needs a `&mut self` receiver: it updates the object's sharded fields";
    match sig.inputs.first() {
        Some(FnArg::Receiver(r)) if receives_mut_ref(r) => Ok(()),
        Some(FnArg::Receiver(r)) => Err(syn::Error::new_spanned(r, message)),
        _ => Err(syn::Error::new(sig.paren_token.span.join(), message)),
    }
}

/// `&mut self`, `&'a mut self`, or `self: &mut T`; any other receiver kind
/// (a future one included) is refused.
fn receives_mut_ref(receiver: &syn::Receiver) -> bool {
    match &receiver.kind {
        ReceiverKind::Reference(_, _, mutability) => mutability.is_some(),
        ReceiverKind::Typed(_, ty) => is_mut_ref(ty),
        _ => false,
    }
}

fn is_mut_ref(ty: &Type) -> bool {
    matches!(ty, Type::Reference(r) if r.mutability.is_some())
}

pub fn shard_fold(args: TokenStream, item: ImplItemFn) -> syn::Result<TokenStream> {
    no_arguments("shard_fold", args)?;
    let sig = &item.sig;
    if let Some(token) = sig.asyncness {
        return Err(syn::Error::new(
            token.span,
            "`#[shard_fold]` cannot be `async`",
        ));
    }
    if let Some(FnArg::Receiver(r)) = sig.inputs.first() {
        let name = &sig.ident;
        return Err(syn::Error::new_spanned(
            r,
            format!("`#[shard_fold]` takes no `self`; write `fn {name}(a: T, b: T) -> T` with `T` the field's type"),
        ));
    }
    if sig.inputs.len() != 2 {
        return Err(syn::Error::new(
            sig.paren_token.span.join(),
            format!(
                "`#[shard_fold]` takes exactly two arguments of the field's type, found {}",
                sig.inputs.len()
            ),
        ));
    }
    if let ReturnType::Default = sig.output {
        return Err(syn::Error::new(
            sig.ident.span(),
            "`#[shard_fold]` must return the folded value (the field's type, or `Result` of it)",
        ));
    }
    Ok(quote!(#item))
}

/// Stands in for a fold whose signature was refused: generic, so the
/// derive's `fn(T, T) -> _` still type-checks against it and the user sees
/// only the signature error. The body is dropped; it is checked again once
/// the signature is fixed.
pub fn fold_stub(error: syn::Error, item: &ImplItemFn) -> TokenStream {
    let error = error.into_compile_error();
    let vis = &item.vis;
    let ident = &item.sig.ident;
    quote! {
        #error
        #[allow(dead_code)]
        #vis fn #ident<__AutoshardT>(_: __AutoshardT, _: __AutoshardT) -> __AutoshardT {
            ::core::unreachable!()
        }
    }
}

fn no_arguments(name: &str, args: TokenStream) -> syn::Result<()> {
    if args.is_empty() {
        Ok(())
    } else {
        Err(syn::Error::new_spanned(
            args,
            format!("`#[{name}]` takes no arguments"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::receives_mut_ref;

    fn receiver(source: &str) -> syn::Receiver {
        syn::parse_str(source).unwrap()
    }

    #[test]
    fn only_unique_borrows_of_self_are_receivers() {
        let accepted = [
            "&mut self",
            "&'a mut self",
            "self: &mut Self",
            "mut self: &mut Self",
        ];
        for source in accepted {
            assert!(receives_mut_ref(&receiver(source)), "{source}");
        }
        // `mut self` guards syn 3's trap: `Receiver::mutability` is the
        // binding's `mut` there, while `&mut self` keeps its `mut` in the kind.
        let refused = [
            "self",
            "mut self",
            "&self",
            "&'a self",
            "self: &Self",
            "self: Box<Self>",
        ];
        for source in refused {
            assert!(!receives_mut_ref(&receiver(source)), "{source}");
        }
    }
}

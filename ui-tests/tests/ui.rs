//! Compile-time checks of the derive and the attribute macros.
//!
//! Each `tests/ui/<mistake>.rs` must fail to compile with exactly the message
//! in its `.stderr`. Each `tests/ui/pass/*.rs` must compile (under `deny` of
//! the lints a careful crate turns on) and run: those are test targets of
//! their own (`Cargo.toml`), so trybuild only checks. The toolchain is pinned
//! (rust-toolchain.toml) so the snapshots stay stable. After changing a
//! message: `TRYBUILD=overwrite cargo test -p autoshard-ui-tests`, then read
//! every changed `.stderr`.

#[test]
fn ui() {
    // trybuild builds the cases as a workspace of its own, in its own target
    // directory (`target/tests/trybuild`), so on a clean clone it compiles
    // every dev-dependency of this package once more: hence a package with
    // autoshard on SQLite as its only one, and no `pass` cases here, so that
    // trybuild runs `cargo check` and generates no code.
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}

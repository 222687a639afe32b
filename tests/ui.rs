//! Compile-time checks of the derive and the attribute macros.
//!
//! Each `tests/ui/<mistake>.rs` must fail to compile with exactly the message
//! in its `.stderr`; each `tests/ui/pass/*.rs` must compile and run. The
//! toolchain is pinned (rust-toolchain.toml) so the snapshots stay stable.
//! After changing a message: `TRYBUILD=overwrite cargo test --test ui`,
//! then read every changed `.stderr`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

//! Compile-time checks of the derive and the attribute macros.
//!
//! Each `tests/ui/<mistake>.rs` must fail to compile with exactly the message
//! in its `.stderr`; each `tests/ui/pass/*.rs` must compile and run. The
//! toolchain is pinned (rust-toolchain.toml) so the snapshots stay stable.
//! After changing a message: `TRYBUILD=overwrite cargo test -p autoshard-ui-tests`,
//! then read every changed `.stderr`.

#[test]
fn ui() {
    // trybuild builds the cases as a workspace of its own, in its own target
    // directory (`target/tests/trybuild`), so on a clean clone it compiles
    // every dev-dependency of this package once more (hence a package with
    // autoshard on SQLite as its only one), and the root's `[profile.dev]`
    // does not reach it. The cases need no debugger and the `pass` ones run for
    // milliseconds: without debug info the dependencies compile and the
    // ~60 case binaries link faster (issue 20 item 2; BENCHMARKS.md, "Test
    // time"). The nested `cargo` inherits this process's environment, and
    // this binary has no other test to race with the write.
    if std::env::var_os("CARGO_PROFILE_DEV_DEBUG").is_none() {
        std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "false");
    }
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

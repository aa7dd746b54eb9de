//! The README's two commands must build on a fresh machine with only the Rust toolchain: `xtask`
//! (which `cargo xtask ci` builds before it can install anything) and `runner` (the main job,
//! `cargo run --release -p runner`) must not depend, in their default features, on a crate whose
//! build needs a system package. Today that crate is
//! `ggml-sys-bleedingedge` (cmake and libclang), which only the tests and `cargo xtask bench ops`
//! (through xtask's `ggml` feature) may link.

use std::process::Command;

/// Crates whose build scripts need system packages that a fresh machine lacks.
const NEEDS_SYSTEM_PACKAGES: &[&str] = &["ggml-sys-bleedingedge", "bindgen", "clang-sys", "cmake", "shaderc-sys"];

#[test]
fn xtask_default_build_needs_no_system_package() {
    for name in dependencies("xtask") {
        assert!(
            !NEEDS_SYSTEM_PACKAGES.contains(&name.as_str()),
            "xtask's default build depends on `{name}`, which needs system packages: keep it behind a \
             feature that only the benchmarks enable"
        );
    }
}

/// The main job (`cargo run --release -p runner`) compiles no C at all: no `cc` build dependency
/// (the tokenizer's regex is pure Rust, not oniguruma; its suffix-array helper without its C++
/// feature), no crate that needs a system package, and no Vulkan at build time (the loader is
/// opened at run time).
#[test]
fn the_runner_builds_without_a_c_compiler() {
    let deps = dependencies("runner");
    assert!(deps.iter().any(|d| d == "tokenizers"), "unexpected cargo tree output: {deps:?}");
    for name in deps {
        assert!(
            !NEEDS_SYSTEM_PACKAGES.contains(&name.as_str()) && !["cc", "onig_sys", "onig"].contains(&name.as_str()),
            "the runner's build depends on `{name}`"
        );
    }
}

/// The names of `package` and every crate its default build compiles (normal and build edges).
fn dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--package", package, "--edges", "normal,build", "--prefix", "none", "--format", "{p}"])
        .args(["--manifest-path", concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")])
        .output()
        .expect("running cargo tree");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(tree.lines().any(|l| l.starts_with(&format!("{package} "))), "unexpected cargo tree output:\n{tree}");
    tree.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
}

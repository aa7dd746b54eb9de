//! The fuzz targets' regression run, on the stable toolchain: every committed seed
//! (`fuzz/seeds/<target>/`: valid inputs, and each input the fuzzer crashed on, added with its fix)
//! goes through the same check as its libFuzzer target (`fuzz/checks.rs`, included here), so CI
//! replays them in seconds without nightly or cargo-fuzz.

#[path = "../../fuzz/checks.rs"]
mod checks;

use std::path::PathBuf;

/// Runs `check` on every seed of `target` (at least one: no seeds test nothing), naming the input
/// that fails.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target);
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "{}: no seeds", dir.display());
    for p in seeds {
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| check(&data));
        assert!(r.is_ok(), "{target}: the check failed on {}", p.display());
    }
}

#[test]
fn gguf_seeds() {
    replay("gguf", checks::gguf);
}

#[test]
fn spec_seeds() {
    replay("spec", checks::spec);
}

#[test]
fn fixture_seeds() {
    replay("fixture", checks::fixture);
}

#[test]
fn npy_seeds() {
    replay("npy", checks::npy);
}

#[test]
fn tokenizer_seeds() {
    replay("tokenizer", checks::tokenizer);
}

#[test]
fn gbnf_seeds() {
    replay("gbnf", checks::gbnf);
}

#[test]
fn json_schema_seeds() {
    replay("json_schema", checks::json_schema);
}

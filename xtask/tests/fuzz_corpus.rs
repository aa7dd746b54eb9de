//! The fuzz targets' regression run, on the stable toolchain: every committed seed
//! (`fuzz/seeds/<target>/`: valid inputs, and each input the fuzzer crashed on, added with its fix)
//! goes through the same entry point and invariant as its libFuzzer target
//! (`fuzz/fuzz_targets/<target>.rs`), so CI replays them in seconds without nightly or cargo-fuzz.

use std::path::PathBuf;

/// The inputs of one corpus (at least one: an empty corpus tests nothing).
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target);
    let mut v: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "{}: no seeds", dir.display());
    v
}

#[test]
fn gguf_corpus() {
    for (p, data) in corpus("gguf") {
        match gguf::Gguf::from_bytes("fuzz.gguf", data) {
            Ok(g) => {
                for t in g.tensors() {
                    let (info, bytes) = g.tensor(&t.name).expect("an indexed tensor");
                    assert_eq!(bytes.len(), info.size, "{}", p.display());
                }
            }
            Err(e) => assert!(e.to_string().starts_with("fuzz.gguf: "), "{}: {e}", p.display()),
        }
    }
}

#[test]
fn spec_corpus() {
    for (_, data) in corpus("spec") {
        let Ok(text) = std::str::from_utf8(&data) else { continue };
        if let Ok(mut chain) = sampling::Chain::parse(text) {
            let row = [0.5f32, -1.0, 3.0, 2.0, f32::NEG_INFINITY, 0.0, 1.5, -0.25];
            let _ = chain.run(&row);
        }
    }
}

#[test]
fn fixture_corpus() {
    for (p, data) in corpus("fixture") {
        let Ok(text) = std::str::from_utf8(&data) else { continue };
        if let Err(e) = graph::fixture::parse(text) {
            assert!(!e.to_string().is_empty(), "{}", p.display());
        }
    }
}

#[test]
fn npy_corpus() {
    for (p, data) in corpus("npy") {
        if let Ok(a) = npy::parse(&data) {
            assert_eq!(a.data.len(), a.shape.iter().product::<usize>(), "{}", p.display());
        }
    }
}

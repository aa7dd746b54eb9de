//! Property test: a valid file with random bytes overwritten, bytes inserted or removed, or cut
//! short, is read without a panic, and any error names the file. (The libFuzzer target
//! `fuzz/fuzz_targets/gguf.rs` explores the same entry point: `cargo xtask fuzz`.)

mod common;

use gguf::Gguf;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_files_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut b = common::sample().bytes();
        for (at, byte, kind) in edits {
            let i = at.index(b.len());
            match kind {
                0 | 1 => b[i] = byte,
                2 => b.insert(i, byte),
                _ => { b.remove(i); }
            }
        }
        if cut.index(8) == 0 {
            let n = cut.index(b.len());
            b.truncate(n);
        }
        let len = b.len();
        match Gguf::from_bytes("fuzz.gguf", b) {
            Ok(g) => {
                for t in g.tensors() {
                    let (_, data) = g.tensor(&t.name).unwrap();
                    prop_assert_eq!(data.len(), t.size);
                    prop_assert!(t.offset + t.size <= len);
                }
            }
            Err(e) => prop_assert!(e.to_string().starts_with("fuzz.gguf: "), "{}", e),
        }
    }
}

//! llama.cpp's own example grammars (its `grammars/*.gbnf`), read at test time from the folder
//! `LLAMA_GRAMMARS_DIR` names; none of them is copied into this repository. `cargo xtask ci`
//! fetches them (llama-cpp-python 0.3.36's source archive from PyPI, which vendors llama.cpp,
//! SHA-256 checked) into `target/llama-grammars` and sets the variable. Elsewhere:
//!
//! ```text
//! git clone https://github.com/ggml-org/llama.cpp /tmp/llama.cpp
//! LLAMA_GRAMMARS_DIR=/tmp/llama.cpp/grammars cargo test -p grammar --test llama_grammars
//! ```
//!
//! Without it the test says loudly that it skipped (and fails under CI).
//!
//! Every `*.gbnf` there must build and give a first mask over a byte vocabulary; a few of them
//! (where present) must also take or refuse sample texts of ours, fed byte by byte with each byte
//! of an accepted text allowed by the mask before it is taken.

use grammar::{Grammar, Matcher, Vocab};
use std::path::PathBuf;
use std::sync::Arc;

fn byte_vocab() -> Arc<Vocab> {
    let mut pieces = vec![b"</s>".to_vec()];
    pieces.extend((1u8..=0xff).map(|b| vec![b]));
    Arc::new(Vocab::new(pieces, &[0]))
}

/// Whether `text`, fed byte by byte, is taken whole with every byte allowed first, and can end.
fn takes(g: &Grammar, vocab: &Arc<Vocab>, text: &str) -> bool {
    let mut m = Matcher::new(g, Arc::clone(vocab));
    for &b in text.as_bytes() {
        if !m.allows(u32::from(b)).unwrap() || m.accept(u32::from(b)).is_err() {
            return false;
        }
    }
    m.can_end()
}

#[test]
fn llama_cpp_grammars() {
    let Some(dir) = std::env::var_os("LLAMA_GRAMMARS_DIR").map(PathBuf::from) else {
        sched::testing::skip(
            "llama_cpp_grammars",
            "LLAMA_GRAMMARS_DIR is not set (cargo xtask ci fetches llama.cpp's grammars and sets it)",
        );
        return;
    };
    let vocab = byte_vocab();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "gbnf"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .gbnf file in {}", dir.display());
    let mut problems = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let g = match Grammar::new(&text) {
            Ok(g) => g,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        if let Err(e) = Matcher::new(&g, Arc::clone(&vocab)).mask() {
            problems.push(format!("{name}: the first mask failed: {e}"));
        }
        let (good, bad): (&[&str], &[&str]) = match name.as_str() {
            "json.gbnf" => {
                (&["{}", r#"{"a": 1, "b": [true, null, "x"], "c": {"d": -2.5}}"#], &["", r#"{"a" 1}"#, r#"{"a": 1,}"#])
            }
            "arithmetic.gbnf" => (&["1+2=3\n", "x*(y-2)=10\n"], &["", "1+2=3", "=3\n"]),
            "list.gbnf" => (&["- one\n- two\n"], &["", "one\n", "- one"]),
            "chess.gbnf" => (&["1. e4 e5\n2. Nf3 Nc6\n"], &["", "1. e4"]),
            _ => (&[], &[]),
        };
        for s in good {
            if !g.matches(s) || !takes(&g, &vocab, s) {
                problems.push(format!("{name}: should take {s:?}"));
            }
        }
        for s in bad {
            if g.matches(s) || takes(&g, &vocab, s) {
                problems.push(format!("{name}: should refuse {s:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

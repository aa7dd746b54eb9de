//! Our own grammars in the style of llama.cpp's `grammars/` folder (`tests/grammars/*.gbnf`,
//! written for this crate): each must build, accept its sample sentences and reject its samples of
//! near misses. Every sample is checked with `Grammar::matches` and with a matcher fed the text one
//! byte per token (so that every multi-byte character arrives split), where each byte of a
//! sentence must be allowed by the mask before it is accepted.

use grammar::{Grammar, Matcher, Vocab};
use std::sync::Arc;

/// A vocabulary of every byte 0x01..=0xFF as its own token (token id = byte value) plus an
/// end-of-generation token 0.
fn byte_vocab() -> Arc<Vocab> {
    let mut pieces = vec![b"</s>".to_vec()];
    pieces.extend((1u8..=0xff).map(|b| vec![b]));
    Arc::new(Vocab::new(pieces, &[0]))
}

/// Whether the matcher, fed `text` byte by byte, takes it all and can end, and the first byte it
/// accepted although its mask refused it (a sentence of the grammar should have none).
fn match_bytes(g: &Grammar, vocab: &Arc<Vocab>, text: &str) -> (bool, Option<usize>) {
    let mut m = Matcher::new(g, Arc::clone(vocab));
    let mut refused = None;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        let t = u32::from(b);
        let allowed = m.allows(t).unwrap();
        if m.accept(t).is_err() {
            return (false, refused);
        }
        if !allowed && refused.is_none() {
            refused = Some(i);
        }
    }
    let end = m.can_end();
    assert_eq!(m.allows(0).unwrap(), end, "{text:?}: the end-of-generation token disagrees with can_end");
    (end, refused)
}

fn check(file: &str, text: &str, good: &[&str], bad: &[&str]) {
    let g = Grammar::new(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let vocab = byte_vocab();
    let mut problems = Vec::new();
    for (s, want) in good.iter().map(|s| (s, true)).chain(bad.iter().map(|s| (s, false))) {
        if g.matches(s) != want {
            problems.push(format!("{file}: {s:?}: Grammar::matches says {}", !want));
        }
        let (got, refused) = match_bytes(&g, &vocab, s);
        if got != want {
            problems.push(format!("{file}: {s:?}: the byte matcher says {got}"));
        }
        if let (true, Some(i)) = (want, refused) {
            problems.push(format!("{file}: {s:?}: byte {i} was accepted but the mask refused it"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn json() {
    check(
        "json.gbnf",
        include_str!("grammars/json.gbnf"),
        &[
            "{}",
            " { } ",
            r#"{"a": 1}"#,
            r#"{"name": "Zoë", "tags": ["x", "y"], "nested": {"ok": true, "n": null}}"#,
            "{\n  \"pi\": 3.14159,\n  \"big\": -12e+30,\n  \"list\": [1, 2.5, -0, 1E3]\n}",
            r#"{"esc": "tab\t quote\" slash\/ \u00e9 😀 中文"}"#,
            r#"{"empty": [], "deep": [[[{}]]]}"#,
        ],
        &[
            "",
            "[]",
            "\"just a string\"",
            r#"{"a" 1}"#,
            r#"{"a": 1,}"#,
            r#"{"a": 01}"#,
            r#"{"a": .5}"#,
            r#"{"a": tru}"#,
            r#"{"a": "bad \x escape"}"#,
            "{\"ctl\": \"a\u{1}b\"}",
            r#"{'a': 1}"#,
            r#"{"a": 1}}"#,
        ],
    );
}

#[test]
fn json_arr() {
    check(
        "json_arr.gbnf",
        include_str!("grammars/json_arr.gbnf"),
        &[
            "[]",
            "[\n]",
            "[\n  {\"id\": 1, \"name\": \"a\"},\n  {\"id\": 2, \"name\": \"b\"}\n]",
            "[1,2,3]",
            "[\"é\", [true, false], null]",
        ],
        &["{}", "[1,]", "[\n  {\"id\": 1}\n  {\"id\": 2}\n]", "[1 2]", "[", "[]\n"],
    );
}

#[test]
fn arithmetic() {
    check(
        "arithmetic.gbnf",
        include_str!("grammars/arithmetic.gbnf"),
        &["1+2=3\n", "2 * (x + 1) = 10\n", "a=b\nc_1 / 4.5 = -d\n", "((1))=1\n"],
        &["1+2=3", "1+=3\n", "=3\n", "1+2\n", "X=1\n", "(1=1\n", "1 == 1\n"],
    );
}

#[test]
fn list() {
    check(
        "list.gbnf",
        include_str!("grammars/list.gbnf"),
        &["- one\n", "- one\n- two\n  * nested, with – dashes\n    + deeper\n", "* ünïcödé item\n"],
        &["", "- one", "-one\n", "- \n", "        - too deep\n", "1. numbered\n"],
    );
}

#[test]
fn chess() {
    check(
        "chess.gbnf",
        include_str!("grammars/chess.gbnf"),
        &[
            "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6",
            "1. d4 Nf6 2. c4 e6 3. Nc3 Bb4 4. Qc2 O-O 5. a3 Bxc3+ 6. Qxc3 b6",
            "1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0",
            "12. exd8=Q+ Rxd8 13. Nbd2 O-O-O",
            "1. e4",
        ],
        &["", "1.e4", "1. e9", "1. Ke", "0. e4", "1. e4 e5 2. Nf3 Nc6 1/2", "1. Zf3", "1. O-O-O-O"],
    );
}

#[test]
fn english() {
    check(
        "english.gbnf",
        include_str!("grammars/english.gbnf"),
        &["Hello, world.", "It's a fine day; the sun is out. Isn't it?\n", "I counted 42 sheep - then I slept!"],
        &["hello world.", "Hello world", "Hello  world.", "Hello world .", "Hello, world. ", "Héllo."],
    );
}

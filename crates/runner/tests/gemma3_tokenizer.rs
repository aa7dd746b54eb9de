//! The SPM tokenizer on Gemma 3's vocabulary (262,144 tokens) against llama.cpp itself: every
//! string of the corpus in `data/gemma3_tokenizer.json` (written by `data/gemma3_tokenizer_ref.py`
//! through llama-cpp-python) must encode to exactly llama.cpp's ids, with and without BOS, decode
//! back to exactly the text llama.cpp's detokenizer gives, and stream to that same text token by
//! token.

mod common;

use runner::Tokenizer;
use std::sync::OnceLock;

/// Gemma 3's tokenizer, read once from the model file's metadata.
fn tokenizer() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| {
        let g = gguf::Gguf::open(&common::gemma3_path()).unwrap();
        runner::gguf_model::tokenizer(&g).unwrap()
    })
}

struct Case {
    text: String,
    ids_bos: Vec<u32>,
    ids: Vec<u32>,
    decoded_bos: String,
    decoded: String,
}

fn cases() -> Vec<Case> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gemma3_tokenizer.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let ids = |c: &serde_json::Value, k: &str| -> Vec<u32> {
        c[k].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
    };
    let s = |c: &serde_json::Value, k: &str| c[k].as_str().unwrap().to_string();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            text: s(c, "text"),
            ids_bos: ids(c, "ids_bos"),
            ids: ids(c, "ids"),
            decoded_bos: s(c, "decoded_bos"),
            decoded: s(c, "decoded"),
        })
        .collect()
}

#[test]
fn metadata_is_gemmas() {
    let t = tokenizer();
    assert_eq!(t.n_vocab(), 262_144);
    assert_eq!((t.bos(), t.eos(), t.adds_bos()), (Some(2), Some(1), true));
    assert!(t.is_eog(1), "<eos> ends generation");
    assert!(t.is_eog(106), "<end_of_turn> ends generation");
    assert!(!t.is_eog(105), "<start_of_turn> does not");
    // llama.cpp's end-of-generation set for this file: <eos>, <end_of_turn> and </s> (a text on its
    // list, made a control token though the file says normal), nothing else
    let eog: Vec<u32> = (0..262_144).filter(|&i| t.is_eog(i)).collect();
    assert_eq!(eog, [1, 106, 212]);
    // llama-cpp-python 0.3.36: tokenize(b"a</s>b", add_bos=True, special=True)
    assert_eq!(t.encode("a</s>b").unwrap(), [2, 236746, 212, 236763], "</s> matched whole");
    let v = t.grammar_vocab();
    assert_eq!(v.piece(236743), b" ", "\u{2581} is a space");
    assert_eq!(v.piece(238 + 0x41), b"A", "<0x41> is its byte");
    assert_eq!(v.piece(106), b"<end_of_turn>", "control tokens are verbatim");
}

#[test]
fn every_corpus_string_encodes_and_decodes_as_llama_cpp() {
    let t = tokenizer();
    let cases = cases();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut bad = Vec::new();
    for c in &cases {
        let ids = t.encode(&c.text).unwrap();
        if ids != c.ids_bos {
            bad.push(format!("{:?}: encode gave {ids:?}, llama.cpp {:?}", c.text, c.ids_bos));
        }
        let no_bos = &ids[1..];
        if no_bos != c.ids.as_slice() {
            bad.push(format!("{:?}: without BOS {no_bos:?}, llama.cpp {:?}", c.text, c.ids));
        }
        for (ids, want) in [(&c.ids_bos, &c.decoded_bos), (&c.ids, &c.decoded)] {
            let text = t.decode(ids).unwrap();
            if &text != want {
                bad.push(format!("{:?}: decode gave {text:?}, llama.cpp {want:?}", c.text));
            }
            let mut st = t.stream();
            let streamed: String = ids.iter().map(|&i| st.push(t, i).unwrap()).collect();
            if &streamed != want {
                bad.push(format!("{:?}: streaming gave {streamed:?}, llama.cpp {want:?}", c.text));
            }
        }
    }
    assert!(bad.is_empty(), "{} of {} cases disagree:\n{}", bad.len(), cases.len(), bad.join("\n"));
}

#[test]
fn byte_fallback_streams_whole_characters() {
    // U+20000 is no token of the vocabulary: its four UTF-8 bytes come as four byte tokens, and
    // the stream says nothing until the last one.
    let t = tokenizer();
    let ids = t.encode("a𠀀").unwrap();
    let bytes: Vec<u32> = "𠀀".bytes().map(|b| 238 + u32::from(b)).collect();
    assert_eq!(ids[ids.len() - 4..], bytes[..]);
    let mut st = t.stream();
    let pieces: Vec<String> = ids.iter().map(|&i| st.push(t, i).unwrap()).collect();
    assert_eq!(pieces[pieces.len() - 4..], ["", "", "", "𠀀"]);
    assert_eq!(pieces.concat(), "<bos>a𠀀");
}

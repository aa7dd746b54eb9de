//! The byte-level BPE tokenizer built from GGUF-style metadata: round trips through merges,
//! digits split as the pre-tokenizer says, special tokens, streaming of split UTF-8 characters,
//! and every rejected input by its message.

use runner::{Tokenizer, TokenizerSpec};

/// GPT-2's byte-to-character map: printable bytes stand for themselves, the others are shifted
/// to code points from 256 up.
fn byte_char(b: u8) -> char {
    let printable = |b: u8| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    if printable(b) {
        return b as char;
    }
    let n = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).unwrap()
}

fn enc(s: &str) -> String {
    s.bytes().map(byte_char).collect()
}

/// 256 byte tokens, then merged tokens for " the", "he", "ll", "llo", "hello", "12", and two
/// control tokens.
fn spec(pre: &str) -> TokenizerSpec {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    let merges = [("h", "e"), ("l", "l"), ("ll", "o"), ("he", "llo"), (" ", "t"), (" t", "he"), ("1", "2")];
    let mut m = Vec::new();
    for (a, b) in merges {
        let (a, b) = (enc(a), enc(b));
        m.push(format!("{a} {b}"));
        tokens.push(format!("{a}{b}"));
    }
    tokens.push("<|im_start|>".into());
    tokens.push("<|im_end|>".into());
    let mut types = vec![1; tokens.len()];
    let n = types.len();
    types[n - 2] = 3;
    types[n - 1] = 3;
    TokenizerSpec {
        model: "gpt2".into(),
        pre: pre.into(),
        tokens,
        merges: m,
        token_types: types,
        bos: Some(n as u32 - 2),
        eos: Some(n as u32 - 1),
        eot: None,
        add_bos: false,
    }
}

#[test]
fn grammar_vocab_has_byte_pieces_and_the_end_tokens() {
    let t = Tokenizer::new(&spec("gpt2")).unwrap();
    let v = t.grammar_vocab();
    assert_eq!(v.len(), t.n_vocab());
    // Every byte token is its byte, also the ones byte-level BPE shifts (space, newline, 0xff).
    for b in [b' ', b'\n', b'a', 0x7f, 0xad, 0xff] {
        assert_eq!(v.piece(u32::from(b)), [b], "byte {b:#x}");
    }
    // NUL cuts a piece (llama.cpp reads pieces as C strings).
    assert!(v.piece(0).is_empty());
    assert_eq!(v.piece(256 + 5), b" the");
    let n = t.n_vocab() as u32;
    assert_eq!(v.piece(n - 2), b"<|im_start|>", "control tokens are verbatim");
    assert!(v.is_eog(n - 1) && t.is_eog(n - 1), "the EOS token ends generation");
    assert!(!v.is_eog(n - 2));
}

#[test]
fn merges_apply_and_text_round_trips() {
    let t = Tokenizer::new(&spec("gpt2")).unwrap();
    // "hello" is one token (256 + 3: h e -> he, l l -> ll, ll o -> llo, he llo -> hello), " the" one.
    let ids = t.encode("hello the").unwrap();
    assert_eq!(ids, [259, 261]);
    for text in ["hello the", "Hello, wörld! 12 345\n\n  x", "日本語 🙂", ""] {
        let ids = t.encode(text).unwrap();
        assert_eq!(t.decode(&ids).unwrap(), text, "{ids:?}");
    }
}

#[test]
fn the_pre_tokenizer_decides_digit_splits() {
    // GPT-2 keeps " 12" together as one piece, so "12" merges; SmolLM's splits digits one by one.
    let gpt2 = Tokenizer::new(&spec("gpt2")).unwrap();
    let smol = Tokenizer::new(&spec("smollm")).unwrap();
    assert_eq!(gpt2.encode("12").unwrap(), [262]);
    assert_eq!(smol.encode("12").unwrap(), [u32::from(b'1'), u32::from(b'2')]);
    assert_eq!(smol.decode(&smol.encode("x12y").unwrap()).unwrap(), "x12y");
}

#[test]
fn control_tokens_are_special_and_bos_is_added_when_asked() {
    let mut s = spec("smollm");
    let t = Tokenizer::new(&s).unwrap();
    let ids = t.encode("<|im_start|>hello<|im_end|>").unwrap();
    assert_eq!(ids, [263, 259, 264]);
    assert_eq!(t.decode(&ids).unwrap(), "<|im_start|>hello<|im_end|>");
    assert_eq!(t.eos(), Some(264));
    s.add_bos = true;
    let t = Tokenizer::new(&s).unwrap();
    assert_eq!(t.encode("hello").unwrap(), [263, 259]);
}

#[test]
fn streaming_holds_back_split_characters() {
    let t = Tokenizer::new(&spec("gpt2")).unwrap();
    let ids = t.encode("aé🙂").unwrap();
    // 'a', then é's two bytes, then the emoji's four: one byte token each.
    assert_eq!(ids.len(), 7);
    let mut st = t.stream();
    let pieces: Vec<String> = ids.iter().map(|&i| st.push(&t, i).unwrap()).collect();
    assert_eq!(pieces, ["a", "", "é", "", "", "", "🙂"]);
}

#[test]
fn bad_metadata_is_rejected_by_name() {
    let err = |s: TokenizerSpec| Tokenizer::new(&s).unwrap_err().to_string();
    let e = err(TokenizerSpec { model: "llama".into(), ..spec("gpt2") });
    assert!(e.contains("tokenizer.ggml.model = \"llama\"") && e.contains("unsupported tokenizer type"), "{e}");
    let e = err(spec("tekken-99"));
    assert!(e.contains("tokenizer.ggml.pre = \"tekken-99\"") && e.contains("unsupported pre-tokenizer"), "{e}");
    let mut s = spec("gpt2");
    s.merges[2] = "nospace".into();
    let e = err(s);
    assert!(e.contains("tokenizer.ggml.merges[2]") && e.contains("\"nospace\""), "{e}");
    let mut s = spec("gpt2");
    s.eos = Some(100_000);
    let e = err(s);
    assert!(e.contains("eos_token_id") && e.contains("100000 is outside the vocabulary of 265"), "{e}");
    let mut s = spec("gpt2");
    s.token_types.pop();
    assert!(err(s).contains("264 entries for 265 tokens"));
    let e = err(TokenizerSpec { tokens: vec![], token_types: vec![], bos: None, eos: None, ..spec("gpt2") });
    assert!(e.contains("vocabulary is empty"), "{e}");
    let t = Tokenizer::new(&spec("gpt2")).unwrap();
    let e = t.decode(&[265]).unwrap_err().to_string();
    assert!(e.contains("token 265 is outside"), "{e}");
}

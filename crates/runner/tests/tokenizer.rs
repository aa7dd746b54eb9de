//! The tokenizers built from GGUF-style metadata. Byte-level BPE: round trips through merges,
//! digits split as the pre-tokenizer says, special tokens, streaming of split UTF-8 characters,
//! and every rejected input by its message. SPM (`llama`): merges by score, special tokens, byte
//! fallback, the space prefix, streaming over byte tokens, rejected metadata.

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
        ..TokenizerSpec::default()
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
    let e = err(TokenizerSpec { model: "bert".into(), ..spec("gpt2") });
    assert!(e.contains("tokenizer.ggml.model = \"bert\"") && e.contains("unsupported tokenizer type"), "{e}");
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

/// A SentencePiece-style (`llama`) vocabulary: `<pad> <eos> <bos> <unk>`, `<start_of_turn>`
/// (control), the 256 byte tokens, then `▁`, `a`, `b`, `ab`, `▁ab` with scores.
fn spm_spec() -> TokenizerSpec {
    let mut tokens: Vec<String> = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>"].map(String::from).to_vec();
    let mut token_types = vec![3, 3, 3, 2, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        token_types.push(6);
    }
    let mut scores = vec![0.0; tokens.len()];
    for (t, s) in [("▁", -1.0), ("a", -2.0), ("b", -3.0), ("ab", -4.0), ("▁ab", -5.0)] {
        tokens.push(t.into());
        token_types.push(1);
        scores.push(s);
    }
    TokenizerSpec {
        model: "llama".into(),
        pre: "default".into(),
        tokens,
        scores,
        token_types,
        bos: Some(2),
        eos: Some(1),
        unk: Some(3),
        add_bos: true,
        add_space_prefix: Some(false),
        ..TokenizerSpec::default()
    }
}

/// The id of byte `b` in [`spm_spec`].
fn spm_byte(b: u8) -> u32 {
    5 + u32::from(b)
}

#[test]
fn spm_merges_specials_and_byte_fallback() {
    let t = Tokenizer::new(&spm_spec()).unwrap();
    let ab = 261 + 3;
    assert_eq!(t.encode("ab ab").unwrap(), [2, ab, 261 + 4]);
    let ids = t.encode("<start_of_turn>é").unwrap();
    assert_eq!(ids, [2, 4, spm_byte(0xc3), spm_byte(0xa9)]);
    assert_eq!(t.decode(&ids).unwrap(), "<bos><start_of_turn>é");
    assert!(t.is_eog(1) && !t.is_eog(4));
    // Without add_space_prefix set, llama.cpp's default for SPM applies: a space first.
    let t = Tokenizer::new(&TokenizerSpec { add_space_prefix: None, ..spm_spec() }).unwrap();
    assert_eq!(t.encode("ab").unwrap(), [2, 261 + 4]);
    assert_eq!(t.decode(&[261 + 4]).unwrap(), "ab", "and decoding drops it again");
}

#[test]
fn spm_streaming_holds_back_characters_split_over_byte_tokens() {
    let t = Tokenizer::new(&spm_spec()).unwrap();
    let ids = t.encode("aé🙂").unwrap();
    let mut want = vec![2, 262];
    want.extend("é🙂".bytes().map(spm_byte));
    assert_eq!(ids, want, "é and the emoji fall back to their bytes");
    let mut st = t.stream();
    let pieces: Vec<String> = ids.iter().map(|&i| st.push(&t, i).unwrap()).collect();
    assert_eq!(pieces, ["<bos>", "a", "", "é", "", "", "", "🙂"]);
}

#[test]
fn spm_bad_metadata_is_rejected_by_name() {
    let mut s = spm_spec();
    s.scores.pop();
    let e = Tokenizer::new(&s).unwrap_err().to_string();
    assert!(e.contains("tokenizer.ggml.scores") && e.contains("265 entries for 266 tokens"), "{e}");
    let mut s = spm_spec();
    s.tokens[5] = "<0xZZ>".into();
    let e = Tokenizer::new(&s).unwrap_err().to_string();
    assert!(e.contains("<0xZZ>") && e.contains("byte token"), "{e}");
    let e = Tokenizer::new(&TokenizerSpec { unk: Some(999), ..spm_spec() }).unwrap_err().to_string();
    assert!(e.contains("unknown_token_id") && e.contains("999 is outside"), "{e}");
}

//! What each fuzz target checks, one function per target, shared by the libFuzzer targets
//! (`fuzz_targets/<target>.rs`) and the stable replay of the seeds (`xtask/tests/fuzz_corpus.rs`).
//! Each takes any bytes and panics only where the code under test breaks its contract.

/// Any bytes through `Gguf::from_bytes` give a file whose tensors can all be read, or an error
/// naming the file; never a panic, an abort or an out-of-bounds read.
pub fn gguf(data: &[u8]) {
    match gguf::Gguf::from_bytes("fuzz.gguf", data.to_vec()) {
        Ok(g) => {
            for t in g.tensors() {
                let (info, bytes) = g.tensor(&t.name).expect("an indexed tensor");
                assert_eq!(bytes.len(), info.size);
            }
            for (k, _) in g.metadata() {
                let _ = g.get_u32(k);
                let _ = g.get_f32(k);
                let _ = g.get_str_array(k);
                let _ = g.get_i32_array(k);
                let _ = g.get_f32_array(k);
            }
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz.gguf: ")),
    }
}

/// Any text through `sampling::Chain::parse` (the SPEC language) is a chain or an error; a chain
/// that parses runs on a small row without panicking.
pub fn spec(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(mut chain) = sampling::Chain::parse(text) {
        let row = [0.5f32, -1.0, 3.0, 2.0, f32::NEG_INFINITY, 0.0, 1.5, -0.25];
        let _ = chain.run(&row);
    }
}

/// Any text through `graph::fixture::parse` is a graph, built through the builder's checks, or an
/// error naming its line.
pub fn fixture(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = graph::fixture::parse(text) {
        assert!(e.to_string().starts_with("line "), "{e}");
    }
}

/// Any bytes through `npy::parse` are an array whose element count is its shape's product, or an
/// error; never an allocation the file does not back.
pub fn npy(data: &[u8]) {
    if let Ok(a) = npy::parse(data) {
        assert_eq!(a.data.len(), a.shape.iter().product::<usize>());
    }
}

/// The byte-level BPE tokenizer (`runner::Tokenizer` over the `tokenizers` crate) built from
/// GGUF-style metadata: 256 byte tokens, a few merges and two control tokens. The first byte picks
/// the mode: even, the rest as UTF-8 is encoded, every id is in the vocabulary and the ids decode
/// back to the text (unless it holds control-token text); odd, the rest as little-endian u32 ids is
/// decoded: text or an error, never a panic.
pub fn tokenizer(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let t = fuzz_tokenizer();
    if mode % 2 == 0 {
        let Ok(text) = std::str::from_utf8(rest) else { return };
        let ids = t.encode(text).expect("any text encodes");
        assert!(ids.iter().all(|&i| (i as usize) < t.n_vocab()));
        if !text.contains("<|im_") {
            assert_eq!(t.decode(&ids).expect("its own ids decode"), text);
        }
    } else {
        let ids: Vec<u32> = rest.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
        let _ = t.decode(&ids);
    }
}

/// GPT-2's byte-to-character map: printable bytes stand for themselves, the others are shifted to
/// code points from 256 up.
fn byte_char(b: u8) -> char {
    let printable = |b: u8| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    if printable(b) {
        return b as char;
    }
    let n = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).expect("a code point")
}

/// The tokenizer target's vocabulary, built once.
fn fuzz_tokenizer() -> &'static runner::Tokenizer {
    static T: std::sync::OnceLock<runner::Tokenizer> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let enc = |s: &str| s.bytes().map(byte_char).collect::<String>();
        let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
        let mut merges = Vec::new();
        for (a, b) in [("h", "e"), ("l", "l"), ("ll", "o"), ("he", "llo"), (" ", "t"), (" t", "he"), ("1", "2")] {
            let (a, b) = (enc(a), enc(b));
            merges.push(format!("{a} {b}"));
            tokens.push(format!("{a}{b}"));
        }
        tokens.push("<|im_start|>".into());
        tokens.push("<|im_end|>".into());
        let n = tokens.len();
        let mut token_types = vec![1; n];
        token_types[n - 2] = 3;
        token_types[n - 1] = 3;
        let spec = runner::TokenizerSpec {
            model: "gpt2".into(),
            pre: "smollm".into(),
            tokens,
            merges,
            token_types,
            bos: Some(n as u32 - 2),
            eos: Some(n as u32 - 1),
            eot: None,
            add_bos: false,
        };
        runner::Tokenizer::new(&spec).expect("the fuzz tokenizer builds")
    })
}

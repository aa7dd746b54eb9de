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
            ..Default::default()
        };
        runner::Tokenizer::new(&spec).expect("the fuzz tokenizer builds")
    })
}

/// The longest GBNF text the `gbnf` target reads, and the most tokens it accepts per grammar: a
/// grammar of this size must parse, and its matcher move, well within a second.
const GBNF_MAX_LEN: usize = 2048;
const GBNF_STEPS: usize = 12;

/// Any text through `grammar::Grammar::new` (and `Grammar::with_vocab`, which resolves `<text>`
/// tokens in a small vocabulary) is a grammar or an error; never a panic, a stall or a stack
/// overflow. A grammar that parses drives a `Matcher` over that vocabulary (every byte, a few
/// words and tags, an end-of-generation token) for a few steps: `allows(t)` agrees with `mask()`
/// for every token, the end-of-generation token is allowed exactly where the grammar may end, a
/// refused token is an error that leaves the mask as it was, and an allowed token (picked by the
/// input's bytes) is accepted. Where llama.cpp's own mask and accept disagree, so may the
/// matcher's (the crate follows llama.cpp): the mask refuses an empty text, invalid UTF-8 and a
/// partial character no class can take, which accept takes; and a token element reached inside a
/// token lets the mask allow a token that accept refuses. So a refused token must be an error
/// only where its text and everything accepted before are whole UTF-8 characters, and an allowed
/// one must be accepted only in a grammar without token elements; elsewhere an error must still
/// leave the matcher as it was. Too many parse stacks (a documented error) ends the walk.
pub fn gbnf(data: &[u8]) {
    use grammar::GrammarError;
    if data.len() > GBNF_MAX_LEN {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    let vocab = gbnf_vocab();
    let plain = grammar::Grammar::new(text);
    let with_vocab = grammar::Grammar::with_vocab(text, "root", vocab.as_ref());
    let g = match (plain, with_vocab) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.rules(), b.rules(), "the vocabulary changes a grammar without `<text>` tokens");
            b
        }
        // Only `<text>` tokens need the vocabulary.
        (Ok(_), Err(e)) => panic!("parses without a vocabulary but not with one: {e}"),
        (Err(_), Ok(b)) => b,
        (Err(a), Err(b)) => {
            assert!(!a.to_string().is_empty() && !b.to_string().is_empty());
            return;
        }
    };
    let rules = g.rules();
    let _ = rules.to_string();
    let has_tokens = (0..rules.len()).any(|i| rules.rule(i).iter().any(|e| e.is_token()));
    let mut m = grammar::Matcher::new(&g, std::sync::Arc::clone(vocab));
    let n = vocab.len() as u32;
    let eog = n - 1;
    let bit = |mask: &[u32], t: u32| mask[(t / 32) as usize] >> (t % 32) & 1 == 1;
    let whole = |t: u32| t == eog || std::str::from_utf8(vocab.piece(t)).is_ok_and(|s| !s.is_empty());
    assert!(matches!(m.allows(n), Err(GrammarError::UnknownToken { .. })));
    // The bytes that pick tokens: the input's, from its end (its start is mostly `root ::=`).
    let mut picks = data.iter().rev().copied().cycle();
    let mut pick = |len: usize| usize::from(picks.next().unwrap_or(0)) % len.max(1);
    // Whether everything accepted so far was whole characters (no partial one pending).
    let mut clear = true;
    for _ in 0..GBNF_STEPS {
        let mask = match m.mask() {
            Ok(mask) => mask,
            Err(GrammarError::TooManyStacks { .. }) => return,
            Err(e) => panic!("mask: {e}"),
        };
        assert_eq!(mask.len(), vocab.mask_words());
        assert_eq!(bit(&mask, eog), m.can_end(), "the end-of-generation token against can_end");
        let (mut allowed, mut refused) = (Vec::new(), Vec::new());
        for t in 0..n {
            let a = m.allows(t).unwrap_or_else(|e| panic!("allows({t}) after a mask: {e}"));
            assert_eq!(a, bit(&mask, t), "allows({t}) against the mask");
            if a { allowed.push(t) } else { refused.push(t) }
        }
        if let Some(&t) = refused.get(pick(refused.len())) {
            let mut probe = m.clone();
            match probe.accept(t) {
                Err(GrammarError::Rejected { .. } | GrammarError::TooManyStacks { .. }) => {
                    assert_eq!(probe.mask().ok().as_deref(), Some(&mask[..]), "a refused token {t} moved the matcher");
                }
                Err(e) => panic!("accept({t}) of a refused token: {e}"),
                Ok(()) => assert!(!(clear && whole(t)), "the refused token {t} is accepted"),
            }
        }
        let Some(&t) = allowed.get(pick(allowed.len())) else { return };
        match m.accept(t) {
            // After end-of-generation, nothing more.
            Ok(()) if t == eog => return,
            Ok(()) => clear &= whole(t),
            Err(GrammarError::TooManyStacks { .. }) => return,
            Err(GrammarError::Rejected { .. }) if has_tokens => {
                assert_eq!(m.mask().ok().as_deref(), Some(&mask[..]), "a rejected token {t} moved the matcher");
            }
            Err(e) => panic!("accept({t}) of an allowed token: {e}"),
        }
    }
}

/// The `gbnf` target's vocabulary: every byte (token `b` is byte `b`; byte 0's text is empty, as
/// a NUL cuts a piece), a few words, JSON pieces and tags that `<text>` tokens can name, a
/// two-byte character, and an end-of-generation token last.
fn gbnf_vocab() -> &'static std::sync::Arc<grammar::Vocab> {
    static V: std::sync::OnceLock<std::sync::Arc<grammar::Vocab>> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let mut pieces: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for w in [
            "true", "false", "null", "{\"", "\":", "\",", "12", "ab", "abc", " a", "<think>", "</think>", "<|tool|>",
            "é", "<|eot|>",
        ] {
            pieces.push(w.as_bytes().to_vec());
        }
        let eog = pieces.len() as u32 - 1;
        std::sync::Arc::new(grammar::Vocab::new(pieces, &[eog]))
    })
}

/// The longest schema text the `json_schema` target reads.
const SCHEMA_MAX_LEN: usize = 4096;

/// Any text through `schema::to_grammar_str` is a grammar or an error; never a panic. A grammar
/// it writes parses with `grammar::Grammar::new`, but for two limits shared with llama.cpp: the
/// parser's repetition limits (2000), which large counts exceed (documented by the schema crate)
/// and so do the rules that exclude a long property name (700 characters or so) under
/// `additionalProperties`; and the left recursion of a recursive reference (`$ref`) reached
/// first through `anyOf` (documented).
pub fn json_schema(data: &[u8]) {
    if data.len() > SCHEMA_MAX_LEN {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(gbnf) = schema::to_grammar_str(text) else { return };
    match grammar::Grammar::new(&gbnf) {
        Ok(_) => {}
        Err(grammar::GrammarError::LeftRecursion { .. }) if text.contains("$ref") => {}
        Err(e @ grammar::GrammarError::Parse { .. }) if e.to_string().contains("exceeds sane defaults") => {}
        Err(e) => panic!("the grammar of schema {text:?} does not parse: {e}\n{gbnf}"),
    }
}

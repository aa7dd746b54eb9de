//! `Tokenizer`: text to token ids and back from a GGUF file's `tokenizer.ggml.*` metadata, for
//! the two tokenizer types this runner supports. Byte-level BPE (`gpt2`) is run by the
//! `tokenizers` crate with its pure-Rust regex engine: the pre-tokenizer is rebuilt from
//! llama.cpp's per-type split expressions (applied in order, each piece isolated), followed by the
//! byte-to-character mapping; control tokens are special tokens (matched whole in the input,
//! printed by `decode`). SentencePiece-style (`llama`, as LLaMA 2 and Gemma) is llama.cpp's own
//! algorithm, in [`spm`]. Both share BOS handling, the end-of-generation set and streaming: text
//! streams out through [`TextStream`], which holds back an incomplete UTF-8 sequence until its
//! last byte arrives.

mod spm;

use crate::error::{Result, RunnerError};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BPE, Merges, Vocab};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior};

/// GPT-2's split expression (llama.cpp's form: no trailing `\s+` alternative).
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// LLaMA 3's split expression (case-insensitive contractions spelled out, digits in threes).
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's split expression (single digits).
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The split expressions of a `tokenizer.ggml.pre` name, as llama.cpp applies them; `None` for a
/// name this runner does not know.
pub fn split_expressions(pre: &str) -> Option<Vec<&'static str>> {
    Some(match pre {
        "default" | "gpt2" | "gpt-2" | "mpt" | "olmo" | "jais" => vec![GPT2],
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
            vec![r"\p{N}", GPT2]
        }
        "llama3" | "llama-v3" | "llama-bpe" => vec![LLAMA3],
        "qwen2" | "stablelm2" => vec![QWEN2],
        _ => return None,
    })
}

/// GGUF token type of a control token (`tokenizer.ggml.token_type`).
pub const TOKEN_TYPE_CONTROL: i32 = 3;
/// GGUF token types whose text is printed as it is (llama.cpp's `token_to_piece` with special
/// tokens rendered): unknown, control, user-defined.
const TOKEN_TYPES_VERBATIM: [i32; 3] = [2, 3, 4];
/// GGUF token type of a normal token (byte-level characters decoded to bytes).
const TOKEN_TYPE_NORMAL: i32 = 1;
/// The texts llama.cpp (as of llama-cpp-python 0.3.36's `llama-vocab.cpp`) treats as end of
/// generation wherever a vocabulary holds them, besides the EOS and EOT ids of the metadata; it
/// also makes them control tokens when the file does not.
const EOG_TEXTS: [&str; 22] = [
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "[e~[",
];

/// The byte a byte-level BPE character stands for (GPT-2's byte-to-character table, inverted):
/// printable bytes are themselves, the others were shifted to U+0100 and up in order.
fn byte_of(c: char) -> Option<u8> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let c = c as u32;
    if c < 256 {
        return if printable(c) { Some(c as u8) } else { None };
    }
    (0u32..256).filter(|&b| !printable(b)).nth((c - 256) as usize).map(|b| b as u8)
}

/// A token's text as bytes, as llama.cpp's `token_to_piece` renders it with special tokens:
/// normal tokens' byte-level characters decoded to bytes (a character outside the table kept as
/// its UTF-8), unknown, control and user-defined tokens verbatim, others (unused, byte) empty.
fn piece_bytes(text: &str, ty: i32) -> Vec<u8> {
    if TOKEN_TYPES_VERBATIM.contains(&ty) {
        return text.as_bytes().to_vec();
    }
    if ty != TOKEN_TYPE_NORMAL {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match byte_of(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.to_string().as_bytes()),
        }
    }
    out
}

/// What a tokenizer is built from (the `tokenizer.ggml.*` metadata).
#[derive(Debug, Clone, Default)]
pub struct TokenizerSpec {
    /// `tokenizer.ggml.model`: `gpt2` (byte-level BPE) or `llama` (SentencePiece-style).
    pub model: String,
    /// `tokenizer.ggml.pre`: the pre-tokenizer's name (BPE only; SPM has none).
    pub pre: String,
    /// `tokenizer.ggml.tokens`: token text by id (byte-level characters for BPE, `▁` for a space
    /// in SPM).
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.merges`: `"left right"` pairs, highest priority first (BPE).
    pub merges: Vec<String>,
    /// `tokenizer.ggml.scores`: merge scores by id (SPM; empty means all 0, as llama.cpp).
    pub scores: Vec<f32>,
    /// `tokenizer.ggml.token_type` (may be empty).
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.eot_token_id`.
    pub eot: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: bool,
    /// `tokenizer.ggml.unknown_token_id` (SPM: byte fallback's last resort).
    pub unk: Option<u32>,
    /// `tokenizer.ggml.add_space_prefix` (SPM; absent: true, llama.cpp's default for SPM).
    pub add_space_prefix: Option<bool>,
}

/// The algorithm behind a [`Tokenizer`].
#[derive(Debug, Clone)]
enum Inner {
    /// Byte-level BPE, run by the `tokenizers` crate.
    Bpe(Box<tokenizers::Tokenizer>),
    /// llama.cpp's SPM tokenizer.
    Spm(Box<spm::Spm>),
}

/// A byte-level BPE or SPM tokenizer; see the module docs.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    inner: Inner,
    n_vocab: usize,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    /// Token texts as bytes and the end-of-generation tokens, for grammars.
    vocab: std::sync::Arc<grammar::Vocab>,
    /// llama.cpp's `add_space_prefix` (its `detokenize` strips one leading space).
    add_space_prefix: bool,
    /// llama.cpp's `clean_spaces` (see [`clean_spaces`]).
    clean_spaces: bool,
}

/// llama.cpp's `clean_spaces` for a vocabulary (`llama_vocab::impl::load`): false for
/// SentencePiece; for byte-level BPE true except for the pre-tokenizers that turn it off (of the
/// ones this runner knows: `smollm`, `qwen2`, `command-r`).
pub fn clean_spaces(model: &str, pre: &str) -> bool {
    model == "gpt2" && !matches!(pre, "smollm" | "qwen2" | "command-r")
}

/// `bytes` as text the way llama.cpp's BPE reads it (`unicode_cpts_from_utf8`): each byte of an
/// invalid or cut UTF-8 sequence becomes U+FFFD.
fn text_of_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        out.extend(std::iter::repeat_n('\u{FFFD}', chunk.invalid().len()));
    }
    out
}

fn tok_err(what: impl Into<String>, reason: impl std::fmt::Display) -> RunnerError {
    RunnerError::Tokenizer { what: what.into(), reason: reason.to_string() }
}

impl Tokenizer {
    /// Builds the tokenizer; an unsupported model or pre-tokenizer, an empty vocabulary, a
    /// malformed merge or a special id outside the vocabulary is an error naming it.
    pub fn new(spec: &TokenizerSpec) -> Result<Tokenizer> {
        if !matches!(spec.model.as_str(), "gpt2" | "llama") {
            return Err(tok_err(
                format!("tokenizer.ggml.model = {:?}", spec.model),
                "unsupported tokenizer type (supported: byte-level BPE, \"gpt2\", and SentencePiece-style, \"llama\")",
            ));
        }
        let n_vocab = spec.tokens.len();
        if n_vocab == 0 {
            return Err(tok_err("tokenizer.ggml.tokens", "the vocabulary is empty"));
        }
        if !spec.token_types.is_empty() && spec.token_types.len() != n_vocab {
            return Err(tok_err(
                "tokenizer.ggml.token_type",
                format!("{} entries for {n_vocab} tokens", spec.token_types.len()),
            ));
        }
        for (what, id) in [
            ("tokenizer.ggml.bos_token_id", spec.bos),
            ("tokenizer.ggml.eos_token_id", spec.eos),
            ("tokenizer.ggml.eot_token_id", spec.eot),
            ("tokenizer.ggml.unknown_token_id", spec.unk),
        ] {
            if let Some(id) = id.filter(|&i| i as usize >= n_vocab) {
                return Err(tok_err(what, format!("{id} is outside the vocabulary of {n_vocab} tokens")));
            }
        }
        let (inner, pieces) = if spec.model == "llama" {
            let spm = spm::Spm::new(&spm::SpmSpec {
                tokens: &spec.tokens,
                scores: &spec.scores,
                token_types: &spec.token_types,
                control_texts: &EOG_TEXTS,
                unk: spec.unk,
                add_space_prefix: spec.add_space_prefix.unwrap_or(true),
            })?;
            let pieces = spm.pieces().to_vec();
            (Inner::Spm(Box::new(spm)), pieces)
        } else {
            let ty = |i: usize| spec.token_types.get(i).copied().unwrap_or(TOKEN_TYPE_NORMAL);
            let pieces = spec.tokens.iter().enumerate().map(|(i, t)| piece_bytes(t, ty(i))).collect();
            (Inner::Bpe(Box::new(Self::bpe(spec)?)), pieces)
        };
        let mut eog: Vec<u32> = [spec.eos, spec.eot].into_iter().flatten().collect();
        eog.extend(
            spec.tokens.iter().enumerate().filter(|(_, t)| EOG_TEXTS.contains(&t.as_str())).map(|(i, _)| i as u32),
        );
        let vocab = std::sync::Arc::new(grammar::Vocab::new(pieces, &eog));
        Ok(Tokenizer {
            inner,
            n_vocab,
            bos: spec.bos,
            eos: spec.eos,
            add_bos: spec.add_bos,
            vocab,
            add_space_prefix: spec.add_space_prefix.unwrap_or(spec.model == "llama"),
            clean_spaces: clean_spaces(&spec.model, &spec.pre),
        })
    }

    /// The byte-level BPE tokenizer of `spec` (its pre-tokenizer, merges and control tokens).
    fn bpe(spec: &TokenizerSpec) -> Result<tokenizers::Tokenizer> {
        let exprs = split_expressions(&spec.pre)
            .ok_or_else(|| tok_err(format!("tokenizer.ggml.pre = {:?}", spec.pre), "unsupported pre-tokenizer type"))?;
        let mut vocab = Vocab::default();
        for (i, t) in spec.tokens.iter().enumerate() {
            vocab.entry(t.clone()).or_insert(i as u32);
        }
        let mut merges: Merges = Vec::with_capacity(spec.merges.len());
        for (i, m) in spec.merges.iter().enumerate() {
            // The separator is the first space after the first character (a merge's left part may
            // itself be a space character in some vocabularies).
            let first = m.chars().next().map_or(0, char::len_utf8);
            let sp = m[first..].find(' ').map(|p| p + first);
            match sp {
                Some(p) if p + 1 < m.len() => merges.push((m[..p].to_string(), m[p + 1..].to_string())),
                _ => {
                    return Err(tok_err(format!("tokenizer.ggml.merges[{i}]"), format!("{m:?} is not \"left right\"")));
                }
            }
        }
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(matches!(spec.pre.as_str(), "llama3" | "llama-v3" | "llama-bpe"))
            .build()
            .map_err(|e| tok_err("building the BPE model", e))?;
        let mut pre: Vec<PreTokenizerWrapper> = Vec::new();
        for x in exprs {
            let split = Split::new(SplitPattern::Regex(x.to_string()), SplitDelimiterBehavior::Isolated, false)
                .map_err(|e| tok_err(format!("pre-tokenizer expression {x:?}"), e))?;
            pre.push(split.into());
        }
        pre.push(ByteLevel::new(false, false, false).into());
        let mut inner = tokenizers::Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(Sequence::new(pre)));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        let specials: Vec<AddedToken> = spec
            .token_types
            .iter()
            .zip(&spec.tokens)
            .filter(|(ty, _)| **ty == TOKEN_TYPE_CONTROL)
            .map(|(_, t)| AddedToken::from(t.clone(), true))
            .collect();
        inner.add_special_tokens(&specials);
        Ok(inner)
    }

    /// The vocabulary as grammars see it: each token's text as bytes (llama.cpp's
    /// `token_to_piece` with special tokens rendered) and the end-of-generation tokens (the EOS
    /// and EOT ids, and the texts llama.cpp treats as ends wherever they appear).
    pub fn grammar_vocab(&self) -> &std::sync::Arc<grammar::Vocab> {
        &self.vocab
    }

    /// Whether `t` ends generation (see [`Tokenizer::grammar_vocab`]).
    pub fn is_eog(&self, t: u32) -> bool {
        self.vocab.is_eog(t)
    }

    /// Vocabulary size.
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }

    /// The beginning-of-sequence token, if the model names one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token, where the model has one.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether [`Tokenizer::encode`] puts a BOS token first.
    pub fn adds_bos(&self) -> bool {
        self.add_bos && self.bos.is_some()
    }

    /// Token ids of `text` as llama.cpp's `tokenize(text, add_special, parse_special)`: the
    /// BOS token first where `add_special` and the model adds one; without `parse_special`,
    /// control tokens' texts are tokenized as text ([`Tokenizer::encode`] is both true).
    pub fn encode_with(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        if parse_special {
            let mut ids = self.encode(text)?;
            if self.adds_bos() && !add_special && !ids.is_empty() {
                ids.remove(0);
            }
            return Ok(ids);
        }
        let mut ids = Vec::new();
        if add_special
            && self.add_bos
            && let Some(b) = self.bos
        {
            ids.push(b);
        }
        match &self.inner {
            Inner::Bpe(t) => {
                // A copy that reads control tokens' texts as text (made per call: rare).
                let mut plain = t.clone();
                plain.set_encode_special_tokens(true);
                let enc = plain.encode(text, false).map_err(|e| tok_err(format!("encoding {text:?}"), e))?;
                ids.extend_from_slice(enc.get_ids());
            }
            Inner::Spm(s) => s.encode_with(text, false, &mut ids)?,
        }
        Ok(ids)
    }

    /// Token ids of `text`, with the BOS token first when the model asks for it.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        if self.add_bos
            && let Some(b) = self.bos
        {
            ids.push(b);
        }
        match &self.inner {
            Inner::Bpe(t) => {
                let enc = t.encode(text, false).map_err(|e| tok_err(format!("encoding {text:?}"), e))?;
                ids.extend_from_slice(enc.get_ids());
            }
            Inner::Spm(s) => s.encode(text, &mut ids)?,
        }
        Ok(ids)
    }

    /// DRY's string breakers' view of this tokenizer ([`sampling::samplers::BreakerTokenizer`]):
    /// llama.cpp's `detokenize` flags and its `tokenize(text, add_special = false,
    /// parse_special = false)` (no BOS; control tokens' texts tokenized as text). Its tokenizer is
    /// a copy of this one's (made here, once). Bytes that are not UTF-8 (a breaker cut inside a
    /// character) become U+FFFD each, as llama.cpp's BPE reads them; llama.cpp's SentencePiece
    /// would tokenize such bytes as bytes, and a tokenizer error gives no tokens.
    pub fn breaker_tokenizer(&self) -> sampling::samplers::BreakerTokenizer {
        let inner = match &self.inner {
            Inner::Bpe(t) => {
                let mut plain = t.clone();
                plain.set_encode_special_tokens(true);
                Inner::Bpe(plain)
            }
            spm @ Inner::Spm(_) => spm.clone(),
        };
        sampling::samplers::BreakerTokenizer {
            add_space_prefix: self.add_space_prefix,
            clean_spaces: self.clean_spaces,
            tokenize: std::sync::Arc::new(move |bytes: &[u8]| {
                let text = text_of_bytes(bytes);
                match &inner {
                    Inner::Bpe(t) => t.encode(text.as_str(), false).map(|e| e.get_ids().to_vec()).unwrap_or_default(),
                    Inner::Spm(s) => {
                        let mut ids = Vec::new();
                        s.encode_with(&text, false, &mut ids).map(|()| ids).unwrap_or_default()
                    }
                }
            }),
        }
    }

    /// The text of `ids` (special tokens included; invalid UTF-8 becomes U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= self.n_vocab) {
            return Err(tok_err("decode", format!("token {bad} is outside the vocabulary of {} tokens", self.n_vocab)));
        }
        match &self.inner {
            Inner::Bpe(t) => t.decode(ids, false).map_err(|e| tok_err("decode", e)),
            Inner::Spm(s) => Ok(String::from_utf8_lossy(&s.decode(ids)).into_owned()),
        }
    }

    /// An incremental decoder for one sequence.
    pub fn stream(&self) -> TextStream {
        TextStream::default()
    }
}

/// Incremental decoding of one sequence's tokens: each push returns the new text, holding back a
/// character whose UTF-8 bytes are split over tokens until it is complete.
#[derive(Debug, Clone, Default)]
pub struct TextStream {
    ids: Vec<u32>,
    emitted: usize,
}

impl TextStream {
    /// Adds a token and returns the text it completes (possibly empty).
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String> {
        self.ids.push(id);
        let text = tok.decode(&self.ids)?;
        if text.ends_with('\u{FFFD}') || text.len() < self.emitted || !text.is_char_boundary(self.emitted) {
            return Ok(String::new());
        }
        let out = text[self.emitted..].to_string();
        self.emitted = text.len();
        Ok(out)
    }
}

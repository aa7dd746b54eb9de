//! DRY sequence breakers given as strings (llama.cpp's default `["\n", ":", "\"", "*"]`), turned
//! into the head token -> tail sequences map that [`super::Dry`] searches, exactly as llama.cpp
//! fills `dry_processed_breakers` (`llama_sampler_init_dry` and `get_overlapping_token_sequences`
//! in `src/llama-sampler.cpp`, after koboldcpp):
//!
//! * each breaker is cut at its first NUL byte (llama.cpp takes them as C strings), then to its
//!   first [`MAX_CHAR_LEN`] (40) bytes; an empty one is skipped;
//! * for every token `t` of the vocabulary, in id order, its text `w` (llama.cpp's
//!   `vocab.detokenize({t}, special = true)`: [`token_word`]):
//!   * if `w` contains the breaker, `t` is a head with an empty tail (a single-token breaker:
//!     it cuts repeats and is never penalised);
//!   * otherwise, for every position `p` where the breaker's first byte occurs in `w` and the rest
//!     of `w` from `p` (its `k = len(w) - p` bytes) is the breaker's first `k` bytes, `t` is a head
//!     whose tail is the model's tokenization of the breaker's remaining bytes (llama.cpp's
//!     `vocab.tokenize(rest, add_special = false, parse_special = false)`), cut to
//!     [`MAX_SEQ_LEN`] (20) tokens, unless `t` already has that very tail (from this breaker or
//!     an earlier one; empty tails are not deduplicated, which changes nothing).
//!
//! So the head tokens come from the vocabulary scan alone; the tokenizer is asked only for the
//! tails, which a single-byte breaker (each of llama.cpp's defaults) never needs.
//!
//! Token texts here are the vocabulary's pieces ([`grammar::Vocab::piece`]: llama.cpp's
//! `token_to_piece` with special tokens rendered), with llama.cpp's `detokenize` applied on
//! top: one leading space stripped where the vocabulary has `add_space_prefix` (SentencePiece
//! models), and its `clean_spaces` passes where the vocabulary has them (most byte-level BPE
//! pre-tokenizers). One difference: a piece is cut at its first NUL byte (as the grammar reads
//! pieces), where llama.cpp's `std::string` keeps it; a breaker has no NUL byte, so only a token
//! with text after a NUL could differ (none of the usual vocabularies has one: `<0x00>` is the
//! byte 0 alone).

use crate::sampler::Token;
use std::collections::HashMap;
use std::sync::Arc;

/// llama.cpp's cut of each string breaker, in bytes (`MAX_CHAR_LEN`).
pub const MAX_CHAR_LEN: usize = 40;
/// llama.cpp's cut of each tail, in tokens (`MAX_SEQ_LEN`).
pub const MAX_SEQ_LEN: usize = 20;

/// llama.cpp's `vocab.tokenize(text, add_special = false, parse_special = false)` over bytes
/// (see [`BreakerTokenizer::tokenize`]).
pub type TokenizeFn = dyn Fn(&[u8]) -> Vec<Token> + Send + Sync;

/// What string breakers need of the model's tokenizer besides the token texts: how llama.cpp's
/// `detokenize` of one token differs from its piece, and its `tokenize`.
#[derive(Clone)]
pub struct BreakerTokenizer {
    /// The vocabulary's `add_space_prefix` (SentencePiece: true unless the model says otherwise;
    /// byte-level BPE: false unless it says otherwise): `detokenize` strips one leading space.
    pub add_space_prefix: bool,
    /// The vocabulary's `clean_spaces` (llama.cpp sets it per tokenizer type and pre-tokenizer:
    /// SentencePiece false; byte-level BPE true except e.g. `smollm`, `qwen2`, `command-r`).
    pub clean_spaces: bool,
    /// llama.cpp's `vocab.tokenize(text, add_special = false, parse_special = false)`: no BOS,
    /// control tokens' texts tokenized as text (a SentencePiece model still puts its space
    /// prefix first). The text is bytes: a breaker cut at 40 bytes, or its rest after an
    /// overlap, may end or start inside a UTF-8 character.
    pub tokenize: Arc<TokenizeFn>,
}

impl std::fmt::Debug for BreakerTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerTokenizer")
            .field("add_space_prefix", &self.add_space_prefix)
            .field("clean_spaces", &self.clean_spaces)
            .finish_non_exhaustive()
    }
}

/// A token's text as llama.cpp's `vocab.detokenize({t}, special = true)` gives it, from its
/// piece: one leading space stripped with `add_space_prefix`, then, with `clean_spaces`, its
/// three passes (a space dropped before `?!.,`; a lone `'` between spaces loses both; a space
/// dropped before `'s`, `'m`, `'re`, `'ve`), ported as written (in place, byte by byte).
pub fn token_word(piece: &[u8], add_space_prefix: bool, clean_spaces: bool) -> Vec<u8> {
    let mut text = piece.to_vec();
    if add_space_prefix && text.first() == Some(&b' ') {
        text.remove(0);
    }
    if !clean_spaces {
        return text;
    }
    // First pass: " ?", " !", " .", " ," lose the space.
    let total1 = text.len();
    let mut total = usize::from(total1 > 0);
    for i in 1..total1 {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        text[total] = x;
        total += 1;
    }
    // Second pass: " ' " becomes "'".
    let total2 = total;
    total = usize::from(total2 > 0);
    let mut i = 1;
    while i < total2 {
        let x = text[i];
        if x == b'\'' && i + 1 < total2 && text[i - 1] == b' ' && text[i + 1] == b' ' {
            total -= 1;
            i += 1;
            text[i] = 0;
        }
        text[total] = x;
        total += 1;
        i += 1;
    }
    // Third pass: " 's", " 'm", " 're", " 've" lose the space.
    let total3 = total;
    total = usize::from(total3 > 0);
    for i in 1..total3 {
        let x = text[i];
        if text[i - 1] == b' ' && x == b'\'' && i + 1 < total3 {
            let x1 = text[i + 1];
            if x1 == b's' || x1 == b'm' {
                total -= 1;
            } else if x1 != b't' && x1 != b'd' && i + 2 < total3 {
                let x2 = text[i + 2];
                if x2 == b'e' && (x1 == b'r' || x1 == b'v') {
                    total -= 1;
                }
            }
        }
        text[total] = x;
        total += 1;
    }
    text.truncate(total);
    text
}

/// Why string breakers could not be processed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakerError {
    /// A tail had to be tokenized and no tokenizer was given: the breaker (cut to 40 bytes).
    NeedsTokenizer(Vec<u8>),
}

/// The `(head, tail)` entries llama.cpp's `get_overlapping_token_sequences` puts in its multimap
/// for `breakers`, in the order it inserts them (see the module documentation). `words` are the
/// token texts by id ([`token_word`] of each piece); `tokenize` is llama.cpp's `tokenize` (see
/// [`BreakerTokenizer::tokenize`]); without one, a breaker whose tail must be tokenized (one of
/// two or more bytes that some token's text ends partway into) is an error.
pub fn overlapping_sequences(
    breakers: &[&[u8]],
    words: &[Vec<u8>],
    tokenize: Option<&TokenizeFn>,
) -> Result<Vec<(Token, Vec<Token>)>, BreakerError> {
    let mut out: Vec<(Token, Vec<Token>)> = Vec::new();
    // Index of each head's entries in `out`, for the duplicate check.
    let mut by_head: HashMap<Token, Vec<usize>> = HashMap::new();
    for &b in breakers {
        let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
        let s = &b[..b.len().min(MAX_CHAR_LEN)];
        if s.is_empty() {
            continue;
        }
        // The tokenization of `s[i..]` depends only on `i`.
        let mut tails: HashMap<usize, Vec<Token>> = HashMap::new();
        for (t, word) in words.iter().enumerate() {
            let t = t as Token;
            if contains(word, s) {
                by_head.entry(t).or_default().push(out.len());
                out.push((t, Vec::new()));
                continue;
            }
            for pos in 0..word.len() {
                if word[pos] != s[0] {
                    continue;
                }
                // llama.cpp: `for (i = 1; i < str_len && i + pos < word_len; ++i)` comparing
                // `word[pos + i]` with `str[i]`; a mismatch drops this position.
                let k = (word.len() - pos).min(s.len());
                if word[pos..pos + k] != s[..k] {
                    continue;
                }
                // `k < len(s)`: `word` does not contain `s`.
                let tail = match tails.get(&k) {
                    Some(t) => t.clone(),
                    None => {
                        let f = tokenize.ok_or_else(|| BreakerError::NeedsTokenizer(s.to_vec()))?;
                        let mut tail = f(&s[k..]);
                        tail.truncate(MAX_SEQ_LEN);
                        tails.insert(k, tail.clone());
                        tail
                    }
                };
                let entries = by_head.entry(t).or_default();
                if !entries.iter().any(|&e| out[e].1 == tail) {
                    entries.push(out.len());
                    out.push((t, tail));
                }
            }
        }
    }
    Ok(out)
}

/// Whether `hay` contains `needle` (non-empty).
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The entries of [`overlapping_sequences`] for `breakers` over `vocab`'s pieces, with the
/// tokenizer's `detokenize` flags and `tokenize`.
pub fn from_vocab(
    breakers: &[&[u8]],
    vocab: &::grammar::Vocab,
    tok: &BreakerTokenizer,
) -> Result<Vec<(Token, Vec<Token>)>, BreakerError> {
    let words: Vec<Vec<u8>> =
        (0..vocab.len() as Token).map(|t| token_word(vocab.piece(t), tok.add_space_prefix, tok.clean_spaces)).collect();
    overlapping_sequences(breakers, &words, Some(tok.tokenize.as_ref()))
}

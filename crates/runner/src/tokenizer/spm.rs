//! `Spm`: llama.cpp's SentencePiece-style tokenizer (`tokenizer.ggml.model = "llama"`, used by
//! LLaMA 1/2, Mistral and Gemma), rebuilt to give the same ids as `llm_tokenizer_spm` and
//! `tokenizer_st_partition` in llama.cpp's `src/llama-vocab.cpp` (tokenizing with
//! `parse_special = true`) and the same text as its `token_to_piece` (special tokens rendered).
//!
//! It owns encoding and the token pieces; [`super::Tokenizer`] owns BOS handling, the
//! end-of-generation set and streaming. Encoding, in llama.cpp's order:
//! 1. special tokens (control, user-defined, unknown, and texts llama.cpp promotes to control)
//!    are cut out of the text whole, longest text first, every occurrence of one before the next;
//! 2. each remaining run of text gets a leading space when `add_space_prefix` is set and it is
//!    the first run or follows a special token, then every space becomes U+2581 (`▁`);
//! 3. the run is split into UTF-8 characters and adjacent pairs merge, highest token score first
//!    (ties: the leftmost pair), while the merged text is a token of the vocabulary;
//! 4. each final piece is its token, or else (it is then a single character) its bytes as byte
//!    tokens `<0xXX>` (or the one-byte token, or the unknown token where neither exists).
//!
//! llama.cpp's `LSTRIP`/`RSTRIP` token attributes (set only for a few models by name: jina,
//! phi-3, modern-bert) are not modelled, nor `add_eos_token`.

use super::{TOKEN_TYPE_CONTROL as TYPE_CONTROL, tok_err};
use crate::error::Result;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// GGUF token types (`tokenizer.ggml.token_type`).
const TYPE_NORMAL: i32 = 1;
const TYPE_UNKNOWN: i32 = 2;
const TYPE_USER_DEFINED: i32 = 4;
const TYPE_BYTE: i32 = 6;

/// What an SPM tokenizer is built from.
pub(crate) struct SpmSpec<'a> {
    /// Token texts by id (spaces as `▁`).
    pub tokens: &'a [String],
    /// Merge scores by id (empty: all 0, as llama.cpp).
    pub scores: &'a [f32],
    /// Token types by id (empty: all normal).
    pub token_types: &'a [i32],
    /// Texts llama.cpp treats as control tokens whatever their type (its end-of-turn names).
    pub control_texts: &'a [&'a str],
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    /// `tokenizer.ggml.add_space_prefix` (llama.cpp's default for SPM vocabularies: true).
    pub add_space_prefix: bool,
}

/// The SPM tokenizer; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct Spm {
    /// Token text to id (a repeated text keeps its last id, as llama.cpp's map does).
    ids: HashMap<Box<str>, u32>,
    /// Merge score by id.
    scores: Vec<f32>,
    /// Tokens matched whole in the text, longest text first, each with whether it is matched
    /// also without `parse_special` (user-defined tokens; control and unknown ones are not).
    specials: Vec<(Box<str>, u32, bool)>,
    /// The token standing for each byte in byte fallback.
    byte_tokens: [Option<u32>; 256],
    unk: Option<u32>,
    add_space_prefix: bool,
    /// Each token's text as llama.cpp's `token_to_piece` renders it (special tokens included).
    pieces: Vec<Vec<u8>>,
}

/// The byte of a byte token's text `<0xXX>`.
fn byte_of_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// A token's text as bytes (llama.cpp's `token_to_piece` for SPM with special tokens rendered):
/// normal tokens with `▁` as a space, byte tokens as their byte, unknown, control and
/// user-defined tokens verbatim, others (unused, undefined) empty.
fn piece(text: &str, ty: i32, control: bool) -> Vec<u8> {
    match ty {
        _ if control => text.as_bytes().to_vec(),
        TYPE_UNKNOWN | TYPE_CONTROL | TYPE_USER_DEFINED => text.as_bytes().to_vec(),
        TYPE_NORMAL => text.replace('\u{2581}', " ").into_bytes(),
        TYPE_BYTE => byte_of_token(text).map(|b| vec![b]).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// A piece of the text being merged: a byte range, linked to its neighbours (`NONE` at the ends).
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
}

const NONE: usize = usize::MAX;

/// A candidate merge of two adjacent symbols; the heap's greatest is the highest score, then the
/// leftmost.
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    /// The merged length when the candidate was made: a later mismatch means it is stale.
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // llama.cpp's comparator: lower score, or equal score and larger left index, is "less".
        // A NaN score compares as equal, as `<` makes it there.
        self.score.partial_cmp(&other.score).unwrap_or(Ordering::Equal).then_with(|| other.left.cmp(&self.left))
    }
}

/// A stretch of the input after special tokens are cut out: text still to tokenize, or a token.
#[derive(Clone, Copy, Debug)]
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

impl Spm {
    /// Builds the tables; a byte token naming no byte or a score array of the wrong length is an
    /// error naming it.
    pub(crate) fn new(spec: &SpmSpec<'_>) -> Result<Spm> {
        let n = spec.tokens.len();
        if !spec.scores.is_empty() && spec.scores.len() != n {
            return Err(tok_err("tokenizer.ggml.scores", format!("{} entries for {n} tokens", spec.scores.len())));
        }
        let ty = |i: usize| spec.token_types.get(i).copied().unwrap_or(TYPE_NORMAL);
        let mut ids = HashMap::with_capacity(n);
        let mut specials = Vec::new();
        let mut pieces = Vec::with_capacity(n);
        for (i, t) in spec.tokens.iter().enumerate() {
            let id = i as u32;
            ids.insert(Box::from(t.as_str()), id);
            let control = spec.control_texts.contains(&t.as_str());
            if control || matches!(ty(i), TYPE_UNKNOWN | TYPE_CONTROL | TYPE_USER_DEFINED) {
                specials.push((Box::from(t.as_str()), id, !control && ty(i) == TYPE_USER_DEFINED));
            }
            if ty(i) == TYPE_BYTE && byte_of_token(t).is_none() {
                return Err(tok_err(format!("token {i} ({t:?})"), "a byte token whose text is not <0xXX>"));
            }
            pieces.push(piece(t, ty(i), control));
        }
        // llama.cpp sorts by text length, longest first (its sort is not stable: equal lengths
        // come in an unspecified order; here in id order, which matters only where two special
        // texts of one length overlap in the input).
        specials.sort_by_key(|s: &(Box<str>, u32, bool)| std::cmp::Reverse(s.0.len()));
        let mut byte_tokens = [None; 256];
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            let b = b as u8;
            *slot = ids.get(format!("<0x{b:02X}>").as_str()).copied().or_else(|| {
                // The byte itself as a one-byte token, where it is a whole character.
                std::str::from_utf8(&[b]).ok().and_then(|s| ids.get(s).copied())
            });
        }
        let scores = if spec.scores.is_empty() { vec![0.0; n] } else { spec.scores.to_vec() };
        Ok(Spm { ids, scores, specials, byte_tokens, unk: spec.unk, add_space_prefix: spec.add_space_prefix, pieces })
    }

    /// Each token's text as bytes (see [`piece`]).
    pub(crate) fn pieces(&self) -> &[Vec<u8>] {
        &self.pieces
    }

    /// Appends the ids of `text` (no BOS) to `out`.
    pub(crate) fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        self.encode_with(text, true, out)
    }

    /// Appends the ids of `text` (no BOS) to `out`; without `parse_special` (llama.cpp's
    /// `parse_special = false`) control and unknown tokens' texts are tokenized as text.
    pub(crate) fn encode_with(&self, text: &str, parse_special: bool, out: &mut Vec<u32>) -> Result<()> {
        let mut prev_special = true;
        let mut run = String::new();
        for f in self.partition(text, parse_special) {
            match f {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(a, b) => {
                    run.clear();
                    if self.add_space_prefix && prev_special {
                        run.push(' ');
                    }
                    run.push_str(&text[a..b]);
                    let escaped = run.replace(' ', "\u{2581}");
                    self.merge(&escaped, out)?;
                    prev_special = false;
                }
            }
        }
        Ok(())
    }

    /// Cuts the special tokens out of `text`: for each special token, longest first, every
    /// occurrence in the text fragments left so far, left to right.
    fn partition(&self, text: &str, parse_special: bool) -> Vec<Fragment> {
        let mut frags = if text.is_empty() { Vec::new() } else { vec![Fragment::Text(0, text.len())] };
        let mut next = Vec::new();
        for (s, id, always) in &self.specials {
            // Every match lies inside the whole text, so a special absent from it is skipped
            // without walking the fragments.
            if s.is_empty() || !(parse_special || *always) || !text.contains(&**s) {
                continue;
            }
            next.clear();
            for &f in &frags {
                let Fragment::Text(mut a, b) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(p) = text[a..b].find(&**s) {
                    let m = a + p;
                    if m > a {
                        next.push(Fragment::Text(a, m));
                    }
                    next.push(Fragment::Token(*id));
                    a = m + s.len();
                }
                if a < b {
                    next.push(Fragment::Text(a, b));
                }
            }
            std::mem::swap(&mut frags, &mut next);
        }
        frags
    }

    /// The bigram of `left` and `right` when their joined text is a token.
    fn bigram(&self, text: &str, syms: &[Symbol], left: usize, right: usize) -> Option<Bigram> {
        if left == NONE || right == NONE {
            return None;
        }
        let (l, r) = (syms[left], syms[right]);
        let len = l.len + r.len;
        let id = *self.ids.get(&text[l.start..l.start + len])?;
        Some(Bigram { left, right, score: self.scores[id as usize], len })
    }

    /// Tokenizes one escaped run of text by score-ordered merges (module docs, steps 3 and 4).
    fn merge(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let mut syms: Vec<Symbol> = Vec::with_capacity(text.len());
        for (start, c) in text.char_indices() {
            let i = syms.len();
            let end = start + c.len_utf8();
            syms.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: i.wrapping_sub(1),
                next: if end == text.len() { NONE } else { i + 1 },
            });
        }
        if let Some(first) = syms.first_mut() {
            first.prev = NONE;
        }
        let mut heap = BinaryHeap::with_capacity(syms.len());
        for i in 1..syms.len() {
            heap.extend(self.bigram(text, &syms, i - 1, i));
        }
        while let Some(bg) = heap.pop() {
            let (l, r) = (syms[bg.left], syms[bg.right]);
            // Stale: one side was merged away, or grew, since the candidate was made.
            if l.len == 0 || r.len == 0 || l.len + r.len != bg.len {
                continue;
            }
            syms[bg.left].len += r.len;
            syms[bg.left].next = r.next;
            syms[bg.right].len = 0;
            if r.next != NONE {
                syms[r.next].prev = bg.left;
            }
            heap.extend(self.bigram(text, &syms, l.prev, bg.left));
            heap.extend(self.bigram(text, &syms, bg.left, r.next));
        }
        // Every merged symbol is a token (a merge needs one); a symbol that is not is a single
        // character never merged, so llama.cpp's re-segmentation of merges never applies and
        // the character falls back to bytes.
        let mut i = if syms.is_empty() { NONE } else { 0 };
        while i != NONE {
            let s = syms[i];
            let piece = &text[s.start..s.start + s.len];
            if let Some(&id) = self.ids.get(piece) {
                out.push(id);
            } else {
                for b in piece.bytes() {
                    match self.byte_tokens[b as usize].or(self.unk) {
                        Some(id) => out.push(id),
                        None => {
                            return Err(tok_err(
                                format!("encoding {piece:?}"),
                                format!("no byte token <0x{b:02X}> and no unknown token in the vocabulary"),
                            ));
                        }
                    }
                }
            }
            i = s.next;
        }
        Ok(())
    }

    /// The text of `ids` as bytes, as llama.cpp's `llama_detokenize` gives it with special tokens
    /// rendered: the pieces joined, the first one's leading space dropped when the vocabulary
    /// adds a space prefix. Ids must be in the vocabulary.
    pub(crate) fn decode(&self, ids: &[u32]) -> Vec<u8> {
        let mut out = Vec::new();
        for (k, &id) in ids.iter().enumerate() {
            let p = &self.pieces[id as usize];
            let p = if k == 0 && self.add_space_prefix { p.strip_prefix(b" ").unwrap_or(p) } else { p };
            out.extend_from_slice(p);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny vocabulary: specials, byte tokens for every byte, and scored merges.
    fn spm(add_space_prefix: bool) -> Spm {
        let mut tokens: Vec<String> =
            ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "  "].iter().map(|s| s.to_string()).collect();
        let mut types = vec![3, 3, 3, 2, 3, 4];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(TYPE_BYTE);
        }
        let normal = ["▁", "h", "e", "l", "o", "he", "ll", "llo", "hello", "▁hello", "é", "▁w", "ab", "bc"];
        let mut scores = vec![0.0; tokens.len()];
        for (i, t) in normal.iter().enumerate() {
            tokens.push(t.to_string());
            types.push(TYPE_NORMAL);
            scores.push(-(i as f32));
        }
        // "bc" outscores "ab": "abc" is a + bc.
        let n = scores.len();
        scores[n - 1] = 10.0;
        Spm::new(&SpmSpec {
            tokens: &tokens,
            scores: &scores,
            token_types: &types,
            control_texts: &[],
            unk: Some(3),
            add_space_prefix,
        })
        .unwrap()
    }

    fn id(s: &Spm, t: &str) -> u32 {
        s.ids[t]
    }

    fn enc(s: &Spm, text: &str) -> Vec<u32> {
        let mut v = Vec::new();
        s.encode(text, &mut v).unwrap();
        v
    }

    #[test]
    fn merges_follow_scores_and_spaces_are_escaped() {
        let s = spm(false);
        assert_eq!(enc(&s, "hello"), [id(&s, "hello")]);
        assert_eq!(enc(&s, " hello"), [id(&s, "▁hello")]);
        assert_eq!(enc(&s, "abc"), [id(&s, "<0x61>"), id(&s, "bc")]);
        let p = spm(true);
        assert_eq!(enc(&p, "hello"), [id(&p, "▁hello")], "the space prefix");
        assert_eq!(p.decode(&enc(&p, "hello")), b"hello", "and its removal");
    }

    #[test]
    fn specials_are_cut_out_and_the_rest_falls_back_to_bytes() {
        let s = spm(false);
        let ids = enc(&s, "<start_of_turn>hi  x");
        let bytes = |t: &str| t.bytes().map(|b| id(&s, &format!("<0x{b:02X}>"))).collect::<Vec<_>>();
        let mut want = vec![4, id(&s, "h")];
        want.extend(bytes("i"));
        want.push(5);
        want.extend(bytes("x"));
        assert_eq!(ids, want);
        assert_eq!(s.decode(&ids), b"<start_of_turn>hi  x");
        assert_eq!(enc(&s, "ü"), bytes("ü"));
        assert_eq!(s.decode(&enc(&s, "ü é")), "ü é".as_bytes());
        assert!(enc(&s, "").is_empty());
    }
}

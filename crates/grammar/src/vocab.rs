//! [`Vocab`]: what a grammar needs to know of a model's vocabulary: each token's text as bytes
//! (llama.cpp's `token_to_piece` with special tokens rendered), and which tokens end generation.
//! Built once per model and shared by every sequence's matcher; it also keeps the tokens sorted
//! by text, so that the mask walk shares the work of common prefixes.

use crate::parse::TokenLookup;
use crate::sets::TokenSets;
use crate::utf8::{Decoder, Step};
use std::collections::HashMap;

/// A vocabulary as the grammar sees it.
#[derive(Debug, Clone)]
pub struct Vocab {
    /// Each token's text, cut at its first NUL byte (llama.cpp reads pieces as C strings).
    pieces: Vec<Vec<u8>>,
    /// End-of-generation tokens, sorted.
    eog: Vec<u32>,
    /// The tokens a text walk considers (not end-of-generation, non-empty text), sorted by text.
    pub(crate) order: Vec<u32>,
    /// `lcp[i]`: the length of the common prefix of `order[i]`'s text and `order[i - 1]`'s (0 at 0).
    pub(crate) lcp: Vec<u32>,
    /// The texts of `order`, one after the other (the walk reads them in this order, so they lie
    /// in memory in it too); `order[i]`'s is `texts[offsets[i]..offsets[i + 1]]`.
    texts: Vec<u8>,
    offsets: Vec<u32>,
    /// `lower[i]`: the first index after `i` whose common prefix with its predecessor is shorter
    /// than `order[i]`'s (`lcp[lower[i]] < lcp[i]`), or `order.len()`. Every token in between
    /// shares at least `lcp[i]` bytes with `order[i - 1]`: where a state refuses a prefix of `d + 1`
    /// bytes, the walk jumps over the tokens sharing it from one such index to the next
    /// ([`Vocab::skip`]), a jump per distinct prefix length rather than a step per token.
    lower: Vec<u32>,
    /// The longest text.
    pub(crate) max_len: usize,
    /// The tokens grouped for the walk's word-parallel shortcuts.
    pub(crate) sets: TokenSets,
    by_text: HashMap<Vec<u8>, u32>,
}

impl Vocab {
    /// A vocabulary of `pieces` (token `i`'s text as bytes) whose end-of-generation tokens are `eog`
    /// (ids outside the vocabulary are ignored).
    pub fn new(pieces: Vec<Vec<u8>>, eog: &[u32]) -> Self {
        let pieces: Vec<Vec<u8>> = pieces
            .into_iter()
            .map(|mut p| {
                if let Some(z) = p.iter().position(|&b| b == 0) {
                    p.truncate(z);
                }
                p
            })
            .collect();
        let n = pieces.len();
        let mut eog: Vec<u32> = eog.iter().copied().filter(|&t| (t as usize) < n).collect();
        eog.sort_unstable();
        eog.dedup();
        let mut order: Vec<u32> =
            (0..n as u32).filter(|&t| !pieces[t as usize].is_empty() && eog.binary_search(&t).is_err()).collect();
        order.sort_by(|&a, &b| pieces[a as usize].cmp(&pieces[b as usize]).then(a.cmp(&b)));
        let mut lcp = vec![0u32; order.len()];
        for i in 1..order.len() {
            let (a, b) = (&pieces[order[i - 1] as usize], &pieces[order[i] as usize]);
            lcp[i] = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count() as u32;
        }
        let wide_clean: Vec<bool> = order.iter().map(|&t| wide_clean(&pieces[t as usize])).collect();
        let sets = TokenSets::new(&order, &pieces, n, &wide_clean);
        // The next smaller value of each `lcp`, from the right with a stack of candidates.
        let mut lower = vec![order.len() as u32; order.len()];
        let mut stack: Vec<usize> = Vec::new();
        for i in (0..order.len()).rev() {
            while stack.last().is_some_and(|&k| lcp[k] >= lcp[i]) {
                stack.pop();
            }
            if let Some(&k) = stack.last() {
                lower[i] = k as u32;
            }
            stack.push(i);
        }
        let max_len = pieces.iter().map(Vec::len).max().unwrap_or(0);
        let mut texts = Vec::with_capacity(order.iter().map(|&t| pieces[t as usize].len()).sum());
        let mut offsets = Vec::with_capacity(order.len() + 1);
        offsets.push(0);
        for &t in &order {
            texts.extend_from_slice(&pieces[t as usize]);
            offsets.push(texts.len() as u32);
        }
        let mut by_text = HashMap::with_capacity(n);
        for (i, p) in pieces.iter().enumerate() {
            by_text.entry(p.clone()).or_insert(i as u32);
        }
        Self { pieces, eog, order, lcp, texts, offsets, lower, max_len, sets, by_text }
    }

    /// The first index after `i` whose text does not share the first `d + 1` bytes of
    /// `order[i]`'s (`d` below its length).
    #[inline]
    pub(crate) fn skip(&self, i: usize, d: usize) -> usize {
        let mut j = i + 1;
        while j < self.order.len() && self.lcp[j] as usize > d {
            j = self.lower[j] as usize;
        }
        j
    }

    /// The text of `order[i]`.
    #[inline]
    pub(crate) fn ordered_piece(&self, i: usize) -> &[u8] {
        &self.texts[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Whether the vocabulary has no token.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Token `t`'s text (cut at a NUL byte).
    pub fn piece(&self, t: u32) -> &[u8] {
        &self.pieces[t as usize]
    }

    /// Whether `t` ends generation.
    pub fn is_eog(&self, t: u32) -> bool {
        self.eog.binary_search(&t).is_ok()
    }

    /// The end-of-generation tokens.
    pub fn eog(&self) -> &[u32] {
        &self.eog
    }

    /// The bytes the vocabulary keeps for the mask walk's word-parallel shortcuts (the tokens
    /// grouped by the ASCII bytes they hold and by their length in characters, as bitsets in
    /// text and in id order).
    pub fn shortcut_bytes(&self) -> usize {
        self.sets.bytes()
    }

    /// The words of a mask over this vocabulary (`ceil(len / 32)`).
    pub fn mask_words(&self) -> usize {
        self.len().div_ceil(32)
    }
}

/// Whether a text is wide-clean: its non-ASCII bytes, decoded from a character boundary as the
/// mask walk decodes them (an ASCII byte between characters is its own character; every other
/// byte goes through the decoder), are whole characters all at or above U+0080 (no invalid
/// sequence, no partial character at the end); false for an ASCII-only text. A state that is
/// itself again after every such character and after each of the text's ASCII bytes takes the
/// token unwalked ([`TokenSets`]).
fn wide_clean(piece: &[u8]) -> bool {
    let mut d = Decoder::CLEAR;
    let mut wide = false;
    for &b in piece {
        if b < 0x80 && d.is_clear() {
            continue;
        }
        match d.push(b) {
            Step::Char(c) if c >= 0x80 => wide = true,
            Step::Pending => {}
            Step::Char(_) | Step::Invalid => return false,
        }
    }
    wide && d.is_clear()
}

impl TokenLookup for Vocab {
    fn token_id(&self, text: &str) -> Option<u32> {
        self.by_text.get(text.as_bytes()).copied()
    }
}

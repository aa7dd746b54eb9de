//! [`TokenSets`]: the vocabulary's tokens grouped for the mask walk's shortcuts, so that a
//! shortcut takes its tokens a machine word at a time rather than testing each token: per ASCII
//! byte, the tokens whose text holds it; per character count up to [`MAX_CHARS`], the ASCII-only
//! tokens and the wide-clean ones (see `vocab::wide_clean`). Each set is kept
//! twice: over the text order of [`Vocab::order`](crate::vocab::Vocab) (u64 words, for the walk
//! to skip what a shortcut took) and over token ids (u32 words, the mask's own layout, ORed into
//! it). A byte held by few tokens is a list of them instead of two bitsets.
//!
//! [`Taken`] is the scratch a shortcut writes: the tokens it takes, in both orders.

use crate::utf8::{Decoder, Step};

/// The longest token, in characters, that the chain shortcut takes (its depth).
pub(crate) const MAX_CHARS: usize = 16;

/// An entry of the chain shortcut (`Engine::chain`): a 128-bit set of ASCII characters, and
/// whether the characters from U+0080 up lead on too.
pub(crate) type ChainStep = ([u64; 2], bool);

/// A set of tokens in both orders.
#[derive(Debug, Clone, Default)]
struct Set {
    text: Box<[u64]>,
    id: Box<[u32]>,
    /// No token in it.
    empty: bool,
}

/// The tokens holding one ASCII byte.
#[derive(Debug, Clone)]
enum ByteSet {
    Dense(Set),
    /// (text-order index, token id) of each token.
    Sparse(Box<[(u32, u32)]>),
}

/// See the module docs.
#[derive(Debug, Clone)]
pub(crate) struct TokenSets {
    bytes: Vec<ByteSet>,
    /// `plain[k - 1]`: the ASCII-only tokens of 1 to `k` characters.
    plain: Vec<Set>,
    /// `wide[k - 1]`: the wide-clean tokens of 1 to `k` characters.
    wide: Vec<Set>,
    plain_all: Set,
    wide_all: Set,
}

/// What a shortcut took, in both orders, and its exclusions so far.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    pub(crate) text: Vec<u64>,
    pub(crate) id: Vec<u32>,
    excl_text: Vec<u64>,
    excl_id: Vec<u32>,
}

impl Taken {
    fn clear(&mut self, sets: &TokenSets) {
        let (wt, wi) = (sets.plain_all.text.len(), sets.plain_all.id.len());
        for v in [&mut self.text, &mut self.excl_text] {
            v.clear();
            v.resize(wt, 0);
        }
        for v in [&mut self.id, &mut self.excl_id] {
            v.clear();
            v.resize(wi, 0);
        }
    }

    /// Whether text-order index `i` was taken.
    #[inline]
    pub(crate) fn has(&self, i: usize) -> bool {
        self.text[i / 64] >> (i % 64) & 1 == 1
    }

    /// The first text-order index from `i` not taken (`n` if none).
    #[inline]
    pub(crate) fn next_free(&self, i: usize, n: usize) -> usize {
        let mut w = i / 64;
        let mut free = !self.text[w] & (!0u64 << (i % 64));
        while free == 0 {
            w += 1;
            if w == self.text.len() {
                return n;
            }
            free = !self.text[w];
        }
        (w * 64 + free.trailing_zeros() as usize).min(n)
    }

    /// Adds the tokens holding byte `b` to the exclusions.
    fn exclude(&mut self, sets: &TokenSets, b: usize) {
        match &sets.bytes[b] {
            ByteSet::Dense(s) => {
                self.excl_text.iter_mut().zip(&s.text[..]).for_each(|(e, x)| *e |= x);
                self.excl_id.iter_mut().zip(&s.id[..]).for_each(|(e, x)| *e |= x);
            }
            ByteSet::Sparse(list) => {
                for &(i, t) in &list[..] {
                    self.excl_text[i as usize / 64] |= 1 << (i % 64);
                    self.excl_id[t as usize / 32] |= 1 << (t % 32);
                }
            }
        }
    }

    /// Takes the tokens of `set` outside the exclusions.
    fn take(&mut self, set: &Set) {
        if set.empty {
            return;
        }
        for ((t, x), e) in self.text.iter_mut().zip(&set.text[..]).zip(&self.excl_text) {
            *t |= x & !e;
        }
        for ((t, x), e) in self.id.iter_mut().zip(&set.id[..]).zip(&self.excl_id) {
            *t |= x & !e;
        }
    }
}

/// The characters of a text as the mask walk decodes it from a character boundary (an ASCII
/// byte between characters is one; every other byte goes through the decoder).
fn chars(piece: &[u8]) -> usize {
    let mut d = Decoder::CLEAR;
    let mut n = 0;
    for &b in piece {
        if (b < 0x80 && d.is_clear()) || matches!(d.push(b), Step::Char(_)) {
            n += 1;
        }
    }
    n
}

/// Whether ASCII byte `b` is in the 128-bit set `set`.
fn holds(set: [u64; 2], b: usize) -> bool {
    set[b / 64] >> (b % 64) & 1 == 1
}

impl TokenSets {
    /// The sets of a vocabulary of `n_tokens` whose walk order is `order`, with `pieces` the
    /// texts by id and `wide_clean` by text-order index.
    pub(crate) fn new(order: &[u32], pieces: &[Vec<u8>], n_tokens: usize, wide_clean: &[bool]) -> Self {
        let (wt, wi) = (order.len().div_ceil(64), n_tokens.div_ceil(32));
        let new_set = || Set { text: vec![0; wt].into(), id: vec![0; wi].into(), empty: true };
        let add = |s: &mut Set, i: usize, t: u32| {
            s.text[i / 64] |= 1 << (i % 64);
            s.id[t as usize / 32] |= 1 << (t % 32);
            s.empty = false;
        };
        let mut lists: Vec<Vec<(u32, u32)>> = vec![Vec::new(); 128];
        let (mut plain, mut wide) = (vec![new_set(); MAX_CHARS], vec![new_set(); MAX_CHARS]);
        let (mut plain_all, mut wide_all) = (new_set(), new_set());
        let mut seen = [false; 128];
        for (i, &t) in order.iter().enumerate() {
            let piece = &pieces[t as usize];
            seen.fill(false);
            for &b in piece.iter().filter(|&&b| b < 0x80) {
                if !std::mem::replace(&mut seen[usize::from(b)], true) {
                    lists[usize::from(b)].push((i as u32, t));
                }
            }
            if piece.iter().all(|&b| b < 0x80) {
                add(&mut plain_all, i, t);
                for s in plain.iter_mut().skip(piece.len() - 1) {
                    add(s, i, t);
                }
            } else if wide_clean[i] {
                add(&mut wide_all, i, t);
                for s in wide.iter_mut().skip(chars(piece).max(1) - 1) {
                    add(s, i, t);
                }
            }
        }
        let bytes = lists
            .into_iter()
            .map(|list| {
                // Two bitsets cost a word operation per 64 and per 32 tokens; a list, two per token.
                if list.len() > order.len() / 32 {
                    let mut s = new_set();
                    list.iter().for_each(|&(i, t)| add(&mut s, i as usize, t));
                    ByteSet::Dense(s)
                } else {
                    ByteSet::Sparse(list.into())
                }
            })
            .collect();
        Self { bytes, plain, wide, plain_all, wide_all }
    }

    /// The bytes these sets take in memory.
    pub(crate) fn bytes(&self) -> usize {
        let set = |s: &Set| s.text.len() * 8 + s.id.len() * 4;
        let sets = self.plain.iter().chain(&self.wide).chain([&self.plain_all, &self.wide_all]).map(set).sum::<usize>();
        let by_byte: usize = self
            .bytes
            .iter()
            .map(|b| match b {
                ByteSet::Dense(s) => set(s),
                ByteSet::Sparse(l) => l.len() * 8,
            })
            .sum();
        sets + by_byte
    }

    /// Into `out`: the tokens made only of ASCII bytes in `loops` (a 128-bit set), and where
    /// `wide` the wide-clean ones whose ASCII bytes are all in it.
    pub(crate) fn take_loops(&self, loops: [u64; 2], wide: bool, out: &mut Taken) {
        out.clear(self);
        for b in 1..128 {
            if !holds(loops, b) {
                out.exclude(self, b);
            }
        }
        out.take(&self.plain_all);
        if wide {
            out.take(&self.wide_all);
        }
    }

    /// Into `out`: for each `k` up to `chain.len()` (at most [`MAX_CHARS`]), the ASCII-only
    /// tokens of `k` characters all in the set `chain[k - 1].0`, and where `chain[k - 1].1` the
    /// wide-clean tokens of `k` characters whose ASCII bytes are all in it. The sets shrink
    /// with `k` (and the wide flag goes from true to false only), so the exclusions only grow,
    /// and a token of fewer characters that an entry would take was taken by an earlier one:
    /// each run of equal entries (a string's class all along) takes the tokens up to its last
    /// length at once.
    pub(crate) fn take_chain(&self, chain: &[ChainStep], out: &mut Taken) {
        out.clear(self);
        let chain = &chain[..chain.len().min(MAX_CHARS)];
        let mut prev = [!1u64, !0u64];
        let mut k = 0;
        while k < chain.len() {
            let (set, wide) = chain[k];
            debug_assert_eq!([set[0] & !prev[0], set[1] & !prev[1]], [0, 0], "the chain's sets shrink");
            for b in 1..128 {
                if holds(prev, b) && !holds(set, b) {
                    out.exclude(self, b);
                }
            }
            prev = set;
            // Entries k..end are equal: the tokens of up to end characters.
            let end = k + chain[k..].iter().take_while(|&&e| e == (set, wide)).count();
            out.take(&self.plain[end - 1]);
            if wide {
                out.take(&self.wide[end - 1]);
            }
            k = end;
        }
    }
}

//! The engine behind a matcher: every set of parse stacks it has met, interned as a state, with
//! the cached transitions between states on a code point, and the cached allowed-token masks.
//!
//! The semantics are llama.cpp's (`llama_grammar_reject_candidates`, `llama_grammar_accept_token`):
//! a token is allowed when some parse stack can take all its complete characters and, where it
//! ends inside a character, that partial character can still match the next class. Moving a set
//! of stacks over a character is the union of moving each stack, so the set is the state; equal
//! sets (kept sorted) are one state, and a transition, once computed, is an array or hash lookup.
//!
//! The mask over the vocabulary walks the tokens in text order ([`Vocab`] keeps them sorted with
//! their common-prefix lengths): a token starts from the state its predecessor reached at the end
//! of their common prefix, and a prefix no stack can take rejects every token that shares it
//! without looking at them (a jump over them, `Vocab::skip`), a character begun whose possible
//! code points no class on top of a stack meets included. Inside a string (a state that is
//! itself again after most characters, or one that counts what is left of a bounded one), the
//! tokens made of those characters are taken a mask word at a time from the vocabulary's
//! [`TokenSets`](crate::sets::TokenSets), and the walk visits only the others. Grammars with
//! token elements (`<[id]>`, `!<[id]>`) check each token on its own instead, since a token
//! element accepts by id, mid-token too, as in llama.cpp.
//!
//! The cache only grows while a mask or an accept runs; past its limits it is emptied between
//! calls (matchers hold their stacks, not state ids, across calls).

use crate::error::{GrammarError, Result};
use crate::rules::{Kind, Pos, Rules};
use crate::sets::{ChainStep, Taken};
use crate::stacks::{self, Stack};
use crate::utf8::{self, Decoder, Partial, Step};
use crate::vocab::Vocab;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// A state: an interned, sorted set of parse stacks.
pub(crate) type StateId = u32;
/// No stack can go on.
pub(crate) const DEAD: StateId = u32::MAX;
const UNKNOWN: StateId = u32::MAX - 1;

/// The most parse stacks one state may hold before the grammar is called too ambiguous.
pub const MAX_STACKS: usize = 4096;
/// States kept before the cache is emptied.
const MAX_STATES: usize = 1 << 16;
/// Mask bytes kept before the mask cache is emptied.
const MAX_MASK_BYTES: usize = 64 << 20;

struct State {
    stacks: Arc<Vec<Stack>>,
    /// Some stack is empty: the grammar may end here.
    complete: bool,
    /// The positions of the token elements on top of stacks.
    token_tops: Vec<Pos>,
    /// Transitions on ASCII code points.
    ascii: Box<[StateId; 128]>,
    /// The ASCII characters after which the state is itself again (inside a string: most of
    /// them), as a 128-bit set without NUL; computed on first use.
    loops: Option<[u64; 2]>,
    /// Transitions on code points from U+0080 up, by class; computed on first use.
    wide: Option<WideClasses>,
    /// [`Engine::chain`] of the state; computed on first use.
    chain: Option<Arc<[ChainStep]>>,
    /// [`Engine::lead_ok`] of each lead byte 0xC0..=0xFF (bit `b - 0xC0`); computed on first use.
    leads: Option<u64>,
}

/// How deep [`Engine::chain`] follows a state's majority successors (as far as the token sets
/// group tokens by length).
const CHAIN_DEPTH: usize = crate::sets::MAX_CHARS;
/// The fewest ASCII characters a shortcut must cover to be worth its pass over the token sets.
const SHORTCUT_MIN: u32 = 48;

/// The code points from U+0080 up cut into intervals at the bounds of the character classes on
/// top of a state's stacks: two code points of one interval match the same classes, so the state
/// moves alike on both, and a transition is computed once per interval rather than once per
/// code point (a vocabulary of 262,144 tokens holds tens of thousands of distinct characters).
struct WideClasses {
    /// The interval starts above U+0080, sorted: interval `i` is `[bounds[i - 1], bounds[i])`,
    /// with U+0080 before the first and no end after the last.
    bounds: Box<[u32]>,
    /// The state after a code point of each interval (`UNKNOWN` until computed).
    next: Vec<StateId>,
    /// Whether every interval leads back to the state itself; computed on first use.
    loops: Option<bool>,
}

/// See the module docs.
pub(crate) struct Engine {
    rules: Arc<Rules>,
    states: Vec<State>,
    /// The state of each stack set (the key shares the state's stacks).
    index: HashMap<Arc<Vec<Stack>>, StateId>,
    partial_ok: HashMap<(StateId, Partial), bool>,
    masks: HashMap<(StateId, Partial), Arc<[u32]>>,
    mask_bytes: usize,
    /// Whether the grammar has token elements.
    has_tokens: bool,
    /// What is left of the current call's expansion work (`stacks::MAX_EXPANSION`).
    budget: usize,
    /// Walk scratch: the state and decoder at each depth.
    walk_states: Vec<StateId>,
    walk_decoders: Vec<Decoder>,
    /// Walk scratch: what a shortcut took.
    walk_taken: Taken,
}

impl Engine {
    pub(crate) fn new(rules: Arc<Rules>, has_tokens: bool) -> Self {
        Self {
            rules,
            states: Vec::new(),
            index: HashMap::default(),
            partial_ok: HashMap::default(),
            masks: HashMap::default(),
            mask_bytes: 0,
            has_tokens,
            budget: stacks::MAX_EXPANSION,
            walk_states: Vec::new(),
            walk_decoders: Vec::new(),
            walk_taken: Taken::default(),
        }
    }

    /// Starts a call (a mask, a check or an accept): a new expansion budget, and the cache
    /// emptied where it grew past its limits (never during a walk).
    pub(crate) fn trim(&mut self) {
        self.budget = stacks::MAX_EXPANSION;
        if self.states.len() > MAX_STATES {
            self.states.clear();
            self.index.clear();
            self.partial_ok.clear();
            self.masks.clear();
            self.mask_bytes = 0;
        }
        if self.mask_bytes > MAX_MASK_BYTES {
            self.masks.clear();
            self.mask_bytes = 0;
        }
    }

    /// The state of `stacks` (sorted and deduplicated here); [`DEAD`] for no stack.
    pub(crate) fn intern(&mut self, mut stacks: Vec<Stack>) -> Result<StateId> {
        if stacks.is_empty() {
            return Ok(DEAD);
        }
        stacks.sort_unstable();
        stacks.dedup();
        if stacks.len() > MAX_STACKS {
            return Err(GrammarError::TooManyStacks { limit: MAX_STACKS });
        }
        if let Some(&id) = self.index.get(&stacks) {
            return Ok(id);
        }
        let id = self.states.len() as StateId;
        let complete = stacks.iter().any(Vec::is_empty);
        let token_tops =
            stacks.iter().filter_map(|s| s.last().copied()).filter(|&p| self.rules.at(p).is_token()).collect();
        let stacks = Arc::new(stacks);
        self.index.insert(Arc::clone(&stacks), id);
        self.states.push(State {
            stacks,
            complete,
            token_tops,
            ascii: Box::new([UNKNOWN; 128]),
            loops: None,
            wide: None,
            chain: None,
            leads: None,
        });
        Ok(id)
    }

    /// The stacks of state `s`.
    pub(crate) fn stacks(&self, s: StateId) -> &[Stack] {
        &self.states[s as usize].stacks
    }

    /// Whether the grammar may end in state `s`.
    pub(crate) fn complete(&self, s: StateId) -> bool {
        self.states[s as usize].complete
    }

    /// The code points where membership in a class on top of a stack of `s` may change (each
    /// character or range of a class bounds an interval), unsorted: two code points with no
    /// bound between them (`a < b` and no bound in `a + 1..=b`) move the state alike.
    fn class_bounds(&self, s: StateId) -> Vec<u32> {
        let mut bounds = Vec::new();
        for top in self.states[s as usize].stacks.iter().filter_map(|st| st.last().copied()) {
            if self.rules.at(top).is_token() {
                continue;
            }
            // The class at `top`, as `stacks::match_char` reads it.
            let mut pos = top;
            loop {
                let (e, next) = (self.rules.at(pos), self.rules.at(pos + 1));
                if next.kind == Kind::CharRngUpper {
                    bounds.extend([e.value, next.value.saturating_add(1)]);
                    pos += 2;
                } else {
                    if e.kind != Kind::CharAny {
                        bounds.extend([e.value, e.value.saturating_add(1)]);
                    }
                    pos += 1;
                }
                if self.rules.at(pos).kind != Kind::CharAlt {
                    break;
                }
            }
        }
        bounds
    }

    /// Computes state `s`'s transition on the ASCII character `c`, and sets it for the other
    /// characters of `c`'s interval among the class bounds (one computation per interval, not
    /// per character, for the loops and chains that try every ASCII character).
    fn fill_ascii(&mut self, s: StateId, c: u32) -> Result<StateId> {
        let bounds = self.class_bounds(s);
        let a = bounds.iter().copied().filter(|&b| b <= c).max().unwrap_or(0);
        let b = bounds.iter().copied().filter(|&b| b > c).min().unwrap_or(128).min(128);
        let t = self.step(s, c)?;
        self.states[s as usize].ascii[a as usize..b as usize].fill(t);
        Ok(t)
    }

    /// The interval of code point `c` (at least U+0080) among state `s`'s [`WideClasses`],
    /// computed on first use.
    fn wide_class(&mut self, s: StateId, c: u32) -> usize {
        if self.states[s as usize].wide.is_none() {
            let mut bounds = self.class_bounds(s);
            bounds.retain(|&b| b > 0x80);
            bounds.sort_unstable();
            bounds.dedup();
            let next = vec![UNKNOWN; bounds.len() + 1];
            self.states[s as usize].wide = Some(WideClasses { bounds: bounds.into(), next, loops: None });
        }
        let w = self.states[s as usize].wide.as_ref().expect("just computed");
        w.bounds.partition_point(|&b| b <= c)
    }

    /// Whether state `s` is itself again after every code point from U+0080 up.
    fn wide_loops(&mut self, s: StateId) -> Result<bool> {
        self.wide_class(s, 0x80);
        let w = self.states[s as usize].wide.as_ref().expect("computed");
        if let Some(l) = w.loops {
            return Ok(l);
        }
        // One code point of each interval: its start (U+0080 for the first).
        let starts: Vec<u32> = std::iter::once(0x80).chain(w.bounds.iter().copied()).collect();
        let mut all = true;
        for c in starts {
            if self.next(s, c)? != s {
                all = false;
                break;
            }
        }
        self.states[s as usize].wide.as_mut().expect("computed").loops = Some(all);
        Ok(all)
    }

    /// The state after code point `c` ([`DEAD`] when no stack takes it).
    #[inline]
    pub(crate) fn next(&mut self, s: StateId, c: u32) -> Result<StateId> {
        if c < 128 {
            return match self.states[s as usize].ascii[c as usize] {
                UNKNOWN => self.fill_ascii(s, c),
                t => Ok(t),
            };
        }
        let class = self.wide_class(s, c);
        let t = self.states[s as usize].wide.as_ref().expect("computed").next[class];
        if t != UNKNOWN {
            return Ok(t);
        }
        let t = self.step(s, c)?;
        self.states[s as usize].wide.as_mut().expect("computed").next[class] = t;
        Ok(t)
    }

    /// The state after code point `c`, computed from the stacks.
    fn step(&mut self, s: StateId, c: u32) -> Result<StateId> {
        let mut out = Vec::new();
        // `out` gathers duplicates (see `stacks::advance`): removed whenever it has grown by
        // another MAX_STACKS, so that only distinct stacks count against the limit.
        let mut dedup_at = MAX_STACKS;
        for st in self.states[s as usize].stacks.iter() {
            stacks::accept_char(&self.rules, st, c, &mut out, &mut self.budget)?;
            if out.len() > dedup_at {
                out.sort_unstable();
                out.dedup();
                if out.len() > MAX_STACKS {
                    return Err(GrammarError::TooManyStacks { limit: MAX_STACKS });
                }
                dedup_at = out.len() + MAX_STACKS;
            }
        }
        self.intern(out)
    }

    /// [`State::loops`] of `s`.
    fn loops(&mut self, s: StateId) -> Result<[u64; 2]> {
        if let Some(l) = self.states[s as usize].loops {
            return Ok(l);
        }
        let mut l = [0u64; 2];
        for b in 1..128u32 {
            if self.next(s, b)? == s {
                l[(b / 64) as usize] |= 1 << (b % 64);
            }
        }
        self.states[s as usize].loops = Some(l);
        Ok(l)
    }

    /// The chain shortcut of state `s` (inside a string with a length bound, where every
    /// character leads to a new state that counts what is left): entry `k - 1` is the set of
    /// ASCII characters (a 128-bit set without NUL) that lead from state `c_d` to state `c_{d+1}`
    /// for every `d < k`, where `c_0 = s` and `c_{d+1}` is the state most ASCII characters lead
    /// `c_d` to (not [`DEAD`]), and whether every code point from U+0080 up leads `c_d` to
    /// `c_{d+1}` too for every `d < k`. A token of `k` ASCII characters all in entry `k - 1`
    /// walks that chain and ends between characters: it is allowed unwalked; so is a
    /// wide-clean token of `k` characters whose ASCII ones are in it, where the entry says so.
    /// The chain ends where the set falls below [`SHORTCUT_MIN`] characters, or at
    /// [`CHAIN_DEPTH`].
    fn chain(&mut self, s: StateId) -> Result<Arc<[ChainStep]>> {
        if let Some(c) = &self.states[s as usize].chain {
            return Ok(Arc::clone(c));
        }
        let mut out = Vec::new();
        let mut inter = [!1u64, !0u64];
        let mut wide = true;
        let mut cur = s;
        for _ in 0..CHAIN_DEPTH {
            // The successor most ASCII characters lead to, and those characters.
            let mut succ: Vec<(StateId, [u64; 2], u32)> = Vec::new();
            for b in 1..128u32 {
                let t = self.next(cur, b)?;
                if t == DEAD {
                    continue;
                }
                let bit = |set: &mut [u64; 2]| set[(b / 64) as usize] |= 1 << (b % 64);
                match succ.iter_mut().find(|e| e.0 == t) {
                    Some(e) => {
                        bit(&mut e.1);
                        e.2 += 1;
                    }
                    None => {
                        let mut set = [0u64; 2];
                        bit(&mut set);
                        succ.push((t, set, 1));
                    }
                }
            }
            let Some(&(t, set, _)) = succ.iter().max_by_key(|e| e.2) else { break };
            inter = [inter[0] & set[0], inter[1] & set[1]];
            if inter[0].count_ones() + inter[1].count_ones() < SHORTCUT_MIN {
                break;
            }
            if wide {
                // Every interval of the classes above ASCII (one code point of each) to `t`.
                self.wide_class(cur, 0x80);
                let w = self.states[cur as usize].wide.as_ref().expect("computed");
                let starts: Vec<u32> = std::iter::once(0x80).chain(w.bounds.iter().copied()).collect();
                for c in starts {
                    if self.next(cur, c)? != t {
                        wide = false;
                        break;
                    }
                }
            }
            out.push((inter, wide));
            cur = t;
        }
        let chain: Arc<[ChainStep]> = out.into();
        self.states[s as usize].chain = Some(Arc::clone(&chain));
        Ok(chain)
    }

    /// Whether some stack of `s` may take the character the decoder `dc` has begun (pending),
    /// whatever bytes complete it: a class on top of a stack meets the code points it can
    /// decode to, every value with the bits so far on top (inside a token the decoder takes any
    /// continuation byte, and one resumed from the previous token checks only their top bits).
    /// `lead`: the byte just taken when it was the character's first (the answer is cached per
    /// state for those). A negated class counts as meeting them (a sound answer: only a `false`
    /// lets the walk skip tokens, and a token ending inside such a character would be refused
    /// too, `stacks::match_partial` meeting a narrower range).
    fn may_complete(&mut self, s: StateId, lead: Option<u8>, dc: Decoder) -> bool {
        if let Some(b) = lead {
            return self.lead_ok(s, b);
        }
        let p = dc.partial();
        let n = p.n_remain as u32;
        let low = p.value << (6 * n);
        self.tops_meet(s, low, low | ((1 << (6 * n)) - 1))
    }

    /// Whether a class on top of a stack of `s` may match a code point in `low..=high`
    /// (`stacks::may_match_range`).
    fn tops_meet(&self, s: StateId, low: u32, high: u32) -> bool {
        let rules = &self.rules;
        self.states[s as usize]
            .stacks
            .iter()
            .filter_map(|st| st.last().copied())
            .any(|top| !rules.at(top).is_token() && stacks::may_match_range(rules, top, low, high))
    }

    /// [`Engine::may_complete`] of a character whose lead byte `lead` (0xC0 and up) was just
    /// taken.
    fn lead_ok(&mut self, s: StateId, lead: u8) -> bool {
        let leads = match self.states[s as usize].leads {
            Some(l) => l,
            None => {
                let mut l = 0u64;
                for b in 0xC0..=0xFFu8 {
                    // The lead's bits and byte count, as the decoder reads them.
                    let mut d = Decoder::CLEAR;
                    d.push(b);
                    let p = d.partial();
                    let n = p.n_remain as u32;
                    let low = p.value << (6 * n);
                    let high = low | ((1 << (6 * n)) - 1);
                    if self.tops_meet(s, low, high) {
                        l |= 1 << (b - 0xC0);
                    }
                }
                self.states[s as usize].leads = Some(l);
                l
            }
        };
        leads >> (lead - 0xC0) & 1 == 1
    }

    /// Whether some stack of `s` can take a character that completes `p` (`p.n_remain != 0`).
    fn partial_ok(&mut self, s: StateId, p: Partial) -> bool {
        if let Some(&ok) = self.partial_ok.get(&(s, p)) {
            return ok;
        }
        let rules = &self.rules;
        let ok = self.states[s as usize]
            .stacks
            .iter()
            .filter_map(|st| st.last().copied())
            .any(|top| !rules.at(top).is_token() && stacks::match_partial(rules, top, p));
        self.partial_ok.insert((s, p), ok);
        ok
    }

    /// Whether token `t` is allowed in state `s` after the partial character `partial`, exactly
    /// as llama.cpp's candidate rejection decides it.
    pub(crate) fn allows(&mut self, vocab: &Vocab, s: StateId, partial: Partial, t: u32) -> Result<bool> {
        if vocab.is_eog(t) {
            return Ok(self.complete(s));
        }
        let piece = vocab.piece(t);
        if piece.is_empty() {
            return Ok(false);
        }
        let (cps, p) = utf8::decode(piece, partial);
        let mut cur = s;
        for &c in &cps {
            // A token element accepts by id while the token still has characters.
            if self.has_tokens
                && self.states[cur as usize].token_tops.iter().any(|&top| stacks::token_matches(&self.rules, top, t))
            {
                return Ok(true);
            }
            cur = self.next(cur, c)?;
            if cur == DEAD {
                return Ok(false);
            }
        }
        Ok(p.n_remain == 0 || self.partial_ok(cur, p))
    }

    /// The allowed-token mask of state `s` after `partial` into `out` (`ceil(n_vocab / 32)` words,
    /// bit `t % 32` of word `t / 32` set when token `t` is allowed).
    pub(crate) fn mask(&mut self, vocab: &Vocab, s: StateId, partial: Partial, out: &mut [u32]) -> Result<()> {
        debug_assert_eq!(out.len(), vocab.mask_words());
        if let Some(m) = self.masks.get(&(s, partial)) {
            out.copy_from_slice(m);
            return Ok(());
        }
        out.fill(0);
        let set = |out: &mut [u32], t: u32| out[(t / 32) as usize] |= 1 << (t % 32);
        if self.complete(s) {
            for &t in vocab.eog() {
                set(out, t);
            }
        }
        if self.has_tokens {
            for &t in &vocab.order {
                if self.allows(vocab, s, partial, t)? {
                    set(out, t);
                }
            }
        } else {
            self.walk(vocab, s, partial, out)?;
        }
        self.mask_bytes += out.len() * 4;
        self.masks.insert((s, partial), out.into());
        Ok(())
    }

    /// The text-ordered walk of the module docs (grammars without token elements).
    fn walk(&mut self, vocab: &Vocab, s: StateId, partial: Partial, out: &mut [u32]) -> Result<()> {
        let mut st = std::mem::take(&mut self.walk_states);
        let mut dec = std::mem::take(&mut self.walk_decoders);
        let mut taken = std::mem::take(&mut self.walk_taken);
        st.clear();
        dec.clear();
        st.resize(vocab.max_len + 1, DEAD);
        dec.resize(vocab.max_len + 1, Decoder::new(partial));
        st[0] = s;
        let (order, lcp) = (&vocab.order, &vocab.lcp);
        let mut valid = 0usize;
        let mut i = 0;
        let result = (|| {
            // Where the start state is itself again after most ASCII characters (inside a
            // string), a token made only of those is allowed without a walk: it never leaves the
            // state and ends between characters. A text with characters from U+0080 up needs
            // them to lead back to the state too, and to be whole characters (wide-clean, see
            // `vocab::wide_clean`). Where it is not, but most ASCII characters lead on to one
            // next state, and from there on again (a string with a length bound), the chain of
            // those states gives the same shortcut for tokens up to its length (`Engine::chain`).
            // The shortcut takes its tokens a word of the mask at a time (`TokenSets`); the walk
            // visits the others only.
            let clear = Decoder::new(partial).is_clear();
            let loops = if clear { self.loops(s)? } else { [0; 2] };
            let shortcut = loops[0].count_ones() + loops[1].count_ones() >= SHORTCUT_MIN;
            let took = if shortcut {
                let wide = self.wide_loops(s)?;
                vocab.sets.take_loops(loops, wide, &mut taken);
                true
            } else if clear {
                let chain = self.chain(s)?;
                if !chain.is_empty() {
                    vocab.sets.take_chain(&chain, &mut taken);
                }
                !chain.is_empty()
            } else {
                false
            };
            if took {
                out.iter_mut().zip(&taken.id).for_each(|(o, t)| *o |= t);
            }
            while i < order.len() {
                if took && taken.has(i) {
                    i = taken.next_free(i, order.len());
                    // The next token starts from the root: nothing of those was walked.
                    valid = 0;
                    continue;
                }
                let t = order[i];
                let piece = vocab.ordered_piece(i);
                let mut d = (lcp[i] as usize).min(valid);
                let mut dead = None;
                while d < piece.len() {
                    let b = piece[d];
                    let (next, dc) = if b < 0x80 && dec[d].is_clear() {
                        // The common case: an ASCII character between characters.
                        let t = self.states[st[d] as usize].ascii[usize::from(b)];
                        (if t == UNKNOWN { self.next(st[d], u32::from(b))? } else { t }, Decoder::CLEAR)
                    } else {
                        let mut dc = dec[d];
                        let next = match dc.push(b) {
                            Step::Char(c) => self.next(st[d], c)?,
                            // A character begun that no stack can take, whatever follows: every
                            // token from here on is rejected.
                            Step::Pending if !self.may_complete(st[d], dec[d].is_clear().then_some(b), dc) => DEAD,
                            Step::Pending => st[d],
                            Step::Invalid => DEAD,
                        };
                        (next, dc)
                    };
                    if next == DEAD {
                        dead = Some(d);
                        break;
                    }
                    st[d + 1] = next;
                    dec[d + 1] = dc;
                    d += 1;
                }
                if let Some(d) = dead {
                    // Every token sharing the first d + 1 bytes is rejected: jumped over.
                    valid = d;
                    i = vocab.skip(i, d);
                    continue;
                }
                valid = piece.len();
                let p = dec[piece.len()].partial();
                if p.n_remain == 0 || self.partial_ok(st[piece.len()], p) {
                    out[(t / 32) as usize] |= 1 << (t % 32);
                }
                i += 1;
            }
            Ok(())
        })();
        self.walk_states = st;
        self.walk_decoders = dec;
        self.walk_taken = taken;
        result
    }

    /// The state after accepting token `t` with text `piece` (not end-of-generation) in state `s`
    /// after `partial`, and the partial character it leaves; [`DEAD`] when no stack takes it
    /// (llama.cpp's `llama_grammar_accept_token`).
    pub(crate) fn accept_piece(
        &mut self,
        s: StateId,
        partial: Partial,
        t: u32,
        piece: &[u8],
    ) -> Result<(StateId, Partial)> {
        let (cps, p) = utf8::decode(piece, partial);
        let mut out: Vec<Stack> = Vec::new();
        let rules = Arc::clone(&self.rules);
        let token_tops = !self.states[s as usize].token_tops.is_empty();
        if token_tops {
            for st in self.states[s as usize].stacks.iter() {
                if st.last().is_some_and(|&top| rules.at(top).is_token()) {
                    stacks::accept_token_elem(&rules, st, t, &mut out, &mut self.budget)?;
                }
            }
        }
        if cps.is_empty() {
            // No character: the stacks waiting on one stay; empty stacks end.
            out.extend(
                self.states[s as usize]
                    .stacks
                    .iter()
                    .filter(|st| st.last().is_some_and(|&top| !rules.at(top).is_token()))
                    .cloned(),
            );
        } else {
            let mut cur = s;
            for &c in &cps {
                cur = self.next(cur, c)?;
                if cur == DEAD {
                    break;
                }
            }
            if cur != DEAD {
                out.extend(self.states[cur as usize].stacks.iter().cloned());
            }
        }
        Ok((self.intern(out)?, p))
    }
}

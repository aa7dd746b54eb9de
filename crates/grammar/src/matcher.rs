//! [`Matcher`]: one sequence's position in a grammar (its parse stacks and a character a token
//! left unfinished), what it allows next (a mask over the vocabulary, or one token checked), and
//! how it moves on an accepted token; plus llama.cpp's lazy grammars, which accept anything until
//! a trigger (a token, a word, or a pattern) appears in the output and then constrain from the
//! trigger on.
//!
//! Clones share the engine's cache (a drafted position's matcher is a clone advanced along the
//! draft), and a matcher is only ever moved by [`Matcher::accept`]: computing masks and checking
//! tokens leave it where it is.

use crate::engine::{DEAD, Engine, StateId};
use crate::error::{GrammarError, Result};
use crate::grammar::Grammar;
use crate::stacks::Stack;
use crate::utf8::Partial;
use crate::vocab::Vocab;
use regex::bytes::Regex;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What activates a lazy grammar (llama.cpp's `common_grammar_trigger`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// This token, when accepted: the grammar starts with it.
    Token(u32),
    /// This text anywhere in the output: the grammar starts at it.
    Word(String),
    /// A regular expression matched anywhere in the output: the grammar starts at its first
    /// non-empty capture group (or at the match).
    Pattern(String),
    /// A regular expression that must match the whole output from its start (llama.cpp's
    /// `PATTERN_FULL`, anchored with `^...$`): the grammar starts at its first non-empty capture
    /// group (or at the start).
    PatternFull(String),
}

#[derive(Debug, Clone)]
struct Lazy {
    awaiting: bool,
    tokens: Vec<u32>,
    patterns: Vec<Regex>,
    /// The output so far while awaiting, and each token's span in it.
    buffer: Vec<u8>,
    spans: Vec<(u32, usize, usize)>,
}

/// See the module docs.
#[derive(Clone)]
pub struct Matcher {
    grammar: Grammar,
    vocab: Arc<Vocab>,
    engine: Arc<Mutex<Engine>>,
    stacks: Vec<Stack>,
    partial: Partial,
    lazy: Option<Lazy>,
    initial_lazy: Option<Lazy>,
}

impl std::fmt::Debug for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matcher")
            .field("stacks", &self.stacks.len())
            .field("partial", &self.partial)
            .field("awaiting_trigger", &self.is_awaiting_trigger())
            .finish()
    }
}

fn lock(engine: &Mutex<Engine>) -> MutexGuard<'_, Engine> {
    // The engine is a cache: a panic while holding it cannot leave it wrong for the next caller,
    // since every entry is written whole.
    engine.lock().unwrap_or_else(PoisonError::into_inner)
}

fn regex_escape(word: &str) -> String {
    regex::escape(word)
}

impl Matcher {
    /// A matcher at the start of `grammar` over `vocab`.
    pub fn new(grammar: &Grammar, vocab: Arc<Vocab>) -> Self {
        let engine = Engine::new(Arc::clone(&grammar.rules), grammar.has_tokens);
        let mut stacks = grammar.initial.clone();
        stacks.sort_unstable();
        stacks.dedup();
        Self {
            grammar: grammar.clone(),
            vocab,
            engine: Arc::new(Mutex::new(engine)),
            stacks,
            partial: Partial::default(),
            lazy: None,
            initial_lazy: None,
        }
    }

    /// A lazy matcher: it allows every token until one of `triggers` appears, then constrains
    /// from the trigger on (llama.cpp's lazy grammar, with its triggers turned into patterns as
    /// `common_sampler_init` does: words and anywhere-patterns become one alternation searched
    /// anywhere in the output). Error: no trigger, an empty one, a bad expression or a token
    /// outside the vocabulary.
    pub fn lazy(grammar: &Grammar, vocab: Arc<Vocab>, triggers: &[Trigger]) -> Result<Self> {
        if triggers.is_empty() {
            return Err(GrammarError::BadTrigger {
                trigger: String::new(),
                reason: "a lazy grammar needs a trigger".into(),
            });
        }
        let mut tokens = Vec::new();
        let mut anywhere = Vec::new();
        let mut full = Vec::new();
        for t in triggers {
            match t {
                Trigger::Token(id) => {
                    if *id as usize >= vocab.len() {
                        return Err(GrammarError::UnknownToken { token: *id, n_vocab: vocab.len() });
                    }
                    tokens.push(*id);
                }
                Trigger::Word(w) | Trigger::Pattern(w) if w.is_empty() => {
                    return Err(GrammarError::BadTrigger { trigger: w.clone(), reason: "it is empty".into() });
                }
                Trigger::Word(w) => anywhere.push(regex_escape(w)),
                Trigger::Pattern(p) => anywhere.push(p.clone()),
                Trigger::PatternFull(p) => {
                    let mut a = String::new();
                    if !p.starts_with('^') {
                        a.push('^');
                    }
                    a.push_str(p);
                    if !p.ends_with('$') {
                        a.push('$');
                    }
                    full.push(a);
                }
            }
        }
        if !anywhere.is_empty() {
            full.push(format!("^(?s:.)*?({})(?s:.)*", anywhere.join("|")));
        }
        let patterns = full
            .into_iter()
            .map(|p| Regex::new(&p).map_err(|e| GrammarError::BadTrigger { trigger: p.clone(), reason: e.to_string() }))
            .collect::<Result<Vec<_>>>()?;
        let mut m = Self::new(grammar, vocab);
        let lazy = Lazy { awaiting: true, tokens, patterns, buffer: Vec::new(), spans: Vec::new() };
        m.lazy = Some(lazy.clone());
        m.initial_lazy = Some(lazy);
        Ok(m)
    }

    /// Whether `other` shares this matcher's cache of grammar states and masks (a clone does).
    pub fn shares_cache_with(&self, other: &Matcher) -> bool {
        Arc::ptr_eq(&self.engine, &other.engine)
    }

    /// The grammar.
    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    /// Whether a lazy grammar still waits for its trigger (it allows every token meanwhile).
    pub fn is_awaiting_trigger(&self) -> bool {
        self.lazy.as_ref().is_some_and(|l| l.awaiting)
    }

    /// Whether the grammar may end here (some parse is complete): end-of-generation tokens are
    /// allowed.
    pub fn can_end(&self) -> bool {
        !self.is_awaiting_trigger() && self.stacks.iter().any(Vec::is_empty)
    }

    fn state(&self, e: &mut Engine) -> Result<StateId> {
        e.trim();
        e.intern(self.stacks.clone())
    }

    /// Writes the allowed-token mask (`ceil(n_vocab / 32)` words; bit `t % 32` of word `t / 32`
    /// for token `t`; bits past the vocabulary clear).
    pub fn fill_mask(&self, out: &mut [u32]) -> Result<()> {
        let n = self.vocab.len();
        assert_eq!(out.len(), self.vocab.mask_words(), "a mask over {n} tokens has {} words", self.vocab.mask_words());
        if self.is_awaiting_trigger() {
            out.fill(u32::MAX);
            if !n.is_multiple_of(32) {
                out[n / 32] = (1u32 << (n % 32)) - 1;
            }
            return Ok(());
        }
        let mut e = lock(&self.engine);
        let s = self.state(&mut e)?;
        e.mask(&self.vocab, s, self.partial, out)
    }

    /// The allowed-token mask as a new vector.
    pub fn mask(&self) -> Result<Vec<u32>> {
        let mut out = vec![0; self.vocab.mask_words()];
        self.fill_mask(&mut out)?;
        Ok(out)
    }

    /// Whether token `t` may come next.
    pub fn allows(&self, t: u32) -> Result<bool> {
        self.check_id(t)?;
        if self.is_awaiting_trigger() {
            return Ok(true);
        }
        let mut e = lock(&self.engine);
        let s = self.state(&mut e)?;
        e.allows(&self.vocab, s, self.partial, t)
    }

    /// Whether the only tokens allowed now end generation (the grammar is complete and nothing
    /// can extend it).
    pub fn must_end(&self) -> Result<bool> {
        if !self.can_end() {
            return Ok(false);
        }
        let mask = self.mask()?;
        let mut others = mask;
        for &t in self.vocab.eog() {
            others[(t / 32) as usize] &= !(1 << (t % 32));
        }
        Ok(others.iter().all(|&w| w == 0))
    }

    fn check_id(&self, t: u32) -> Result<()> {
        if t as usize >= self.vocab.len() {
            return Err(GrammarError::UnknownToken { token: t, n_vocab: self.vocab.len() });
        }
        Ok(())
    }

    fn rejected(&self, t: u32, piece: &[u8]) -> GrammarError {
        GrammarError::Rejected { token: t, piece: String::from_utf8_lossy(piece).into_owned() }
    }

    /// Moves the matcher over `piece` as token `t`'s text; the matcher is unchanged on error.
    fn accept_piece(&mut self, t: u32, piece: &[u8]) -> Result<()> {
        let mut e = lock(&self.engine);
        let s = self.state(&mut e)?;
        let (next, partial) = e.accept_piece(s, self.partial, t, piece)?;
        if next == DEAD {
            return Err(self.rejected(t, piece));
        }
        self.stacks = e.stacks(next).to_vec();
        self.partial = partial;
        Ok(())
    }

    /// Accepts token `t` (llama.cpp's `llama_grammar_accept_impl`). An end-of-generation token is
    /// accepted where the grammar may end and changes nothing; a token the grammar cannot take
    /// is [`GrammarError::Rejected`] and leaves the matcher unchanged.
    pub fn accept(&mut self, t: u32) -> Result<()> {
        self.check_id(t)?;
        let vocab = Arc::clone(&self.vocab);
        let piece = vocab.piece(t);
        if let Some(lazy) = self.lazy.as_mut()
            && lazy.awaiting
        {
            if lazy.tokens.contains(&t) {
                let saved = self.lazy.clone();
                if let Some(l) = self.lazy.as_mut() {
                    l.awaiting = false;
                    l.buffer.clear();
                    l.spans.clear();
                }
                return self.accept_piece(t, piece).inspect_err(|_| self.lazy = saved);
            }
            let start = lazy.buffer.len();
            lazy.buffer.extend_from_slice(piece);
            lazy.spans.push((t, start, lazy.buffer.len()));
            let Some(at) = lazy.patterns.iter().find_map(|re| trigger_start(re, &lazy.buffer)) else {
                return Ok(());
            };
            let saved = (self.lazy.clone(), self.stacks.clone(), self.partial);
            let (buffer, spans) = match self.lazy.as_mut() {
                Some(l) => {
                    l.awaiting = false;
                    (std::mem::take(&mut l.buffer), std::mem::take(&mut l.spans))
                }
                None => unreachable!(),
            };
            for &(tok, a, b) in &spans {
                if b <= at {
                    continue;
                }
                if let Err(err) = self.accept_piece(tok, &buffer[a.max(at)..b]) {
                    (self.lazy, self.stacks, self.partial) = saved;
                    // The trigger fired but the grammar cannot take the text from it on: the
                    // output so far stays accepted as unconstrained text, and the error says why.
                    if let Some(l) = self.lazy.as_mut() {
                        l.buffer.truncate(start);
                        l.spans.pop();
                    }
                    return Err(err);
                }
            }
            return Ok(());
        }
        if self.vocab.is_eog(t) {
            return if self.can_end() { Ok(()) } else { Err(self.rejected(t, piece)) };
        }
        self.accept_piece(t, piece)
    }

    /// Back to the start (a lazy grammar waits for its trigger again).
    pub fn reset(&mut self) {
        let mut stacks = self.grammar.initial.clone();
        stacks.sort_unstable();
        stacks.dedup();
        self.stacks = stacks;
        self.partial = Partial::default();
        self.lazy = self.initial_lazy.clone();
    }
}

/// Where a trigger pattern starts the grammar in `buffer`, if it matches (llama.cpp's
/// `llama_grammar_trigger_pattern::find`: the first non-empty capture group, else the match).
fn trigger_start(re: &Regex, buffer: &[u8]) -> Option<usize> {
    let caps = re.captures(buffer)?;
    let group = (1..caps.len()).filter_map(|i| caps.get(i)).find(|m| !m.is_empty());
    Some(group.map_or_else(|| caps.get(0).map_or(0, |m| m.start()), |m| m.start()))
}

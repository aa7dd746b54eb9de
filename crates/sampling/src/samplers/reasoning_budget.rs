//! `reasoning_budget`: after `budget` tokens inside a thinking block, forces the block's end,
//! token by token (llama.cpp's `common_reasoning_budget_init`, `common/reasoning-budget.cpp`,
//! which `common_sampler_sample` applies before the chain: the walkthrough's step 2).
//!
//! A state machine driven by the accepted tokens:
//! * **idle**: waiting for a start sequence (any of `start`); on one, **counting** with the whole
//!   budget (a budget of 0 goes straight to **forcing**);
//! * **counting**: each token that does not complete an end sequence (any of `end`: the block
//!   ended by itself, **done**) uses one token of the budget; when none is left, **forcing**, or
//!   **waiting** where the token left a UTF-8 character unfinished;
//! * **waiting**: tokens pass until one ends on a complete UTF-8 character (or completes an end
//!   sequence: **done**), then **forcing**;
//! * **forcing**: every token but `forced[i]` is masked; after the last forced token, **done**;
//! * **done**: passes everything; a new start sequence re-arms the budget (models that think in
//!   several blocks).
//!
//! Sequences match as llama.cpp's Aho-Corasick matchers do: the longest sequence ending at the
//! token among the tokens since the matcher's last match or reset (a match restarts it; entering
//! forcing restarts the end matcher). The UTF-8 test is llama.cpp's `common_utf8_is_complete` on
//! the token's own text (so a token holding only the continuation bytes that finish a character
//! counts as unfinished, as there); without a vocabulary every token counts as complete
//! (llama.cpp's `vocab = nullptr`).
//!
//! Edge values (llama.cpp): a negative budget is unlimited (`INT_MAX`: it never forces by itself,
//! only through [`ReasoningBudget::force`]); `forced` defaults to the first end sequence
//! (llama.cpp forces the budget message's tokens, then the first end tag); empty sequences are
//! skipped and duplicates dropped. Errors (llama.cpp does not create the sampler without them): no
//! start or no end sequence, an empty `forced`.
//!
//! Forcing adds `-inf` to every other token (`x + -inf`, as the ban stages do) where llama.cpp
//! assigns `-inf`: a NaN or `+inf` logit elsewhere in the row still fails the row as a bad row
//! (docs/SAMPLING.md, "Deliberate differences"). On the backend the forced token is a per-row
//! input (-1 when not forcing) and the mask is computed from it (`arange`, `equal`): nothing
//! vocabulary-sized is written per step, and the graph does not change as the state does.
//! llama.cpp turns backend sampling off when a reasoning budget is set; here the forced token
//! overrides the chain on the backend too, and on a drafted output the row's chain has accepted
//! the draft before it, so verification cannot let a draft token slip past the budget.

use crate::backend::prelude::*;
use crate::candidates::Candidates;
use crate::error::{Result, invalid};
use crate::sampler::{Sampler, Token};
use std::sync::Arc;

const NAME: &str = "reasoning_budget";

/// Where the budget's state machine stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetState {
    /// Waiting for a start sequence.
    Idle,
    /// Inside a thinking block, counting down.
    Counting,
    /// The budget is spent; waiting for a token that ends a UTF-8 character.
    WaitingUtf8,
    /// Forcing the forced sequence.
    Forcing,
    /// Passing everything until a start sequence re-arms it.
    Done,
}

/// llama.cpp's `token_matcher`: which of a set of token sequences ends at each accepted token.
#[derive(Debug, Clone)]
struct Matcher {
    seqs: Vec<Vec<Token>>,
    /// The tokens since the last match or reset (at most the longest sequence's length).
    recent: Vec<Token>,
}

impl Matcher {
    fn new(seqs: &[Vec<Token>]) -> Self {
        let mut out: Vec<Vec<Token>> = Vec::new();
        for s in seqs {
            if !s.is_empty() && !out.contains(s) {
                out.push(s.clone());
            }
        }
        Self { seqs: out, recent: Vec::new() }
    }

    /// The index of the longest sequence ending at `token`, if any (the matcher then restarts).
    fn advance(&mut self, token: Token) -> Option<usize> {
        let longest = self.seqs.iter().map(Vec::len).max().unwrap_or(0);
        if longest == 0 {
            return None;
        }
        self.recent.push(token);
        if self.recent.len() > longest {
            self.recent.remove(0);
        }
        let hit = (0..self.seqs.len())
            .filter(|&i| self.recent.ends_with(&self.seqs[i]))
            .max_by_key(|&i| (self.seqs[i].len(), std::cmp::Reverse(i)));
        if hit.is_some() {
            self.recent.clear();
        }
        hit
    }

    fn reset(&mut self) {
        self.recent.clear();
    }
}

/// llama.cpp's `common_utf8_is_complete`: whether `s` ends on a complete UTF-8 character (an
/// empty text does; an orphan continuation byte does not).
pub fn utf8_is_complete(s: &[u8]) -> bool {
    if s.is_empty() {
        return true;
    }
    for i in 1..=s.len().min(4) {
        let c = s[s.len() - i];
        if c & 0xC0 != 0x80 {
            let expected = if c >= 0xF0 {
                4
            } else if c >= 0xE0 {
                3
            } else if c >= 0xC0 {
                2
            } else {
                1
            };
            return i >= expected;
        }
    }
    false
}

/// The reasoning budget.
#[derive(Debug, Clone)]
pub struct ReasoningBudget {
    start: Matcher,
    end: Matcher,
    forced: Vec<Token>,
    /// The budget (`None`: unlimited).
    budget: Option<u32>,
    remaining: u32,
    state: BudgetState,
    initial: BudgetState,
    force_pos: usize,
    end_match: Option<usize>,
    vocab: Option<Arc<::grammar::Vocab>>,
}

impl ReasoningBudget {
    /// A budget of `budget` tokens (negative: unlimited) for the blocks opened by any of `start`
    /// and closed by any of `end`, forcing `forced` (empty: the first end sequence) when spent,
    /// in state `initial` (`Counting` where the prompt opened a block; counting with a budget of
    /// 0 is forcing). `vocab` gives the token texts for the UTF-8 test.
    pub fn new(
        budget: i64,
        start: &[Vec<Token>],
        end: &[Vec<Token>],
        forced: &[Token],
        initial: BudgetState,
        vocab: Option<Arc<::grammar::Vocab>>,
    ) -> Result<Self> {
        let start = Matcher::new(start);
        let end = Matcher::new(end);
        if start.seqs.is_empty() {
            return Err(invalid(NAME, "start", "", "needs a start sequence (the tokens that open a thinking block)"));
        }
        if end.seqs.is_empty() {
            return Err(invalid(NAME, "end", "", "needs an end sequence (the tokens that close a thinking block)"));
        }
        let forced = if forced.is_empty() { end.seqs[0].clone() } else { forced.to_vec() };
        let budget = u32::try_from(budget).ok();
        let mut s = Self {
            start,
            end,
            forced,
            budget,
            remaining: 0,
            state: initial,
            initial,
            force_pos: 0,
            end_match: None,
            vocab,
        };
        s.reset();
        Ok(s)
    }

    /// The state.
    pub fn state(&self) -> BudgetState {
        self.state
    }

    /// The end sequence that closed the last block (naturally or at the end of the forced
    /// tokens), if any; cleared when a start sequence re-arms the budget.
    pub fn end_match(&self) -> Option<&[Token]> {
        self.end_match.map(|i| self.end.seqs[i].as_slice())
    }

    /// llama.cpp's `common_reasoning_budget_force`: from counting, forcing at once (true); any
    /// other state is left as it is (false).
    pub fn force(&mut self) -> bool {
        if self.state != BudgetState::Counting {
            return false;
        }
        self.begin_forcing();
        true
    }

    /// The token this step must take, while forcing.
    pub fn forced_token(&self) -> Option<Token> {
        if self.state == BudgetState::Forcing { self.forced.get(self.force_pos).copied() } else { None }
    }

    fn begin_forcing(&mut self) {
        self.state = BudgetState::Forcing;
        self.force_pos = 0;
        self.end.reset();
    }

    /// A block opens: the whole budget, or forcing at once for a budget of 0.
    fn arm(&mut self) {
        self.state = BudgetState::Counting;
        self.remaining = self.budget.unwrap_or(u32::MAX);
        if self.remaining == 0 {
            self.state = BudgetState::Forcing;
            self.force_pos = 0;
        }
    }

    fn utf8_complete(&self, token: Token) -> bool {
        match &self.vocab {
            Some(v) if (token as usize) < v.len() => utf8_is_complete(v.piece(token)),
            _ => true,
        }
    }
}

impl Sampler for ReasoningBudget {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A prompt token is not the output's: llama.cpp's grammar and reasoning budget see
    /// generated tokens only.
    fn accept_prompt(&mut self, _token: Token) {}

    fn accept(&mut self, token: Token) {
        match self.state {
            BudgetState::Idle => {
                if self.start.advance(token).is_some() {
                    self.arm();
                }
            }
            BudgetState::Counting | BudgetState::WaitingUtf8 => {
                if let Some(m) = self.end.advance(token) {
                    self.state = BudgetState::Done;
                    self.end_match = Some(m);
                    return;
                }
                let complete = self.utf8_complete(token);
                if self.state == BudgetState::WaitingUtf8 {
                    if complete {
                        self.begin_forcing();
                    }
                } else {
                    // An unlimited budget never runs out (llama.cpp counts down from INT_MAX).
                    if self.budget.is_some() {
                        self.remaining = self.remaining.saturating_sub(1);
                    }
                    if self.remaining == 0 {
                        if complete {
                            self.begin_forcing();
                        } else {
                            self.state = BudgetState::WaitingUtf8;
                            self.end.reset();
                        }
                    }
                }
            }
            BudgetState::Forcing => {
                // The end sequence inside the forced tokens is recorded too.
                let m = self.end.advance(token);
                self.force_pos += 1;
                if self.force_pos >= self.forced.len() {
                    self.state = BudgetState::Done;
                    self.end_match = m;
                }
            }
            BudgetState::Done => {
                if self.start.advance(token).is_some() {
                    self.end.reset();
                    self.end_match = None;
                    self.arm();
                }
            }
        }
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let Some(forced) = self.forced_token() else { return Ok(()) };
        if let Some(logits) = cur.vocab_logits_mut() {
            for (i, l) in logits.iter_mut().enumerate() {
                if i != forced as usize {
                    *l += f32::NEG_INFINITY;
                }
            }
            return Ok(());
        }
        for e in cur.list_mut(NAME)?.iter_mut().filter(|e| e.id != forced) {
            e.logit += f32::NEG_INFINITY;
        }
        cur.set_sorted(false);
        Ok(())
    }

    fn reset(&mut self) {
        self.start.reset();
        self.end.reset();
        self.force_pos = 0;
        self.end_match = None;
        self.state = BudgetState::Idle;
        self.remaining = self.budget.unwrap_or(u32::MAX);
        match self.initial {
            BudgetState::Counting => self.arm(),
            BudgetState::Forcing => self.begin_forcing(),
            s => self.state = s,
        }
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

/// On every form: a dense row, 0 at the row's forced token (every token while it forces none)
/// and `-inf` elsewhere, added to the record (`Lowering::add_row`). Appended whatever the budget:
/// an unlimited one still forces after [`ReasoningBudget::force`].
impl BackendStage for ReasoningBudget {
    fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        Some(match form {
            Form::Masked => (StageKey::new::<Self>(NAME, 0, 0).keeping_inf(), form),
            _ => (StageKey::new::<Self>(NAME, 0, 0), form),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, _key: StageKey, rec: Record) -> R<Record> {
        let (n, nv) = (cx.n(), cx.n_vocab());
        // The forced token as an f32 (exact: vocabularies are far below 2^24), -1 for none.
        let forced = cx.param::<Self>("forced", 1, |s, out| out.f32(s.forced_token().map_or(-1.0, |t| t as f32)))?;
        let ids = cx.g.arange(DType::F32, &[nv, n], 0.0, 1.0)?;
        let is_forced = cx.g.equal(ids, forced)?;
        let zero = cx.fill(&[1, 1], 0.0)?;
        let forcing = cx.g.ge(forced, zero)?;
        let idle = cx.g.scale_bias(forcing, -1.0, 1.0)?;
        let keep = cx.g.add(is_forced, idle)?;
        let zeros = cx.fill(&[nv, n], 0.0)?;
        let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
        let row = cx.g.where_(keep, zeros, ninf)?;
        cx.add_row(rec, row)
    }
}

//! Structured output: a stage that allows only the tokens a grammar can take next (llama.cpp's
//! grammar sampler, `llama_sampler_init_grammar` / `_lazy_patterns`), over a GBNF grammar, a
//! JSON schema turned into one, or a lazy grammar waiting for its trigger. The grammar and its
//! matcher are the `grammar` crate's; this file is the stage: its CPU form, its backend form, and
//! its two modes.
//!
//! - **Grammar-first** ([`GrammarMode::First`]): the stage masks, at its place in the chain, every
//!   token the grammar cannot take (`-inf` added, as the other bans do), on the vocabulary or on a
//!   candidate list (after a `top_k`, among the k). llama.cpp's `grammar_first`.
//! - **Optimistic** ([`GrammarMode::Optimistic`], llama.cpp's default in
//!   `common_sampler_sample`): the chain runs without the stage; only if the grammar rejects the
//!   token it chose does the chain run again with the stage masking. The chain's random stages
//!   draw the same number in both runs (a step's numbers move only on accept), where llama.cpp's
//!   resample draws a fresh one: docs/SAMPLING.md lists this. On the backend the stage appends
//!   nothing to the step; the host checks the 4-byte token, and only the rows it rejects run
//!   their chain again in a second, smaller backend step, masked (the mask uploaded as in
//!   grammar-first mode, the logits read where the first step left them): 4 bytes more read back
//!   per rejected row.
//!
//! End-of-generation tokens are allowed exactly where the grammar may end. A step at which the
//! grammar allows no token, or no candidate that the chain left, is an error for that sequence.
//! The backend form: the host computes the row's allowed-token bitmask from the grammar's state
//! (it never depends on the logits), uploads it packed (`ceil(n_vocab / 32)` words), and one
//! `token_mask` op sets the disallowed logits to `-inf`; the rest of the chain stays on the
//! backend. A drafted output's mask follows the grammar advanced along the draft before it.

use crate::backend::prelude::*;
use crate::candidates::Candidates;
use crate::error::{Result, SamplingError};
use crate::sampler::{Sampler, Token};
use ::grammar::{GrammarError, Matcher};

thread_local! {
    /// The mask a row's input is written from, kept from step to step (8192 words at 262144
    /// tokens: no allocation per row and step).
    static MASK: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// When the grammar masks (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GrammarMode {
    /// Mask at the stage's place in the chain, every step.
    #[default]
    First,
    /// Run the chain without the mask; mask and run again only when the grammar rejects the
    /// chosen token.
    Optimistic,
}

/// The grammar stage; see the module docs.
#[derive(Debug, Clone)]
pub struct GrammarStage {
    name: &'static str,
    matcher: Matcher,
    mode: GrammarMode,
    /// Why the matcher could not take a token it was made to accept (a drafted token the grammar
    /// rejects: the outputs after it are never used).
    poisoned: Option<GrammarError>,
}

fn grammar_err(stage: &'static str, e: &GrammarError) -> SamplingError {
    SamplingError::Grammar { stage, message: e.to_string() }
}

impl GrammarStage {
    /// A stage named `name` (`grammar`, `json_schema`, `grammar_lazy`: the SPEC name it was made
    /// from) over `matcher`, masking in `mode`.
    pub fn new(name: &'static str, matcher: Matcher, mode: GrammarMode) -> Self {
        Self { name, matcher, mode, poisoned: None }
    }

    /// The matcher (where the grammar stands).
    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    /// The mode.
    pub fn mode(&self) -> GrammarMode {
        self.mode
    }

    /// Whether the grammar is complete and allows nothing but end-of-generation tokens.
    pub fn must_end(&self) -> Result<bool> {
        self.live()?.must_end().map_err(|e| grammar_err(self.name, &e))
    }

    fn check_vocab(&self, n_vocab: usize) -> Result<()> {
        let nv = self.matcher.vocab().len();
        if nv != n_vocab {
            return Err(SamplingError::Grammar {
                stage: self.name,
                message: format!("the grammar's vocabulary has {nv} tokens but the logits row {n_vocab}"),
            });
        }
        Ok(())
    }

    fn live(&self) -> Result<&Matcher> {
        match &self.poisoned {
            Some(e) => Err(grammar_err(self.name, e)),
            None => Ok(&self.matcher),
        }
    }

    /// The mask the backend form uploads for this stage: the grammar's; every token where the
    /// matcher was made to accept a token it rejects (only a drafted output after a draft token
    /// the grammar rejects: verification never reaches it); no token where the grammar fails (too
    /// ambiguous), so that only this row fails (a bad row), not the step of the whole batch.
    fn row_mask(&self, out: &mut crate::backend::Out<'_>) -> Result<()> {
        MASK.with_borrow_mut(|words| {
            words.clear();
            words.resize(self.matcher.vocab().mask_words(), 0);
            match &self.poisoned {
                None => {
                    if self.matcher.fill_mask(words).is_err() {
                        words.fill(0);
                    }
                }
                Some(_) => words.fill(u32::MAX),
            }
            out.u32s(words);
        });
        Ok(())
    }
}

impl Sampler for GrammarStage {
    fn name(&self) -> &'static str {
        self.name
    }

    /// A prompt token is not the output's: llama.cpp's grammar and reasoning budget see
    /// generated tokens only.
    fn accept_prompt(&mut self, _token: Token) {}

    fn accept(&mut self, token: Token) {
        if self.poisoned.is_none()
            && let Err(e) = self.matcher.accept(token)
        {
            self.poisoned = Some(e);
        }
    }

    fn check_accept(&self, token: Token) -> Result<()> {
        let m = self.live()?;
        m.clone().accept(token).map_err(|e| grammar_err(self.name, &e))
    }

    fn deferred(&self) -> bool {
        self.mode == GrammarMode::Optimistic
    }

    fn allows(&self, token: Token) -> Result<bool> {
        self.live()?.allows(token).map_err(|e| grammar_err(self.name, &e))
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        self.check_vocab(cur.n_vocab())?;
        let m = self.live()?;
        let name = self.name;
        let none_left = || SamplingError::Grammar {
            stage: name,
            message: "the grammar allows none of the candidates left here (every allowed token is masked)".into(),
        };
        if let Some(logits) = cur.vocab_logits_mut() {
            let mask = m.mask().map_err(|e| grammar_err(name, &e))?;
            if mask.iter().all(|&w| w == 0) {
                return Err(SamplingError::Grammar { stage: name, message: "the grammar allows no token here".into() });
            }
            // The `token_mask` op's arithmetic (`kernels::token_mask`), in place.
            for (t, l) in logits.iter_mut().enumerate() {
                *l = kernels::token_mask::masked(*l, kernels::token_mask::allowed(&mask, t as i64));
            }
            if logits.iter().all(|&l| l == f32::NEG_INFINITY) {
                return Err(none_left());
            }
            return Ok(());
        }
        let list = cur.list_mut(name)?;
        for e in list.iter_mut() {
            let ok = m.allows(e.id).map_err(|e| grammar_err(name, &e))?;
            e.logit = kernels::token_mask::masked(e.logit, ok);
        }
        if list.iter().all(|e| e.logit == f32::NEG_INFINITY) {
            return Err(none_left());
        }
        cur.set_sorted(false);
        Ok(())
    }

    fn reset(&mut self) {
        self.matcher.reset();
        self.poisoned = None;
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

/// Variants: the mask on the vocabulary row, or on a candidate list (by its ids).
const ON_VOCAB: u32 = 0;
const ON_LIST: u32 = 1;

impl GrammarStage {
    /// The packed mask input (`i32 [ceil(n_vocab / 32), n]`), each row's written from its own
    /// grammar every step.
    fn bits_input(cx: &mut Lowering<'_>, key: StageKey) -> R<NodeId> {
        let (w, n, stage) = (key.size(), cx.n(), cx.stage());
        let bits = Field::new(move |row, out| row.stage::<Self>(stage)?.row_mask(out));
        cx.input(&format!("s{stage}.grammar_bits"), DType::I32, &[w, n], vec![bits])
    }
}

impl BackendStage for GrammarStage {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        // A vocabulary of another size is the CPU form's clear error.
        if self.matcher.vocab().len() != n_vocab {
            return None;
        }
        // An optimistic grammar appends nothing: the host checks the token the backend chose, and
        // only a row whose token it rejects is run again, masked, in a second backend step
        // (`masking_key`, `Tail::sample`).
        if self.mode == GrammarMode::Optimistic {
            return (form != Form::Token).then_some((StageKey::nothing(), form));
        }
        self.masking_key(form, n_vocab)
    }

    /// The mask at the stage's place, in either mode (grammar-first's every step, an optimistic
    /// grammar's in the second run of a row whose token it rejected).
    fn masking_key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        if self.matcher.vocab().len() != n_vocab {
            return None;
        }
        let w = n_vocab.div_ceil(32);
        Some(match form {
            Form::Vocab => (StageKey::new::<Self>("grammar", ON_VOCAB, w), form),
            Form::Masked => (StageKey::new::<Self>("grammar", ON_VOCAB, w).keeping_inf(), form),
            Form::List(_) => (StageKey::new::<Self>("grammar", ON_LIST, w), form),
            Form::Token => return None,
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        let bits = Self::bits_input(cx, key)?;
        cx.mask_tokens(rec, bits)
    }

    /// On the vocabulary the stage is one `token_mask`: a next stage that reads the row through
    /// the mask (a `top_k`) takes the mask instead, and the masked row is never written.
    fn vocab_mask(&self, cx: &mut Lowering<'_>, key: StageKey) -> Option<R<NodeId>> {
        (key.variant() == ON_VOCAB && !key.keeps_inf()).then(|| Self::bits_input(cx, key))
    }
}

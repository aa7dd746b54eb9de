//! The sequences a runner samples for: each one's chain and what it wants read back
//! ([`SeqConfig`]), set, replaced and removed between steps, and its step counter (the number of
//! tokens accepted so far, which keys its random draws).

use super::stage::{Form, StageKey};
use crate::chain::Chain;
use crate::error::{Result, SamplingError};
use crate::sampler::{Sampler, Token};
use std::collections::BTreeMap;
use std::fmt;

/// A sequence id (llama.cpp's `llama_seq_id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(pub u32);

impl fmt::Display for SeqId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq {}", self.0)
    }
}

/// One sequence's sampling configuration.
#[derive(Debug, Clone)]
pub struct SeqConfig {
    /// The sampler chain; its longest backend-capable prefix runs on the backend.
    pub chain: Chain,
    /// Also read back the candidates that survive the chain (before its selecting stage).
    pub candidates: bool,
    /// Read back the log-probabilities of this many most likely tokens of the raw logits (0: none).
    pub logprobs: usize,
    /// Read back the raw logits row.
    pub logits: bool,
}

impl SeqConfig {
    /// A configuration that reads back only the token.
    pub fn new(chain: Chain) -> Self {
        Self { chain, candidates: false, logprobs: 0, logits: false }
    }

    /// Also read back the surviving candidates.
    pub fn with_candidates(mut self) -> Self {
        self.candidates = true;
        self
    }

    /// Also read back the raw logits row.
    pub fn with_logits(mut self) -> Self {
        self.logits = true;
        self
    }

    /// The extras this configuration reserves.
    pub(crate) fn extras(&self) -> super::build::Extras {
        super::build::Extras { candidates: self.candidates, logprobs: self.logprobs, logits: self.logits }
    }

    /// Also read back the top-`n` log-probabilities.
    pub fn with_logprobs(mut self, n: usize) -> Self {
        self.logprobs = n;
        self
    }

    /// The structure of the chain's longest prefix with a backend form (before the capability check
    /// on a real backend): one key per stage.
    pub(crate) fn wanted_prefix(&self, n_vocab: usize) -> Vec<StageKey> {
        let mut keys = Vec::new();
        self.each_wanted(n_vocab, |k| {
            keys.push(k);
            true
        });
        keys
    }

    /// Whether [`SeqConfig::wanted_prefix`] is `keys` (without building it: checked every step).
    pub(crate) fn wants_prefix(&self, n_vocab: usize, keys: &[StageKey]) -> bool {
        let mut n = 0;
        let same = self.each_wanted(n_vocab, |k| {
            let eq = keys.get(n) == Some(&k);
            n += 1;
            eq
        });
        same && n == keys.len()
    }

    /// Calls `f` with each key of the wanted prefix in order while it returns true; false if it
    /// returned false.
    fn each_wanted(&self, n_vocab: usize, mut f: impl FnMut(StageKey) -> bool) -> bool {
        let mut form = Form::Vocab;
        for s in self.chain.stages() {
            match s.backend_stage().and_then(|b| b.key(form, n_vocab)) {
                Some((k, next)) => {
                    if !f(k) {
                        return false;
                    }
                    form = next;
                }
                None => break,
            }
        }
        true
    }
}

#[derive(Debug, Clone)]
pub(crate) struct SeqState {
    pub cfg: SeqConfig,
    pub step: u64,
    /// This step's draft tokens: output `j` predicts the token after `draft[..j]`.
    pub draft: Vec<Token>,
}

impl SeqState {
    /// The chain as output `output` sees it: the real chain for output 0, else a copy that has
    /// accepted the draft tokens before that output (so penalties and DRY count them).
    pub(crate) fn chain_for(&self, output: usize) -> std::borrow::Cow<'_, Chain> {
        let n = output.min(self.draft.len());
        if n == 0 {
            return std::borrow::Cow::Borrowed(&self.cfg.chain);
        }
        let mut c = self.cfg.chain.clone();
        for &t in &self.draft[..n] {
            c.accept(t);
        }
        std::borrow::Cow::Owned(c)
    }
}

/// The registry of sequences.
#[derive(Debug, Clone)]
pub struct Sequences {
    max_outputs: usize,
    seqs: BTreeMap<SeqId, SeqState>,
}

impl Sequences {
    /// An empty registry allowing up to `max_outputs` output rows per sequence per step (1 for
    /// plain decoding; more for speculative verification). It must be at least 1.
    pub fn new(max_outputs: usize) -> Result<Self> {
        if max_outputs == 0 {
            return Err(SamplingError::InvalidConfig { what: "max_outputs".into(), reason: "must be at least 1" });
        }
        Ok(Self { max_outputs, seqs: BTreeMap::new() })
    }

    /// The largest number of output rows a sequence may have in one step.
    pub fn max_outputs(&self) -> usize {
        self.max_outputs
    }

    /// Sets or replaces `seq`'s configuration. Its step counter is kept (it counts the sequence's
    /// accepted tokens, not the chain's life); a new sequence starts at step 0.
    pub fn set(&mut self, seq: SeqId, cfg: SeqConfig) {
        match self.seqs.get_mut(&seq) {
            Some(s) => s.cfg = cfg,
            None => {
                self.seqs.insert(seq, SeqState { cfg, step: 0, draft: Vec::new() });
            }
        }
    }

    /// Removes `seq`, returning its configuration.
    pub fn remove(&mut self, seq: SeqId) -> Option<SeqConfig> {
        self.seqs.remove(&seq).map(|s| s.cfg)
    }

    /// `seq`'s configuration.
    pub fn get(&self, seq: SeqId) -> Option<&SeqConfig> {
        self.seqs.get(&seq).map(|s| &s.cfg)
    }

    /// `seq`'s step counter: its draws this step use `step + output index`.
    pub fn step(&self, seq: SeqId) -> Option<u64> {
        self.seqs.get(&seq).map(|s| s.step)
    }

    /// Sets `seq`'s step counter (e.g. to resume a sequence).
    pub fn set_step(&mut self, seq: SeqId, step: u64) -> Result<()> {
        self.state_mut(seq)?.step = step;
        Ok(())
    }

    /// The sequences, in id order.
    pub fn ids(&self) -> impl Iterator<Item = SeqId> + '_ {
        self.seqs.keys().copied()
    }

    pub(crate) fn state(&self, seq: SeqId) -> Result<&SeqState> {
        self.seqs.get(&seq).ok_or(SamplingError::UnknownSequence { seq: seq.0 })
    }

    pub(crate) fn state_mut(&mut self, seq: SeqId) -> Result<&mut SeqState> {
        self.seqs.get_mut(&seq).ok_or(SamplingError::UnknownSequence { seq: seq.0 })
    }

    /// Sets `seq`'s draft tokens for the next step (speculative verification): its output `j`
    /// then samples the position after `draft[..j]`, with a chain that has accepted those tokens
    /// (penalties and DRY count them; the step is `step + j` as always). At most
    /// `max_outputs - 1` tokens; cleared by the next accept.
    pub fn set_draft(&mut self, seq: SeqId, draft: &[Token]) -> Result<()> {
        let max = self.max_outputs;
        if draft.len() >= max {
            return Err(SamplingError::TooManyOutputs { seq: seq.0, n: draft.len() + 1, max });
        }
        self.state_mut(seq)?.draft = draft.to_vec();
        Ok(())
    }

    /// Accepts `tokens`, the first outputs of `seq`'s step in order: every stage of its chain
    /// records them (penalties, DRY, mirostat) and the step counter advances by their number.
    /// The draft is cleared.
    pub(crate) fn accept(&mut self, seq: SeqId, tokens: &[Token]) -> Result<()> {
        let s = self.state_mut(seq)?;
        for &t in tokens {
            s.cfg.chain.accept(t);
        }
        s.step += tokens.len() as u64;
        s.draft.clear();
        Ok(())
    }
}

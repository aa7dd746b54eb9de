//! The sequences a runner samples for: each one's chain and what it wants read back
//! ([`SeqConfig`]), set, replaced and removed between steps, and its step counter (the number of
//! tokens accepted so far, which keys its random draws).

use super::stage::{Form, StageKey};
use crate::chain::Chain;
use crate::error::{Result, SamplingError};
use crate::sampler::{Sampler, Token};
use std::collections::{BTreeMap, HashMap};
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

    /// The extras this configuration reserves; in a second run where the deferred stages mask
    /// (`masking`), only the candidates (the first run read the log-probabilities and logits of
    /// the same row).
    pub(crate) fn extras(&self, masking: bool) -> super::group::Extras {
        if masking {
            // A second run's row with log-probabilities gets its new token's own (and rank) on
            // the backend: the top one is the least list that carries them (the first run's top
            // `n` stay the row's, the logits being the same).
            return super::group::Extras { candidates: self.candidates, logprobs: self.logprobs.min(1), logits: false };
        }
        super::group::Extras { candidates: self.candidates, logprobs: self.logprobs, logits: self.logits }
    }

    /// Also read back the top-`n` log-probabilities.
    pub fn with_logprobs(mut self, n: usize) -> Self {
        self.logprobs = n;
        self
    }

    /// The structure of the chain's longest prefix with a backend form (before the capability check
    /// on a real backend): one key per stage, with the form it leaves. With `masking`, of the
    /// chain's second run, where its deferred stages (optimistic grammars) mask
    /// ([`super::BackendStage::masking_key`]).
    pub(crate) fn wanted_prefix(&self, n_vocab: usize, masking: bool) -> Vec<(StageKey, Form)> {
        let mut keys = Vec::new();
        self.each_wanted(n_vocab, masking, |k| {
            keys.push(k);
            true
        });
        keys
    }

    /// Whether [`SeqConfig::wanted_prefix`] is `keys` (without building it: checked every step).
    pub(crate) fn wants_prefix(&self, n_vocab: usize, masking: bool, keys: &[(StageKey, Form)]) -> bool {
        let mut n = 0;
        let same = self.each_wanted(n_vocab, masking, |k| {
            let eq = keys.get(n) == Some(&k);
            n += 1;
            eq
        });
        same && n == keys.len()
    }

    /// Calls `f` with each key of the wanted prefix in order while it returns true; false if it
    /// returned false. The prefix ends at the first stage without a backend form for the record
    /// it gets, and after a selecting stage (nothing follows a token).
    fn each_wanted(&self, n_vocab: usize, masking: bool, mut f: impl FnMut((StageKey, Form)) -> bool) -> bool {
        let mut form = Form::Vocab;
        for s in self.chain.stages() {
            if form == Form::Token {
                break;
            }
            let key =
                s.backend().and_then(|b| if masking { b.masking_key(form, n_vocab) } else { b.key(form, n_vocab) });
            match key {
                Some((k, next)) => {
                    if !f((k, next)) {
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
    /// For a sampled draft: the distribution each draft token was drawn from (empty: the draft
    /// is deterministic, one-hot `q`).
    pub draft_q: Vec<Vec<(Token, f32)>>,
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

    /// Runs `f` on the chain output `output` samples with: the sequence's own for output 0 (a
    /// stateful stage learns from its draw, as on the CPU), else [`SeqState::chain_for`]'s copy.
    pub(crate) fn with_chain_for<R>(&mut self, output: usize, f: impl FnOnce(&mut Chain) -> R) -> R {
        if output == 0 { f(&mut self.cfg.chain) } else { f(&mut self.chain_for(output).into_owned()) }
    }
}

/// The registry of sequences.
///
/// It also remembers what the device's penalty count tensors hold (so that each step writes only
/// the counts that changed): use one registry with one scheduler. A clone used with another
/// scheduler is safe (that scheduler's tensors start unwritten, and are written whole), but two
/// registries taking turns on one scheduler's tensors are not.
#[derive(Debug, Clone)]
pub struct Sequences {
    max_outputs: usize,
    /// Entries reserved per drafted output for a sampled draft's distribution (0: none).
    q_len: usize,
    seqs: BTreeMap<SeqId, SeqState>,
    /// What each penalty count state tensor on the device holds, by sequence and stage (the
    /// tokens with a nonzero count): the tail writes only the entries that differ from the
    /// chain's counts. Kept when a sequence is removed (the tensor may outlive it).
    pub(crate) device_counts: BTreeMap<(SeqId, usize), HashMap<Token, u32>>,
}

impl Sequences {
    /// An empty registry allowing up to `max_outputs` output rows per sequence per step (1 for
    /// plain decoding; more for speculative verification). It must be at least 1.
    pub fn new(max_outputs: usize) -> Result<Self> {
        if max_outputs == 0 {
            return Err(SamplingError::InvalidConfig { what: "max_outputs".into(), reason: "must be at least 1" });
        }
        Ok(Self { max_outputs, q_len: 0, seqs: BTreeMap::new(), device_counts: BTreeMap::new() })
    }

    /// A registry as [`Sequences::new`] that can also verify sampled drafts: each drafted output
    /// may carry the distribution its draft token was drawn from, up to `q_len` `(token,
    /// probability)` pairs ([`Sequences::set_draft_sampled`]; a draft model's surviving candidates
    /// after its top-k). A tail attached for it verifies with `graph::Op::SpecVerifySampled` and
    /// uploads `q_len` pairs per output row each step (8 bytes a pair); deterministic drafts
    /// ([`Sequences::set_draft`]) go through the same op as a one-entry `q`. `max_outputs` must be
    /// at least 2 and `q_len` at least 1.
    pub fn with_draft_distributions(max_outputs: usize, q_len: usize) -> Result<Self> {
        if max_outputs < 2 || q_len == 0 {
            return Err(SamplingError::InvalidConfig {
                what: format!("max_outputs {max_outputs}, q_len {q_len}"),
                reason: "sampled drafts need at least 2 outputs per sequence and 1 entry per distribution",
            });
        }
        Ok(Self { max_outputs, q_len, seqs: BTreeMap::new(), device_counts: BTreeMap::new() })
    }

    /// The entries reserved per drafted output for a sampled draft's distribution (0: sampled
    /// drafts are not verified on the backend).
    pub fn draft_q_len(&self) -> usize {
        self.q_len
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
                self.seqs.insert(seq, SeqState { cfg, step: 0, draft: Vec::new(), draft_q: Vec::new() });
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
        let s = self.state_mut(seq)?;
        s.draft = draft.to_vec();
        s.draft_q.clear();
        Ok(())
    }

    /// Sets `seq`'s draft for the next step as [`Sequences::set_draft`], for draft tokens drawn
    /// at random: `q[i]` is the distribution `draft[i]` was drawn from, as `(token,
    /// probability)` pairs (the drafter's surviving candidates; normalised by the verifier, as
    /// `speculative::DraftProbs::Sampled`). The backend then accepts `draft[i]` with probability
    /// `min(1, p / q)` and otherwise draws from the residual `max(0, p - q)`, as
    /// [`crate::speculative::verify`] does. Checked here, with the errors the CPU verifier gives
    /// for the same input: one distribution per draft token, each at most
    /// [`Sequences::draft_q_len`] pairs, probabilities finite and `>= 0`, each draft token with a
    /// positive probability in its distribution; and tokens distinct within a distribution (so
    /// that the backend sums nothing twice).
    pub fn set_draft_sampled(&mut self, seq: SeqId, draft: &[Token], q: &[Vec<(Token, f32)>]) -> Result<()> {
        let refuse = |reason: String| SamplingError::Verify { reason };
        if self.q_len == 0 {
            return Err(refuse(format!(
                "{seq}: these Sequences reserve no draft distributions (make them with Sequences::with_draft_distributions)"
            )));
        }
        if q.len() != draft.len() {
            return Err(refuse(format!(
                "{} draft tokens need {} draft distributions, got {}",
                draft.len(),
                draft.len(),
                q.len()
            )));
        }
        for (i, (dist, &d)) in q.iter().zip(draft).enumerate() {
            if dist.len() > self.q_len {
                return Err(refuse(format!(
                    "draft position {i}: {} pairs, more than the {} reserved per output",
                    dist.len(),
                    self.q_len
                )));
            }
            let mut total = 0.0f64;
            for &(t, p) in dist {
                if !(p >= 0.0 && p.is_finite()) {
                    return Err(refuse(format!(
                        "draft position {i}: probability {p} of token {t} is not finite and >= 0"
                    )));
                }
                total += f64::from(p);
            }
            let mut ids: Vec<Token> = dist.iter().map(|e| e.0).collect();
            ids.sort_unstable();
            if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
                return Err(refuse(format!("draft position {i}: token {} is listed twice", w[0])));
            }
            if i32::try_from(d).is_err() || dist.iter().any(|e| i32::try_from(e.0).is_err()) {
                return Err(refuse(format!("draft position {i}: a token id does not fit an i32")));
            }
            let qd = dist.iter().find(|e| e.0 == d).map_or(0.0, |e| f64::from(e.1));
            if !(total > 0.0 && qd > 0.0) {
                return Err(refuse(format!(
                    "draft position {i}: the draft token {d} has probability 0 in the distribution it was drawn from"
                )));
            }
        }
        self.set_draft(seq, draft)?;
        self.state_mut(seq)?.draft_q = q.to_vec();
        Ok(())
    }

    /// Feeds `tokens`, a prompt's, to `seq`'s chain ([`Sampler::accept_prompt`]: penalties and
    /// DRY count them, a grammar does not), as llama-server does before a sequence's first draw.
    /// The step counter does not move (the draws stay keyed by the generated tokens' count); the
    /// backend's penalty counts follow at the next step's inputs.
    pub fn accept_prompt(&mut self, seq: SeqId, tokens: &[Token]) -> Result<()> {
        let s = self.state_mut(seq)?;
        for &t in tokens {
            s.cfg.chain.accept_prompt(t);
        }
        Ok(())
    }

    /// Accepts `tokens`, the first outputs of `seq`'s step in order: every stage of its chain
    /// records them (penalties, DRY, mirostat) and the step counter advances by their number.
    /// The draft is cleared.
    ///
    /// A token a stage refuses (a grammar that cannot take it) is an error: the tokens before it
    /// stay accepted, it and those after it are not.
    pub(crate) fn accept(&mut self, seq: SeqId, tokens: &[Token]) -> Result<()> {
        let s = self.state_mut(seq)?;
        s.draft.clear();
        s.draft_q.clear();
        for &t in tokens {
            s.cfg.chain.try_accept(t)?;
            s.step += 1;
        }
        Ok(())
    }
}

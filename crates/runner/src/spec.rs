//! Speculative decoding's drafting and its decode loop: the drafters ([`Drafter`]: an n-gram
//! lookup over each sequence's own context, or a draft model, a second runner model with the same
//! vocabulary drafting greedily over its own KV cache, or by sampling with its own chain, which
//! gives each draft token's distribution `q` for the verifier) and [`generate`], which prefills, then
//! drafts, verifies ([`Session::step_spec`]) and emits until every sequence has its tokens,
//! counting drafted and accepted tokens. Without a drafter it is plain decoding (the baseline).

use crate::error::{Result, RunnerError};
use crate::model::Model;
use crate::session::{DraftDist, Sampling, Session, SessionOptions};
use sampling::speculative::ngram::NgramDrafter;
use sampling::{Chain, Sampler, Token};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A draft model: a second [`Session`] (CPU sampling, greedy) over a model with the target's
/// vocabulary. Each draft first rolls its cache back to the longest prefix it shares with the
/// sequence's context (rejected drafts leave), feeds the context's tokens after it, then drafts
/// token by token while the top probability is at least `p_min`: greedily, or (made with
/// [`DraftModel::sampled`]) by sampling with its own chain, whose surviving candidates'
/// probabilities are the draft token's `q`.
#[derive(Debug)]
pub struct DraftModel {
    session: Session,
    fed: Vec<Vec<Token>>,
    max_draft: usize,
    p_min: f32,
    /// Sampled drafting: each sequence's draft chain and its next draw's step.
    sample: Option<(Vec<Chain>, Vec<u64>)>,
}

/// What a drafter proposes: per sequence its draft tokens, and for sampled drafts the
/// distribution each was drawn from (`(token, probability)` pairs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drafts {
    /// Per sequence, the draft tokens.
    pub tokens: Vec<Vec<Token>>,
    /// Per sequence, per draft token, its distribution (empty for deterministic drafts).
    pub q: Vec<Vec<DraftDist>>,
}

impl DraftModel {
    /// A draft model for `n_seq` sequences of up to `n_ctx` tokens (context and draft), drafting
    /// at most `max_draft` tokens while its top probability is at least `p_min`.
    pub fn new(model: Arc<Model>, opts: SessionOptions, max_draft: usize, p_min: f32) -> Result<Self> {
        if !(0.0..=1.0).contains(&p_min) {
            return Err(RunnerError::Session {
                what: format!("draft p_min {p_min}"),
                reason: "must be in [0, 1]".into(),
            });
        }
        let greedy = Chain::parse("greedy").map_err(RunnerError::sampling("the draft chain".into()))?;
        let n_seq = opts.n_seq;
        let opts = SessionOptions { sampling: Sampling::Cpu, n_draft_max: 0, ..opts };
        let session = Session::new(model, opts, vec![greedy; n_seq])?;
        Ok(DraftModel { session, fed: vec![Vec::new(); n_seq], max_draft, p_min, sample: None })
    }

    /// A draft model as [`DraftModel::new`] that drafts by sampling with `chain` (ending in
    /// `dist`; e.g. `top_k(k=20);temp(t=0.8);dist(seed=S)`, whose top-k bounds `q`'s length),
    /// each sequence with its own copy, a draw's step counting the sequence's draft tokens. Each
    /// draft token's `q` is the chain's surviving candidates; drafting stops where their top
    /// probability is below `p_min`.
    pub fn sampled(
        model: Arc<Model>,
        opts: SessionOptions,
        max_draft: usize,
        p_min: f32,
        chain: Chain,
    ) -> Result<Self> {
        if chain.stages().last().map(|s| s.name()) != Some("dist") {
            return Err(RunnerError::Session {
                what: "a sampling draft chain".into(),
                reason: "must end in dist (its surviving candidates are the draft's distribution)".into(),
            });
        }
        let mut d = Self::new(model, opts, max_draft, p_min)?;
        let n_seq = d.fed.len();
        d.sample = Some((vec![chain; n_seq], vec![0; n_seq]));
        Ok(d)
    }

    /// The draft model's session (its positions, plans).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Drafts up to `limit[s]` (and at most `max_draft`) tokens after each `contexts[s]`.
    pub fn draft(&mut self, contexts: &[Vec<Token>], limit: &[usize]) -> Result<Drafts> {
        let n_seq = self.fed.len();
        if contexts.len() != n_seq || contexts.iter().any(Vec::is_empty) {
            return Err(RunnerError::Session {
                what: format!("drafting for {} contexts", contexts.len()),
                reason: format!("the draft model has {n_seq} sequences, each with a non-empty context"),
            });
        }
        // Roll back to the shared prefix (at least one token left to feed), then catch up.
        let mut feed = Vec::with_capacity(n_seq);
        for (s, ctx) in contexts.iter().enumerate() {
            let shared = self.fed[s].iter().zip(ctx).take_while(|(a, b)| a == b).count().min(ctx.len() - 1);
            self.session.truncate(s, shared)?;
            self.fed[s].truncate(shared);
            feed.push(ctx[shared..].to_vec());
        }
        let refs: Vec<&[Token]> = feed.iter().map(Vec::as_slice).collect();
        let mut logits = self.session.eval(&refs)?;
        for (s, f) in feed.iter().enumerate() {
            self.fed[s].extend_from_slice(f);
        }
        let limit: Vec<usize> = limit.iter().map(|&l| l.min(self.max_draft)).collect();
        let mut drafts: Vec<Vec<Token>> = vec![Vec::new(); n_seq];
        let mut qs: Vec<Vec<DraftDist>> = vec![Vec::new(); n_seq];
        let mut active: Vec<bool> = limit.iter().map(|&l| l > 0).collect();
        loop {
            for s in 0..n_seq {
                if !active[s] {
                    continue;
                }
                let (tok, p, q) = match self.sample.as_mut() {
                    None => {
                        let (tok, p) = top(&logits[s]);
                        (tok, p, None)
                    }
                    Some((chains, steps)) => {
                        let c = &mut chains[s];
                        c.set_step(steps[s]);
                        steps[s] += 1;
                        let out =
                            c.run(&logits[s]).map_err(RunnerError::sampling(format!("drafting for sequence {s}")))?;
                        let tok = out.selected.ok_or_else(|| RunnerError::Session {
                            what: format!("drafting for sequence {s}"),
                            reason: "the draft chain selected no token".into(),
                        })?;
                        let q: DraftDist = out.candidates.iter().map(|c| (c.id, c.p)).collect();
                        let top_p = q.iter().map(|e| e.1).fold(0.0f32, f32::max);
                        (tok, top_p, Some(q))
                    }
                };
                if p < self.p_min {
                    active[s] = false;
                } else {
                    drafts[s].push(tok);
                    qs[s].extend(q);
                    active[s] = drafts[s].len() < limit[s];
                }
            }
            if !active.iter().any(|&a| a) {
                break;
            }
            // The active sequences feed their last draft token; the others a repeat of their
            // last token, rolled back right after (every sequence takes part in every step).
            let one: Vec<[Token; 1]> = (0..n_seq)
                .map(|s| {
                    [if active[s] { *drafts[s].last().expect("drafted") } else { *self.fed[s].last().expect("fed") }]
                })
                .collect();
            let refs: Vec<&[Token]> = one.iter().map(|x| x.as_slice()).collect();
            let before: Vec<usize> = self.session.positions().to_vec();
            logits = self.session.eval(&refs)?;
            for s in 0..n_seq {
                if active[s] {
                    self.fed[s].push(one[s][0]);
                } else {
                    self.session.truncate(s, before[s])?;
                }
            }
        }
        Ok(Drafts { tokens: drafts, q: qs })
    }
}

/// The greedy token of a logits row (the first maximum) and its softmax probability.
fn top(row: &[f32]) -> (Token, f32) {
    let (mut best, mut max) = (0usize, f32::NEG_INFINITY);
    for (i, &l) in row.iter().enumerate() {
        if l > max {
            (best, max) = (i, l);
        }
    }
    if !max.is_finite() {
        return (best as Token, 0.0);
    }
    let z: f64 = row.iter().map(|&l| f64::from(l - max).exp()).sum();
    (best as Token, (1.0 / z) as f32)
}

/// Where draft tokens come from.
#[derive(Debug)]
pub enum Drafter {
    /// n-gram matches in each sequence's own context (prompt included).
    Ngram(NgramDrafter),
    /// A draft model.
    Model(Box<DraftModel>),
}

impl Drafter {
    /// Drafts for every sequence: at most `limit[s]` tokens after `contexts[s]` (with their
    /// distributions where the drafter samples).
    pub fn draft(&mut self, contexts: &[Vec<Token>], limit: &[usize]) -> Result<Drafts> {
        match self {
            Drafter::Ngram(d) => Ok(Drafts {
                tokens: contexts
                    .iter()
                    .zip(limit)
                    .map(|(c, &l)| {
                        let mut x = d.draft(c);
                        x.truncate(l);
                        x
                    })
                    .collect(),
                q: vec![Vec::new(); contexts.len()],
            }),
            Drafter::Model(m) => m.draft(contexts, limit),
        }
    }
}

/// Why a sequence stopped before `n` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It emitted this end-of-generation token (the last of its tokens).
    EndOfGeneration(Token),
    /// Its grammar is complete and allows nothing but end-of-generation tokens.
    GrammarComplete,
}

/// What [`generate`] produced and measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// Per sequence, its generated tokens: the first `n`, or fewer where it ended.
    pub tokens: Vec<Vec<Token>>,
    /// Per sequence, why it ended before `n` tokens (`None`: it made all `n`).
    pub ended: Vec<Option<Ending>>,
    /// Decode steps (target forward passes after the prefill).
    pub steps: usize,
    /// Draft tokens proposed.
    pub drafted: usize,
    /// Draft tokens accepted.
    pub accepted: usize,
    /// Steps in which some draft token was rejected.
    pub rejections: usize,
    /// The prefill (prompts and the first token).
    pub prefill_time: Duration,
    /// The decode loop, drafting included.
    pub decode_time: Duration,
    /// Time spent drafting (inside `decode_time`).
    pub draft_time: Duration,
    /// Tokens generated in the decode loop (after the first; at most `n - 1` per sequence).
    pub decode_tokens: usize,
    /// Plans the target's scheduler made after the prefill.
    pub plans_after_prefill: u64,
    /// The decode steps' graph time: building or planning a new step shape, writing inputs and
    /// computing (the forward pass and the backend sampling ops).
    pub graph_time: Duration,
    /// The decode steps' sampling time: reading back, finishing on the CPU, verifying, accepting.
    pub sample_time: Duration,
    /// Bytes the decode steps read back to the host (the scheduler's count).
    pub bytes_read: usize,
}

impl Generation {
    /// Adds one decode step's graph time, sampling time and bytes read back.
    fn count_step(&mut self, graph: Duration, sample: Duration, bytes: usize) {
        self.graph_time += graph;
        self.sample_time += sample;
        self.bytes_read += bytes;
    }

    /// Accepted over drafted tokens (0 when nothing was drafted).
    pub fn acceptance(&self) -> f64 {
        if self.drafted == 0 { 0.0 } else { self.accepted as f64 / self.drafted as f64 }
    }

    /// Decode tokens per second.
    pub fn tokens_per_s(&self) -> f64 {
        self.decode_tokens as f64 / self.decode_time.as_secs_f64()
    }
}

/// KV cells per sequence that [`generate`] needs for prompts of at most `max_prompt` tokens, `n`
/// tokens per sequence and drafts of at most `n_draft_max` tokens: without drafts every sequence
/// takes one position a step; with them a sequence that is done keeps stepping, one token a step,
/// until the others are, hence twice the steps.
pub fn cells_needed(max_prompt: usize, n: usize, n_draft_max: usize) -> usize {
    if n_draft_max == 0 { max_prompt + n + 1 } else { max_prompt + 2 * n + n_draft_max + 1 }
}

/// The warning to give when a run can use positions past the context `config` was trained for
/// (llama.cpp: "n_ctx_per_seq > n_ctx_train -- possible training context overflow"), where the
/// model file says what that context is.
pub fn context_warning(cells: usize, config: &crate::Config) -> Option<String> {
    let train = config.n_ctx_train?;
    (cells > train).then(|| {
        format!(
            "this run can use {cells} positions a sequence, more than the {train} the model was trained for \
             (context_length): past {train} its output is outside what it has seen (`--ctx N` bounds a run)"
        )
    })
}

/// How many tokens a sequence may draft next, following its measured acceptance (as mistral.rs and
/// vLLM adapt their draft length): all of a draft accepted doubles the depth (up to the most), a
/// partial accept sets it one past what was accepted, nothing accepted halves it; at zero the
/// sequence drafts nothing for 2, 4, ... 32 steps (doubling with each failed probe), then probes
/// with one token. A drafter that keeps failing (an n-gram lookup on text that does not repeat)
/// thus costs a few verification steps, not a wide step per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DraftDepth {
    max: usize,
    depth: usize,
    cool: usize,
    misses: u32,
}

impl DraftDepth {
    /// At most `max` tokens a step, starting at `max`.
    pub fn new(max: usize) -> Self {
        DraftDepth { max, depth: max, cool: 0, misses: 0 }
    }

    /// The most tokens to draft this step (0 while backing off).
    pub fn limit(&self) -> usize {
        if self.cool > 0 { 0 } else { self.depth }
    }

    /// Learns from a step in which `drafted` tokens were proposed and `accepted` of them kept.
    pub fn update(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            self.cool = self.cool.saturating_sub(1);
        } else if accepted >= drafted {
            self.depth = (self.depth * 2).max(1).min(self.max);
            self.misses = 0;
        } else if accepted > 0 {
            self.depth = (accepted + 1).min(self.max);
            self.misses = 0;
        } else {
            self.depth /= 2;
            if self.depth == 0 {
                self.misses += 1;
                self.cool = 1 << self.misses.min(5);
                self.depth = 1.min(self.max);
            }
        }
    }
}

/// Generates `n` tokens per sequence (the first from the prompt's logits) with `session`; with
/// a drafter, each decode step drafts (at most `n_draft_max` tokens, never past `n`, and as many as
/// each sequence's [`DraftDepth`] allows) and verifies with [`Session::step_spec`], or takes a
/// plain step where no sequence may draft; without one, plain [`Session::step`]s. `on_step` sees
/// each step's emitted tokens per sequence.
pub fn generate(
    session: &mut Session,
    mut drafter: Option<&mut Drafter>,
    prompts: &[Vec<Token>],
    n: usize,
    mut on_step: impl FnMut(&[Vec<Token>]) -> Result<()>,
) -> Result<Generation> {
    let n_seq = prompts.len();
    if drafter.is_some() && session.options().n_draft_max == 0 {
        return Err(RunnerError::Session {
            what: "speculative decoding with n_draft_max = 0".into(),
            reason: "the session verifies no drafts: set SessionOptions::n_draft_max".into(),
        });
    }
    if let Some(Drafter::Model(d)) = drafter.as_deref() {
        let (dv, tv) = (d.session.model().config.n_vocab, session.model().config.n_vocab);
        if dv != tv {
            return Err(RunnerError::Session {
                what: format!("a draft model `{}`", d.session.model().name),
                reason: format!("its vocabulary has {dv} tokens, the target's {tv}: they must be the same"),
            });
        }
    }
    let t0 = Instant::now();
    let refs: Vec<&[Token]> = prompts.iter().map(Vec::as_slice).collect();
    let first = session.step(&refs)?.tokens;
    let prefill_time = t0.elapsed();
    let plans0 = session.stats().plans;
    let mut out: Vec<Vec<Token>> = vec![Vec::new(); n_seq];
    let mut ended: Vec<Option<Ending>> = vec![None; n_seq];
    let first_emitted: Vec<Vec<Token>> = first.iter().map(|&t| vec![t]).collect();
    for s in 0..n_seq {
        keep_until_end(session, s, &first_emitted[s], n, &mut out[s], &mut ended[s])?;
    }
    on_step(&first_emitted)?;
    let mut contexts: Vec<Vec<Token>> =
        prompts.iter().zip(&first).map(|(p, &t)| [p.as_slice(), &[t]].concat()).collect();
    let mut g = Generation {
        tokens: Vec::new(),
        ended: Vec::new(),
        steps: 0,
        drafted: 0,
        accepted: 0,
        rejections: 0,
        prefill_time,
        decode_time: Duration::ZERO,
        draft_time: Duration::ZERO,
        decode_tokens: 0,
        plans_after_prefill: 0,
        graph_time: Duration::ZERO,
        sample_time: Duration::ZERO,
        bytes_read: 0,
    };
    let mut depth = vec![DraftDepth::new(session.options().n_draft_max); n_seq];
    let t1 = Instant::now();
    // A sequence that ended still runs in the batch (whose shape is fixed), but its tokens are
    // not kept and it drafts nothing.
    let live = |out: &[Vec<Token>], ended: &[Option<Ending>], s: usize| ended[s].is_none() && out[s].len() < n;
    while (0..n_seq).any(|s| live(&out, &ended, s)) {
        let last: Vec<[Token; 1]> = contexts.iter().map(|c| [*c.last().expect("non-empty")]).collect();
        let last: Vec<&[Token]> = last.iter().map(|x| x.as_slice()).collect();
        // Never draft past `n` (the last needed token is the target's own), nor past each
        // sequence's depth; where nobody may draft, a plain step.
        let k = session.options().n_draft_max;
        let limit: Vec<usize> = (0..n_seq)
            .map(|s| {
                if live(&out, &ended, s) { n.saturating_sub(out[s].len() + 1).min(k).min(depth[s].limit()) } else { 0 }
            })
            .collect();
        let draft_now = drafter.is_some() && limit.iter().any(|&l| l > 0);
        if drafter.is_some() && !draft_now {
            for d in &mut depth {
                d.update(0, 0);
            }
        }
        let emitted: Vec<Vec<Token>> = match drafter.as_deref_mut().filter(|_| draft_now) {
            None => {
                let o = session.step(&last)?;
                g.count_step(o.prepare_time + o.graph_time, o.sample_time, o.bytes_read);
                o.tokens.into_iter().map(|t| vec![t]).collect()
            }
            Some(d) => {
                let td = Instant::now();
                let Drafts { tokens: drafts, q } = d.draft(&contexts, &limit)?;
                g.draft_time += td.elapsed();
                let refs: Vec<&[Token]> = drafts.iter().map(Vec::as_slice).collect();
                let o = if q.iter().any(|q| !q.is_empty()) {
                    let qr: Vec<&[DraftDist]> = q.iter().map(Vec::as_slice).collect();
                    session.step_spec_sampled(&last, &refs, &qr)?
                } else {
                    session.step_spec(&last, &refs)?
                };
                g.count_step(o.prepare_time + o.graph_time, o.sample_time, o.bytes_read);
                for ((dr, &a), dd) in drafts.iter().zip(&o.accepted).zip(&mut depth) {
                    g.drafted += dr.len();
                    g.accepted += a;
                    g.rejections += usize::from(a < dr.len());
                    dd.update(dr.len(), a);
                }
                o.tokens
            }
        };
        g.steps += 1;
        for s in 0..n_seq {
            contexts[s].extend_from_slice(&emitted[s]);
            let before = out[s].len();
            keep_until_end(session, s, &emitted[s], n, &mut out[s], &mut ended[s])?;
            g.decode_tokens += out[s].len() - before;
        }
        on_step(&emitted)?;
    }
    g.decode_time = t1.elapsed();
    g.plans_after_prefill = session.stats().plans - plans0;
    g.tokens = out;
    g.ended = ended;
    Ok(g)
}

/// Appends sequence `s`'s `emitted` tokens to `out` up to `n` tokens, stopping after an
/// end-of-generation token of the model's vocabulary or where the sequence's grammar is complete
/// and allows nothing more (recorded in `ended`). Nothing is kept once the sequence has ended.
fn keep_until_end(
    session: &Session,
    s: usize,
    emitted: &[Token],
    n: usize,
    out: &mut Vec<Token>,
    ended: &mut Option<Ending>,
) -> Result<()> {
    if ended.is_some() {
        return Ok(());
    }
    let eog = |t: Token| session.model().tokenizer.as_ref().is_some_and(|tk| tk.is_eog(t));
    for &t in emitted {
        if out.len() >= n {
            return Ok(());
        }
        out.push(t);
        if eog(t) {
            *ended = Some(Ending::EndOfGeneration(t));
            return Ok(());
        }
    }
    if session.chain(s).must_end().map_err(RunnerError::sampling(format!("sequence {s}'s grammar")))? {
        *ended = Some(Ending::GrammarComplete);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::DraftDepth;

    #[test]
    fn draft_depth_follows_acceptance_and_backs_off() {
        let mut d = DraftDepth::new(8);
        assert_eq!(d.limit(), 8);
        d.update(8, 3); // partial: one past the accepted
        assert_eq!(d.limit(), 4);
        d.update(4, 4); // all: doubles, up to the most
        assert_eq!(d.limit(), 8);
        d.update(8, 8);
        assert_eq!(d.limit(), 8);
        for want in [4, 2, 1] {
            d.update(d.limit(), 0); // nothing accepted: halves
            assert_eq!(d.limit(), want);
        }
        // at zero: 2 steps without drafting, then a probe of one token; each failed probe doubles
        // the pause (4, 8, ..., 32 at most)
        for pause in [2usize, 4, 8, 16, 32, 32] {
            d.update(1, 0);
            for _ in 0..pause {
                assert_eq!(d.limit(), 0);
                d.update(0, 0);
            }
            assert_eq!(d.limit(), 1, "after a pause of {pause}");
        }
        d.update(1, 1); // a probe that lands grows again
        assert_eq!(d.limit(), 2);
        // no draft proposed (the drafter found nothing) leaves the depth alone
        d.update(0, 0);
        assert_eq!(d.limit(), 2);
        assert_eq!(DraftDepth::new(0).limit(), 0);
    }
}

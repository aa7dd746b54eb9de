//! `Session`: a batch of sequences decoded in lockstep over one KV cache, on a scheduler over the
//! chosen backend, each sequence sampled by its own chain: through the backend sampling tail
//! (`sampling::backend::Tail`, only what each chain needs read back) or, with
//! [`Sampling::Cpu`], by copying the logits rows back and running the CPU chains.
//!
//! One forward graph is built per step shape (tokens and outputs per sequence, sampled or not)
//! and kept: a steady decode loop reuses its graph and its plan, and only writes inputs each step
//! (the scheduler's `Stats::plans` does not grow). Weights are bound where the scheduler has not
//! got them yet, so the prefill and decode graphs share them: read in place from the mapped model
//! file where the backend can (the CPU: `sched::Scheduler::set_input_shared`), else one copy
//! uploaded to the backend (a GPU; every weight with [`SessionOptions::weights_in_place`] off).
//!
//! Speculative decoding ([`Session::step_spec`], with [`SessionOptions::n_draft_max`] `= K > 0`):
//! a step feeds each sequence's new token(s) plus its draft (at most `K` tokens) padded to a static
//! width `W` of tokens and output rows per sequence, the longest draft plus one rounded up to a
//! power of two and at most `K + 1` (so a few plans in all; sequences with and without drafts
//! mixed; a step where no sequence has a draft uses the plain one-output shape), samples
//! every output through the backend tail with the draft set (`Sequences::set_draft`: output `j`
//! predicts the position after `draft[..j]`, and its draw is the verifier's decision,
//! `graph::Op::SpecVerify`; the accepted prefix comes from the tokens read back,
//! `sampling::speculative::accept_rows`) or copies the rows back and verifies with the CPU chains
//! (`sampling::speculative::verify`) (greedy: plain greedy decoding's tokens; `dist`: the target's
//! distribution exactly), and rolls the KV cache back to the accepted tokens: the sequence's
//! position advances past its new tokens and its accepted drafts only (see [`crate::kv`]).

use crate::error::{Result, RunnerError};
use crate::forward::{self, Forward};
use crate::kv::{CacheSpec, StepInputs};
use crate::model::Model;
use graph::{DType, Graph};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::speculative::{self, DraftProbs, Verdict};
use sampling::{Chain, Token};
use sched::{BufferRole, Scheduler, Stats};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most step graphs a session keeps built (each with its plan in the scheduler's cache).
const MAX_GRAPHS: usize = 48;

/// The distribution one sampled draft token was drawn from: `(token, probability)` pairs (the
/// drafter's surviving candidates; normalised by the verifier).
pub type DraftDist = Vec<(Token, f32)>;

/// Where the forward pass (and backend sampling) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// The CPU backend.
    Cpu,
    /// A Vulkan device first, the CPU for what it cannot run.
    Vulkan,
}

/// Where the sampler chains run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// Each chain's backend prefix as graph ops after the logits; the rest on the CPU.
    Backend,
    /// The logits rows copied back, every chain on the CPU.
    Cpu,
}

/// Options of a session.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SessionOptions {
    /// Sequences decoded together.
    pub n_seq: usize,
    /// KV cache cells per sequence (the longest prompt plus generated tokens).
    pub n_ctx: usize,
    /// KV cache element type (f16 as llama.cpp, or f32).
    pub kv_dtype: DType,
    /// Backend.
    pub backend: BackendKind,
    /// CPU worker threads.
    pub threads: usize,
    /// Where sampling runs.
    pub sampling: Sampling,
    /// The most draft tokens a sequence may bring to one [`Session::step_spec`] (0: no
    /// speculative decoding). With backend sampling only tokens are read back: the drafted draws
    /// are the verifier's decisions.
    pub n_draft_max: usize,
    /// With [`BackendKind::Vulkan`], leave the quantized weights' ops to the CPU
    /// (`vulkan::Options::cpu_quantized`; for long runs on a software Vulkan driver).
    pub quantized_on_cpu: bool,
    /// With backend sampling and `n_draft_max > 0`: the most `(token, probability)` pairs of a
    /// sampled draft's distribution per drafted token ([`Session::step_spec_sampled`]; the
    /// backend verifies with `graph::Op::SpecVerifySampled`, uploading this many pairs per output
    /// row). 0: drafts are deterministic (one-hot `q`, `graph::Op::SpecVerify`).
    pub draft_q_len: usize,
    /// Let the backend read the weights where they lie, in the model's memory (the mapped GGUF
    /// file), where it can (`sched::Scheduler::set_input_shared`: the CPU backend, aligned
    /// tensors); `false` copies every weight into the backend's own buffers (llama.cpp's
    /// `--no-mmap`, in effect: memory for the file's pages and for the copies).
    pub weights_in_place: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            n_seq: 1,
            n_ctx: 256,
            kv_dtype: DType::F16,
            backend: BackendKind::Cpu,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            sampling: Sampling::Backend,
            n_draft_max: 0,
            quantized_on_cpu: false,
            draft_q_len: 0,
            weights_in_place: true,
        }
    }
}

/// What one sampled step produced.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutcome {
    /// The token chosen for each sequence (accepted already).
    pub tokens: Vec<Token>,
    /// Real (not padding) tokens the forward pass evaluated.
    pub n_eval: usize,
    /// Building and planning a new step shape and binding weights (zero when the shape's plan
    /// was current).
    pub prepare_time: Duration,
    /// Writing inputs and computing the graph (the forward pass and the backend sampling ops).
    pub graph_time: Duration,
    /// Reading back and finishing the sampling on the CPU, and accepting.
    pub sample_time: Duration,
    /// Bytes read back to the host for sampling in this step (the scheduler's count).
    pub bytes_read: usize,
}

/// What one speculative step produced ([`Session::step_spec`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SpecOutcome {
    /// Per sequence, the emitted tokens (accepted already): its accepted draft tokens, then the
    /// target's own token after them.
    pub tokens: Vec<Vec<Token>>,
    /// Per sequence, how many of its draft tokens were accepted.
    pub accepted: Vec<usize>,
    /// Real (not padding) tokens the forward pass evaluated (drafts included).
    pub n_eval: usize,
    /// As [`StepOutcome::prepare_time`].
    pub prepare_time: Duration,
    /// As [`StepOutcome::graph_time`].
    pub graph_time: Duration,
    /// Reading back, finishing the sampling, verifying and accepting.
    pub sample_time: Duration,
    /// As [`StepOutcome::bytes_read`].
    pub bytes_read: usize,
}

/// What one slot does in a [`Session::step_slots`] step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotWork<'a> {
    /// Nothing: the slot only fills the step's range (a padding token at its position, which
    /// a later step overwrites; its position does not move and its chain is not used).
    Idle,
    /// Append these tokens without sampling (a chunk of a prompt).
    Feed(&'a [Token]),
    /// Append these tokens and sample (and accept) one token after the last.
    Sample(&'a [Token]),
}

/// A sampled slot's result in a [`Session::step_slots`] step.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotSample {
    /// The token (accepted already).
    pub token: Token,
    /// The `(token, log p)` of the most likely tokens of the raw logits, where the slot's chain
    /// was set with log-probabilities ([`Session::set_chain`]).
    pub logprobs: Option<Vec<(Token, f32)>>,
    /// The token's own log-probability under the raw logits, exact wherever it ranks (with
    /// `logprobs`; on the backend path gathered by the sampling tail, on the CPU path from the
    /// row: the same value to a few 1e-7).
    pub token_logprob: Option<f32>,
    /// The token's rank among the raw logits, with `token_logprob`: 1 + how many are strictly
    /// greater than its own (tied tokens share a rank: [`sampling::candidates::rank`]); counted
    /// on the backend path by the sampling tail, on the CPU path on the row.
    pub token_rank: Option<u32>,
    /// The chain's surviving candidates (`p` normalised over them, by `p` descending), where the
    /// slot's chain was set to read them ([`Session::set_chain_reading`]).
    pub candidates: Option<Vec<sampling::TokenData>>,
}

/// What one slot does in a [`Session::step_slots_spec`] step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecWork<'a> {
    /// Nothing (as [`SlotWork::Idle`]).
    Idle,
    /// Append `tokens` (usually the last emitted one) and the `draft`, and verify the draft.
    Decode {
        /// The new tokens.
        tokens: &'a [Token],
        /// The draft after them (may be empty: plain decoding).
        draft: &'a [Token],
    },
}

/// What a [`Session::step_slots_spec`] step produced: per slot of the range, `None` for an idle
/// slot, else its verdict (the emitted tokens, accepted already, and how many draft tokens were
/// accepted) or its own error; `n_eval` counts the drafts.
pub type SlotsSpecOutcome = SlotsOutcome<Verdict>;

/// What a [`Session::step_slots`] step produced (and, with `T` a verdict, a
/// [`Session::step_slots_spec`] step).
#[derive(Debug)]
pub struct SlotsOutcome<T = SlotSample> {
    /// Per slot of the step's range: `None` for [`SlotWork::Idle`] and [`SlotWork::Feed`], the
    /// sample or the slot's own error for [`SlotWork::Sample`] (a row that fails fails alone).
    pub results: Vec<Option<Result<T>>>,
    /// Real (not padding) tokens the forward pass evaluated.
    pub n_eval: usize,
    /// As [`StepOutcome::prepare_time`].
    pub prepare_time: Duration,
    /// As [`StepOutcome::graph_time`].
    pub graph_time: Duration,
    /// As [`StepOutcome::sample_time`].
    pub sample_time: Duration,
    /// As [`StepOutcome::bytes_read`].
    pub bytes_read: usize,
}

#[derive(Debug)]
struct StepGraph {
    slots: std::ops::Range<usize>,
    /// Tokens per slot (all equal unless the step is ragged).
    widths: Vec<usize>,
    /// Which slots have output rows (all but in a ragged step).
    outputs: Vec<bool>,
    cells: usize,
    n_out: usize,
    sampled: bool,
    graph: Graph,
    fwd: Forward,
    tail: Option<Tail>,
}

/// A batch of sequences over one KV cache; see the module docs.
#[derive(Debug)]
pub struct Session {
    model: Arc<Model>,
    opts: SessionOptions,
    cache: CacheSpec,
    sched: Scheduler,
    pos: Vec<usize>,
    seqs: Sequences,
    chains: Vec<Chain>,
    graphs: Vec<StepGraph>,
    current: Option<usize>,
    logits_buf: Vec<f32>,
    /// Per sequence, the log-probabilities it reads back with each token (0: none).
    logprobs: Vec<usize>,
    /// Per sequence: read back the chain's surviving candidates ([`Session::set_chain_reading`]).
    candidates: Vec<bool>,
    /// Rows an optimistic grammar checked on the host, and rejected (run again in a second
    /// backend step), since the session began.
    optimistic: (usize, usize),
}

impl Session {
    /// A session over `model` for `chains.len()` sequences (one chain each; `opts.n_seq` is
    /// taken from it).
    pub fn new(model: Arc<Model>, opts: SessionOptions, chains: Vec<Chain>) -> Result<Session> {
        let opts = SessionOptions { n_seq: chains.len(), ..opts };
        if opts.n_seq == 0 || opts.n_ctx == 0 {
            return Err(RunnerError::Session {
                what: format!("{} sequences of {} cells", opts.n_seq, opts.n_ctx),
                reason: "a session needs at least one sequence and one cell".into(),
            });
        }
        if opts.threads == 0 {
            return Err(RunnerError::Session { what: "threads = 0".into(), reason: "at least one thread".into() });
        }
        let cpu: Box<dyn sched::Backend> = Box::new(cpu::CpuBackend::with_threads(opts.threads));
        let backends = match opts.backend {
            BackendKind::Cpu => vec![cpu],
            BackendKind::Vulkan => {
                let vo = vulkan::Options { cpu_quantized: opts.quantized_on_cpu, ..vulkan::Options::from_env() };
                let vk = vulkan::VulkanBackend::with_options(vo)
                    .map_err(|e| RunnerError::Backend { backend: "vulkan".into(), reason: e.to_string() })?;
                vec![Box::new(vk) as Box<dyn sched::Backend>, cpu]
            }
        };
        let sched = Scheduler::new(backends).map_err(RunnerError::sched("creating the scheduler"))?;
        let seqs = if opts.draft_q_len > 0 && opts.n_draft_max > 0 {
            Sequences::with_draft_distributions(opts.n_draft_max + 1, opts.draft_q_len)
        } else {
            Sequences::new(opts.n_draft_max + 1)
        };
        let mut seqs = seqs.map_err(RunnerError::sampling("sequences".into()))?;
        for (i, c) in chains.iter().enumerate() {
            // With drafts, each output's draw is the verifier's decision (`graph::Op::SpecVerify`):
            // only tokens come back.
            seqs.set(SeqId(i as u32), SeqConfig::new(c.clone()));
        }
        let cache = CacheSpec { n_seq: opts.n_seq, n_ctx: opts.n_ctx, dtype: opts.kv_dtype };
        Ok(Session {
            model,
            opts,
            cache,
            sched,
            pos: vec![0; opts.n_seq],
            seqs,
            chains,
            graphs: Vec::new(),
            current: None,
            logits_buf: Vec::new(),
            logprobs: vec![0; opts.n_seq],
            candidates: vec![false; opts.n_seq],
            optimistic: (0, 0),
        })
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The options (with `n_seq` from the chains).
    pub fn options(&self) -> SessionOptions {
        self.opts
    }

    /// Tokens each sequence holds in the KV cache (its next position).
    pub fn positions(&self) -> &[usize] {
        &self.pos
    }

    /// The scheduler's counters (plans made, cache hits, bytes moved).
    pub fn stats(&self) -> Stats {
        self.sched.stats()
    }

    /// With backend sampling: the rows whose token an optimistic grammar checked on the host
    /// since the session began, and how many of them it rejected (each run again, masked, in a
    /// second backend step): their ratio is the rejection rate. (On the CPU path the chain does
    /// the check itself, uncounted.)
    pub fn optimistic_checks(&self) -> (usize, usize) {
        self.optimistic
    }

    /// The scheduler (for plan dumps).
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }

    /// Sequence `seq`'s chain as it stands (its stages' state included).
    ///
    /// # Panics
    /// If `seq` is not one of the session's sequences.
    pub fn chain(&self, seq: usize) -> &Chain {
        match self.seqs.get(sampling::backend::SeqId(seq as u32)) {
            Some(c) if self.opts.sampling == Sampling::Backend => &c.chain,
            _ => &self.chains[seq],
        }
    }

    /// Per sequence, where each stage of its chain runs (`+name` backend, `-name` CPU), as the
    /// last sampled graph placed them (with [`Sampling::Cpu`], every stage `-`).
    pub fn placement(&self) -> Vec<String> {
        let tail = self
            .current
            .and_then(|i| self.graphs[i].tail.as_ref())
            .or_else(|| self.graphs.iter().rev().find_map(|g| g.tail.as_ref()));
        (0..self.opts.n_seq)
            .map(|s| match tail {
                Some(t) => t.placement().into_iter().find(|(q, _)| q.0 == s as u32).map(|(_, p)| p).unwrap_or_default(),
                None => self.chains[s].stages().iter().map(|x| format!("-{}", x.name())).collect::<Vec<_>>().join(" "),
            })
            .collect()
    }

    /// The graph of the current step shape, if any (for dumps).
    pub fn graph(&self) -> Option<&Graph> {
        self.current.map(|i| &self.graphs[i].graph)
    }

    /// Forgets every sequence's tokens (positions back to 0); the cache contents are left as they
    /// are and masked. Sampler states are kept.
    pub fn rewind(&mut self) {
        self.pos.iter_mut().for_each(|p| *p = 0);
    }

    /// Rolls sequence `seq` back to its first `len` tokens (a no-op if it holds no more): later
    /// steps write its cells from `len` on, and the cells after it are never attended to again
    /// (see [`crate::kv`]). Its sampler state is not changed.
    pub fn truncate(&mut self, seq: usize, len: usize) -> Result<()> {
        let p = self.pos.get_mut(seq).ok_or_else(|| RunnerError::Session {
            what: format!("sequence {seq}"),
            reason: format!("the session has {} sequences", self.opts.n_seq),
        })?;
        *p = (*p).min(len);
        Ok(())
    }

    /// Gives slot `seq` a new sequence's chain (a server's request joining the batch): its
    /// sampling state starts afresh (step counter 0, so its draws are those of the same chain
    /// and seed anywhere else), reading back the `logprobs` most likely tokens' log-probabilities
    /// with each token (0: none). The slot's position is not changed ([`Session::truncate`]).
    /// A chain of another structure than the slot's last one rebuilds the sampled step graphs
    /// that include the slot (at their next use).
    pub fn set_chain(&mut self, seq: usize, chain: Chain, logprobs: usize) -> Result<()> {
        self.set_chain_reading(seq, chain, logprobs, false)
    }

    /// [`Session::set_chain`], and with `candidates` each sampled token comes with the chain's
    /// surviving candidates as its selecting stage saw them, `p` normalised over them, sorted by
    /// `p` descending ([`SlotSample::candidates`]: llama-server's `post_sampling_probs`). On the
    /// backend path the tail reads them back for this sequence only (a fixed-size list after a
    /// top-k, else the vocabulary row); on the CPU path they are the chain's output list.
    pub fn set_chain_reading(&mut self, seq: usize, chain: Chain, logprobs: usize, candidates: bool) -> Result<()> {
        if seq >= self.opts.n_seq {
            return Err(RunnerError::Session {
                what: format!("sequence {seq}"),
                reason: format!("the session has {} sequences", self.opts.n_seq),
            });
        }
        let id = SeqId(seq as u32);
        self.seqs.remove(id);
        let mut cfg = SeqConfig::new(chain.clone());
        if logprobs > 0 {
            cfg = cfg.with_logprobs(logprobs);
        }
        if candidates {
            cfg = cfg.with_candidates();
        }
        self.seqs.set(id, cfg);
        self.chains[seq] = chain;
        self.logprobs[seq] = logprobs;
        self.candidates[seq] = candidates;
        Ok(())
    }

    /// Feeds the prompt `tokens` to slot `seq`'s chain, as llama-server feeds every prompt token
    /// to a new sequence's sampler (`common_sampler_accept(.., false)`): penalties and DRY count
    /// them from the first draw on, a grammar and a reasoning budget do not see them, and no
    /// random step moves (the draws are those of the same chain and seed anywhere else). On
    /// either sampling path (the backend's penalty counts follow at the next step's inputs).
    pub fn accept_prompt(&mut self, seq: usize, tokens: &[Token]) -> Result<()> {
        if seq >= self.opts.n_seq {
            return Err(RunnerError::Session {
                what: format!("sequence {seq}"),
                reason: format!("the session has {} sequences", self.opts.n_seq),
            });
        }
        match self.opts.sampling {
            Sampling::Backend => self
                .seqs
                .accept_prompt(SeqId(seq as u32), tokens)
                .map_err(RunnerError::sampling(format!("sequence {seq}")))?,
            Sampling::Cpu => tokens.iter().for_each(|&t| sampling::Sampler::accept_prompt(&mut self.chains[seq], t)),
        }
        Ok(())
    }

    /// Plans the largest step the caller will run, a ragged step of `widths[s]` tokens for slot
    /// `s` (every slot with tokens sampling with the chain set now, attention over every cell of
    /// the context), so that the scheduler's pool is sized for it now
    /// ([`sched::Scheduler::reserve`]): running out of memory is an error here, at start, and
    /// later steps whose buffers fit allocate nothing. A later chain whose sampling tail needs
    /// more (a longer list, another stage's buffers) grows the shared buffers at its first step.
    /// Nothing is computed, no position moves, and the weights are bound. Returns the bytes
    /// the pool's shared buffers hold after it.
    pub fn reserve(&mut self, widths: &[usize]) -> Result<usize> {
        let n_ctx = self.opts.n_ctx;
        let zeros: Vec<Vec<Token>> = widths.iter().map(|&w| vec![0; w.min(n_ctx)]).collect();
        let tokens: Vec<&[Token]> = zeros.iter().map(Vec::as_slice).collect();
        // Each slot's tokens end at the context's end: attention over every cell.
        let start: Vec<usize> = tokens.iter().map(|t| n_ctx - t.len()).collect();
        let samples: Vec<bool> = tokens.iter().map(|t| !t.is_empty()).collect();
        let n = tokens.len();
        let inputs = StepInputs::ragged(&self.model.config, &self.cache, 0, &tokens, &start, &samples)?;
        let sampled = self.opts.sampling == Sampling::Backend;
        self.prepare(0..n, &inputs, 1, sampled, Some(&samples))?;
        let shared =
            [BufferRole::Inputs, BufferRole::Outputs, BufferRole::HostOutputs, BufferRole::ReadBack, BufferRole::Arena];
        Ok(shared.iter().map(|&r| self.sched.pool_bytes(r)).sum())
    }

    /// One ragged step over the contiguous slots `lo..lo + work.len()`, each doing its
    /// [`SlotWork`] with its own number of tokens, unpadded ([`StepInputs::ragged`]: a server's
    /// prompt chunks beside the others' decode tokens): the slots outside the range and the idle
    /// ones in it take no part, and only the sampling slots get an output row (the LM head and
    /// the sampling tail run for them alone). Each sampling slot's token
    /// is chosen by its chain and accepted, as [`Session::step`] does; its error (a chain that
    /// selects nothing, a grammar that accepts nothing) is its own. Without a sampling slot the
    /// step reads nothing back.
    pub fn step_slots(&mut self, lo: usize, work: &[SlotWork<'_>]) -> Result<SlotsOutcome> {
        let tokens: Vec<&[Token]> = work
            .iter()
            .map(|w| match w {
                SlotWork::Idle => &[],
                SlotWork::Feed(t) | SlotWork::Sample(t) => *t,
            })
            .collect();
        let samples: Vec<bool> = work.iter().map(|w| matches!(w, SlotWork::Sample(_))).collect();
        let hi = lo + work.len();
        let start = self.pos.get(lo..hi).ok_or_else(|| RunnerError::Session {
            what: format!("a step over slots {lo}..{hi}"),
            reason: format!("the session has {} sequences", self.opts.n_seq),
        })?;
        let inputs = StepInputs::ragged(&self.model.config, &self.cache, lo, &tokens, start, &samples)?;
        let n_eval = tokens.iter().map(|t| t.len()).sum();
        let any_sample = samples.contains(&true);
        let sampled = any_sample && self.opts.sampling == Sampling::Backend;
        let t0 = Instant::now();
        let i = self.prepare(lo..hi, &inputs, 1, sampled, Some(&samples))?;
        let tp = Instant::now();
        self.run(i, &inputs)?;
        for (s, (w, t)) in work.iter().zip(&tokens).enumerate() {
            if !matches!(w, SlotWork::Idle) {
                self.pos[lo + s] += t.len();
            }
        }
        let t1 = Instant::now();
        let before = self.sched.stats().bytes_to_host;
        let mut results: Vec<Option<Result<SlotSample>>> = (0..work.len()).map(|_| None).collect();
        if any_sample {
            match self.graphs[i].tail.as_mut() {
                Some(tail) => {
                    let step = tail
                        .sample(&mut self.sched, &mut self.seqs)
                        .map_err(RunnerError::sampling("sampling".into()))?;
                    self.optimistic.0 += step.checked;
                    self.optimistic.1 += step.resampled;
                    for r in step.rows {
                        let s = r.seq.0 as usize - lo;
                        if !matches!(work[s], SlotWork::Sample(_)) {
                            continue;
                        }
                        let what = || format!("sequence {}", r.seq.0);
                        let res = r.result.map_err(RunnerError::sampling(what())).and_then(|row| {
                            let token = row.token.ok_or_else(|| RunnerError::Session {
                                what: what(),
                                reason: "its chain selects no token (end it with greedy, dist or mirostat)".into(),
                            })?;
                            tail.accept(&mut self.seqs, r.seq, &[token]).map_err(RunnerError::sampling(what()))?;
                            Ok(SlotSample {
                                token,
                                logprobs: row.logprobs,
                                token_logprob: row.token_logprob,
                                token_rank: row.token_rank,
                                candidates: row.candidates,
                            })
                        });
                        results[s] = Some(res);
                    }
                }
                None => {
                    let logits = self.graphs[i].fwd.logits;
                    // One output row per sampling slot, in slot order.
                    let sampling: Vec<usize> = (0..work.len()).filter(|&s| samples[s]).collect();
                    let rows: Vec<usize> = (0..sampling.len()).collect();
                    self.sched
                        .read_rows_f32_into(logits, &rows, &mut self.logits_buf)
                        .map_err(RunnerError::sched("reading the logits"))?;
                    let v = self.model.config.n_vocab;
                    for (k, &s) in sampling.iter().enumerate() {
                        let row = &self.logits_buf[k * v..(k + 1) * v];
                        let slot = lo + s;
                        let n_lp = self.logprobs[slot];
                        let chain = &mut self.chains[slot];
                        let res = if self.candidates[slot] {
                            sample_with_candidates(chain, row)
                        } else {
                            chain.sample(row).map(|t| (t, None))
                        }
                        .map_err(RunnerError::sampling(format!("sequence {slot}")))
                        .map(|(token, candidates)| {
                            let lse = (n_lp > 0).then(|| log_sum_exp(row));
                            SlotSample {
                                token,
                                logprobs: lse.map(|lse| top_logprobs(row, n_lp, lse)),
                                token_logprob: lse.map(|lse| row[token as usize] - lse),
                                token_rank: lse.map(|_| sampling::candidates::rank(row, token)),
                                candidates,
                            }
                        });
                        results[s] = Some(res);
                    }
                }
            }
        }
        let t2 = Instant::now();
        let bytes_read = (self.sched.stats().bytes_to_host - before) as usize;
        Ok(SlotsOutcome {
            results,
            n_eval,
            prepare_time: tp - t0,
            graph_time: t1 - tp,
            sample_time: t2 - t1,
            bytes_read,
        })
    }

    /// Builds (or finds) the graph for `t` tokens and `n_out` outputs per sequence of the slots
    /// `slots` (with `samples`, a ragged step's: `inputs.widths` tokens a slot, an output row for
    /// each sampling slot) and makes its plan current, binding the weights the scheduler lacks. A sampled
    /// graph whose tail no longer fits its sequences' chains (a chain of another structure was
    /// set since) is built again.
    fn prepare(
        &mut self,
        slots: std::ops::Range<usize>,
        inputs: &StepInputs,
        n_out: usize,
        sampled: bool,
        samples: Option<&[bool]>,
    ) -> Result<usize> {
        let (widths, cells) = (&inputs.widths, inputs.cells);
        // A ragged step's output rows: the sampling slots' (a uniform step's: every slot's).
        let outputs: Vec<bool> = match samples {
            Some(f) => f.to_vec(),
            None => vec![true; widths.len()],
        };
        let same = |g: &StepGraph| {
            g.slots == slots
                && g.widths == *widths
                && g.outputs == outputs
                && g.cells == cells
                && g.n_out == n_out
                && g.sampled == sampled
        };
        let found = self.graphs.iter().position(same);
        if let Some(i) = found
            && self.graphs[i].tail.as_ref().is_some_and(|tail| tail.check_current(&self.seqs).is_err())
        {
            self.graphs.remove(i);
            self.current = None;
        }
        let found = self.graphs.iter().position(same);
        let i = match found {
            Some(i) => i,
            None => {
                if self.graphs.len() >= MAX_GRAPHS {
                    // The oldest built shape goes (a server's shapes come and go with its slots).
                    self.graphs.remove(0);
                    self.current = None;
                }
                let mut graph = Graph::new();
                let (cfg, w) = (&self.model.config, &self.model.weights);
                let fwd = if samples.is_none() {
                    forward::build_slots(&mut graph, cfg, w, &self.cache, slots.clone(), inputs.t, n_out, cells)?
                } else {
                    let n_rows = inputs.out_rows.len();
                    forward::build_ragged(&mut graph, cfg, w, &self.cache, slots.clone(), widths, n_rows, cells)?
                };
                let tail = if sampled {
                    let rows: Vec<(SeqId, usize)> = slots
                        .clone()
                        .filter(|&s| outputs[s - slots.start])
                        .enumerate()
                        .flat_map(|(i, s)| (0..n_out).map(move |j| (SeqId(s as u32), i * n_out + j)))
                        .collect();
                    let backend = self.sched.backends()[0].as_ref();
                    Some(
                        Tail::attach(&mut graph, fwd.logits, &rows, &self.seqs, backend)
                            .map_err(RunnerError::sampling("attaching the sampling tail".into()))?,
                    )
                } else {
                    graph.set_output(fwd.logits);
                    None
                };
                self.graphs.push(StepGraph {
                    slots,
                    widths: widths.clone(),
                    outputs,
                    cells,
                    n_out,
                    sampled,
                    graph,
                    fwd,
                    tail,
                });
                self.graphs.len() - 1
            }
        };
        if self.current != Some(i) {
            let sg = &self.graphs[i];
            self.sched.plan(&sg.graph).map_err(RunnerError::sched("planning the forward graph"))?;
            for (id, name) in &sg.fwd.params {
                if !self.sched.is_set(*id).map_err(RunnerError::sched("checking the weights"))? {
                    // Read in place from the mapped file where the backend can (the CPU), else
                    // uploaded (a GPU, a misaligned tensor).
                    let t = self.model.weights.get(name)?;
                    let e = RunnerError::sched("uploading the weights");
                    if self.opts.weights_in_place {
                        let bytes = sched::SharedBytes::new(std::sync::Arc::new(t.data.clone()));
                        self.sched.set_input_shared(*id, &bytes).map_err(e)?;
                    } else {
                        self.sched.set_input(*id, &t.data).map_err(e)?;
                    }
                }
            }
            self.current = Some(i);
        }
        Ok(i)
    }

    /// Writes the step's inputs and computes the graph.
    fn run(&mut self, i: usize, inputs: &StepInputs) -> Result<()> {
        let sg = &self.graphs[i];
        let f = &sg.fwd;
        let s = &mut self.sched;
        let e = RunnerError::sched("writing the step's inputs");
        s.set_input_i32(f.tokens, &inputs.tokens).map_err(e)?;
        let e = RunnerError::sched("writing the step's inputs");
        s.set_input_i32(f.pos, &inputs.pos).map_err(e)?;
        let e = RunnerError::sched("writing the step's inputs");
        s.set_input_i32(f.k_rows, &inputs.k_rows).map_err(e)?;
        let e = RunnerError::sched("writing the step's inputs");
        s.set_input_i32(f.v_rows, &inputs.v_rows).map_err(e)?;
        let e = RunnerError::sched("writing the step's inputs");
        s.set_input_f32(f.mask, &inputs.mask).map_err(e)?;
        if let (Some(id), Some(m)) = (f.mask_swa, &inputs.mask_swa) {
            s.set_input_f32(id, m).map_err(RunnerError::sched("writing the step's inputs"))?;
        }
        if let Some(rows) = f.out_rows {
            s.set_input_i32(rows, &inputs.out_rows).map_err(RunnerError::sched("writing the step's inputs"))?;
        }
        if let Some(tail) = &sg.tail {
            tail.set_inputs(s, &mut self.seqs).map_err(RunnerError::sampling("writing the sampling inputs".into()))?;
        }
        s.compute().map_err(RunnerError::sched("computing the forward graph"))
    }

    /// Checks that a step gives every sequence its tokens (`eval`, `step`).
    fn every_slot(&self, tokens: &[&[Token]]) -> Result<()> {
        if tokens.len() != self.opts.n_seq {
            return Err(RunnerError::Session {
                what: format!("a step with {} token lists", tokens.len()),
                reason: format!(
                    "the session has {} sequences; every sequence takes part in every step",
                    self.opts.n_seq
                ),
            });
        }
        Ok(())
    }

    fn advance(&mut self, tokens: &[&[Token]]) {
        for (p, t) in self.pos.iter_mut().zip(tokens) {
            *p += t.len();
        }
    }

    /// Evaluates `tokens[s]` for every sequence `s` (appended at its position) and returns each
    /// sequence's logits after its last token, without sampling.
    pub fn eval(&mut self, tokens: &[&[Token]]) -> Result<Vec<Vec<f32>>> {
        self.every_slot(tokens)?;
        let ones = vec![1; tokens.len()];
        let inputs = StepInputs::for_slots(&self.model.config, &self.cache, 0, tokens, &self.pos, 0, 1, &ones)?;
        let i = self.prepare(0..self.opts.n_seq, &inputs, 1, false, None)?;
        self.run(i, &inputs)?;
        self.advance(tokens);
        let logits = self.graphs[i].fwd.logits;
        let rows: Vec<usize> = (0..self.opts.n_seq).collect();
        let all = self.sched.read_rows_f32(logits, &rows).map_err(RunnerError::sched("reading the logits"))?;
        Ok(all.chunks(self.model.config.n_vocab).map(<[f32]>::to_vec).collect())
    }

    /// Evaluates `tokens[s]` for every sequence `s`, samples one token per sequence from its
    /// logits after its last token with its chain, and accepts it.
    pub fn step(&mut self, tokens: &[&[Token]]) -> Result<StepOutcome> {
        self.every_slot(tokens)?;
        let work: Vec<SlotWork<'_>> = tokens.iter().map(|t| SlotWork::Sample(t)).collect();
        let out = self.step_slots(0, &work)?;
        let mut picked = Vec::with_capacity(tokens.len());
        for r in out.results {
            picked.push(r.expect("every slot samples")?.token);
        }
        Ok(StepOutcome {
            tokens: picked,
            n_eval: out.n_eval,
            prepare_time: out.prepare_time,
            graph_time: out.graph_time,
            sample_time: out.sample_time,
            bytes_read: out.bytes_read,
        })
    }

    /// A speculative step: evaluates `tokens[s]` (the sequence's new tokens, usually its last
    /// emitted one) followed by `drafts[s]` (at most [`SessionOptions::n_draft_max`] tokens; may
    /// be empty) for every sequence, verifies each draft against the target's outputs at the
    /// last new token and at every draft token with the sequence's chain (the drafts taken as
    /// deterministic: an n-gram lookup, a greedy draft model), emits the accepted draft tokens
    /// and the target's token after them, and rolls the KV cache back past the rejected drafts.
    /// See the module docs. Errors: more drafts than `n_draft_max`, a draft for a chain that
    /// cannot be verified (a stateful selector such as mirostat), and whatever [`Session::step`]
    /// reports.
    pub fn step_spec(&mut self, tokens: &[&[Token]], drafts: &[&[Token]]) -> Result<SpecOutcome> {
        self.step_spec_inner(tokens, drafts, None)
    }

    /// [`Session::step_spec`] for sampled drafts: `qs[s][i]` is the distribution draft token
    /// `drafts[s][i]` was drawn from (`(token, probability)` pairs, e.g. the draft model's
    /// surviving candidates; an empty `qs[s]`: sequence `s`'s draft is deterministic). Verified
    /// with `q` (accept with probability `min(1, p/q)`, else the residual `max(0, p - q)`): on the
    /// backend by `graph::Op::SpecVerifySampled` (needs [`SessionOptions::draft_q_len`] at least
    /// each distribution's length), on the CPU by `speculative::verify` with
    /// `DraftProbs::Sampled`; both emit the same tokens.
    pub fn step_spec_sampled(
        &mut self,
        tokens: &[&[Token]],
        drafts: &[&[Token]],
        qs: &[&[DraftDist]],
    ) -> Result<SpecOutcome> {
        if qs.len() != drafts.len() {
            return Err(RunnerError::Session {
                what: format!("a speculative step with {} drafts and {} draft distributions", drafts.len(), qs.len()),
                reason: "one list of distributions per sequence".into(),
            });
        }
        self.step_spec_inner(tokens, drafts, Some(qs))
    }

    fn step_spec_inner(
        &mut self,
        tokens: &[&[Token]],
        drafts: &[&[Token]],
        qs: Option<&[&[DraftDist]]>,
    ) -> Result<SpecOutcome> {
        let n_seq = self.opts.n_seq;
        if drafts.len() != n_seq || tokens.len() != n_seq {
            return Err(RunnerError::Session {
                what: format!("a speculative step with {} token lists and {} drafts", tokens.len(), drafts.len()),
                reason: format!("the session has {n_seq} sequences; every sequence takes part in every step"),
            });
        }
        let work: Vec<SpecWork<'_>> =
            tokens.iter().zip(drafts).map(|(&tokens, &draft)| SpecWork::Decode { tokens, draft }).collect();
        let out = self.spec_slots(0, &work, qs)?;
        let mut verdicts = Vec::with_capacity(n_seq);
        for r in out.results {
            verdicts.push(r.expect("every slot decodes")?);
        }
        Ok(SpecOutcome {
            accepted: verdicts.iter().map(|v| v.accepted).collect(),
            tokens: verdicts.into_iter().map(|v| v.tokens).collect(),
            n_eval: out.n_eval,
            prepare_time: out.prepare_time,
            graph_time: out.graph_time,
            sample_time: out.sample_time,
            bytes_read: out.bytes_read,
        })
    }

    /// A speculative step over the contiguous slots `lo..lo + work.len()`: each decoding slot
    /// feeds its new token(s) and its draft, which is verified as [`Session::step_spec`] does
    /// (deterministic drafts), its accepted tokens and the target's next token emitted and
    /// accepted, and its position rolled back past the rejected drafts; an idle slot only pads.
    /// A slot's own error (a chain that cannot verify, a bad row) is its result, the others go on.
    pub fn step_slots_spec(&mut self, lo: usize, work: &[SpecWork<'_>]) -> Result<SlotsSpecOutcome> {
        self.spec_slots(lo, work, None)
    }

    fn spec_slots(
        &mut self,
        lo: usize,
        work: &[SpecWork<'_>],
        qs: Option<&[&[DraftDist]]>,
    ) -> Result<SlotsSpecOutcome> {
        let n = work.len();
        let hi = lo + n;
        if n == 0 || hi > self.opts.n_seq || qs.is_some_and(|q| q.len() != n) {
            return Err(RunnerError::Session {
                what: format!("a speculative step over slots {lo}..{hi}"),
                reason: format!("the session has {} sequences, one draft distribution list per slot", self.opts.n_seq),
            });
        }
        // Slot `s`'s sampled draft's distributions (`None`: deterministic).
        let q_of = |s: usize| qs.map(|q| q[s]).filter(|q| !q.is_empty());
        let k = self.opts.n_draft_max;
        let pad = [0 as Token];
        let (toks, drafts): (Vec<&[Token]>, Vec<&[Token]>) = work
            .iter()
            .map(|w| match w {
                SpecWork::Idle => (&pad[..], &[][..]),
                SpecWork::Decode { tokens, draft } => (*tokens, *draft),
            })
            .unzip();
        let idle = |s: usize| matches!(work[s], SpecWork::Idle);
        if let Some(s) = (0..n).find(|&s| drafts[s].len() > k) {
            return Err(RunnerError::Session {
                what: format!("sequence {}: a draft of {} tokens", lo + s, drafts[s].len()),
                reason: format!("the session verifies at most n_draft_max = {k} per step"),
            });
        }
        let fed: Vec<Vec<Token>> = (0..n).map(|s| [toks[s], drafts[s]].concat()).collect();
        let refs: Vec<&[Token]> = fed.iter().map(Vec::as_slice).collect();
        // A few static shapes for the steps with a draft: W tokens and outputs per sequence, W the
        // longest draft plus one rounded up to a power of two (at most K + 1), so that a short
        // draft (a drafter probing after failures) costs a narrow step and the plans stay few.
        let longest = drafts.iter().map(|d| d.len()).max().unwrap_or(0);
        let any = longest > 0;
        let width = (longest + 1).next_power_of_two().min(k + 1);
        let (t_min, n_out) = if any { (width, width) } else { (1, 1) };
        let outs: Vec<usize> = drafts.iter().map(|d| if any { d.len() + 1 } else { 1 }).collect();
        let inputs =
            StepInputs::for_slots(&self.model.config, &self.cache, lo, &refs, &self.pos[lo..hi], t_min, n_out, &outs)?;
        let n_eval = (0..n).filter(|&s| !idle(s)).map(|s| fed[s].len()).sum();
        let sampled = self.opts.sampling == Sampling::Backend;
        let t0 = Instant::now();
        let i = self.prepare(lo..hi, &inputs, n_out, sampled, None)?;
        let tp = Instant::now();
        if sampled {
            for (s, d) in drafts.iter().enumerate() {
                let what = || format!("sequence {}", lo + s);
                let seq = SeqId((lo + s) as u32);
                let set = match q_of(s) {
                    Some(q) => self.seqs.set_draft_sampled(seq, d, q),
                    None => self.seqs.set_draft(seq, d),
                };
                set.map_err(|e| RunnerError::sampling(what())(e))?;
            }
        }
        self.run(i, &inputs)?;
        let t1 = Instant::now();
        let before = self.sched.stats().bytes_to_host;
        let mut results: Vec<Option<Result<Verdict>>> = (0..n).map(|_| None).collect();
        match self.graphs[i].tail.as_mut() {
            Some(tail) => {
                let step =
                    tail.sample(&mut self.sched, &mut self.seqs).map_err(RunnerError::sampling("sampling".into()))?;
                self.optimistic.0 += step.checked;
                self.optimistic.1 += step.resampled;
                for (s, draft) in drafts.iter().enumerate() {
                    if idle(s) {
                        continue;
                    }
                    let what = || format!("sequence {}", lo + s);
                    let seq = SeqId((lo + s) as u32);
                    let mut rows: Vec<_> =
                        step.rows.iter().filter(|r| r.seq == seq && r.output <= draft.len()).collect();
                    rows.sort_by_key(|r| r.output);
                    // Each output's token is the verifier's decision at its position (drawn on the
                    // backend, keyed by the sequence's step). The outputs after the first one that
                    // differs from its draft token are never used, and may have failed (a grammar
                    // that cannot take a draft token before them): only the used ones must succeed.
                    let verdict = (|| {
                        let mut emitted: Vec<Token> = Vec::with_capacity(draft.len() + 1);
                        let mut rejected = false;
                        for r in rows {
                            let row = r.result.as_ref().map_err(|e| RunnerError::sampling(what())(e.clone()))?;
                            let token = row.token.ok_or_else(|| RunnerError::Session {
                                what: what(),
                                reason: "its chain selects no token (end it with greedy, dist or mirostat)".into(),
                            })?;
                            emitted.push(token);
                            if r.output < draft.len() && draft[r.output] != token {
                                rejected = true;
                                break;
                            }
                        }
                        let verdict = if draft.is_empty() {
                            // Plain decoding (any chain, mirostat included): output 0's token.
                            Verdict { accepted: 0, tokens: vec![emitted[0]] }
                        } else {
                            // The unused outputs stand in as the last used token: the accepted
                            // prefix ends before them all the same.
                            if rejected {
                                let last = *emitted.last().expect("output 0 is used");
                                emitted.resize(draft.len() + 1, last);
                            }
                            let chain = &self.seqs.get(seq).expect("every sequence is registered").chain;
                            speculative::accept_rows(chain, &emitted, draft).map_err(RunnerError::sampling(what()))?
                        };
                        tail.accept(&mut self.seqs, seq, &verdict.tokens).map_err(RunnerError::sampling(what()))?;
                        Ok(verdict)
                    })();
                    results[s] = Some(verdict);
                }
            }
            None => {
                let logits = self.graphs[i].fwd.logits;
                let rows: Vec<usize> =
                    (0..n).filter(|&s| !idle(s)).flat_map(|s| (0..outs[s]).map(move |j| s * n_out + j)).collect();
                self.sched
                    .read_rows_f32_into(logits, &rows, &mut self.logits_buf)
                    .map_err(RunnerError::sched("reading the logits"))?;
                let v = self.model.config.n_vocab;
                let mut at = 0;
                for s in (0..n).filter(|&s| !idle(s)) {
                    let chain = &mut self.chains[lo + s];
                    let target: Vec<&[f32]> =
                        (0..outs[s]).map(|j| &self.logits_buf[(at + j) * v..(at + j + 1) * v]).collect();
                    at += outs[s];
                    let what = format!("sequence {}", lo + s);
                    let verdict = if drafts[s].is_empty() {
                        chain
                            .sample(target[0])
                            .map(|t| Verdict { accepted: 0, tokens: vec![t] })
                            .map_err(RunnerError::sampling(what))
                    } else {
                        let probs = q_of(s).map_or(DraftProbs::Deterministic, DraftProbs::Sampled);
                        speculative::verify(chain, &target, drafts[s], probs).map_err(RunnerError::sampling(what))
                    };
                    results[s] = Some(verdict);
                }
            }
        }
        // Roll back: keep the new tokens and the accepted drafts only.
        for (s, r) in results.iter().enumerate() {
            if let Some(r) = r {
                self.pos[lo + s] += toks[s].len() + r.as_ref().map_or(0, |v| v.accepted);
            }
        }
        let t2 = Instant::now();
        let bytes_read = (self.sched.stats().bytes_to_host - before) as usize;
        Ok(SlotsOutcome {
            results,
            n_eval,
            prepare_time: tp - t0,
            graph_time: t1 - tp,
            sample_time: t2 - t1,
            bytes_read,
        })
    }
}

/// [`Chain::sample`] that also returns the chain's surviving candidates (its output list).
fn sample_with_candidates(
    chain: &mut Chain,
    row: &[f32],
) -> sampling::Result<(Token, Option<Vec<sampling::TokenData>>)> {
    let mut cur = sampling::Candidates::from_row(row)?;
    sampling::Sampler::apply(chain, &mut cur)?;
    let token = cur.selected_token().ok_or(sampling::SamplingError::NothingSelected)?;
    chain.try_accept(token)?;
    Ok((token, Some(cur.output()?.candidates)))
}

/// `ln sum exp(row)`, as the backend's log-probabilities take it (`max + ln sum exp(x - max)`;
/// the sum in f64).
fn log_sum_exp(row: &[f32]) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = row.iter().map(|&l| f64::from((l - max).exp())).sum();
    max + sum.ln() as f32
}

/// The `(token, log p)` of the `n` most likely tokens of a logits row (ties to the lower id), as
/// the backend's log-probability reservation gives them; `lse` is the row's [`log_sum_exp`].
fn top_logprobs(row: &[f32], n: usize, lse: f32) -> Vec<(Token, f32)> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    let n = n.min(row.len());
    idx.select_nth_unstable_by(n.saturating_sub(1), |&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    idx.truncate(n);
    idx.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    idx.into_iter().map(|i| (i as Token, row[i] - lse)).collect()
}

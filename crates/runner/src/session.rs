//! `Session`: a batch of sequences decoded in lockstep over one KV cache, on a scheduler over the
//! chosen backend, each sequence sampled by its own chain: through the backend sampling tail
//! (`sampling::backend::Tail`, only what each chain needs read back) or, with
//! [`Sampling::Cpu`], by copying the logits rows back and running the CPU chains.
//!
//! One forward graph is built per step shape (tokens per sequence, sampled or not) and kept: a
//! steady decode loop reuses its graph and its plan, and only writes inputs each step (the
//! scheduler's `Stats::plans` does not grow). Weights are uploaded where the scheduler has not got
//! them yet, so the prefill and decode graphs share one copy.

use crate::error::{Result, RunnerError};
use crate::forward::{self, Forward};
use crate::kv::{CacheSpec, StepInputs};
use crate::model::Model;
use graph::{DType, Graph};
use sampling::backend::{SeqConfig, SeqId, Sequences, Tail};
use sampling::{Chain, Token};
use sched::{Scheduler, Stats};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Building and planning a new step shape and uploading weights (zero when the shape's plan
    /// was current).
    pub prepare_time: Duration,
    /// Writing inputs and computing the graph (the forward pass and the backend sampling ops).
    pub graph_time: Duration,
    /// Reading back and finishing the sampling on the CPU, and accepting.
    pub sample_time: Duration,
    /// Bytes read back to the host for sampling in this step (the scheduler's count).
    pub bytes_read: usize,
}

#[derive(Debug)]
struct StepGraph {
    t: usize,
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
                let vk = vulkan::VulkanBackend::new()
                    .map_err(|e| RunnerError::Backend { backend: "vulkan".into(), reason: e.to_string() })?;
                vec![Box::new(vk) as Box<dyn sched::Backend>, cpu]
            }
        };
        let sched = Scheduler::new(backends).map_err(RunnerError::sched("creating the scheduler"))?;
        let mut seqs = Sequences::new(1).map_err(RunnerError::sampling("sequences".into()))?;
        for (i, c) in chains.iter().enumerate() {
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

    /// The scheduler (for plan dumps).
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
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

    /// Builds (or finds) the graph for `t` tokens per sequence and makes its plan current,
    /// uploading the weights the scheduler lacks.
    fn prepare(&mut self, t: usize, sampled: bool) -> Result<usize> {
        let i = match self.graphs.iter().position(|g| g.t == t && g.sampled == sampled) {
            Some(i) => i,
            None => {
                let mut graph = Graph::new();
                let fwd = forward::build(&mut graph, &self.model.config, &self.model.weights, &self.cache, t)?;
                let tail = if sampled {
                    let rows: Vec<(SeqId, usize)> = (0..self.opts.n_seq).map(|s| (SeqId(s as u32), s)).collect();
                    let backend = self.sched.backends()[0].as_ref();
                    Some(
                        Tail::attach(&mut graph, fwd.logits, &rows, &self.seqs, backend)
                            .map_err(RunnerError::sampling("attaching the sampling tail".into()))?,
                    )
                } else {
                    graph.set_output(fwd.logits);
                    None
                };
                self.graphs.push(StepGraph { t, sampled, graph, fwd, tail });
                self.graphs.len() - 1
            }
        };
        if self.current != Some(i) {
            let sg = &self.graphs[i];
            self.sched.plan(&sg.graph).map_err(RunnerError::sched("planning the forward graph"))?;
            for (id, name) in &sg.fwd.params {
                if !self.sched.is_set(*id).map_err(RunnerError::sched("checking the weights"))? {
                    let t = self.model.weights.get(name)?;
                    self.sched.set_input(*id, &t.data).map_err(RunnerError::sched("uploading the weights"))?;
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
        if let Some(rows) = f.out_rows {
            s.set_input_i32(rows, &inputs.out_rows).map_err(RunnerError::sched("writing the step's inputs"))?;
        }
        if let Some(tail) = &sg.tail {
            tail.set_inputs(s, &self.seqs).map_err(RunnerError::sampling("writing the sampling inputs".into()))?;
        }
        s.compute().map_err(RunnerError::sched("computing the forward graph"))
    }

    fn inputs(&self, tokens: &[&[Token]]) -> Result<StepInputs> {
        StepInputs::new(&self.model.config, &self.cache, tokens, &self.pos)
    }

    fn advance(&mut self, tokens: &[&[Token]]) {
        for (p, t) in self.pos.iter_mut().zip(tokens) {
            *p += t.len();
        }
    }

    /// Evaluates `tokens[s]` for every sequence `s` (appended at its position) and returns each
    /// sequence's logits after its last token, without sampling.
    pub fn eval(&mut self, tokens: &[&[Token]]) -> Result<Vec<Vec<f32>>> {
        let inputs = self.inputs(tokens)?;
        let i = self.prepare(inputs.t, false)?;
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
        let inputs = self.inputs(tokens)?;
        let n_eval = tokens.iter().map(|t| t.len()).sum();
        let sampled = self.opts.sampling == Sampling::Backend;
        let t0 = Instant::now();
        let i = self.prepare(inputs.t, sampled)?;
        let tp = Instant::now();
        self.run(i, &inputs)?;
        self.advance(tokens);
        let t1 = Instant::now();
        let before = self.sched.stats().bytes_to_host;
        let n_seq = self.opts.n_seq;
        let mut out = Vec::with_capacity(n_seq);
        match self.graphs[i].tail.as_mut() {
            Some(tail) => {
                let step =
                    tail.sample(&mut self.sched, &mut self.seqs).map_err(RunnerError::sampling("sampling".into()))?;
                for r in &step.rows {
                    let what = || format!("sequence {}", r.seq.0);
                    let row = r.result.as_ref().map_err(|e| RunnerError::sampling(what())(e.clone()))?;
                    let tok = row.token.ok_or_else(|| RunnerError::Session {
                        what: what(),
                        reason: "its chain selects no token (end it with greedy, dist or mirostat)".into(),
                    })?;
                    tail.accept(&mut self.seqs, r.seq, &[tok]).map_err(RunnerError::sampling(what()))?;
                    out.push(tok);
                }
            }
            None => {
                let logits = self.graphs[i].fwd.logits;
                let rows: Vec<usize> = (0..n_seq).collect();
                self.sched
                    .read_rows_f32_into(logits, &rows, &mut self.logits_buf)
                    .map_err(RunnerError::sched("reading the logits"))?;
                let v = self.model.config.n_vocab;
                for (s, chain) in self.chains.iter_mut().enumerate() {
                    let row = &self.logits_buf[s * v..(s + 1) * v];
                    out.push(chain.sample(row).map_err(RunnerError::sampling(format!("sequence {s}")))?);
                }
            }
        }
        let t2 = Instant::now();
        let bytes_read = (self.sched.stats().bytes_to_host - before) as usize;
        Ok(StepOutcome {
            tokens: out,
            n_eval,
            prepare_time: tp - t0,
            graph_time: t1 - tp,
            sample_time: t2 - t1,
            bytes_read,
        })
    }
}

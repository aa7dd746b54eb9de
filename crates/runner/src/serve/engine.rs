//! The batching loop: one thread owns the [`Session`] (`--parallel` slots over one KV cache) and
//! runs continuous batching. A sequence ([`Job`]) joins at the next step in a free slot (the one
//! it asks for, `id_slot`, waiting while that one is busy; else the one
//! whose cells still hold the longest prefix of its prompt from its last sequence, which it
//! does not evaluate again, else the lowest; its chain set in the session's `Sequences` then: a
//! fresh sampler state, fed every prompt token as llama-server's `init_sampler` does, so that
//! penalties and DRY count them), and its prompt is evaluated in chunks of at most `chunk`
//! tokens **in the same steps as the others decode**: each step is ragged
//! ([`Session::step_slots`]: every decoding slot's one token and the prefilling slots' next
//! chunks, each slot its own count, unpadded), taking the prefilling slots in the order they were
//! admitted, at most `batch` prompt tokens in all (llama.cpp's `n_batch`: the bound on how long
//! the others' next token waits) over at most [`MAX_PREFILL_SLOTS`] slots, so that a burst of
//! requests is prefilled together and its sequences then decode in the same steps. A slot's first
//! token is sampled in the step of its last chunk. The step runs over the range of slots from the
//! lowest to the highest taking part (slots in between that are free or wait for their chunk take
//! no part: no token, no output). A sequence leaves when it ends (an end-of-generation token, a
//! stop string, its grammar complete, `max_tokens`, the context full), when its client goes away
//! (its event channel closed: the slot is freed before the next step), or on an error of its own
//! row, and its slot is reused. (`--prefill-apart` evaluates the chunks in steps of their own,
//! between decode steps, as before ragged steps: for comparison.) Its end reports its slot and
//! [`Timings`] (llama-server's `timings`).
//!
//! With n-gram speculation (`--spec ngram`), each decode step drafts for every decoding sequence
//! from its own context (prompt and output) as deep as its [`DraftDepth`] allows and the
//! context's room permits, and verifies on the backend ([`Session::step_slots_spec`]): greedy
//! requests get their plain tokens, sampling requests their target distribution. Sequences
//! whose chain cannot verify (mirostat) or that read back log-probabilities draft nothing.
//! Prompt chunks are then steps of their own, between the speculative steps.
//!
//! A sequence's tokens depend only on its prompt, chain and seed: the forward pass over
//! quantized weights (SmolLM2's Q4_1) gives a token the same bits whatever the step's slots,
//! tokens per slot and attended cells, and each draw is keyed by the sequence's seed and its own
//! step counter, so a request gives the same tokens alone or among others that come and go
//! (tested over HTTP). (F16 weights are not bit-invariant between a one-row and a several-row
//! step: the mat-vec and the tiled mat-mat sum in different orders, about 1e-6 apart.)

use super::metrics::Metrics;
use super::stop::{Pushed, StopFilter};
use crate::error::{Result, RunnerError};
use crate::model::Model;
use crate::session::{Session, SessionOptions, SlotSample, SlotWork, SpecWork};
use crate::spec::DraftDepth;
use crate::tokenizer::{TextStream, Tokenizer};
use sampling::speculative::ngram::NgramDrafter;
use sampling::{Chain, Token};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// The most slots whose prompts one prefill step evaluates together.
pub const MAX_PREFILL_SLOTS: usize = 16;

/// How many of the most likely tokens a row that asked for log-probabilities reads back (with the
/// chosen token's own log-probability, exact wherever it ranks).
pub const LOGPROBS_READ: usize = 20;

/// One sequence to generate: a choice of a request.
#[derive(Debug)]
pub struct Job {
    /// The choice's index in its request.
    pub index: usize,
    /// The prompt's tokens (at least one, fewer than the context).
    pub prompt: Vec<Token>,
    /// The sampler chain (seeded).
    pub chain: Chain,
    /// `Some(n)`: each token comes with its log-probability and the `n` most likely.
    pub logprobs: Option<usize>,
    /// Tokens to generate at most (`None`: until the context is full).
    pub max_tokens: Option<usize>,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Do not end at end-of-generation tokens.
    pub ignore_eos: bool,
    /// Reuse the cells of a free slot whose last sequence shares a prefix with the prompt
    /// (llama-server's `cache_prompt`).
    pub cache_prompt: bool,
    /// With `logprobs`: report the probabilities after the sampler chain (llama-server's
    /// `post_sampling_probs`) rather than the raw logits' log-probabilities.
    pub post_sampling: bool,
    /// Run in this slot (below the number of slots; llama-server's `id_slot`), waiting while it
    /// is busy.
    pub id_slot: Option<usize>,
    /// Where the job's events go; closed when the client went away.
    pub events: UnboundedSender<Event>,
}

/// Why a sequence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// An end-of-generation token, a stop string, or its grammar complete.
    Stop,
    /// `max_tokens`, or the context is full.
    Length,
}

impl Finish {
    /// OpenAI's `finish_reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// A token's log-probability entry.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    /// The token.
    pub id: Token,
    /// The token's text (lossy where it splits a character).
    pub token: String,
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Its log-probability under the raw logits (before any sampler, as llama-server reports
    /// `logprob` without `post_sampling_probs`), exact wherever it ranks; with the job's
    /// `post_sampling`, its probability among the chain's survivors (1 where it is not one of
    /// them, as llama-server).
    pub value: f32,
    /// Its rank among the raw logits (1 + how many are strictly greater; not with
    /// `post_sampling`).
    pub rank: Option<u32>,
    /// The most likely tokens, by `value` descending (with `post_sampling`: the chain's
    /// survivors of nonzero probability).
    pub top: Vec<TopEntry>,
}

/// One of the most likely tokens in a [`TokenLogprob`].
#[derive(Debug, Clone, PartialEq)]
pub struct TopEntry {
    /// The token.
    pub id: Token,
    /// Its text (lossy where it splits a character).
    pub token: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its log-probability (with `post_sampling`: its probability).
    pub value: f32,
}

/// A sequence's counts and times, as llama-server's `timings` reports them: its prompt from
/// joining the batch to its first token, its generation from the first token to the last.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Timings {
    /// Prompt tokens whose cells were reused (not evaluated).
    pub cached: usize,
    /// Prompt tokens evaluated.
    pub prompt_n: usize,
    /// From joining a slot to the first token.
    pub prompt: Duration,
    /// Tokens generated.
    pub predicted_n: usize,
    /// From the first token to the last (at least 1 µs once a token is out).
    pub predicted: Duration,
    /// Draft tokens proposed (`--spec ngram`).
    pub drafted: usize,
    /// Draft tokens accepted.
    pub accepted: usize,
}

/// What a job reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// More text (possibly empty while a stop string may be starting), and the log-probability
    /// entries of the tokens since the last event (where asked).
    Delta {
        /// The choice.
        index: usize,
        /// The slot it runs in.
        slot: usize,
        /// Text.
        text: String,
        /// Log-probability entries.
        logprobs: Vec<TokenLogprob>,
        /// The tokens generated since the last event (their text is in `text`, or held back
        /// while a stop string may be starting; an end-of-generation token is not among them).
        tokens: Vec<Token>,
    },
    /// The end.
    Done {
        /// The choice.
        index: usize,
        /// The slot it ran in.
        slot: usize,
        /// Its counts and times.
        timings: Timings,
        /// The tokens the slot's cells hold at the end (prompt and generated ones).
        tokens_cached: usize,
        /// Why.
        finish: Finish,
        /// Prompt tokens.
        prompt_tokens: usize,
        /// Generated tokens.
        completion_tokens: usize,
        /// The stop string that ended it, where one did.
        stopping_word: Option<String>,
    },
    /// The sequence failed (its own row's error, or the server stopping).
    Failed {
        /// The choice.
        index: usize,
        /// Why.
        message: String,
    },
}

/// The loop's settings.
#[derive(Debug, Clone, Copy)]
pub struct EngineOptions {
    /// The session: `n_seq` slots of `n_ctx` cells, backend, threads, sampling path.
    pub session: SessionOptions,
    /// The most prompt tokens of one slot evaluated in one step.
    pub chunk: usize,
    /// The most prompt tokens evaluated in one step, all slots together (llama.cpp's `n_batch`).
    pub batch: usize,
    /// The most sequences waiting for a slot.
    pub queue: usize,
    /// N-gram speculation: `(n, most draft tokens a step)`; the session's `n_draft_max` must be
    /// the latter.
    pub ngram: Option<(usize, usize)>,
    /// Evaluate prompt chunks in steps of their own between decode steps, not in ragged steps
    /// beside them (as this server did before ragged steps; for comparison).
    pub prefill_apart: bool,
}

/// A running loop: send it jobs; it stops when every sender is gone and its slots are done, or
/// at once when `stopping` is set.
#[derive(Debug)]
pub struct Engine {
    /// Where jobs go (bounded: a full queue refuses).
    pub jobs: SyncSender<Job>,
    /// Set to make the loop cancel what it runs and end.
    pub stopping: Arc<AtomicBool>,
    /// The loop's thread.
    pub thread: std::thread::JoinHandle<()>,
}

/// Starts the loop on its own thread; the session is made there, its largest step reserved with
/// `reserve_chain` on every slot (an error making it or reserving is returned here).
pub fn start(model: Arc<Model>, opts: EngineOptions, metrics: Arc<Metrics>, reserve_chain: Chain) -> Result<Engine> {
    let (jobs, rx) = mpsc::sync_channel::<Job>(opts.queue);
    let stopping = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
    let stop = Arc::clone(&stopping);
    let thread = std::thread::Builder::new()
        .name("batching".into())
        .spawn(move || {
            let greedy = match Chain::parse("greedy") {
                Ok(c) => c,
                Err(e) => {
                    let _ = ready_tx.send(Err(RunnerError::sampling("the idle chain".into())(e)));
                    return;
                }
            };
            let n = opts.session.n_seq;
            let session = match Session::new(Arc::clone(&model), opts.session, vec![greedy; n]) {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let Some(tok) = model.tokenizer.clone() else {
                let _ = ready_tx.send(Err(RunnerError::Session {
                    what: format!("serving `{}`", model.name),
                    reason: "the model has no tokenizer".into(),
                }));
                return;
            };
            let drafter = match opts.ngram.map(|(n, k)| NgramDrafter::new(n, k, 0.0)).transpose() {
                Ok(d) => d,
                Err(e) => {
                    let _ = ready_tx.send(Err(RunnerError::sampling("the n-gram drafter".into())(e)));
                    return;
                }
            };
            // Warm up before answering: the first step uploads the weights and plans a
            // one-token step (a sampled step in slot 0 with the idle chain), so that the first
            // request does not wait for it.
            let mut session = session;
            let warm = session.step_slots(0, &[SlotWork::Sample(&[0])]).and_then(|_| session.truncate(0, 0));
            if let Err(e) = warm.and_then(|()| reserve(&mut session, &opts, reserve_chain)) {
                let _ = ready_tx.send(Err(e));
                return;
            }
            metrics.allocations.store(session.stats().allocations, Ordering::Relaxed);
            let _ = ready_tx.send(Ok(()));
            Loop {
                session,
                tok,
                slots: (0..n).map(|_| None).collect(),
                metrics,
                order: 0,
                chunk: opts.chunk.max(1),
                batch: opts.batch.max(1),
                prefill_apart: opts.prefill_apart,
                drafter,
                cached: vec![Vec::new(); n],
                waiting: std::collections::VecDeque::new(),
                queue: opts.queue.max(1),
            }
            .run(&rx, &stop);
        })
        .map_err(|e| RunnerError::Session { what: "the batching thread".into(), reason: e.to_string() })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(Engine { jobs, stopping, thread }),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            Err(RunnerError::Session { what: "the batching thread".into(), reason: "it ended while starting".into() })
        }
    }
}

/// Sizes the session's memory for the largest step the loop can run: `batch` prompt tokens in
/// chunks (16 chunks at most; with speculation and steps of their own, as many as a burst
/// while none decodes), the others decoding (with speculation, a draft's width), attention
/// over every cell, every slot sampling with `chain` (a request's default) and reading back
/// log-probabilities. Too little memory is then an error at start, not in a running batch.
fn reserve(session: &mut Session, opts: &EngineOptions, chain: Chain) -> Result<()> {
    let (n, n_ctx) = (opts.session.n_seq, opts.session.n_ctx);
    for s in 0..n {
        session.set_chain(s, chain.clone(), LOGPROBS_READ)?;
    }
    let chunk = opts.chunk.clamp(1, n_ctx.saturating_sub(1).max(1));
    let other = opts.ngram.map_or(1, |(_, k)| k + 1).min(chunk);
    // Steps of their own for prompts (speculation, `--prefill-apart`) take a chunk from up to
    // 16 slots while none decodes; ragged steps `batch` tokens in all.
    let apart = opts.ngram.is_some() || opts.prefill_apart;
    let mut left = if apart { usize::MAX } else { opts.batch.max(1) };
    let widths: Vec<usize> = (0..n)
        .map(|s| {
            let w = if s < MAX_PREFILL_SLOTS { chunk.min(left).max(other) } else { other };
            left = left.saturating_sub(w);
            w
        })
        .collect();
    let t0 = Instant::now();
    let bytes = session.reserve(&widths)?;
    tracing::info!(
        "reserved {:.1} MiB of step buffers for the largest step ({} tokens) in {:?}",
        bytes as f64 / (1 << 20) as f64,
        widths.iter().sum::<usize>(),
        t0.elapsed()
    );
    Ok(())
}

/// The prompt pieces of a step: `waiting` lists the prefilling slots in the order they were
/// admitted as `(slot, tokens fed, prompt length)`; each gets its next `chunk` tokens at most, all
/// together `batch` at most, over [`MAX_PREFILL_SLOTS`] slots at most. `(slot, from, to)`.
fn chunks(waiting: &[(usize, usize, usize)], chunk: usize, batch: usize) -> Vec<(usize, usize, usize)> {
    let mut budget = batch;
    let mut out = Vec::new();
    for &(s, fed, len) in waiting.iter().take(MAX_PREFILL_SLOTS) {
        let end = (fed + chunk.min(budget)).min(len);
        if end == fed {
            break;
        }
        budget -= end - fed;
        out.push((s, fed, end));
    }
    out
}

/// A sequence in a slot.
struct Active {
    job: Job,
    order: u64,
    fed: usize,
    generated: usize,
    text: TextStream,
    stop: StopFilter,
    last: Token,
    decoding: bool,
    /// The prompt and the tokens emitted so far (the n-gram drafter's context).
    context: Vec<Token>,
    depth: DraftDepth,
    /// Whether its chain can verify drafts and it reads back no log-probabilities.
    drafts: bool,
    /// Tokens generated since its last event.
    unsent: Vec<Token>,
    /// When it joined; its first token; its last token.
    started: Instant,
    first: Option<Instant>,
    last_at: Option<Instant>,
    /// Prompt tokens reused from the slot's cells.
    reused: usize,
    /// Draft tokens proposed and accepted.
    drafted: usize,
    accepted: usize,
}

struct Loop {
    session: Session,
    tok: Tokenizer,
    slots: Vec<Option<Active>>,
    metrics: Arc<Metrics>,
    order: u64,
    chunk: usize,
    batch: usize,
    prefill_apart: bool,
    drafter: Option<NgramDrafter>,
    /// Per free slot, the tokens whose keys and values its cells still hold (positions `0..`).
    cached: Vec<Vec<Token>>,
    /// Jobs that asked for a slot that was busy, in arrival order.
    waiting: std::collections::VecDeque<Job>,
    /// The queue's capacity.
    queue: usize,
}

impl Loop {
    fn run(mut self, rx: &Receiver<Job>, stopping: &AtomicBool) {
        let mut open = true;
        loop {
            if stopping.load(Ordering::Relaxed) {
                self.cancel_all(rx, "the server is shutting down");
                return;
            }
            self.admit_waiting();
            if open && self.slots.iter().all(Option::is_none) {
                match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(job) => self.admit(job),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => open = false,
                }
            }
            // (Jobs waiting for a busy slot count against the queue: no more are taken in while
            // as many wait as the queue holds.)
            while open && self.slots.iter().any(Option::is_none) && self.waiting.len() < self.queue {
                match rx.try_recv() {
                    Ok(job) => self.admit(job),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => open = false,
                }
            }
            if !open && self.slots.iter().all(Option::is_none) && self.waiting.is_empty() {
                return;
            }
            self.drop_cancelled();
            if self.drafter.is_some() || self.prefill_apart {
                self.prefill_chunk();
                self.decode_step();
            } else {
                self.step();
            }
        }
    }

    /// Places the jobs waiting for their slot whose slot is free (in arrival order); drops
    /// those whose client went away.
    fn admit_waiting(&mut self) {
        let mut keep = std::collections::VecDeque::new();
        while let Some(job) = self.waiting.pop_front() {
            if job.events.is_closed() {
                self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                Metrics::add(&self.metrics.cancelled, 1);
            } else if job.id_slot.is_some_and(|s| self.slots[s].is_none()) {
                self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                self.place(job);
            } else {
                keep.push_back(job);
            }
        }
        self.waiting = keep;
    }

    /// A job from the queue: placed, or set waiting (still counted in the queue's depth) where
    /// its slot is busy or another job waits for it before this one.
    fn admit(&mut self, job: Job) {
        if let Some(s) = job.id_slot
            && s < self.slots.len()
            && !job.events.is_closed()
            && (self.slots[s].is_some() || self.waiting.iter().any(|w| w.id_slot == Some(s)))
        {
            self.waiting.push_back(job);
            return;
        }
        self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
        if job.events.is_closed() {
            Metrics::add(&self.metrics.cancelled, 1);
            return;
        }
        if let Some(s) = job.id_slot.filter(|&s| s >= self.slots.len()) {
            let message = format!("slot {s} does not exist (the server has {})", self.slots.len());
            let _ = job.events.send(Event::Failed { index: job.index, message });
            return;
        }
        self.place(job);
    }

    /// Puts `job` in a free slot: its `id_slot`, else the one whose cells hold the longest
    /// prefix of its prompt (with `cache_prompt`; at least one prompt token is evaluated again,
    /// for the logits), else the lowest.
    fn place(&mut self, job: Job) {
        let shared = |c: &[Token]| c.iter().zip(&job.prompt).take_while(|(a, b)| a == b).count();
        let free = (0..self.slots.len()).filter(|&s| self.slots[s].is_none() && job.id_slot.is_none_or(|i| i == s));
        let (slot, reuse) = free
            .map(|s| (s, if job.cache_prompt { shared(&self.cached[s]) } else { 0 }))
            .max_by_key(|&(s, n)| (n, std::cmp::Reverse(s)))
            .expect("admit is called with a free slot");
        let reuse = reuse.min(job.prompt.len() - 1);
        self.cached[slot].clear();
        let set = self
            .session
            .truncate(slot, reuse)
            .and_then(|()| {
                // Post-sampling probabilities are the chain's survivors (none to read after a
                // greedy selection: the chosen token, probability 1), not the raw logits'.
                let (lp, cands) = match job.logprobs {
                    Some(_) if job.post_sampling => (0, !ends_greedy(&job.chain)),
                    Some(_) => (LOGPROBS_READ, false),
                    None => (0, false),
                };
                self.session.set_chain_reading(slot, job.chain.clone(), lp, cands)
            })
            // Every prompt token, reused cells' included, as llama-server's `init_sampler`.
            .and_then(|()| self.session.accept_prompt(slot, &job.prompt));
        if let Err(e) = set {
            let _ = self.session.truncate(slot, 0);
            let _ = job.events.send(Event::Failed { index: job.index, message: e.to_string() });
            return;
        }
        Metrics::add(&self.metrics.prompt_tokens_cached, reuse as u64);
        self.order += 1;
        let stop = StopFilter::new(&job.stop);
        let job_prompt = job.prompt.clone();
        let verifies = job.chain.stages().last().is_some_and(|s| matches!(s.name(), "greedy" | "dist"));
        let drafts = verifies && job.logprobs.is_none();
        let max_draft = self.session.options().n_draft_max;
        self.slots[slot] = Some(Active {
            job,
            order: self.order,
            fed: reuse,
            generated: 0,
            text: self.tok.stream(),
            stop,
            last: 0,
            decoding: false,
            context: job_prompt,
            depth: DraftDepth::new(max_draft),
            drafts,
            unsent: Vec::new(),
            started: Instant::now(),
            first: None,
            last_at: None,
            reused: reuse,
            drafted: 0,
            accepted: 0,
        });
        Metrics::add(&self.metrics.active_slots, 1);
    }

    /// Frees a slot, keeping the tokens its cells hold for a later prompt that shares them (as
    /// many as leave room for a padding step: a free slot in a speculative step's range pads at
    /// its position).
    fn free(&mut self, slot: usize) {
        if let Some(a) = self.slots[slot].take() {
            self.metrics.active_slots.fetch_sub(1, Ordering::Relaxed);
            let o = self.session.options();
            let pos = self.session.positions()[slot];
            let keep = pos.min(a.context.len()).min(o.n_ctx.saturating_sub(o.n_draft_max + 1));
            // Never fails for a slot of the session.
            let _ = self.session.truncate(slot, keep);
            self.cached[slot] = a.context[..keep].to_vec();
        }
    }

    fn fail(&mut self, slot: usize, message: String) {
        if let Some(a) = &self.slots[slot] {
            let _ = a.job.events.send(Event::Failed { index: a.job.index, message });
        }
        self.free(slot);
        // What its cells hold is not known after an error.
        self.cached[slot].clear();
        let _ = self.session.truncate(slot, 0);
    }

    fn cancel_all(&mut self, rx: &Receiver<Job>, why: &str) {
        for s in 0..self.slots.len() {
            self.fail(s, why.to_string());
        }
        while let Ok(job) = rx.try_recv() {
            self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            let _ = job.events.send(Event::Failed { index: job.index, message: why.to_string() });
        }
        for job in std::mem::take(&mut self.waiting) {
            self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            let _ = job.events.send(Event::Failed { index: job.index, message: why.to_string() });
        }
    }

    fn drop_cancelled(&mut self) {
        for s in 0..self.slots.len() {
            if self.slots[s].as_ref().is_some_and(|a| a.job.events.is_closed()) {
                Metrics::add(&self.metrics.cancelled, 1);
                self.free(s);
            }
        }
    }

    fn count_step<T>(&self, kind: &str, lo: usize, out: &crate::session::SlotsOutcome<T>) {
        tracing::debug!(
            "{kind} step from slot {lo}: {} slots, {} tokens; prepare {:?}, graph {:?}, sampling {:?}",
            out.results.len(),
            out.n_eval,
            out.prepare_time,
            out.graph_time,
            out.sample_time
        );
        let m = &self.metrics;
        m.allocations.store(self.session.stats().allocations, Ordering::Relaxed);
        Metrics::add(&m.bytes_read, out.bytes_read as u64);
        Metrics::add(&m.graph_us, (out.prepare_time + out.graph_time).as_micros() as u64);
        Metrics::add(&m.sampling_us, out.sample_time.as_micros() as u64);
    }

    /// A decode step's counters: `sampled` sequences together.
    fn count_decode<T>(&self, kind: &str, lo: usize, out: &crate::session::SlotsOutcome<T>, sampled: usize) {
        self.count_step(kind, lo, out);
        let m = &self.metrics;
        Metrics::add(&m.decode_steps, 1);
        if sampled > 1 {
            Metrics::add(&m.shared_steps, 1);
        }
        m.batch_size.store(sampled as u64, Ordering::Relaxed);
        m.bytes_read_last_step.store(out.bytes_read as u64, Ordering::Relaxed);
        let (checked, rejected) = self.session.optimistic_checks();
        m.grammar_checked.store(checked as u64, Ordering::Relaxed);
        m.grammar_rejected.store(rejected as u64, Ordering::Relaxed);
    }

    /// One ragged step (without speculation): every decoding slot's next token, and beside them
    /// the next chunks of the prefilling slots in the order they were admitted, each at most
    /// `chunk` tokens, at most `batch` in all (at most [`MAX_PREFILL_SLOTS`] slots). A slot
    /// whose chunk ends its prompt samples its first token in the same step.
    /// The step runs over the range of slots from the lowest to the highest taking part; the
    /// others in it have no token and no output.
    fn step(&mut self) {
        let dec: Vec<usize> =
            (0..self.slots.len()).filter(|&s| self.slots[s].as_ref().is_some_and(|a| a.decoding)).collect();
        let mut prefilling: Vec<usize> =
            (0..self.slots.len()).filter(|&s| self.slots[s].as_ref().is_some_and(|a| !a.decoding)).collect();
        prefilling.sort_by_key(|&s| self.slots[s].as_ref().map_or(u64::MAX, |a| a.order));
        let waiting: Vec<(usize, usize, usize)> = prefilling
            .iter()
            .map(|&s| {
                let a = self.slots[s].as_ref().expect("prefilling");
                (s, a.fed, a.job.prompt.len())
            })
            .collect();
        // (slot, its prompt piece, whether the piece ends the prompt, where it ends)
        let pieces: Vec<(usize, Vec<Token>, bool, usize)> = chunks(&waiting, self.chunk, self.batch)
            .into_iter()
            .map(|(s, from, end)| {
                let a = self.slots[s].as_ref().expect("prefilling");
                (s, a.job.prompt[from..end].to_vec(), end == a.job.prompt.len(), end)
            })
            .collect();
        let taking = dec.iter().copied().chain(pieces.iter().map(|p| p.0));
        let (Some(lo), Some(hi)) = (taking.clone().min(), taking.max()) else { return };
        let lasts: Vec<[Token; 1]> =
            (lo..=hi).map(|s| [self.slots[s].as_ref().filter(|a| a.decoding).map_or(0, |a| a.last)]).collect();
        let work: Vec<SlotWork<'_>> = (lo..=hi)
            .map(|s| match pieces.iter().find(|p| p.0 == s) {
                Some((_, p, true, _)) => SlotWork::Sample(p),
                Some((_, p, false, _)) => SlotWork::Feed(p),
                None if dec.contains(&s) => SlotWork::Sample(&lasts[s - lo]),
                None => SlotWork::Idle,
            })
            .collect();
        let t0 = Instant::now();
        match self.session.step_slots(lo, &work) {
            Ok(out) => {
                if dec.is_empty() {
                    self.count_step("prefill", lo, &out);
                } else {
                    let kind = if pieces.is_empty() { "decode" } else { "decode+prefill" };
                    self.count_decode(kind, lo, &out, dec.len());
                    if !pieces.is_empty() {
                        Metrics::add(&self.metrics.mixed_steps, 1);
                    }
                }
                if !pieces.is_empty() {
                    Metrics::add(&self.metrics.prefill_steps, 1);
                    let tokens: usize = pieces.iter().map(|p| p.1.len()).sum();
                    Metrics::add(&self.metrics.prompt_tokens, tokens as u64);
                }
                for (s, _, _, end) in &pieces {
                    if let Some(a) = self.slots[*s].as_mut() {
                        a.fed = *end;
                    }
                }
                for (i, r) in out.results.into_iter().enumerate() {
                    if let Some(r) = r {
                        self.took(lo + i, r);
                    }
                }
            }
            Err(e) => {
                tracing::warn!("step over slots {lo}..={hi} failed after {:?}: {e}", t0.elapsed());
                for s in dec.into_iter().chain(pieces.iter().map(|p| p.0)) {
                    self.fail(s, e.to_string());
                }
            }
        }
    }

    /// One chunk of the prompt of the earliest admitted slot that is still prefilling, in one step
    /// with the next chunks of the prefilling slots next to it (a contiguous run of at most
    /// [`MAX_PREFILL_SLOTS`]: a burst of requests is prefilled together, not one slot a step;
    /// while other slots decode, at most `chunk` prompt tokens in all, so that their next token
    /// waits for one chunk's time at most).
    fn prefill_chunk(&mut self) {
        let prefilling = |s: usize| self.slots[s].as_ref().is_some_and(|a| !a.decoding);
        let Some(first) = (0..self.slots.len())
            .filter(|&s| prefilling(s))
            .min_by_key(|&s| self.slots[s].as_ref().map_or(u64::MAX, |a| a.order))
        else {
            return;
        };
        let piece = |s: usize| {
            let a = self.slots[s].as_ref().expect("prefilling");
            let end = (a.fed + self.chunk).min(a.job.prompt.len());
            (a.job.prompt[a.fed..end].to_vec(), end == a.job.prompt.len(), end)
        };
        // While others decode, the step holds at most `chunk` prompt tokens in all (their next
        // token waits for it); while none does, as many slots as it may.
        let decoding = self.slots.iter().any(|a| a.as_ref().is_some_and(|a| a.decoding));
        let budget = if decoding { self.chunk } else { usize::MAX };
        let len = |s: usize| self.slots[s].as_ref().map_or(0, |a| (a.job.prompt.len() - a.fed).min(self.chunk));
        let (mut lo, mut hi) = (first, first);
        let mut tokens = len(first);
        while hi + 1 - lo < MAX_PREFILL_SLOTS {
            if lo > 0 && prefilling(lo - 1) && tokens + len(lo - 1) <= budget {
                lo -= 1;
                tokens += len(lo);
            } else if hi + 1 < self.slots.len() && prefilling(hi + 1) && tokens + len(hi + 1) <= budget {
                hi += 1;
                tokens += len(hi);
            } else {
                break;
            }
        }
        let mut pieces: Vec<(Vec<Token>, bool, usize)> = (lo..=hi).map(piece).collect();
        // Every slot is padded to the longest chunk: where that would run past a slot's context,
        // the first slot goes alone.
        let t = pieces.iter().map(|p| p.0.len()).max().unwrap_or(1);
        let n_ctx = self.session.options().n_ctx;
        if (lo..=hi).any(|s| self.session.positions()[s] + t > n_ctx) {
            (lo, hi) = (first, first);
            pieces = vec![piece(first)];
        }
        let work: Vec<SlotWork<'_>> =
            pieces.iter().map(|(p, last, _)| if *last { SlotWork::Sample(p) } else { SlotWork::Feed(p) }).collect();
        match self.session.step_slots(lo, &work) {
            Ok(out) => {
                self.count_step("prefill", lo, &out);
                Metrics::add(&self.metrics.prefill_steps, 1);
                let tokens: usize = pieces.iter().map(|p| p.0.len()).sum();
                Metrics::add(&self.metrics.prompt_tokens, tokens as u64);
                for (i, r) in out.results.into_iter().enumerate() {
                    if let Some(a) = self.slots[lo + i].as_mut() {
                        a.fed = pieces[i].2;
                    }
                    if let Some(r) = r {
                        self.took(lo + i, r);
                    }
                }
            }
            Err(e) => {
                for s in lo..=hi {
                    self.fail(s, e.to_string());
                }
            }
        }
    }

    /// One decode step of every decoding slot.
    fn decode_step(&mut self) {
        let dec: Vec<usize> =
            (0..self.slots.len()).filter(|&s| self.slots[s].as_ref().is_some_and(|a| a.decoding)).collect();
        let (Some(&lo), Some(&hi)) = (dec.first(), dec.last()) else { return };
        if self.drafter.is_some() {
            return self.decode_spec(&dec, lo, hi);
        }
        let lasts: Vec<[Token; 1]> =
            (lo..=hi).map(|s| [self.slots[s].as_ref().filter(|a| a.decoding).map_or(0, |a| a.last)]).collect();
        let work: Vec<SlotWork<'_>> = (lo..=hi)
            .zip(&lasts)
            .map(|(s, t)| if dec.contains(&s) { SlotWork::Sample(t) } else { SlotWork::Idle })
            .collect();
        let t0 = Instant::now();
        let res = self.session.step_slots(lo, &work);
        match res {
            Ok(out) => {
                self.count_decode("decode", lo, &out, dec.len());
                for (i, r) in out.results.into_iter().enumerate() {
                    if let Some(r) = r {
                        self.took(lo + i, r);
                    }
                }
            }
            Err(e) => {
                tracing::warn!("decode step over slots {lo}..={hi} failed after {:?}: {e}", t0.elapsed());
                for s in dec {
                    self.fail(s, e.to_string());
                }
            }
        }
    }

    /// One speculative decode step of every decoding slot: drafts, verification, and each
    /// slot's emitted tokens in order (a sequence that ends drops the rest).
    fn decode_spec(&mut self, dec: &[usize], lo: usize, hi: usize) {
        let n_ctx = self.session.options().n_ctx;
        let k = self.session.options().n_draft_max;
        // Every slot of the range, idle ones included, must hold the step's width of tokens:
        // the widest step that fits bounds the drafts.
        let room = (lo..=hi).map(|s| n_ctx - self.session.positions()[s]).min().unwrap_or(1);
        let width = |longest: usize| (longest + 1).next_power_of_two().min(k + 1);
        let max_draft = (0..=k).rev().find(|&d| width(d) <= room).unwrap_or(0);
        let drafter = self.drafter.as_ref().expect("speculating");
        let mut drafts: Vec<Vec<Token>> = vec![Vec::new(); hi - lo + 1];
        for &s in dec {
            let a = self.slots[s].as_ref().expect("decoding");
            if !a.drafts {
                continue;
            }
            // Never past max_tokens: the step emits the draft's accepted tokens and one more.
            let left = a.job.max_tokens.map_or(usize::MAX, |m| m.saturating_sub(a.generated + 1));
            let mut d = drafter.draft(&a.context);
            d.truncate(a.depth.limit().min(left).min(max_draft));
            drafts[s - lo] = d;
        }
        let lasts: Vec<[Token; 1]> =
            (lo..=hi).map(|s| [self.slots[s].as_ref().filter(|a| a.decoding).map_or(0, |a| a.last)]).collect();
        let work: Vec<SpecWork<'_>> = (lo..=hi)
            .map(|s| {
                if dec.contains(&s) {
                    SpecWork::Decode { tokens: &lasts[s - lo], draft: &drafts[s - lo] }
                } else {
                    SpecWork::Idle
                }
            })
            .collect();
        let res = self.session.step_slots_spec(lo, &work);
        match res {
            Ok(out) => {
                self.count_decode("decode", lo, &out, dec.len());
                let m = Arc::clone(&self.metrics);
                for (i, r) in out.results.into_iter().enumerate() {
                    let Some(r) = r else { continue };
                    let s = lo + i;
                    let v = match r {
                        Ok(v) => v,
                        Err(e) => {
                            self.fail(s, e.to_string());
                            continue;
                        }
                    };
                    let drafted = drafts[i].len();
                    Metrics::add(&m.drafted_tokens, drafted as u64);
                    Metrics::add(&m.accepted_tokens, v.accepted as u64);
                    if let Some(a) = self.slots[s].as_mut() {
                        a.depth.update(drafted, v.accepted);
                        a.drafted += drafted;
                        a.accepted += v.accepted;
                    }
                    for t in v.tokens {
                        if self.slots[s].is_none() {
                            break;
                        }
                        self.took(
                            s,
                            Ok(SlotSample {
                                token: t,
                                logprobs: None,
                                token_logprob: None,
                                token_rank: None,
                                candidates: None,
                            }),
                        );
                    }
                }
            }
            Err(e) => {
                tracing::warn!("speculative step over slots {lo}..={hi} failed: {e}");
                for &s in dec {
                    self.fail(s, e.to_string());
                }
            }
        }
    }

    /// A slot's sampled token: emitted, and the sequence ended where it must.
    fn took(&mut self, slot: usize, r: Result<SlotSample>) {
        let sample = match r {
            Ok(s) => s,
            Err(e) => return self.fail(slot, e.to_string()),
        };
        Metrics::add(&self.metrics.generated_tokens, 1);
        let t = sample.token;
        let n_ctx = self.session.options().n_ctx;
        let pos = self.session.positions()[slot];
        let must_end = self.session.chain(slot).must_end();
        let tok = &self.tok;
        let Some(a) = self.slots[slot].as_mut() else { return };
        let now = Instant::now();
        a.first.get_or_insert(now);
        a.last_at = Some(now);
        a.generated += 1;
        a.last = t;
        a.decoding = true;
        a.context.push(t);
        if !a.job.ignore_eos && tok.is_eog(t) {
            return self.finish(slot, Finish::Stop, String::new(), Vec::new());
        }
        a.unsent.push(t);
        let piece = match a.text.push(tok, t) {
            Ok(p) => p,
            Err(e) => return self.fail(slot, e.to_string()),
        };
        let lps = match (a.job.logprobs, &sample.logprobs, sample.token_logprob) {
            (Some(n), _, _) if a.job.post_sampling => match &sample.candidates {
                Some(c) => vec![post_sampling_entry(tok, t, c, n)],
                None if ends_greedy(&a.job.chain) => {
                    vec![post_sampling_entry(tok, t, &[sampling::TokenData { id: t, logit: 0.0, p: 1.0 }], n)]
                }
                None => return self.fail(slot, "the step read back no candidates for the token".into()),
            },
            (Some(n), Some(top), Some(lp)) => vec![logprob_entry(tok, t, lp, sample.token_rank, top, n)],
            (Some(_), _, _) => {
                return self.fail(slot, "the step read back no log-probabilities for the token".into());
            }
            _ => Vec::new(),
        };
        match a.stop.push(&piece) {
            Pushed::Stop(before) => return self.finish(slot, Finish::Stop, before, lps),
            Pushed::Text(text) => {
                if !text.is_empty() || !lps.is_empty() {
                    let tokens = std::mem::take(&mut a.unsent);
                    let _ = a.job.events.send(Event::Delta { index: a.job.index, slot, text, logprobs: lps, tokens });
                }
            }
        }
        match must_end {
            Ok(true) => return self.finish(slot, Finish::Stop, String::new(), Vec::new()),
            Ok(false) => {}
            Err(e) => return self.fail(slot, e.to_string()),
        }
        if a.job.max_tokens.is_some_and(|m| a.generated >= m) || pos >= n_ctx {
            self.finish(slot, Finish::Length, String::new(), Vec::new());
        }
    }

    fn finish(&mut self, slot: usize, finish: Finish, text: String, logprobs: Vec<TokenLogprob>) {
        if let Some(a) = self.slots[slot].as_mut() {
            let text = text + &a.stop.finish();
            let index = a.job.index;
            let tokens = std::mem::take(&mut a.unsent);
            if !text.is_empty() || !logprobs.is_empty() || !tokens.is_empty() {
                let _ = a.job.events.send(Event::Delta { index, slot, text, logprobs, tokens });
            }
            let first = a.first.unwrap_or_else(Instant::now);
            let timings = Timings {
                cached: a.reused,
                prompt_n: a.job.prompt.len() - a.reused,
                prompt: first - a.started,
                predicted_n: a.generated,
                predicted: a.last_at.map_or(Duration::ZERO, |l| (l - first).max(Duration::from_micros(1))),
                drafted: a.drafted,
                accepted: a.accepted,
            };
            let _ = a.job.events.send(Event::Done {
                index,
                slot,
                timings,
                tokens_cached: self.session.positions()[slot],
                finish,
                prompt_tokens: a.job.prompt.len(),
                completion_tokens: a.generated,
                stopping_word: a.stop.matched().map(str::to_string),
            });
            Metrics::add(&self.metrics.finished, 1);
        }
        self.free(slot);
    }
}

/// A token's text and bytes.
fn piece(tok: &Tokenizer, t: Token) -> (String, Vec<u8>) {
    let bytes = tok.grammar_vocab().piece(t).to_vec();
    (String::from_utf8_lossy(&bytes).into_owned(), bytes)
}

fn top_entry(tok: &Tokenizer, id: Token, value: f32) -> TopEntry {
    let (token, bytes) = piece(tok, id);
    TopEntry { id, token, bytes, value }
}

fn logprob_entry(
    tok: &Tokenizer,
    t: Token,
    logprob: f32,
    rank: Option<u32>,
    top: &[(Token, f32)],
    n: usize,
) -> TokenLogprob {
    let (token, bytes) = piece(tok, t);
    let top = top.iter().take(n).map(|&(id, lp)| top_entry(tok, id, lp)).collect();
    TokenLogprob { id: t, token, bytes, value: logprob, rank, top }
}

/// A token's entry of probabilities after the chain, as llama-server's `post_sampling_probs`:
/// its own among the survivors `cands` (by `p` descending; 1 where it is not among them), and
/// the first `n` survivors up to the first of probability 0.
fn post_sampling_entry(tok: &Tokenizer, t: Token, cands: &[sampling::TokenData], n: usize) -> TokenLogprob {
    let (token, bytes) = piece(tok, t);
    let value = cands.iter().find(|c| c.id == t).map_or(1.0, |c| c.p);
    let top = cands.iter().take(n).take_while(|c| c.p != 0.0).map(|c| top_entry(tok, c.id, c.p)).collect();
    TokenLogprob { id: t, token, bytes, value, rank: None, top }
}

/// Whether `chain` ends in greedy (its token's post-sampling probability is 1, its only
/// survivor's: llama.cpp keeps only the most likely token at temperature 0).
fn ends_greedy(chain: &Chain) -> bool {
    chain.stages().last().is_some_and(|s| s.name() == "greedy")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_takes_chunks_in_admission_order_within_the_batch() {
        // Slots 5, 2, 7 waiting (admitted in that order): prompts of 40, 10 and 100 tokens.
        let waiting = [(5, 0, 40), (2, 0, 10), (7, 30, 100)];
        // Chunks of 16, 64 in all: 16 + 10 + 16.
        assert_eq!(chunks(&waiting, 16, 64), [(5, 0, 16), (2, 0, 10), (7, 30, 46)]);
        // 20 in all: the first chunk whole, the second cut to what is left.
        assert_eq!(chunks(&waiting, 16, 20), [(5, 0, 16), (2, 0, 4)]);
        // A burst of 20 short prompts: 16 slots at most, whatever the batch.
        let burst: Vec<(usize, usize, usize)> = (0..20).map(|s| (s, 0, 3)).collect();
        let got = chunks(&burst, 64, 1000);
        assert_eq!(got.len(), MAX_PREFILL_SLOTS);
        assert!(got.iter().all(|&(_, from, to)| (from, to) == (0, 3)));
        assert!(chunks(&[], 16, 64).is_empty());
    }
}

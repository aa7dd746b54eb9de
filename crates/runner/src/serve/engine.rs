//! The batching loop: one thread owns the [`Session`] (`--parallel` slots over one KV cache) and
//! runs continuous batching. A sequence ([`Job`]) joins at the next step in a free slot (the one
//! whose cells still hold the longest prefix of its prompt from its last sequence, which it
//! does not evaluate again, else the lowest; its chain set in the session's `Sequences` then: a
//! fresh sampler state, fed every prompt token as llama-server's `init_sampler` does, so that
//! penalties and DRY count them), its prompt is
//! evaluated in chunks of at most `chunk` tokens, one chunk between two decode steps of the
//! others so that a long prompt does not stall them (the next chunks of the prefilling slots
//! next to it in the same step: a burst is prefilled together), and its first token is sampled
//! from the last chunk. Each decode step then samples every decoding slot together, over the range of
//! slots from the lowest to the highest in use (slots in between that are free or still
//! prefilling only pad). A sequence leaves when it ends (an end-of-generation token, a stop
//! string, its grammar complete, `max_tokens`, the context full), when its client goes away (its
//! event channel closed: the slot is freed before the next step), or on an error of its own row,
//! and its slot is reused.
//!
//! With n-gram speculation (`--spec ngram`), each decode step drafts for every decoding sequence
//! from its own context (prompt and output) as deep as its [`DraftDepth`] allows and the
//! context's room permits, and verifies on the backend ([`Session::step_slots_spec`]): greedy
//! requests get their plain tokens, sampling requests their target distribution. Sequences
//! whose chain cannot verify (mirostat) or that read back log-probabilities draft nothing.
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
    /// The token's text (lossy where it splits a character).
    pub token: String,
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Its log-probability under the raw logits (before any sampler, as llama-server reports
    /// `logprob` without `post_sampling_probs`), exact wherever it ranks.
    pub logprob: f32,
    /// The most likely tokens: text, bytes, log-probability.
    pub top: Vec<(String, Vec<u8>, f32)>,
}

/// What a job reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// More text (possibly empty while a stop string may be starting), and the log-probability
    /// entries of the tokens since the last event (where asked).
    Delta {
        /// The choice.
        index: usize,
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
    /// The most prompt tokens evaluated in one step.
    pub chunk: usize,
    /// The most sequences waiting for a slot.
    pub queue: usize,
    /// N-gram speculation: `(n, most draft tokens a step)`; the session's `n_draft_max` must be
    /// the latter.
    pub ngram: Option<(usize, usize)>,
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

/// Starts the loop on its own thread; the session is made there (an error making it is
/// returned here).
pub fn start(model: Arc<Model>, opts: EngineOptions, metrics: Arc<Metrics>) -> Result<Engine> {
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
            if let Err(e) = warm {
                let _ = ready_tx.send(Err(e));
                return;
            }
            let _ = ready_tx.send(Ok(()));
            Loop {
                session,
                tok,
                slots: (0..n).map(|_| None).collect(),
                metrics,
                order: 0,
                chunk: opts.chunk.max(1),
                drafter,
                cached: vec![Vec::new(); n],
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
}

struct Loop {
    session: Session,
    tok: Tokenizer,
    slots: Vec<Option<Active>>,
    metrics: Arc<Metrics>,
    order: u64,
    chunk: usize,
    drafter: Option<NgramDrafter>,
    /// Per free slot, the tokens whose keys and values its cells still hold (positions `0..`).
    cached: Vec<Vec<Token>>,
}

impl Loop {
    fn run(mut self, rx: &Receiver<Job>, stopping: &AtomicBool) {
        let mut open = true;
        loop {
            if stopping.load(Ordering::Relaxed) {
                self.cancel_all(rx, "the server is shutting down");
                return;
            }
            if open && self.slots.iter().all(Option::is_none) {
                match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(job) => self.admit(job),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => open = false,
                }
            }
            while open && self.slots.iter().any(Option::is_none) {
                match rx.try_recv() {
                    Ok(job) => self.admit(job),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => open = false,
                }
            }
            if !open && self.slots.iter().all(Option::is_none) {
                return;
            }
            self.drop_cancelled();
            self.prefill_chunk();
            self.decode_step();
        }
    }

    /// Puts `job` in a free slot: the one whose cells hold the longest prefix of its prompt
    /// (with `cache_prompt`; at least one prompt token is evaluated again, for the logits), else
    /// the lowest.
    fn admit(&mut self, job: Job) {
        self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
        if job.events.is_closed() {
            Metrics::add(&self.metrics.cancelled, 1);
            return;
        }
        let shared = |c: &[Token]| c.iter().zip(&job.prompt).take_while(|(a, b)| a == b).count();
        let free = (0..self.slots.len()).filter(|&s| self.slots[s].is_none());
        let (slot, reuse) = free
            .map(|s| (s, if job.cache_prompt { shared(&self.cached[s]) } else { 0 }))
            .max_by_key(|&(s, n)| (n, std::cmp::Reverse(s)))
            .expect("admit is called with a free slot");
        let reuse = reuse.min(job.prompt.len() - 1);
        self.cached[slot].clear();
        let set = self
            .session
            .truncate(slot, reuse)
            .and_then(|()| self.session.set_chain(slot, job.chain.clone(), job.logprobs.map_or(0, |_| LOGPROBS_READ)))
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
        });
        Metrics::add(&self.metrics.active_slots, 1);
    }

    /// Frees a slot, keeping the tokens its cells hold for a later prompt that shares them (as
    /// many as leave room for a padding step: a free slot in a step's range pads at its position).
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
    }

    fn drop_cancelled(&mut self) {
        for s in 0..self.slots.len() {
            if self.slots[s].as_ref().is_some_and(|a| a.job.events.is_closed()) {
                Metrics::add(&self.metrics.cancelled, 1);
                self.free(s);
            }
        }
    }

    fn count_step<T>(&self, out: &crate::session::SlotsOutcome<T>) {
        let m = &self.metrics;
        Metrics::add(&m.bytes_read, out.bytes_read as u64);
        Metrics::add(&m.graph_us, (out.prepare_time + out.graph_time).as_micros() as u64);
        Metrics::add(&m.sampling_us, out.sample_time.as_micros() as u64);
    }

    /// A decode step's counters: `sampled` sequences together.
    fn count_decode<T>(&self, out: &crate::session::SlotsOutcome<T>, sampled: usize) {
        self.count_step(out);
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
                self.count_step(&out);
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
                self.count_decode(&out, dec.len());
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
                self.count_decode(&out, dec.len());
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
                    }
                    for t in v.tokens {
                        if self.slots[s].is_none() {
                            break;
                        }
                        self.took(s, Ok(SlotSample { token: t, logprobs: None, token_logprob: None }));
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
            (Some(n), Some(top), Some(lp)) => vec![logprob_entry(tok, t, lp, top, n)],
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
                    let _ = a.job.events.send(Event::Delta { index: a.job.index, text, logprobs: lps, tokens });
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
                let _ = a.job.events.send(Event::Delta { index, text, logprobs, tokens });
            }
            let _ = a.job.events.send(Event::Done {
                index,
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

fn logprob_entry(tok: &Tokenizer, t: Token, logprob: f32, top: &[(Token, f32)], n: usize) -> TokenLogprob {
    let (token, bytes) = piece(tok, t);
    TokenLogprob {
        token,
        bytes,
        logprob,
        top: top
            .iter()
            .take(n)
            .map(|&(id, lp)| {
                let (s, b) = piece(tok, id);
                (s, b, lp)
            })
            .collect(),
    }
}

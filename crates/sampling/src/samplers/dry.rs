//! `dry`: "don't repeat yourself" (llama.cpp's `llama_sampler_init_dry`, after koboldcpp).
//! Penalises a token that would extend a sequence already repeated in the recent history: if the
//! last `L >= allowed_length` tokens also occur earlier followed by token `x`, `x`'s logit drops by
//! `multiplier * base^(L - allowed_length)` (exponent clamped so the power stays finite).
//! Sequence breakers cut the repeat search: a repeat never extends across a breaker, and a
//! single-token breaker is never penalised. They are given here as token sequences (llama.cpp's
//! `llama_sampler_init_dry_testing`); strings (llama.cpp's `llama_sampler_init_dry`) become token
//! sequences in [`super::dry_breakers`], whose `(head, tail)` entries are passed here as
//! `[head, tail...]`, the same map.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_dry`,
//! `llama_sampler_init_dry_testing`, `llama_sampler_dry_accept` and `llama_sampler_dry_apply`):
//! * `multiplier = 0`, `base < 1` (`-inf` included) or `last_n = 0`: disabled (`init_dry` returns
//!   the empty sampler);
//! * `last_n = -1`: the context size `n_ctx`; `last_n < -1` is an error: with the sampler
//!   enabled, llama.cpp sizes its ring buffer `max(last_n, 0) = 0` and throws ("ring buffer:
//!   capacity is zero") on the first accepted token (and its common layer rejects it);
//! * `n_ctx = 0` with `last_n = -1` (enabled): an error for the same reason; `n_ctx` must fit
//!   llama.cpp's `int32_t`. `n_ctx = 0` with `last_n > 0` never penalises (the window is
//!   `min(history, last_n, n_ctx)`);
//! * `multiplier < 0`: plain arithmetic, the logit *rises* by `|multiplier| base^(L - allowed)`,
//!   accepted; `multiplier = +inf`: every token extending a repeat gets `-inf`, a ban, accepted;
//!   `multiplier = -inf` (the logit would become `+inf`) and a negative multiplier with
//!   `base = +inf` (`+inf` for repeats longer than `allowed_length`) are errors;
//! * `base = +inf`: llama.cpp's exponent clamp is 0 (`88.72 / ln inf`), so the penalty is
//!   `multiplier` at `L = allowed_length` and `multiplier * inf` (a ban) beyond it;
//! * `allowed_length < 0`: every token that followed another in the window is penalised (every
//!   repeat length, 0 included, is `>= allowed_length`) by `multiplier base^(L - allowed_length)`;
//!   an `allowed_length` for which `L - allowed_length` can overflow llama.cpp's `int` is an
//!   error (undefined there);
//! * the penalty is computed as llama.cpp does: `multiplier * std::pow(base, exponent)` in double
//!   (`std::pow(float, int)` promotes), rounded to `f32`, then subtracted in `f32`;
//! * an empty breaker sequence is skipped (llama.cpp skips empty breakers with a warning);
//! * NaN `multiplier` or `base`: error (llama.cpp's enable test `base >= 1` or the penalty would
//!   decide by accident).

use crate::backend::prelude::*;
use crate::candidates::Candidates;
use crate::error::{Result, SamplingError, not_nan};
use crate::sampler::{Sampler, Token};
use std::collections::{HashMap, VecDeque};

/// DRY repetition penalty.
#[derive(Debug, Clone)]
pub struct Dry {
    multiplier: f32,
    base: f32,
    allowed_length: i64,
    last_n: i32,
    n_ctx: usize,
    breakers: HashMap<Token, Vec<Vec<Token>>>,
    last_tokens: VecDeque<Token>,
}

const NAME: &str = "dry";

fn invalid(param: &'static str, value: String, reason: &'static str) -> SamplingError {
    crate::error::invalid(NAME, param, value, reason)
}

impl Dry {
    /// DRY with the given parameters; `n_ctx` is the window when `last_n = -1`; `breakers` are
    /// token sequences (empty ones skipped).
    pub fn new(
        multiplier: f32,
        base: f32,
        allowed_length: i32,
        last_n: i32,
        n_ctx: usize,
        breakers: Vec<Vec<Token>>,
    ) -> Result<Self> {
        not_nan(NAME, "multiplier", multiplier)?;
        not_nan(NAME, "base", base)?;
        if last_n < -1 {
            return Err(invalid(
                "last_n",
                last_n.to_string(),
                "must be -1 (n_ctx) or >= 0: llama.cpp sizes its history max(last_n, 0) = 0 and throws on the first accepted token",
            ));
        }
        if i32::try_from(n_ctx).is_err() {
            return Err(invalid("n_ctx", n_ctx.to_string(), "must fit llama.cpp's int32_t"));
        }
        let mut map: HashMap<Token, Vec<Vec<Token>>> = HashMap::new();
        for b in breakers {
            if let Some((&head, tail)) = b.split_first() {
                map.entry(head).or_default().push(tail.to_vec());
            }
        }
        let dry = Self {
            multiplier,
            base,
            allowed_length: i64::from(allowed_length),
            last_n,
            n_ctx,
            breakers: map,
            last_tokens: VecDeque::new(),
        };
        if !dry.enabled() {
            // llama.cpp's empty sampler: nothing below is ever computed.
            return Ok(dry);
        }
        if multiplier == f32::NEG_INFINITY {
            return Err(invalid(
                "multiplier",
                multiplier.to_string(),
                "must not be -inf: a penalised logit would become +inf",
            ));
        }
        if multiplier < 0.0 && base == f32::INFINITY {
            return Err(invalid(
                "multiplier",
                format!("{multiplier} (with base = inf)"),
                "a negative multiplier with base = inf makes the logit of a token extending a long repeat +inf",
            ));
        }
        if last_n == -1 && n_ctx == 0 {
            return Err(invalid(
                "n_ctx",
                n_ctx.to_string(),
                "must be > 0 with last_n = -1: llama.cpp sizes its history n_ctx = 0 and throws on the first accepted token",
            ));
        }
        // The longest repeat is at most window - 1; llama.cpp computes `repeat_len - allowed_length` in int.
        let longest = dry.window().saturating_sub(1) as i64;
        if longest - dry.allowed_length > i64::from(i32::MAX) {
            return Err(invalid(
                "allowed_length",
                allowed_length.to_string(),
                "repeat length - allowed_length would overflow llama.cpp's int (undefined)",
            ));
        }
        Ok(dry)
    }

    fn enabled(&self) -> bool {
        self.multiplier != 0.0 && self.base >= 1.0 && self.last_n != 0
    }

    /// The history window: `last_n`, or `n_ctx` for -1, at most `n_ctx` (llama.cpp's
    /// `last_n_repeat` bound).
    fn window(&self) -> usize {
        let w = if self.last_n == -1 { self.n_ctx } else { self.last_n.max(0) as usize };
        w.min(self.n_ctx)
    }

    /// `i`-th token from the end of the history (0 = last).
    fn rat(&self, i: usize) -> Token {
        self.last_tokens[self.last_tokens.len() - 1 - i]
    }

    /// Penalty per token (the max repeat length it would extend, as a logit offset).
    fn penalties(&self) -> HashMap<Token, f32> {
        let mut out = HashMap::new();
        let n = self.last_tokens.len().min(self.window()).min(self.n_ctx);
        let allowed = self.allowed_length;
        // (n = 0 with a negative allowed_length: llama.cpp's loops below are all empty.)
        if n as i64 <= allowed || n == 0 {
            return out;
        }
        // Step 1: the most recent sequence breaker limits how far back a repeat may reach.
        let mut rep_limit = n;
        for i in 0..n {
            let Some(tails) = self.breakers.get(&self.rat(i)) else { continue };
            let mut longest: Option<usize> = None;
            for tail in tails {
                let len = tail.len();
                if longest.is_none_or(|l| len > l)
                    && len <= i
                    && tail.iter().enumerate().all(|(o, &t)| t == self.rat(i - o - 1))
                {
                    longest = Some(len);
                }
            }
            if let Some(l) = longest {
                rep_limit = i - l;
                break;
            }
        }
        if (rep_limit as i64) < allowed {
            return out;
        }
        // Step 2: reverse Z-algorithm: repeat[last - k] = length of the longest suffix of the
        // history that also ends k tokens before the end.
        let last = n - 1;
        let mut repeat = vec![0usize; n];
        let (mut lt, mut rt) = (0usize, 0usize);
        for k in 1..n {
            if k > rt {
                let mut m = 0;
                while m + k < n && self.rat(m) == self.rat(m + k) {
                    m += 1;
                }
                repeat[last - k] = m.min(rep_limit);
                if m > 0 {
                    lt = k;
                    rt = k + m - 1;
                }
            } else {
                let p = k - lt;
                let right = rt - k + 1;
                if repeat[last - p] < right {
                    repeat[last - k] = repeat[last - p].min(rep_limit);
                } else {
                    let mut i = rt + 1;
                    while i < n && self.rat(i) == self.rat(i - k) {
                        i += 1;
                    }
                    repeat[last - k] = (i - k).min(rep_limit);
                    lt = k;
                    rt = i - 1;
                }
            }
        }
        // Step 3: the token following each repeat would extend it.
        let mut max_repeat: HashMap<Token, usize> = HashMap::new();
        for (i, &len) in repeat.iter().enumerate().take(n - 1) {
            if len as i64 >= allowed {
                let tok = self.rat(n - 2 - i);
                let e = max_repeat.entry(tok).or_insert(len);
                *e = (*e).max(len);
            }
        }
        // Step 4: penalties, skipping single-token breakers.
        let max_exponent = if self.base > 1.000_001 { (88.722_84 / self.base.ln()) as i64 } else { 0 };
        for (tok, len) in max_repeat {
            if self.breakers.get(&tok).is_some_and(|tails| tails.iter().any(|t| t.is_empty())) {
                continue;
            }
            let mut exp = len as i64 - allowed;
            if max_exponent > 0 && exp > max_exponent {
                exp = max_exponent;
            }
            // llama.cpp: `float penalty = multiplier * std::pow(base, exp)`, the power and the
            // product in double (`std::pow(float, int)` promotes), rounded to f32.
            let penalty = (f64::from(self.multiplier) * f64::from(self.base).powf(exp as f64)) as f32;
            out.insert(tok, penalty);
        }
        out
    }
}

impl Sampler for Dry {
    fn name(&self) -> &'static str {
        NAME
    }

    fn accept(&mut self, token: Token) {
        if !self.enabled() {
            return;
        }
        self.last_tokens.push_back(token);
        if self.last_tokens.len() > self.window() {
            self.last_tokens.pop_front();
        }
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if !self.enabled() {
            return Ok(());
        }
        let pen = self.penalties();
        if pen.is_empty() {
            return Ok(());
        }
        if let Some(logits) = cur.vocab_logits_mut() {
            for (&t, &p) in &pen {
                if let Some(l) = logits.get_mut(t as usize) {
                    *l -= p;
                }
            }
            return Ok(());
        }
        for e in cur.list_mut(NAME)?.iter_mut() {
            if let Some(p) = pen.get(&e.id) {
                e.logit -= p;
            }
        }
        cur.set_sorted(false);
        Ok(())
    }

    fn reset(&mut self) {
        self.last_tokens.clear();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

impl Dry {
    /// The most distinct tokens a step can penalise: each follows a position of the window (at
    /// most `window - 1`), and all are in the vocabulary.
    fn capacity(&self, n_vocab: usize) -> usize {
        self.window().saturating_sub(1).clamp(1, n_vocab.max(1))
    }

    /// This step's penalties as `m` entries `(token, -penalty)` by token, padded with `(-1, 0)`
    /// (which adds nothing); tokens outside the vocabulary are dropped, as the CPU path ignores them.
    fn entries(&self, m: usize, n_vocab: usize) -> Vec<(i32, f32)> {
        let mut e: Vec<(i32, f32)> = self
            .penalties()
            .into_iter()
            .filter(|&(t, _)| (t as usize) < n_vocab)
            .map(|(t, p)| (t as i32, -p))
            .collect();
        e.sort_unstable_by_key(|x| x.0);
        e.resize(m.max(e.len()), (-1, 0.0));
        e.truncate(m);
        e
    }
}

const VOCAB: u32 = 0;
const LIST: u32 = 1;

/// DRY's penalties depend only on the history, never on the logits: the host computes this
/// step's sparse `(token, penalty)` list exactly as the CPU sampler does (the same function), and
/// the backend adds `-penalty` at the tokens: on the vocabulary row (or after a cut on it) with
/// `scatter_add`; on a candidate list (after a top-k) through a vocabulary row of the penalties
/// gathered at the list's ids, which leaves the list unsorted as the CPU chain's. `x + (-p)` is
/// `x - p` exactly. Uploaded per step: `8 m` bytes a row, `m` the capacity (the window, at most
/// the vocabulary), never the logits.
impl BackendStage for Dry {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        if !self.enabled() {
            return Some((StageKey::nothing(), form));
        }
        let m = self.capacity(n_vocab);
        // An infinite penalty bans: after a cut that record keeps `-inf` entries the CPU chain's
        // list holds (as xtc's), so a prefix never ends there for a CPU suffix.
        let bans = self.multiplier > 0.0 && (self.multiplier == f32::INFINITY || self.base == f32::INFINITY);
        Some(match form {
            Form::List(_) => (StageKey::new::<Self>(NAME, LIST, m), form),
            Form::Masked if bans => (StageKey::new::<Self>(NAME, VOCAB, m).keeping_inf(), form),
            _ => (StageKey::new::<Self>(NAME, VOCAB, m), form),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        let (m, n, stage) = (key.size(), cx.n(), cx.stage());
        let part = |ids: bool| {
            Field::new(move |row, out| {
                let s = row.stage::<Self>(stage)?;
                for (t, p) in s.entries(m, row.n_vocab()) {
                    if ids { out.i32(t) } else { out.f32(p) }
                }
                Ok(())
            })
        };
        let ids = cx.input(&format!("s{stage}.dry_ids"), DType::I32, &[m, n], vec![part(true)])?;
        let vals = cx.input(&format!("s{stage}.dry"), DType::F32, &[m, n], vec![part(false)])?;
        cx.add_sparse(rec, ids, vals)
    }
}

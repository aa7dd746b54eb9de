//! `dry`: "don't repeat yourself" (llama.cpp's `llama_sampler_init_dry`, after koboldcpp).
//! Penalises a token that would extend a sequence already repeated in the recent history: if the
//! last `L >= allowed_length` tokens also occur earlier followed by token `x`, `x`'s logit drops by
//! `multiplier * base^(L - allowed_length)` (exponent clamped so the power stays finite).
//! Sequence breakers (given here as token sequences, since this crate has no tokenizer) cut the
//! repeat search: a repeat never extends across a breaker, and a single-token breaker is never
//! penalised.
//!
//! Edge values (llama.cpp): `multiplier = 0`, `base < 1` or `last_n = 0` disables it; `last_n = -1`
//! means the context size `n_ctx`. Errors: negative or non-finite `multiplier`, NaN `base`,
//! `allowed_length < 0`, `last_n < -1`, an empty breaker sequence.

use crate::candidates::Candidates;
use crate::error::{Result, SamplingError, finite, not_nan};
use crate::sampler::{Sampler, Token};
use std::collections::{HashMap, VecDeque};

/// DRY repetition penalty.
#[derive(Debug, Clone)]
pub struct Dry {
    multiplier: f32,
    base: f32,
    allowed_length: usize,
    last_n: i32,
    n_ctx: usize,
    breakers: HashMap<Token, Vec<Vec<Token>>>,
    last_tokens: VecDeque<Token>,
}

const NAME: &str = "dry";

fn invalid(param: &'static str, value: String, reason: &'static str) -> SamplingError {
    SamplingError::InvalidParam { stage: NAME, param, value, reason }
}

impl Dry {
    /// DRY with the given parameters; `n_ctx` is the window when `last_n = -1`; `breakers` are
    /// token sequences.
    pub fn new(
        multiplier: f32,
        base: f32,
        allowed_length: i32,
        last_n: i32,
        n_ctx: usize,
        breakers: Vec<Vec<Token>>,
    ) -> Result<Self> {
        finite(NAME, "multiplier", multiplier)?;
        if multiplier < 0.0 {
            return Err(invalid("multiplier", multiplier.to_string(), "must be >= 0"));
        }
        not_nan(NAME, "base", base)?;
        if allowed_length < 0 {
            return Err(invalid("allowed_length", allowed_length.to_string(), "must be >= 0"));
        }
        if last_n < -1 {
            return Err(invalid("last_n", last_n.to_string(), "must be -1 (n_ctx) or >= 0"));
        }
        let mut map: HashMap<Token, Vec<Vec<Token>>> = HashMap::new();
        for b in breakers {
            let Some((&head, tail)) = b.split_first() else {
                return Err(invalid(
                    "breakers",
                    "(empty sequence)".into(),
                    "a sequence breaker needs at least one token",
                ));
            };
            map.entry(head).or_default().push(tail.to_vec());
        }
        Ok(Self {
            multiplier,
            base,
            allowed_length: allowed_length as usize,
            last_n,
            n_ctx,
            breakers: map,
            last_tokens: VecDeque::new(),
        })
    }

    fn enabled(&self) -> bool {
        self.multiplier != 0.0 && self.base >= 1.0 && self.last_n != 0
    }

    fn window(&self) -> usize {
        if self.last_n == -1 { self.n_ctx } else { self.last_n.max(0) as usize }
    }

    /// `i`-th token from the end of the history (0 = last).
    fn rat(&self, i: usize) -> Token {
        self.last_tokens[self.last_tokens.len() - 1 - i]
    }

    /// Penalty per token (the max repeat length it would extend, as a logit offset).
    fn penalties(&self) -> HashMap<Token, f32> {
        let mut out = HashMap::new();
        let n = self.last_tokens.len().min(self.window()).min(self.n_ctx);
        if n <= self.allowed_length {
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
        if rep_limit < self.allowed_length {
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
            if len >= self.allowed_length {
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
            let mut exp = len as i64 - self.allowed_length as i64;
            if max_exponent > 0 && exp > max_exponent {
                exp = max_exponent;
            }
            out.insert(tok, self.multiplier * self.base.powi(exp as i32));
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
}

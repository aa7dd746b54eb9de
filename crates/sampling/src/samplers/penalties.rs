//! `penalties`: repetition, frequency and presence penalties over the last `last_n` accepted
//! tokens (llama.cpp's `llama_sampler_init_penalties`). For a token seen `c > 0` times in the
//! window: a logit `<= 0` is multiplied by `repeat`, a positive one divided by it, then
//! `c * freq + present` is subtracted.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_penalties`,
//! `llama_sampler_penalties_apply`; `common/common.cpp` and `common/arg.cpp` for `last_n`):
//! * `last_n = 0`, or `repeat = 1, freq = 0, present = 0`: disabled (`init_penalties` returns the
//!   empty sampler);
//! * `last_n = -1`: the whole history since reset. This is the common layer's meaning (it
//!   replaces -1 by the context size before calling `init_penalties`, which itself would clamp
//!   every negative `last_n` to 0, disabled); `last_n < -1` is an error, as in the common layer's
//!   `--repeat-last-n` ("invalid repeat-last-n") and the server;
//! * `repeat < 0`: plain arithmetic (a seen token's logit changes sign), accepted; `repeat = +inf`:
//!   a seen token's negative logit becomes `-inf` (banned) and a positive one 0, accepted (an
//!   exact 0 logit becomes `0 * inf = NaN`, which the next stage reports, as any NaN or `+inf`
//!   logit made inside a chain, e.g. a masked token times a negative `repeat`);
//!   `repeat = 0` is an error (every seen positive logit divided by 0 becomes `+inf`), as is
//!   `repeat = -inf` (every seen negative logit becomes `+inf`);
//! * `freq = +inf` or `present = +inf`: every seen token's logit becomes `-inf`, a ban, accepted;
//!   `-inf` would make it `+inf` and is an error;
//! * NaN `repeat`, `freq` or `present`: error.

use crate::candidates::Candidates;
use crate::error::{Result, invalid, not_nan};
use crate::sampler::{Sampler, Token};
use std::collections::{HashMap, VecDeque};

/// Repetition / frequency / presence penalties.
#[derive(Debug, Clone)]
pub struct Penalties {
    last_n: Option<usize>,
    repeat: f32,
    freq: f32,
    present: f32,
    prev: VecDeque<Token>,
    counts: HashMap<Token, u32>,
}

const NAME: &str = "penalties";

impl Penalties {
    /// Penalties over the last `last_n` tokens (-1: all, 0: disabled).
    pub fn new(last_n: i32, repeat: f32, freq: f32, present: f32) -> Result<Self> {
        if last_n < -1 {
            return Err(invalid(
                NAME,
                "last_n",
                last_n,
                "must be -1 (all) or >= 0 (llama.cpp's common layer rejects < -1)",
            ));
        }
        not_nan(NAME, "repeat", repeat)?;
        if repeat == 0.0 {
            return Err(invalid(NAME, "repeat", repeat, "must not be 0: a positive logit divided by 0 becomes +inf"));
        }
        if repeat == f32::NEG_INFINITY {
            return Err(invalid(NAME, "repeat", repeat, "must not be -inf: a negative logit times -inf becomes +inf"));
        }
        for (param, v) in [("freq", freq), ("present", present)] {
            not_nan(NAME, param, v)?;
            if v == f32::NEG_INFINITY {
                return Err(invalid(NAME, param, v, "must not be -inf: a seen token's logit would become +inf"));
            }
        }
        let last_n = if last_n == -1 { None } else { Some(last_n as usize) };
        Ok(Self { last_n, repeat, freq, present, prev: VecDeque::new(), counts: HashMap::new() })
    }

    fn penalise(&self, logit: &mut f32, c: u32) {
        if *logit <= 0.0 {
            *logit *= self.repeat;
        } else {
            *logit /= self.repeat;
        }
        *logit -= c as f32 * self.freq + if c > 0 { self.present } else { 0.0 };
    }
}

impl Sampler for Penalties {
    fn name(&self) -> &'static str {
        NAME
    }

    fn accept(&mut self, token: Token) {
        if self.last_n == Some(0) {
            return;
        }
        *self.counts.entry(token).or_insert(0) += 1;
        if let Some(n) = self.last_n
            && self.prev.len() >= n
            && let Some(old) = self.prev.pop_front()
            && let Some(c) = self.counts.get_mut(&old)
        {
            *c -= 1;
            if *c == 0 {
                self.counts.remove(&old);
            }
        }
        self.prev.push_back(token);
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.last_n == Some(0)
            || (self.repeat == 1.0 && self.freq == 0.0 && self.present == 0.0)
            || self.counts.is_empty()
        {
            return Ok(());
        }
        if let Some(logits) = cur.vocab_logits_mut() {
            for (&tok, &c) in &self.counts {
                if let Some(l) = logits.get_mut(tok as usize) {
                    self.penalise(l, c);
                }
            }
            return Ok(());
        }
        let list = cur.list_mut(NAME)?;
        for t in list.iter_mut() {
            if let Some(&c) = self.counts.get(&t.id) {
                self.penalise(&mut t.logit, c);
            }
        }
        cur.set_sorted(false);
        Ok(())
    }

    fn reset(&mut self) {
        self.prev.clear();
        self.counts.clear();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    /// Disabled: nothing to append. Otherwise the window (`None` for the whole history), the
    /// parameters and the seen tokens' counts: a window's are each step's inputs, the whole
    /// history's a device state tensor that the tail keeps current.
    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        if self.last_n == Some(0) || (self.repeat == 1.0 && self.freq == 0.0 && self.present == 0.0) {
            return Some(crate::backend::BackendStage::Disabled(NAME));
        }
        let mut counts: Vec<(Token, u32)> = self.counts.iter().map(|(&t, &c)| (t, c)).collect();
        counts.sort_unstable();
        Some(crate::backend::BackendStage::Penalties {
            window: self.last_n,
            repeat: self.repeat,
            freq: self.freq,
            present: self.present,
            counts,
        })
    }
}

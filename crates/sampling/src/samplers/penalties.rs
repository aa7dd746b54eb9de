//! `penalties`: repetition, frequency and presence penalties over the last `last_n` accepted
//! tokens (llama.cpp's `llama_sampler_init_penalties`). For a token seen `c > 0` times in the
//! window: a logit `<= 0` is multiplied by `repeat`, a positive one divided by it, then
//! `c * freq + present` is subtracted.
//!
//! Edge values: `last_n = 0`, or `repeat = 1, freq = 0, present = 0`, disables it (llama.cpp);
//! `last_n = -1` means the whole history since reset (llama.cpp's common layer: the context);
//! `last_n < -1`, `repeat <= 0`, non-finite values: errors.

use crate::candidates::Candidates;
use crate::error::{Result, SamplingError, finite};
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
    /// Penalties over the last `last_n` tokens (-1: all).
    pub fn new(last_n: i32, repeat: f32, freq: f32, present: f32) -> Result<Self> {
        if last_n < -1 {
            return Err(SamplingError::InvalidParam {
                stage: NAME,
                param: "last_n",
                value: last_n.to_string(),
                reason: "must be -1 (all) or >= 0",
            });
        }
        finite(NAME, "repeat", repeat)?;
        if repeat <= 0.0 {
            return Err(SamplingError::InvalidParam {
                stage: NAME,
                param: "repeat",
                value: repeat.to_string(),
                reason: "must be > 0",
            });
        }
        finite(NAME, "freq", freq)?;
        finite(NAME, "present", present)?;
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
}

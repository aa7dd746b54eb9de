//! `temp` and `temp_ext`: temperature scaling (llama.cpp's `llama_sampler_init_temp` and
//! `llama_sampler_init_temp_ext`, "dynamic temperature").
//!
//! `temp(t)` divides every logit by `t`. llama.cpp defines `t <= 0` as "keep only the token with
//! the highest logit" (`llama_sampler_temp_impl`: the first maximum keeps its logit, the rest
//! become `-inf`); here the others are removed rather than set to `-inf`, which no later stage can
//! tell apart. NaN is an error. On the vocabulary view the division is deferred (a pending divisor
//! that the next kernel applies on the fly), so `temp` itself costs nothing.
//!
//! `temp_ext(t, delta, exponent)`: with `delta > 0` the temperature is
//! `min_t + (max_t - min_t) * (H / ln n)^exponent` with `min_t = max(0, t - delta)`,
//! `max_t = t + delta` and `H` the entropy of the softmax over the `n` candidates (zero
//! probabilities contribute nothing); then the probabilities are recomputed. With `delta <= 0` it
//! is `temp(t)`. One candidate or none: unchanged.

use crate::candidates::{Candidates, TokenData, check_list, check_scan};
use crate::error::{Result, finite, not_nan};
use crate::kernels;
use crate::sampler::Sampler;

/// Applies temperature `t` as llama.cpp's `llama_sampler_temp_impl` does.
pub(crate) fn temp_impl(stage: &'static str, cur: &mut Candidates<'_>, t: f32) -> Result<()> {
    if t <= 0.0 {
        if let Some((row, div)) = cur.vocab_row() {
            let (i, m, bad) = kernels::argmax(row);
            check_scan(stage, row, bad, m)?;
            let logit = if div == 1.0 { m } else { m / div };
            cur.set_list(vec![TokenData { id: i as u32, logit, p: 0.0 }], true);
            return Ok(());
        }
        let list = cur.list_mut(stage)?;
        check_list(stage, list)?;
        let mut best = 0;
        for (i, t) in list.iter().enumerate().skip(1) {
            if t.logit > list[best].logit {
                best = i;
            }
        }
        let keep = list[best];
        cur.set_list(vec![keep], true);
        return Ok(());
    }
    if cur.vocab_row().is_some() {
        cur.set_div(t);
        return Ok(());
    }
    for e in cur.list_mut(stage)?.iter_mut() {
        e.logit /= t;
    }
    Ok(())
}

/// Temperature.
#[derive(Debug, Clone)]
pub struct Temp {
    t: f32,
}

impl Temp {
    /// Temperature `t` (`t <= 0`: keep only the max, as in llama.cpp; NaN: error).
    pub fn new(t: f32) -> Result<Self> {
        not_nan("temp", "t", t)?;
        Ok(Self { t })
    }
}

impl Sampler for Temp {
    fn name(&self) -> &'static str {
        "temp"
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        temp_impl("temp", cur, self.t)
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

/// Dynamic temperature.
#[derive(Debug, Clone)]
pub struct TempExt {
    t: f32,
    delta: f32,
    exponent: f32,
}

const EXT: &str = "temp_ext";

impl TempExt {
    /// Dynamic temperature around `t` with range `delta` and `exponent`.
    pub fn new(t: f32, delta: f32, exponent: f32) -> Result<Self> {
        not_nan(EXT, "t", t)?;
        finite(EXT, "delta", delta)?;
        finite(EXT, "exponent", exponent)?;
        Ok(Self { t, delta, exponent })
    }
}

impl Sampler for TempExt {
    fn name(&self) -> &'static str {
        EXT
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.delta <= 0.0 {
            return temp_impl(EXT, cur, self.t);
        }
        let min_t = (self.t - self.delta).max(0.0);
        let max_t = self.t + self.delta;
        if cur.len() <= 1 {
            return Ok(());
        }
        let max_entropy = (cur.len() as f32).ln();
        cur.softmax(EXT, true)?;
        let list = cur.list(EXT)?;
        let mut entropy = 0.0f32;
        for t in list {
            if t.p > 0.0 {
                entropy -= t.p * t.p.ln();
            }
        }
        let norm = entropy / max_entropy;
        let dyn_t = min_t + (max_t - min_t) * norm.powf(self.exponent);
        temp_impl(EXT, cur, dyn_t)?;
        let list = cur.list_mut(EXT)?;
        let max = f64::from(list[0].logit);
        let mut sum = 0.0f64;
        for t in list.iter_mut() {
            let p = (f64::from(t.logit) - max).exp();
            t.p = p as f32;
            sum += p;
        }
        for t in list.iter_mut() {
            t.p = (f64::from(t.p) / sum) as f32;
        }
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }
}

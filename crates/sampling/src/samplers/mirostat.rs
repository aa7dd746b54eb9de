//! `mirostat` (v1) and `mirostat_v2`: target-surprise samplers (llama.cpp's
//! `llama_sampler_init_mirostat` and `llama_sampler_init_mirostat_v2`). Both select a token and keep
//! `mu` (initially `2 * tau`) as state, updated after each draw by `mu -= eta * (surprise - tau)`
//! with `surprise = -log2 p(selected)`; `reset` restores `mu = 2 * tau` and step 0. The draw comes
//! from the Philox `MIROSTAT` stream.
//!
//! v1 estimates the Zipf exponent `s` from the `m` most probable tokens, computes
//! `k = (eps * 2^mu / (1 - n^-eps))^(1/s)` with `eps = s - 1` and `n` the vocabulary size, keeps
//! the top `max(k, 1)` (a NaN `k`, e.g. with `m = 1`, keeps 1; an infinite one keeps all) and
//! draws. v2 keeps the sorted prefix of tokens with surprise at most `mu` (at least one) and draws.
//! Parameters: `tau`, `eta` finite, `m >= 1`, else an error.

use crate::candidates::{Candidates, draw_index};
use crate::error::{Result, SamplingError, finite};
use crate::sampler::{Rng, Sampler, rng_methods};
use graph::philox::stream;

/// Mirostat 1.0.
#[derive(Debug, Clone)]
pub struct Mirostat {
    tau: f32,
    eta: f32,
    m: i32,
    mu: f32,
    rng: Rng,
}

const V1: &str = "mirostat";
const V2: &str = "mirostat_v2";

impl Mirostat {
    /// Mirostat with target surprise `tau`, learning rate `eta`, `m` tokens for the estimate, `seed`.
    pub fn new(seed: u64, tau: f32, eta: f32, m: i32) -> Result<Self> {
        finite(V1, "tau", tau)?;
        finite(V1, "eta", eta)?;
        if m < 1 {
            return Err(SamplingError::InvalidParam {
                stage: V1,
                param: "m",
                value: m.to_string(),
                reason: "must be at least 1",
            });
        }
        Ok(Self { tau, eta, m, mu: 2.0 * tau, rng: Rng::new(seed, stream::MIROSTAT) })
    }

    /// Current `mu`.
    pub fn mu(&self) -> f32 {
        self.mu
    }
}

impl Sampler for Mirostat {
    fn name(&self) -> &'static str {
        V1
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let u = self.rng.next_uniform();
        let n_vocab = cur.n_vocab() as f32;
        cur.softmax(V1, true)?;
        let list = cur.list_mut(V1)?;
        let mut sum_ti_bi = 0.0f32;
        let mut sum_ti_sq = 0.0f32;
        let lim = ((self.m - 1) as usize).min(list.len() - 1);
        for i in 0..lim {
            let t_i = ((i + 2) as f32 / (i + 1) as f32).ln();
            let b_i = (list[i].p / list[i + 1].p).ln();
            sum_ti_bi += t_i * b_i;
            sum_ti_sq += t_i * t_i;
        }
        let s_hat = sum_ti_bi / sum_ti_sq;
        let eps = s_hat - 1.0;
        let k = ((eps * 2f32.powf(self.mu)) / (1.0 - n_vocab.powf(-eps))).powf(1.0 / s_hat);
        let k = if k.is_nan() { 1 } else { (k.max(1.0).min(list.len() as f32)) as usize };
        list.truncate(k.max(1));
        cur.softmax(V1, true)?;
        let list = cur.list(V1)?;
        let idx = draw_index(list, u);
        let surprise = -list[idx].p.log2();
        cur.set_selected(Some(idx));
        self.mu -= self.eta * (surprise - self.tau);
        Ok(())
    }

    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.rng.step = 0;
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();
}

/// Mirostat 2.0.
#[derive(Debug, Clone)]
pub struct MirostatV2 {
    tau: f32,
    eta: f32,
    mu: f32,
    rng: Rng,
}

impl MirostatV2 {
    /// Mirostat 2.0 with target surprise `tau`, learning rate `eta` and `seed`.
    pub fn new(seed: u64, tau: f32, eta: f32) -> Result<Self> {
        finite(V2, "tau", tau)?;
        finite(V2, "eta", eta)?;
        Ok(Self { tau, eta, mu: 2.0 * tau, rng: Rng::new(seed, stream::MIROSTAT) })
    }

    /// Current `mu`.
    pub fn mu(&self) -> f32 {
        self.mu
    }
}

impl Sampler for MirostatV2 {
    fn name(&self) -> &'static str {
        V2
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let u = self.rng.next_uniform();
        cur.softmax(V2, true)?;
        let mu = self.mu;
        let list = cur.list_mut(V2)?;
        let keep = list.iter().position(|t| -t.p.log2() > mu).unwrap_or(list.len()).max(1);
        list.truncate(keep);
        cur.softmax(V2, true)?;
        let list = cur.list(V2)?;
        let idx = draw_index(list, u);
        let surprise = -list[idx].p.log2();
        cur.set_selected(Some(idx));
        self.mu -= self.eta * (surprise - self.tau);
        Ok(())
    }

    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.rng.step = 0;
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();
}

//! `mirostat` (v1) and `mirostat_v2`: target-surprise samplers (llama.cpp's
//! `llama_sampler_init_mirostat` and `llama_sampler_init_mirostat_v2`). Both select a token and keep
//! `mu` (initially `2 * tau`) as state, updated after each draw by `mu -= eta * (surprise - tau)`
//! with `surprise = -log2 p(selected)`; `reset` restores `mu = 2 * tau` and step 0. The draw comes
//! from the Philox `MIROSTAT` stream.
//!
//! v1 estimates the Zipf exponent `s` from the `m` most probable tokens, computes
//! `k = (eps * 2^mu / (1 - n^-eps))^(1/s)` with `eps = s - 1` and `n` the vocabulary size, keeps
//! the top `max(int(k), 1)` and draws. v2 keeps the sorted prefix of tokens with surprise at most
//! `mu` (at least one) and draws. On the vocabulary view neither sorts the whole row: v1 selects
//! the estimate's `m` tokens and the top `k` from it and walks the top `k` in token-id order; v2
//! keeps the same tokens (the most probable one, lowest id among ties, where none passes) in
//! token-id order and draws in that order, as min-p and top-p leave their survivors
//! (docs/SAMPLING.md, "Deliberate differences"): the same distribution, another token for the
//! same uniform than a sorted walk, and what lets the backend draw from the masked vocabulary row.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_mirostat_apply`,
//! `llama_sampler_mirostat_v2_apply` and their `init` functions, which check nothing):
//! * v1 `m <= 0`: the estimate uses every candidate (`size_t(m - 1)` wraps to a huge bound, the
//!   loop stops at `size - 1`); `m > n` likewise. `m = 1` is an error: no pair enters the
//!   estimate, `s = 0 / 0 = NaN`, so `k` is NaN and llama.cpp's `int(k)` is undefined behaviour;
//!   `m = i32::MIN` is an error (`m - 1` overflows, undefined);
//! * v1: where a row makes `k` NaN, infinite or beyond `i32` (llama.cpp's `int(k)` is undefined
//!   there too), NaN keeps 1 token and the rest is clamped to `[1, n]`: what the conversion gives
//!   on AArch64 (x86-64 gives `INT_MIN`, so 1 token, for all three);
//! * v1 `tau`: `2 * tau` must be finite (an infinite `mu` makes `k` infinite or NaN and the
//!   update `inf - inf`); `eta` finite (an infinite step makes `mu` infinite or NaN after one
//!   draw). Negative or zero `tau` and `eta` are plain arithmetic and accepted;
//! * v2 `tau`: any non-NaN value. `mu = +inf` (from `tau = +inf`) truncates nothing, a plain draw
//!   from the softmax, and `mu = -inf` keeps only the most likely token; both stay so under the
//!   update only with `eta > 0` (`eta <= 0` makes `mu` NaN after one draw: `0 * inf` or
//!   `inf - inf`), so an infinite `2 * tau` with `eta <= 0` is an error. `eta` must be finite;
//! * NaN `tau` or `eta`: error (`mu` NaN: v1's `k` NaN, v2's `surprise > mu` false for every
//!   token, accidental).
//!
//! After a cut on the vocabulary (the CPU chain's token-order list that stands for the masked row,
//! `Candidates::cut_len`) both run their vocabulary-view forms on the list's finite entries (v1:
//! the estimate from at most their count, `k` clamped to it), drawing in token order.

use crate::candidates::{Candidates, check_list, check_scan, draw_index};
use crate::error::{Result, invalid, not_nan};
use crate::kernels;
use crate::sampler::{Rng, Sampler, rng_methods};
use crate::samplers::top_k::top_k_row;
use graph::philox::stream;

/// Checks that `eta` is finite: an infinite learning rate makes `mu` infinite or NaN after one draw.
fn finite_eta(stage: &'static str, eta: f32) -> Result<()> {
    not_nan(stage, "eta", eta)?;
    if eta.is_infinite() {
        return Err(invalid(
            stage,
            "eta",
            eta,
            "must be finite: an infinite step makes mu infinite or NaN after one draw",
        ));
    }
    Ok(())
}

/// `mu` after drawing a token of probability `p`: `mu - eta (surprise - tau)` with the surprise
/// `-log2 p` (both versions, in `apply` and in [`Sampler::backend_feedback`]).
fn updated_mu(mu: f32, eta: f32, tau: f32, p: f32) -> f32 {
    mu - eta * (-p.log2() - tau)
}

/// Both versions' end: keeps the first `keep` of the sorted list, renormalises, draws with `u`,
/// selects the drawn token and returns its probability.
fn keep_and_draw(cur: &mut Candidates<'_>, stage: &'static str, keep: usize, u: f64) -> Result<f32> {
    cur.list_mut(stage)?.truncate(keep);
    cur.softmax(stage, true)?;
    let list = cur.list(stage)?;
    let idx = draw_index(list, u);
    let p = list[idx].p;
    cur.set_selected(Some(idx));
    Ok(p)
}

/// Mirostat 2.0 on the vocabulary view: the tokens of surprise `-log2 p <= mu` (and the most
/// probable one, the lowest id among ties, which is among them unless none is), kept in token-id
/// order, unsorted; renormalised and drawn with `u` in that order. Returns the drawn probability.
fn v2_on_vocab(cur: &mut Candidates<'_>, mu: f32, u: f64) -> Result<f32> {
    cur.softmax(V2, false)?;
    let list = cur.list(V2)?;
    let top = list.iter().enumerate().fold(0, |b, (i, t)| if t.logit > list[b].logit { i } else { b });
    let kept: Vec<_> =
        list.iter().enumerate().filter(|&(i, t)| i == top || -t.p.log2() <= mu).map(|(_, t)| *t).collect();
    cur.set_list(kept, false);
    cur.softmax(V2, false)?;
    let list = cur.list(V2)?;
    let idx = draw_index(list, u);
    let p = list[idx].p;
    cur.set_selected(Some(idx));
    Ok(p)
}

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
    /// Mirostat with target surprise `tau`, learning rate `eta`, `m` tokens for the estimate
    /// (`m <= 0`: all), `seed`. Errors: `2 * tau` or `eta` not finite, `m = 1`, `m = i32::MIN`.
    pub fn new(seed: u64, tau: f32, eta: f32, m: i32) -> Result<Self> {
        not_nan(V1, "tau", tau)?;
        if !(2.0 * tau).is_finite() {
            return Err(invalid(V1, "tau", tau, "mu = 2 tau must be finite: an infinite mu makes k infinite or NaN"));
        }
        finite_eta(V1, eta)?;
        if m == 1 {
            return Err(invalid(
                V1,
                "m",
                m,
                "m = 1 estimates s from no pair: s = 0/0 = NaN, and llama.cpp's int(NaN) is undefined",
            ));
        }
        if m == i32::MIN {
            return Err(invalid(V1, "m", m, "llama.cpp computes m - 1, which overflows int32 (undefined)"));
        }
        Ok(Self { tau, eta, m, mu: 2.0 * tau, rng: Rng::new(seed, stream::MIROSTAT) })
    }

    /// Current `mu`.
    pub fn mu(&self) -> f32 {
        self.mu
    }

    /// How many to keep for the estimate `s_hat` over a vocabulary of `n_vocab` from `len`
    /// candidates: `(eps 2^mu / (1 - n^-eps))^(1/s)`, clamped into `[1, len]`, 1 for NaN.
    fn k(&self, s_hat: f32, n_vocab: f32, len: usize) -> usize {
        let eps = s_hat - 1.0;
        let k = ((eps * 2f32.powf(self.mu)) / (1.0 - n_vocab.powf(-eps))).powf(1.0 / s_hat);
        if k.is_nan() { 1 } else { (k.max(1.0).min(len as f32) as usize).max(1) }
    }

    /// On the vocabulary view: the estimate from the `m` most probable tokens (selected from the
    /// row, by probability descending, ties by lower id: the sorted list's first `m`) with the
    /// softmax over the whole row, the top `k` of the row kept, and the draw from their softmax
    /// in TOKEN-ID ORDER, never sorted (docs/SAMPLING.md, "Deliberate differences": the same
    /// distribution as the sorted walk, another token for the same uniform); the kept tokens
    /// stay the array, in that order.
    fn apply_vocab(&mut self, cur: &mut Candidates<'_>, u: f64) -> Result<()> {
        cur.flush_div();
        let (row, _) = cur.vocab_row().expect("a vocabulary view");
        let kept = self.keep_on_row(row, row.len(), cur.n_vocab())?;
        self.draw_kept(cur, kept, u)
    }

    /// After a cut on the vocabulary (a token-order list of `n` finite entries, standing for the
    /// masked row): the vocabulary view's form on that masked row with `n` for its length (the
    /// estimate from at most `n` tokens, `k` clamped into `[1, n]`), the draw in token-id order.
    /// It runs on the list's values as a short row: the masked row's `-inf` entries add exactly 0
    /// to the sum and rank after every finite value, and the list keeps the token order (ties:
    /// lower id first), so the kept tokens are the masked row's, without a vocabulary-sized pass.
    fn apply_cut(&mut self, cur: &mut Candidates<'_>, n: usize, u: f64) -> Result<()> {
        let list = cur.list(V1)?;
        check_list(V1, list)?;
        let row: Vec<f32> = list.iter().map(|t| t.logit).collect();
        let ids: Vec<u32> = list.iter().map(|t| t.id).collect();
        let mut kept = self.keep_on_row(&row, n, cur.n_vocab())?;
        // Positions to token ids: increasing both, so the kept list stays in token-id order.
        for t in &mut kept {
            t.id = ids[t.id as usize];
        }
        self.draw_kept(cur, kept, u)
    }

    /// The drawn token among `kept` (token-id order): renormalised, drawn with `u`, selected;
    /// `mu` updated.
    fn draw_kept(&mut self, cur: &mut Candidates<'_>, kept: Vec<crate::candidates::TokenData>, u: f64) -> Result<()> {
        cur.set_list(kept, false);
        cur.softmax(V1, false)?;
        let list = cur.list(V1)?;
        let idx = draw_index(list, u);
        let p = list[idx].p;
        cur.set_selected(Some(idx));
        self.mu = updated_mu(self.mu, self.eta, self.tau, p);
        Ok(())
    }

    /// The top `k` of `row` in row order, each entry's id its position in `row`: the estimate
    /// from its `m` most probable entries (at most `n`, the row's candidates), `k` clamped into
    /// `[1, n]`.
    fn keep_on_row(&self, row: &[f32], n: usize, n_vocab: usize) -> Result<Vec<crate::candidates::TokenData>> {
        let (max, bad) = kernels::max_bad(row);
        check_scan(V1, row, bad, max)?;
        // Candidates::softmax's arithmetic: f32 exponentials, an f64 sum, the f32 inverse.
        let sum: f64 = row.iter().map(|&x| f64::from(kernels::exp_neg(x - max))).sum();
        let inv = (1.0 / sum) as f32;
        let m = if self.m <= 0 { n } else { (self.m as usize).min(n) };
        let top = top_k_row(V1, row, 1.0, m)?;
        let p: Vec<f32> = top.iter().map(|t| kernels::exp_neg(t.logit - max) * inv).collect();
        let (mut sum_ti_bi, mut sum_ti_sq) = (0.0f32, 0.0f32);
        let lim = ((self.m - 1) as usize).min(n - 1);
        for i in 0..lim {
            let t_i = ((i + 2) as f32 / (i + 1) as f32).ln();
            let b_i = (p[i] / p[i + 1]).ln();
            sum_ti_bi += t_i * b_i;
            sum_ti_sq += t_i * t_i;
        }
        let k = self.k(sum_ti_bi / sum_ti_sq, n_vocab as f32, n);
        let mut kept = top_k_row(V1, row, 1.0, k)?;
        kept.sort_unstable_by_key(|t| t.id);
        Ok(kept)
    }
}

impl Sampler for Mirostat {
    fn name(&self) -> &'static str {
        V1
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        let u = self.rng.next_draw();
        if cur.vocab_row().is_some() {
            return self.apply_vocab(cur, u);
        }
        if let Some(n) = cur.cut_len() {
            return self.apply_cut(cur, n, u);
        }
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
        let k = self.k(sum_ti_bi / sum_ti_sq, n_vocab, list.len());
        let p = keep_and_draw(cur, V1, k, u)?;
        self.mu = updated_mu(self.mu, self.eta, self.tau, p);
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

    /// On a list or the vocabulary: the estimate, the truncation and the draw as graph ops
    /// ([`crate::backend`]).
    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        Some(crate::backend::BackendStage::Mirostat { mu: self.mu, m: self.m, seed: self.rng.seed })
    }

    /// The backend drew a token of probability `p` (after the truncation): `apply`'s update.
    fn backend_feedback(&mut self, p: f32) {
        self.mu = updated_mu(self.mu, self.eta, self.tau, p);
    }
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
    /// Mirostat 2.0 with target surprise `tau`, learning rate `eta` and `seed`. Errors: NaN,
    /// infinite `eta`, an infinite `2 * tau` with `eta <= 0`.
    pub fn new(seed: u64, tau: f32, eta: f32) -> Result<Self> {
        not_nan(V2, "tau", tau)?;
        finite_eta(V2, eta)?;
        if (2.0 * tau).is_infinite() && eta <= 0.0 {
            return Err(invalid(
                V2,
                "tau",
                tau,
                "an infinite mu = 2 tau needs eta > 0: otherwise the update makes mu NaN (0 * inf or inf - inf)",
            ));
        }
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
        let u = self.rng.next_draw();
        let mu = self.mu;
        // After a cut on the vocabulary (its finite entries in token order) as on the view.
        let p = if cur.is_vocab_view() || cur.cut_len().is_some() {
            v2_on_vocab(cur, mu, u)?
        } else {
            cur.softmax(V2, true)?;
            let list = cur.list_mut(V2)?;
            let keep = list.iter().position(|t| -t.p.log2() > mu).unwrap_or(list.len()).max(1);
            keep_and_draw(cur, V2, keep, u)?
        };
        self.mu = updated_mu(self.mu, self.eta, self.tau, p);
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

    /// On a sorted list: truncation by `mu` and the draw as graph ops ([`crate::backend`]).
    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        Some(crate::backend::BackendStage::MirostatV2 { mu: self.mu, seed: self.rng.seed })
    }

    /// The backend drew a token of probability `p` (after the truncation): `apply`'s update.
    fn backend_feedback(&mut self, p: f32) {
        self.mu = updated_mu(self.mu, self.eta, self.tau, p);
    }
}

//! `mirostat` (v1) and `mirostat_v2`: target-surprise samplers (llama.cpp's
//! `llama_sampler_init_mirostat` and `llama_sampler_init_mirostat_v2`). Both select a token and keep
//! `mu` (initially `2 * tau`) as state, updated after each draw by `mu -= eta * (surprise - tau)`
//! with `surprise = -log2 p(selected)`, committed when the drawn token is accepted (llama.cpp
//! updates it in `apply`: the same state wherever each sampled token is accepted, and a step that
//! is sampled and not accepted, or resampled, leaves `mu` as it was; docs/SAMPLING.md,
//! "Deliberate differences"); `reset` restores `mu = 2 * tau` and step 0. The draw comes
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

use crate::backend::prelude::*;
use crate::candidates::{Candidates, check_list, check_scan, draw_index};
use crate::error::{Result, invalid, not_nan};
use crate::kernels;
use crate::sampler::{Rng, Sampler, Token, rng_methods};
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

/// Commits a pending `mu` update if `token` is the token it was drawn with (a token accepted
/// after another was sampled, or without a sample, leaves `mu` as it is).
fn commit(mu: &mut f32, pending: &mut Option<(Token, f32)>, token: Token) {
    if let Some((t, next)) = pending.take()
        && t == token
    {
        *mu = next;
    }
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
    /// The token drawn and the `mu` it would leave, committed when that token is accepted.
    pending: Option<(Token, f32)>,
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
        Ok(Self { tau, eta, m, mu: 2.0 * tau, pending: None, rng: Rng::new(seed, stream::MIROSTAT) })
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
    /// its `mu` update pending.
    fn draw_kept(&mut self, cur: &mut Candidates<'_>, kept: Vec<crate::candidates::TokenData>, u: f64) -> Result<()> {
        cur.set_list(kept, false);
        cur.softmax(V1, false)?;
        let list = cur.list(V1)?;
        let idx = draw_index(list, u);
        let (id, p) = (list[idx].id, list[idx].p);
        cur.set_selected(Some(idx));
        self.pending = Some((id, updated_mu(self.mu, self.eta, self.tau, p)));
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
        self.pending = cur.selected_token().map(|t| (t, updated_mu(self.mu, self.eta, self.tau, p)));
        Ok(())
    }

    fn accept(&mut self, token: Token) {
        commit(&mut self.mu, &mut self.pending, token);
        self.rng.commit();
    }

    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.pending = None;
        self.rng.restart();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }

    /// The backend drew `token` with probability `p` (after the truncation): `apply`'s update,
    /// pending until the token is accepted.
    fn backend_feedback(&mut self, token: Token, p: f32) {
        self.pending = Some((token, updated_mu(self.mu, self.eta, self.tau, p)));
    }
}

/// Mirostat 2.0.
#[derive(Debug, Clone)]
pub struct MirostatV2 {
    tau: f32,
    eta: f32,
    mu: f32,
    /// The token drawn and the `mu` it would leave, committed when that token is accepted.
    pending: Option<(Token, f32)>,
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
        Ok(Self { tau, eta, mu: 2.0 * tau, pending: None, rng: Rng::new(seed, stream::MIROSTAT) })
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
        self.pending = cur.selected_token().map(|t| (t, updated_mu(self.mu, self.eta, self.tau, p)));
        Ok(())
    }

    fn accept(&mut self, token: Token) {
        commit(&mut self.mu, &mut self.pending, token);
        self.rng.commit();
    }

    fn reset(&mut self) {
        self.mu = 2.0 * self.tau;
        self.pending = None;
        self.rng.restart();
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    rng_methods!();

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }

    /// The backend drew `token` with probability `p` (after the truncation): `apply`'s update,
    /// pending until the token is accepted.
    fn backend_feedback(&mut self, token: Token, p: f32) {
        self.pending = Some((token, updated_mu(self.mu, self.eta, self.tau, p)));
    }
}

const LIST: u32 = 0;
const VOCAB: u32 = 1;
const MASKED: u32 = 2;

/// The key of a mirostat stage (selecting, so the prefix ends there): on a list, on the
/// vocabulary, or after a cut on it; `size`: v1's estimate bound on the vocabulary.
fn key<S: Sampler>(name: &'static str, form: Form, size: usize) -> Option<(StageKey, Form)> {
    let v = match form {
        Form::List(_) => LIST,
        Form::Vocab => VOCAB,
        _ => MASKED,
    };
    let size = if v == LIST { 0 } else { size };
    Some((StageKey::new::<S>(name, v, size).clearing_inf(), Form::Token))
}

/// On a sorted list: the Zipf estimate, the truncation to the top `k` ([`mirostat_v1`]) and the
/// draw ([`mirostat_draw`]); on the vocabulary, or after a cut on it, [`mirostat_vocab`].
impl BackendStage for Mirostat {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        let m = if self.m <= 0 { n_vocab } else { (self.m as usize).min(n_vocab) };
        key::<Self>(V1, form, m)
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        match cx.sorted(rec)? {
            Record::List { ids, vals, k, init, .. } => {
                let vals = cx.contiguous(vals)?;
                let kept = mirostat_v1(cx, vals, init, k)?;
                mirostat_draw(cx, ids, kept, k, init)
            }
            Record::Vocab { x, .. } => mirostat_vocab(cx, x, key.size(), key.variant() == MASKED),
            r => Ok(r),
        }
    }
}

/// On a sorted list: the tokens of surprise `-log2 p <= mu` are a prefix (at least one); the
/// draw from their renormalised softmax on the `MIROSTAT` stream, and the drawn token's
/// probability read back for the `mu` update. On the vocabulary, or after a cut on it,
/// [`vocab_mirostat_v2`].
impl BackendStage for MirostatV2 {
    fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        key::<Self>(V2, form, 0)
    }

    fn lower(&self, cx: &mut Lowering<'_>, _key: StageKey, rec: Record) -> R<Record> {
        match cx.sorted(rec)? {
            Record::List { ids, vals, k, init, .. } => {
                let neg_mu = cx.param::<Self>("neg_mu", 1, |s, out| out.f32(-s.mu))?;
                let vals = cx.contiguous(vals)?;
                let probs = cx.g.soft_max(vals, None, 1.0)?;
                let lnp = cx.g.log(probs)?;
                let neg_surprise = cx.g.scale(lnp, std::f32::consts::LOG2_E)?;
                let within = cx.g.ge(neg_surprise, neg_mu)?;
                let pos = cx.neg_positions(k)?;
                let first = cx.fill(&[1, 1], -1.0)?;
                let first = cx.g.gt(pos, first)?;
                let keep = cx.g.add(within, first)?;
                let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
                let kept = cx.g.where_(keep, vals, ninf)?;
                mirostat_draw(cx, ids, kept, k, init)
            }
            Record::Vocab { x, .. } => vocab_mirostat_v2(cx, x),
            r => Ok(r),
        }
    }
}

/// Mirostat (v1)'s `f32 [2, n]` rows: `2^mu` (in f32, as the CPU sampler computes it) and the
/// negated bound of the estimate's pairs, `-(m - 1)` (`-inf` for `m <= 0`: every pair).
fn v1_params(cx: &mut Lowering<'_>) -> R<[NodeId; 2]> {
    let par = cx.param::<Mirostat>("mirostat", 2, |s, out| {
        out.f32(2f32.powf(s.mu));
        out.f32(if s.m <= 0 { f32::NEG_INFINITY } else { -((s.m - 1) as f32) });
    })?;
    cx.param_rows(par)
}

/// The mirostat samplers' draw of stage `idx` from their truncated sorted list `kept`, on the
/// `MIROSTAT` stream; the drawn token's probability (for the CPU sampler's `mu` update) and
/// the list it was drawn from are recorded for read-back.
fn mirostat_draw(cx: &mut Lowering<'_>, ids: NodeId, kept: NodeId, k: usize, init: NodeId) -> R<Record> {
    cx.selects_from(Record::List { ids, vals: kept, k, init, sorted: true });
    let (pos, valid) = cx.draw_position(kept, k, graph::philox::stream::MIROSTAT)?;
    let p2 = cx.g.soft_max(kept, None, 1.0)?;
    let p_sel = cx.gather(p2, pos, k, 1)?;
    cx.feedback(p_sel);
    let tok = cx.gather(ids, pos, k, 1)?;
    Ok(Record::Token(cx.fold_token(tok, valid)?))
}

/// Mirostat 1.0's truncation of the sorted list `vals [k, n]` (llama.cpp's
/// `llama_sampler_mirostat_apply`, as the CPU sampler computes it): the Zipf exponent
/// `s = sum t_i b_i / sum t_i^2` over the first `lim = min(m - 1, len - 1)` pairs, with
/// `t_i = ln((i + 2) / (i + 1))` and `b_i = ln(p_i / p_{i+1})` of the list's softmax, then
/// `k = (eps 2^mu / (1 - n_vocab^-eps))^(1/s)` with `eps = s - 1`; the first `k` entries
/// (clamped into `[1, len]`, 1 for a NaN `k`) are kept, the rest masked. `len` counts the list
/// as the CPU chain holds it (entries a stage removed are not in it). The powers are
/// `exp(y ln x)`, so `k` can differ from the CPU's `powf` in its last bits, which matters only
/// where `k` lands within that of an integer.
fn mirostat_v1(cx: &mut Lowering<'_>, vals: NodeId, init: NodeId, k: usize) -> R<NodeId> {
    let n = cx.n;
    let [two_mu, neg_m_lim] = v1_params(cx)?;
    let gone = cx.removed(init, vals)?;
    let n_gone = cx.g.sum_rows(gone)?;
    let len = cx.g.scale_bias(n_gone, -1.0, k as f32)?;
    let probs = cx.g.soft_max(vals, None, 1.0)?;
    // Pair i enters while i < m - 1 and i < len - 1: -i > 1 - len too.
    let neg_last = cx.g.scale_bias(len, -1.0, 1.0)?;
    let kf = mirostat_k(cx, probs, k, Some(neg_last), neg_m_lim, two_mu, len)?;
    // Position i is kept when i + 1 <= k (the CPU truncates k to an integer), or i = 0.
    let neg_pos1 = cx.g.arange(DType::F32, &[k, n], -1.0, -1.0)?;
    let neg_k = cx.g.scale(kf, -1.0)?;
    let within = cx.g.ge(neg_pos1, neg_k)?;
    let pos = cx.neg_positions(k)?;
    let neg_one = cx.fill(&[1, 1], -1.0)?;
    let first = cx.g.gt(pos, neg_one)?;
    let keep = cx.g.add(within, first)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    cx.g.where_(keep, vals, ninf)
}

/// Mirostat (v1)'s `k` (`[1, n]` f32) from the probabilities `sorted [len_max, n]`, most probable
/// first: the Zipf exponent `s` from the pairs `i` that enter (`i < m - 1`, that is
/// `-i > neg_m_lim`; where `neg_last` is given also `-i > neg_last`), `b_i = ln(p_i / p_{i+1})`,
/// `t_i = ln((i + 2) / (i + 1))`, `s = sum t_i b_i / sum t_i^2` (NaN without a pair, as on the
/// CPU); then `k = (eps 2^mu / (1 - n_vocab^-eps))^(1/s)` with `eps = s - 1`, the powers as
/// `exp(y ln x)` (`2^mu` comes from the host as the CPU sampler computes it), raised to 1 and
/// lowered to `len`; a NaN `k` stays NaN (the callers keep the first token for it).
fn mirostat_k(
    cx: &mut Lowering<'_>,
    sorted: NodeId,
    len_max: usize,
    neg_last: Option<NodeId>,
    neg_m_lim: NodeId,
    two_mu: NodeId,
    len: NodeId,
) -> R<NodeId> {
    let n = cx.n;
    let zero = cx.fill(&[1, 1], 0.0)?;
    let one = cx.fill(&[1, n], 1.0)?;
    let s_hat = if len_max > 1 {
        let pairs = len_max - 1;
        let nb1 = cx.g.node(sorted).layout.nb[1];
        let head = cx.g.view(sorted, &[pairs, n], &[4, nb1], 0)?;
        let next = cx.g.view(sorted, &[pairs, n], &[4, nb1], 4)?;
        let ratio = cx.g.div(head, next)?;
        let b = cx.g.log(ratio)?;
        let num = cx.g.arange(DType::F32, &[pairs, n], 2.0, 1.0)?;
        let den = cx.g.arange(DType::F32, &[pairs, n], 1.0, 1.0)?;
        let q = cx.g.div(num, den)?;
        let t = cx.g.log(q)?;
        let pos = cx.g.arange(DType::F32, &[pairs, n], 0.0, -1.0)?;
        let mut used = cx.g.gt(pos, neg_m_lim)?;
        if let Some(neg_last) = neg_last {
            let by_len = cx.g.gt(pos, neg_last)?;
            used = cx.g.mul(used, by_len)?;
        }
        let tb = cx.g.mul(t, b)?;
        let tb = cx.g.where_(used, tb, zero)?;
        let tt = cx.g.sqr(t)?;
        let tt = cx.g.where_(used, tt, zero)?;
        let sum_tb = cx.g.sum_rows(tb)?;
        let sum_tt = cx.g.sum_rows(tt)?;
        cx.g.div(sum_tb, sum_tt)?
    } else {
        // No pair at all: s = 0 / 0, as on the CPU.
        cx.fill(&[1, n], f32::NAN)?
    };
    let eps = cx.g.scale_bias(s_hat, 1.0, -1.0)?;
    let ln_n = (cx.n_vocab as f32).ln();
    let neg = cx.g.scale(eps, -ln_n)?;
    let n_pow = cx.g.exp(neg)?;
    let denom = cx.g.scale_bias(n_pow, -1.0, 1.0)?;
    let numer = cx.g.mul(eps, two_mu)?;
    let base = cx.g.div(numer, denom)?;
    let ln_base = cx.g.log(base)?;
    let inv_s = cx.g.div(one, s_hat)?;
    let e = cx.g.mul(ln_base, inv_s)?;
    let kf = cx.g.exp(e)?;
    // max(k, 1), then min(k, len); NaN compares false everywhere and stays.
    let small = cx.g.gt(one, kf)?;
    let kf = cx.g.where_(small, one, kf)?;
    let big = cx.g.gt(kf, len)?;
    cx.g.where_(big, len, kf)
}

/// `[n_vocab, n]` mask of each row's first maximum (the argmax, lowest id among ties).
fn first_max_mask(cx: &mut Lowering<'_>, x: NodeId) -> R<NodeId> {
    let am = cx.g.argmax(x)?;
    let amf = cx.g.cast(am, DType::F32)?;
    let ids = cx.g.arange(DType::F32, &[cx.n_vocab, cx.n], 0.0, 1.0)?;
    cx.g.equal(ids, amf)
}

/// Mirostat 2.0 of stage `idx` on the vocabulary row `x` (the CPU sampler's vocabulary-view
/// path): the softmax over the row, the tokens of surprise `-log2 p <= mu` and the argmax (which
/// is among them unless none is) kept, the rest `-inf`; `categorical` draws from the masked row
/// in token order on the `MIROSTAT` stream, and the drawn token's probability (the softmax of the
/// kept row, as the CPU sampler renormalises) is read back for its `mu` update. The surprise is
/// `log(p) log2(e)` of the graph's softmax, so a token within f32 rounding of `mu` can be decided
/// otherwise than the CPU sampler's `f64`-summed softmax decides it (as on a list).
fn vocab_mirostat_v2(cx: &mut Lowering<'_>, x: NodeId) -> R<Record> {
    let n = cx.n;
    let neg_mu = cx.param::<MirostatV2>("neg_mu", 1, |s, out| out.f32(-s.mu))?;
    let x = cx.contiguous(x)?;
    let probs = cx.g.soft_max(x, None, 1.0)?;
    let lnp = cx.g.log(probs)?;
    let neg_surprise = cx.g.scale(lnp, std::f32::consts::LOG2_E)?;
    let within = cx.g.ge(neg_surprise, neg_mu)?;
    let top = first_max_mask(cx, x)?;
    let keep = cx.g.add(within, top)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    let kept = cx.g.where_(keep, x, ninf)?;
    cx.selects_from(Record::Vocab { x: kept, touched: true, pending: Pending::default(), unmasked: Some(x) });
    // The masked row's draw: a cut that removes no finite value (categorical skips the blocks
    // the mask left all -inf), as `dist` after a top-p mask.
    let params = cx.input("draw", DType::F32, &[2, n], vec![Field::constant(&[1.0, -f32::MAX])])?;
    let keys = cx.draw_keys_input()?;
    let tok = cx.g.categorical(kept, keys, Some(params), None, graph::philox::stream::MIROSTAT as u32)?;
    // The drawn token's probability (clamped index: a bad row's -1 reads entry 0, unused).
    let tf = cx.g.cast(tok, DType::F32)?;
    let tc = cx.g.clamp(tf, 0.0, (cx.n_vocab - 1) as f32)?;
    let at = cx.g.cast(tc, DType::I32)?;
    let p2 = cx.g.soft_max(kept, None, 1.0)?;
    let p_sel = cx.gather(p2, at, cx.n_vocab, 1)?;
    cx.feedback(p_sel);
    Ok(Record::Token(tok))
}

/// Mirostat (v1) of stage `idx` on the vocabulary row `x [n_vocab, n]`, as the CPU sampler
/// does on its vocabulary view: the Zipf exponent `s` from the softmax of the `m` most
/// probable tokens (`m` as the key gives it: every token for `m <= 0` or `m > n_vocab`), in
/// the order value descending, ties by lower id (the first `min(m - 1, n_vocab - 1)` pairs,
/// `b_i = ln(p_i / p_{i+1})`, `t_i = ln((i + 2) / (i + 1))`), then
/// `k = (eps 2^mu / (1 - n_vocab^-eps))^(1/s)` clamped into `[1, n_vocab]` (1 for a NaN `k`)
/// as in the list form ([`Ctx::mirostat_v1`], the powers as `exp(y ln x)`), the row masked
/// outside its top `k` (`argsort` and a threshold at the `k`-th), and `categorical` on the masked row in token
/// order on the `MIROSTAT` stream; the drawn token's probability in the masked row's softmax
/// is read back for the `mu` update.
///
/// `masked` (after a cut on the vocabulary): the row's finite
/// entries are its candidates (the CPU chain's list): the estimate from at most that many
/// (the pairs before the last finite entry), `k` clamped to their count.
fn mirostat_vocab(cx: &mut Lowering<'_>, x: NodeId, m: usize, masked: bool) -> R<Record> {
    let (n, nv) = (cx.n, cx.n_vocab);
    let [two_mu, neg_m_lim] = v1_params(cx)?;
    let x = cx.contiguous(x)?;
    let one = cx.fill(&[1, n], 1.0)?;
    let probs = cx.g.soft_max(x, None, 1.0)?;
    let perm = cx.g.argsort(x, graph::SortOrder::Desc)?;
    // The `m` most probable in order (every pair enters while i < m - 1 < n_vocab - 1).
    let nb1 = cx.g.node(perm).layout.nb[1];
    let top = cx.g.view(perm, &[m, n], &[4, nb1], 0)?;
    let top = cx.g.cont(top)?;
    let sorted = cx.gather(probs, top, nv, m)?;
    let (len, neg_last) = if masked {
        let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
        let alive = cx.g.gt(x, ninf)?;
        let len = cx.g.sum_rows(alive)?;
        (len, Some(cx.g.scale_bias(len, -1.0, 1.0)?))
    } else {
        (cx.fill(&[1, n], nv as f32)?, None)
    };
    let kf = mirostat_k(cx, sorted, m, neg_last, neg_m_lim, two_mu, len)?;
    // Truncated (the CPU's `as usize`); a NaN k keeps 1.
    let num = cx.g.equal(kf, kf)?;
    let kf = cx.g.where_(num, kf, one)?;
    let kf = cx.g.cast(kf, DType::I32)?;
    let kf = cx.g.cast(kf, DType::F32)?;
    let keep = cx.first_in_order(x, perm, kf, true)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    let kept = cx.g.where_(keep, x, ninf)?;
    cx.selects_from(Record::Vocab { x: kept, touched: true, pending: Pending::default(), unmasked: Some(x) });
    let (tok, valid) = cx.draw_position(kept, nv, graph::philox::stream::MIROSTAT)?;
    let p2 = cx.g.soft_max(kept, None, 1.0)?;
    let p_sel = cx.gather(p2, tok, nv, 1)?;
    cx.feedback(p_sel);
    Ok(Record::Token(cx.fold_token(tok, valid)?))
}

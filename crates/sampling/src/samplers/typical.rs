//! `typical`: locally typical sampling (llama.cpp's `llama_sampler_init_typical`): orders the
//! candidates by `|-ln p - H|` (distance of their surprise from the entropy `H`) and keeps the
//! shortest prefix of that order whose cumulative probability exceeds `p`, but at least
//! `min_keep`. The result is in that order and marked unsorted.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_typical` and
//! `llama_sampler_typical_apply`):
//! * `p >= 1`, `+inf` included: disabled (`init_typical` returns the empty sampler);
//! * `p < 0`, `-inf` included: the first token of the typical order already has `cum_sum > p`,
//!   so the single most typical token, or the first `min_keep`; `p = 0` the same here (the most
//!   typical token has a nonzero probability, see below);
//! * `min_keep` 0 and 1 are the same; `min_keep >= n` keeps all `n` in typical order;
//! * NaN `p` is an error: llama.cpp would keep everything only because `cum_sum > NaN` is false.
//!
//! On the vocabulary view the kept tokens come out in token-id order instead, unsorted (a
//! deliberate difference, docs/SAMPLING.md, as top-p's), and the prefix's mass is counted exactly
//! in units of 2^-23, each probability rounded to the nearest (llama.cpp's `f32` running sum
//! drifts over a whole vocabulary; these integer sums are exact, so the backend's `cumsum`
//! decides alike).
//!
//! Zero-probability candidates add nothing to the entropy (llama.cpp computes `-0 * ln 0 = NaN`
//! there, which makes every score NaN and its sort order undefined); they have an infinite score
//! and come last.
//!
//! After a cut on the vocabulary (the CPU chain's token-order list that stands for the masked row,
//! `Candidates::cut_len`) the vocabulary view's form runs on the list's finite entries, the kept
//! tokens left in token order (docs/SAMPLING.md, "Deliberate differences").

use crate::backend::prelude::*;
use crate::candidates::{Candidates, TokenData, check_list, check_scan};
use crate::error::{Result, not_nan};
use crate::kernels;
use crate::sampler::Sampler;

/// On the vocabulary view the prefix's mass is counted in units of `1 / TYPICAL_UNITS` (2^-23),
/// each probability rounded to the nearest (half up; rounding down would lose up to one unit a
/// token, 1.8% of the mass over 151936 tokens): sums of integers below 2^24 (at most
/// `2^23 + n / 2`), exact in `f32` in any order, so
/// the backend's `cumsum` (its vocabulary form, [`typical_vocab`]) decides as the CPU sampler does.
pub(crate) const TYPICAL_UNITS: f32 = 8_388_608.0;

/// Locally typical sampling.
#[derive(Debug, Clone)]
pub struct Typical {
    p: f32,
    min_keep: usize,
}

const NAME: &str = "typical";

impl Typical {
    /// Typical sampling with mass `p` and `min_keep` (`p >= 1`: disabled; `p <= 0`: the most
    /// typical `max(min_keep, 1)`; NaN: error).
    pub fn new(p: f32, min_keep: usize) -> Result<Self> {
        not_nan(NAME, "p", p)?;
        Ok(Self { p, min_keep })
    }
}

impl Typical {
    /// On the vocabulary view: the softmax over the row (`expf`, an f64 sum), the entropy
    /// in f64, `|-ln p - H|` as `|(x - max) - (ln sum - H)|`, the row's tokens in its stable order
    /// from token order (ties by lower id), the shortest prefix whose mass (in units of 2^-23, each
    /// probability rounded to the nearest: exact integer sums) exceeds `p`, at least `min_keep`; the kept tokens are returned in TOKEN-ID ORDER, unsorted, with their
    /// softmax `p`, as min-p and top-p leave theirs (docs/SAMPLING.md, "Deliberate differences":
    /// a later `dist` walks them in token-id order, as `categorical` walks the masked row).
    fn apply_vocab(&self, cur: &mut Candidates<'_>) -> Result<()> {
        cur.flush_div();
        let (row, _) = cur.vocab_row().expect("a vocabulary view");
        let (max, bad) = kernels::max_bad(row);
        check_scan(NAME, row, bad, max)?;
        let list = self.keep_in_order(row, max, |i| i as u32);
        cur.set_cut_list(list);
        Ok(())
    }

    /// After a cut on the vocabulary (a token-order list of finite entries, standing for the
    /// masked row): the vocabulary view's form over the list (the masked entries add nothing to
    /// the sums and come last in the order, so the kept finite tokens are the view's), the kept
    /// tokens left in token-id order.
    fn apply_cut(&self, cur: &mut Candidates<'_>) -> Result<()> {
        let list = cur.list(NAME)?;
        check_list(NAME, list)?;
        let logits: Vec<f32> = list.iter().map(|t| t.logit).collect();
        let ids: Vec<u32> = list.iter().map(|t| t.id).collect();
        let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        let kept = self.keep_in_order(&logits, max, |i| ids[i]);
        cur.set_cut_list(kept);
        Ok(())
    }

    /// The vocabulary form's selection on `row` (in token-id order, its maximum `max`; entry `i`
    /// is token `id(i)`): the kept entries in that order with their softmax `p`.
    fn keep_in_order(&self, row: &[f32], max: f32, id: impl Fn(usize) -> u32) -> Vec<TokenData> {
        // The platform's `expf`, as the CPU backend's `exp` op (so its probabilities match bit for
        // bit there), an f64 sum and `p = e * (1 / sum)`.
        let e: Vec<f32> = row.iter().map(|&x| (x - max).exp()).collect();
        let sum: f64 = e.iter().map(|&v| f64::from(v)).sum();
        let inv = (1.0 / sum) as f32;
        let p: Vec<f32> = e.iter().map(|&v| v * inv).collect();
        // -ln p - H = -((x - max) - (ln sum - H)): the centre `ln sum - H` (a value near 1, not
        // near the logits) computed with an f64 sum and rounded once, then one f32 subtraction
        // per token; `ln p` as `(x - max) - ln sum` (no logarithm per token).
        let ln_sum = sum.ln() as f32;
        let mut neg_h = 0.0f64;
        for (&q, &x) in p.iter().zip(row) {
            if q > 0.0 {
                neg_h += f64::from(q) * f64::from((x - max) - ln_sum);
            }
        }
        let centre = (sum.ln() + neg_h) as f32;
        // (|-ln p - H|, id), sorted: ties by lower id.
        let mut order: Vec<(f32, u32)> =
            row.iter().enumerate().map(|(i, &x)| (((x - max) - centre).abs(), i as u32)).collect();
        order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // The mass in units of 2^-23, each probability rounded to the nearest (half up): exact
        // integer sums (the backend's cumsum gives the same, in any order).
        let threshold = f64::from(self.p) * f64::from(TYPICAL_UNITS);
        let mut cum = 0.0f64;
        let mut last = order.len();
        for (i, &(_, j)) in order.iter().enumerate() {
            cum += f64::from((p[j as usize] * TYPICAL_UNITS + 0.5).floor());
            if cum > threshold && (self.min_keep == 0 || i + 1 >= self.min_keep) {
                last = i + 1;
                break;
            }
        }
        let mut idx: Vec<u32> = order[..last].iter().map(|&(_, j)| j).collect();
        idx.sort_unstable();
        idx.iter().map(|&j| TokenData { id: id(j as usize), logit: row[j as usize], p: p[j as usize] }).collect()
    }
}

impl Sampler for Typical {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.p >= 1.0 {
            return Ok(());
        }
        if cur.vocab_row().is_some() {
            return self.apply_vocab(cur);
        }
        if cur.cut_len().is_some() {
            return self.apply_cut(cur);
        }
        cur.softmax(NAME, true)?;
        let list = cur.list_mut(NAME)?;
        let mut entropy = 0.0f32;
        for t in list.iter() {
            if t.p > 0.0 {
                entropy += -t.p * t.p.ln();
            }
        }
        let shifted: Vec<f32> = list.iter().map(|t| (-t.p.ln() - entropy).abs()).collect();
        let mut idx: Vec<usize> = (0..list.len()).collect();
        idx.sort_by(|&a, &b| shifted[a].total_cmp(&shifted[b]));
        let mut cum = 0.0f32;
        let mut last = idx.len();
        for (i, &j) in idx.iter().enumerate() {
            cum += list[j].p;
            if cum > self.p && (self.min_keep == 0 || i + 1 >= self.min_keep) {
                last = i + 1;
                break;
            }
        }
        let new: Vec<_> = idx[..last].iter().map(|&j| list[j]).collect();
        cur.set_list(new, false);
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend(&self) -> Option<&dyn BackendStage> {
        Some(self)
    }
}

const LIST: u32 = 0;
const VOCAB: u32 = 1;

/// On a sorted list ([`typical`], which leaves the list in typical order), on the vocabulary or
/// after a cut on it ([`typical_vocab`], a mask in token order).
impl BackendStage for Typical {
    fn key(&self, form: Form, _n_vocab: usize) -> Option<(StageKey, Form)> {
        Some(match form {
            _ if self.p >= 1.0 => (StageKey::nothing(), form),
            Form::List(_) => (StageKey::new::<Self>(NAME, LIST, 0), form),
            _ => (StageKey::new::<Self>(NAME, VOCAB, 0), Form::Masked),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, _key: StageKey, rec: Record) -> R<Record> {
        Ok(match cx.sorted(rec)? {
            Record::List { ids, vals, k, init, .. } => {
                let (ids, vals, init) = typical(cx, ids, vals, init, k)?;
                Record::List { ids, vals, k, init, sorted: false }
            }
            Record::Vocab { x, unmasked, .. } => {
                let x = cx.contiguous(x)?;
                let kept = typical_vocab(cx, x)?;
                Record::Vocab {
                    x: kept,
                    touched: true,
                    pending: Pending::default(),
                    unmasked: Some(unmasked.unwrap_or(x)),
                }
            }
            r => r,
        })
    }
}

/// Locally typical sampling on a sorted list (llama.cpp's `typical`): the entropy `H` of the
/// softmax, the entries ordered by `|-ln p - H|` (stable), and the shortest prefix of that order
/// whose mass exceeds `p` (at least `min_keep`); returns the list in that order, the rest
/// masked.
fn typical(cx: &mut Lowering<'_>, ids: NodeId, vals: NodeId, init: NodeId, k: usize) -> R<(NodeId, NodeId, NodeId)> {
    let n = cx.n;
    let pp = cx.param::<Typical>("p", 1, |s, out| out.f32(s.p))?;
    let mk = cx.param::<Typical>("neg_min_keep", 1, |s, out| out.f32(-(s.min_keep.max(1) as f32)))?;
    let vals = if cx.g.node(vals).layout.is_contiguous(DType::F32) { vals } else { cx.g.cont(vals)? };
    let zero = cx.fill(&[1, 1], 0.0)?;
    let (probs, lnp, neg_h) = cx.softmax_entropy(vals)?;
    // |-ln p - H| = |ln p + H| = |ln p - (-H)|, the absolute value by a select (exact).
    let d = cx.g.sub(lnp, neg_h)?;
    let nd = cx.g.neg(d)?;
    let nonneg = cx.g.ge(d, zero)?;
    let shifted = cx.g.where_(nonneg, d, nd)?;
    let perm = cx.g.argsort(shifted, graph::SortOrder::Asc)?;
    let p_perm = cx.gather(probs, perm, k, k)?;
    let cum = cx.g.cumsum(p_perm)?;
    let before = cx.g.sub(cum, p_perm)?;
    let over = cx.g.gt(before, pp)?;
    let pos = cx.neg_positions(k)?;
    let within_mk = cx.g.gt(pos, mk)?;
    let beyond_mk = cx.g.scale_bias(within_mk, -1.0, 1.0)?;
    let drop = cx.g.mul(over, beyond_mk)?;
    let (ids, v, init) = (cx.gather(ids, perm, k, k)?, cx.gather(vals, perm, k, k)?, cx.gather(init, perm, k, k)?);
    let ninf = cx.fill(&[k, n], f32::NEG_INFINITY)?;
    Ok((ids, cx.g.where_(drop, ninf, v)?, init))
}

/// Locally typical sampling of stage `idx` on the vocabulary row `x [n_vocab, n]`
/// (contiguous, pending transforms applied), as the CPU sampler does on its vocabulary view:
/// the softmax and its entropy `H`, the row's `argsort` by `|ln p + H|` ascending (stable:
/// ties by lower id), the probabilities gathered in that order and their `cumsum`, the
/// shortest prefix whose mass exceeds `p` (a position is dropped when the mass before it
/// exceeds `p` and it is at least `min_keep` in), and the row masked outside it (a threshold
/// at the prefix's last entry, in token order: `Form::Masked`).
fn typical_vocab(cx: &mut Lowering<'_>, x: NodeId) -> R<NodeId> {
    let nv = cx.n_vocab;
    let pp = cx.param::<Typical>("p", 1, |s, out| out.f32(s.p))?;
    let mk = cx.param::<Typical>("neg_min_keep", 1, |s, out| out.f32(-(s.min_keep.max(1) as f32)))?;
    let zero = cx.fill(&[1, 1], 0.0)?;
    let (xm, probs, ln_sum, neg_h) = cx.row_entropy(x)?;
    // |-ln p - H| = |(x - max) - (ln sum - H)|: the centre is a value near 1 (an f32 ulp of
    // it is small next to the logits'), subtracted once per token; |.| by a select (exact).
    let centre = cx.g.add(ln_sum, neg_h)?;
    let d = cx.g.sub(xm, centre)?;
    let nd = cx.g.neg(d)?;
    let nonneg = cx.g.ge(d, zero)?;
    let shifted = cx.g.where_(nonneg, d, nd)?;
    let perm = cx.g.argsort(shifted, graph::SortOrder::Asc)?;
    // The mass in units of 2^-23, each probability rounded to the nearest (p 2^23 + 1/2 is
    // exact, the cast truncates): integers whose every partial sum stays below 2^24, so the
    // cumsum is exact in f32 in any summation order, on every backend, and equals the CPU
    // sampler's.
    let units = cx.g.scale_bias(probs, TYPICAL_UNITS, 0.5)?;
    let units = cx.g.cast(units, DType::I32)?;
    let units = cx.g.cast(units, DType::F32)?;
    let p_perm = cx.gather(units, perm, nv, nv)?;
    let cum = cx.g.cumsum(p_perm)?;
    let before = cx.g.sub(cum, p_perm)?;
    let threshold = cx.g.scale(pp, TYPICAL_UNITS)?;
    let over = cx.g.gt(before, threshold)?;
    let pos = cx.neg_positions(nv)?;
    let within_mk = cx.g.gt(pos, mk)?;
    let beyond_mk = cx.g.scale_bias(within_mk, -1.0, 1.0)?;
    let drop = cx.g.mul(over, beyond_mk)?;
    let n_drop = cx.g.sum_rows(drop)?;
    let count = cx.g.scale_bias(n_drop, -1.0, nv as f32)?;
    let keep = cx.first_in_order(shifted, perm, count, false)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    cx.g.where_(keep, x, ninf)
}

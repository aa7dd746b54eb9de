//! `tail_free`: tail-free sampling (llama.cpp's `llama_sample_tail_free`, release b2757,
//! `llama.cpp`; later `llama_sampler_init_tail_free` in `src/llama-sampling.cpp` with the same
//! body, removed since): sorts the candidates by logit, takes their softmax `p`, the second
//! differences of the sorted probabilities `d2[i] = (p[i] - p[i+1]) - (p[i+1] - p[i+2])` for
//! `i < n - 2`, their absolute values normalised to sum 1, and keeps the first `i` candidates,
//! `i` the first index at least `min_keep` where the running sum of those values exceeds `z`
//! (all `n` where none does).
//!
//! Edge values (llama.cpp's `llama_sample_tail_free`):
//! * `z >= 1`, `+inf` included, or at most 2 candidates: disabled, as llama.cpp's
//!   `if (z >= 1.0f || candidates->size <= 2) return;` (nothing sorted, no softmax);
//! * a sum of the `|d2|` of at most `1e-6` (all probabilities equal, or a linear ramp): every
//!   value is `1 / (n - 2)` (llama.cpp's `else` branch), so the cut is at the first index
//!   `i >= min_keep` with `(i + 1) / (n - 2) > z`;
//! * `z` in `[0, 1)`: as llama.cpp; `z = 0` cuts at the first nonzero value at or after
//!   `min_keep`;
//! * `min_keep >= n - 2`: the loop never cuts, all `n` kept (sorted, with their softmax);
//! * `min_keep = 0` (llama.cpp's common default) where the first value alone exceeds `z`:
//!   llama.cpp sets the size to 0, an empty array its next stage asserts on (a crash); here the
//!   most likely candidate stays (a deliberate difference, docs/SAMPLING.md);
//! * `z < 0` (`-inf` too) is an error: llama.cpp would keep exactly `min_keep` candidates (or
//!   none, the crash above, with `min_keep = 0`), a meaning no caller wants from a mass
//!   threshold; a deliberate difference (docs/SAMPLING.md). NaN `z` is an error (llama.cpp's
//!   `cum_sum > NaN` is never true: everything kept, by accident).
//!
//! On a list (after `top_k`, or any list not a cut on the vocabulary) the decision is llama.cpp's
//! own `f32` arithmetic, replayed operation for operation: the softmax of
//! `kernels::llama_f32` (`expf`, a sequential `f32` sum in sorted order, `p = e / sum`), the
//! differences in `f32`, `std::accumulate`'s sequential `f32` sum, each value divided by it (or
//! `1.0f / (n - 2)`), the running `f32` sum compared `> z`. The list stays sorted, its `p`
//! llama.cpp's probabilities.
//!
//! On the vocabulary view the definition needs the sorted order (the differences are between
//! neighbours in it), so the row is ordered (logit descending, ties by lower id, as every list
//! here), but the kept tokens come out in TOKEN-ID ORDER, unsorted, as typical's and top-p's
//! (docs/SAMPLING.md, "Deliberate differences"), and the decision is made in exact integers
//! ([`units_cut`]): the second differences of the unnormalised exponentials `e^(x - max)` (the
//! platform's `expf`, as the CPU backend's `exp` op, so the two hold the same bits), each scaled by
//! `2^23 / sum |d2|` cut to 8 bits and rounded to the nearest integer, their running sum against
//! `z` times their total. On a long flat row llama.cpp's differences of rounded probabilities are
//! mostly rounding; these are the same on the CPU sampler and the CPU backend bit for bit, and
//! integer sums are exact in any order, so the backend's `cumsum` decides as the CPU sampler does.
//! After a cut on the vocabulary (the token-order list that stands for the masked row,
//! `Candidates::cut_len`) the same form runs on the list's finite entries, `n` their count.

use crate::backend::prelude::*;
use crate::candidates::{Candidates, TokenData, check_list, check_scan, llama_f32_probs, sort_desc};
use crate::error::{Result, invalid, not_nan};
use crate::kernels;
use crate::sampler::Sampler;

/// On the vocabulary view the `|d2|` are counted in integer units, their total about `UNITS`
/// (2^23; see [`units_cut`]).
const UNITS: f32 = 8_388_608.0;

/// llama.cpp's threshold on the sum of the second differences (`second_derivatives_sum > 1e-6f`).
const SUM_EPS: f32 = 1e-6;

/// Tail-free sampling.
#[derive(Debug, Clone)]
pub struct TailFree {
    z: f32,
    min_keep: usize,
}

const NAME: &str = "tail_free";

impl TailFree {
    /// Tail-free sampling with threshold `z` and `min_keep` (`z >= 1`: disabled; `z < 0` and NaN:
    /// errors).
    pub fn new(z: f32, min_keep: usize) -> Result<Self> {
        not_nan(NAME, "z", z)?;
        if z < 0.0 {
            return Err(invalid(
                NAME,
                "z",
                z,
                "must not be negative: z bounds a cumulative mass in [0, 1] (z >= 1 disables the stage); \
                 llama.cpp would keep exactly min_keep candidates, or none",
            ));
        }
        Ok(Self { z, min_keep })
    }
}

/// `|d2[i]|` for `i < n - 2` of the probabilities `ps` (sorted descending), in `f32` as
/// llama.cpp computes them: the first differences, then their differences.
fn abs_second_differences(ps: &[f32]) -> Vec<f32> {
    let d1: Vec<f32> = ps.windows(2).map(|w| w[0] - w[1]).collect();
    d1.windows(2).map(|w| (w[0] - w[1]).abs()).collect()
}

/// llama.cpp's cut on the sorted probabilities `ps` (`n > 2`), in its `f32` arithmetic: the
/// number kept (at least 1, see the module doc).
fn llama_cut(ps: &[f32], z: f32, min_keep: usize) -> usize {
    let mut d2 = abs_second_differences(ps);
    // std::accumulate(.., 0.0f): sequential f32.
    let sum = d2.iter().fold(0.0f32, |s, &v| s + v);
    if sum > SUM_EPS {
        d2.iter_mut().for_each(|v| *v /= sum);
    } else {
        let u = 1.0f32 / d2.len() as f32;
        d2.iter_mut().for_each(|v| *v = u);
    }
    let mut cum = 0.0f32;
    for (i, &v) in d2.iter().enumerate() {
        cum += v;
        if cum > z && i >= min_keep {
            return i.max(1);
        }
    }
    ps.len()
}

/// Veltkamp's split of `c`: `c` rounded to its 8 leading bits (`f32`, round to nearest), exact in
/// every IEEE `f32` arithmetic: the CPU sampler and the graph (three nodes) compute it alike, and
/// agree on it unless their `c` differ across a rounding boundary of 8 bits (`c` from two sums of
/// the same values in other orders, about 1e-7 apart: a chance of about 1e-4 a row).
fn split_hi(c: f32) -> f32 {
    let t = c * SPLIT;
    t - (t - c)
}

/// `2^16 + 1`: [`split_hi`] keeps `24 - 16` bits.
const SPLIT: f32 = 65_537.0;

/// The vocabulary form's cut on the sorted unnormalised exponentials `es` (`e^(x - max)`, the
/// platform's `expf`, as the CPU backend's `exp` op: `n > 2`) whose sum is `sum_e`: the `|d2|` of
/// the exponentials (llama.cpp's of the probabilities times `sum_e`, so the normalisation is the
/// same), their sum `s` in `f64` rounded to `f32`, llama.cpp's fallback where `s <= 1e-6 sum_e`
/// (every value 1), else each `|d2|` times `hi`, the scale `2^23 / s` cut to 8 bits
/// ([`split_hi`]), rounded to the nearest integer: units whose total `U` (about 2^23) and running
/// sums are exact in any order, in `f32` too. The cut is at the first index at least `min_keep`
/// whose running sum exceeds `z U` (one `f32` product), at least 1 kept; none: all `n`.
fn units_cut(es: &[f32], sum_e: f64, z: f32, min_keep: usize) -> usize {
    let a = abs_second_differences(es);
    let s = a.iter().map(|&v| f64::from(v)).sum::<f64>() as f32;
    let units: Vec<f32> = if s > (sum_e as f32) * SUM_EPS {
        let hi = split_hi(UNITS / s);
        a.iter().map(|&v| (v * hi + 0.5).floor()).collect()
    } else {
        vec![1.0; a.len()]
    };
    let total: f64 = units.iter().map(|&u| f64::from(u)).sum();
    let threshold = f64::from((total as f32) * z);
    let mut cum = 0.0f64;
    for (i, &u) in units.iter().enumerate() {
        cum += f64::from(u);
        if cum > threshold && i >= min_keep {
            return i.max(1);
        }
    }
    es.len()
}

impl TailFree {
    /// The vocabulary form on `row` (in token-id order, checked, its maximum `max`; entry `i` is
    /// token `id(i)`): the exponentials `e^(x - max)` (`expf`) and their `f64` sum, the row ordered
    /// by logit descending (ties by lower id), [`units_cut`] on the exponentials in that order, and
    /// the kept entries in TOKEN-ID ORDER with their softmax `p = e * (1 / sum)` (as typical's).
    fn keep_in_order(&self, row: &[f32], max: f32, id: impl Fn(usize) -> u32) -> Vec<TokenData> {
        let e: Vec<f32> = row.iter().map(|&x| (x - max).exp()).collect();
        let sum: f64 = e.iter().map(|&v| f64::from(v)).sum();
        let inv = (1.0 / sum) as f32;
        // The exponentials ride in `p` through the sort.
        let mut order: Vec<TokenData> =
            row.iter().enumerate().map(|(i, &x)| TokenData { id: i as u32, logit: x, p: e[i] }).collect();
        sort_desc(&mut order);
        let es: Vec<f32> = order.iter().map(|t| t.p).collect();
        let kept = units_cut(&es, sum, self.z, self.min_keep);
        let mut idx: Vec<u32> = order[..kept].iter().map(|t| t.id).collect();
        idx.sort_unstable();
        idx.iter().map(|&j| TokenData { id: id(j as usize), logit: row[j as usize], p: e[j as usize] * inv }).collect()
    }
}

impl Sampler for TailFree {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.z >= 1.0 {
            return Ok(());
        }
        if cur.vocab_row().is_some() {
            cur.flush_div();
            let (row, _) = cur.vocab_row().expect("a vocabulary view");
            let (max, bad) = kernels::max_bad(row);
            check_scan(NAME, row, bad, max)?;
            if row.len() <= 2 {
                return Ok(());
            }
            let kept = self.keep_in_order(row, max, |i| i as u32);
            cur.set_cut_list(kept);
            return Ok(());
        }
        if let Some(len) = cur.cut_len() {
            let list = cur.list(NAME)?;
            check_list(NAME, list)?;
            if len <= 2 {
                return Ok(());
            }
            let logits: Vec<f32> = list.iter().map(|t| t.logit).collect();
            let ids: Vec<u32> = list.iter().map(|t| t.id).collect();
            let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
            let kept = self.keep_in_order(&logits, max, |i| ids[i]);
            cur.set_cut_list(kept);
            return Ok(());
        }
        if cur.len() <= 2 {
            return Ok(());
        }
        // llama.cpp: llama_sample_softmax (sort, then p), the decision in its f32 arithmetic.
        cur.sort(NAME)?;
        let list = cur.list_mut(NAME)?;
        check_list(NAME, list)?;
        llama_f32_probs(list);
        let ps: Vec<f32> = list.iter().map(|t| t.p).collect();
        let kept = llama_cut(&ps, self.z, self.min_keep);
        list.truncate(kept);
        cur.set_selected(None);
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
const MASKED: u32 = 2;

/// On a list ([`tail_free_list`]: sorted first, as the CPU sampler sorts, the entries past the
/// cut masked), on the vocabulary and on the masked row after a cut ([`tail_free_vocab`]: the row
/// ordered by `argsort`, masked outside the kept prefix by a threshold, in token order).
impl BackendStage for TailFree {
    fn key(&self, form: Form, n_vocab: usize) -> Option<(StageKey, Form)> {
        Some(match form {
            _ if self.z >= 1.0 => (StageKey::nothing(), form),
            Form::List(k) if k <= 2 => (StageKey::nothing(), form),
            Form::List(_) => (StageKey::new::<Self>(NAME, LIST, 0), form),
            _ if n_vocab <= 2 => (StageKey::nothing(), form),
            Form::Masked => (StageKey::new::<Self>(NAME, MASKED, 0), Form::Masked),
            _ => (StageKey::new::<Self>(NAME, VOCAB, 0), Form::Masked),
        })
    }

    fn lower(&self, cx: &mut Lowering<'_>, key: StageKey, rec: Record) -> R<Record> {
        Ok(match rec {
            Record::List { ids, vals, k, init, sorted } => tail_free_list(cx, ids, vals, init, k, sorted)?,
            rec @ Record::Vocab { .. } => match cx.sorted(rec)? {
                Record::Vocab { x, unmasked, .. } => {
                    let x = cx.contiguous(x)?;
                    let kept = tail_free_vocab(cx, x, key.variant() == MASKED)?;
                    Record::Vocab {
                        x: kept,
                        touched: true,
                        pending: Pending::default(),
                        unmasked: Some(unmasked.unwrap_or(x)),
                    }
                }
                r => r,
            },
            r => r,
        })
    }
}

/// `|d2| [w, n]` of the sorted values `v [w, n]` (contiguous; the next entries gathered at
/// `min(i + 1, w - 1)`), 0 from position `len - 2` on, and that mask of positions `i < len - 2`,
/// and `len - 2` (`[1, n]`).
fn abs_d2(cx: &mut Lowering<'_>, v: NodeId, len: NodeId, w: usize) -> R<(NodeId, NodeId, NodeId)> {
    let n = cx.n;
    let next = cx.g.arange(DType::F32, &[w, n], 1.0, 1.0)?;
    let next = cx.g.clamp(next, 0.0, (w - 1) as f32)?;
    let next = cx.g.cast(next, DType::I32)?;
    let v1 = cx.gather(v, next, w, w)?;
    let d1 = cx.g.sub(v, v1)?;
    let d1n = cx.gather(d1, next, w, w)?;
    let d2 = cx.g.sub(d1, d1n)?;
    // |d2| by a select (exact), 0 from position len - 2 on.
    let zero = cx.fill(&[1, 1], 0.0)?;
    let nd2 = cx.g.neg(d2)?;
    let nonneg = cx.g.ge(d2, zero)?;
    let a = cx.g.where_(nonneg, d2, nd2)?;
    let pos = cx.g.arange(DType::F32, &[w, n], 0.0, 1.0)?;
    let lm2 = cx.g.scale_bias(len, 1.0, -2.0)?;
    let beyond = cx.g.ge(pos, lm2)?;
    let valid = cx.g.scale_bias(beyond, -1.0, 1.0)?;
    let a = cx.g.where_(valid, a, zero)?;
    Ok((a, valid, lm2))
}

/// `count [1, n]` from `over [w, n]` (the positions whose running sum exceeds `z`: a suffix, as
/// the running sum never falls): `max(first over, min_keep)` where that is below `len - 2`
/// (`lm2`), else `len` (llama.cpp's loop ends without a cut); at least 1.
fn count_from(cx: &mut Lowering<'_>, over: NodeId, lm2: NodeId, len: NodeId, w: usize, vocab: bool) -> R<NodeId> {
    let mk = cx.param::<TailFree>("min_keep", 1, |s, out| out.f32(s.min_keep.min(1 << 24) as f32))?;
    let n_over = if vocab { cx.row_sum(over)? } else { cx.g.sum_rows(over)? };
    let first = cx.g.scale_bias(n_over, -1.0, w as f32)?;
    let first_ge = cx.g.ge(first, mk)?;
    let c = cx.g.where_(first_ge, first, mk)?;
    let inside = cx.g.gt(lm2, c)?;
    let count = cx.g.where_(inside, c, len)?;
    cx.g.clamp(count, 1.0, w as f32)
}

/// `count [1, n]`: how many of the `len [1, n]` entries of a list tail-free keeps, from their
/// probabilities `ps [k, n]` sorted descending, in llama.cpp's `f32` steps: [`abs_d2`], their sum,
/// each divided by it (`1 / (len - 2)` where the sum is at most `1e-6`), the running sum (the
/// graph's `cumsum`) against `z`, and [`count_from`].
fn list_count(cx: &mut Lowering<'_>, ps: NodeId, len: NodeId, k: usize) -> R<NodeId> {
    let n = cx.n;
    let z = cx.param::<TailFree>("z", 1, |s, out| out.f32(s.z))?;
    let (a, valid, lm2) = abs_d2(cx, ps, len, k)?;
    let sum = cx.g.sum_rows(a)?;
    let eps = cx.fill(&[1, 1], SUM_EPS)?;
    let big = cx.g.gt(sum, eps)?;
    let normal = cx.g.div(a, sum)?;
    let one = cx.fill(&[1, n], 1.0)?;
    let uniform = cx.g.div(one, lm2)?;
    let wv = cx.g.where_(big, normal, uniform)?;
    // A select, not a product: `1 / (len - 2)` is infinite where `len = 2`.
    let zero = cx.fill(&[1, 1], 0.0)?;
    let wv = cx.g.where_(valid, wv, zero)?;
    let cum = cx.g.cumsum(wv)?;
    let over = cx.g.gt(cum, z)?;
    count_from(cx, over, lm2, len, k, false)
}

/// `count [1, n]` on the vocabulary, as the CPU sampler's [`units_cut`]: from the exponentials
/// `es [n_vocab, n]` sorted descending and their sum `sum_e [1, n]`, [`abs_d2`], their two-level
/// sum `s`, the units `floor(|d2| hi + 1/2)` with `hi` the scale `2^23 / s` cut to 8 bits (every
/// unit 1 where `s <= 1e-6 sum_e`), their total `U` and running sum (integers below 2^24: exact
/// in any order), the positions over `z U`, and [`count_from`].
fn vocab_count(cx: &mut Lowering<'_>, es: NodeId, sum_e: NodeId, len: NodeId) -> R<NodeId> {
    let (nv, n) = (cx.n_vocab, cx.n);
    let z = cx.param::<TailFree>("z", 1, |s, out| out.f32(s.z))?;
    let (a, valid, lm2) = abs_d2(cx, es, len, nv)?;
    let s = cx.row_sum(a)?;
    let lim = cx.g.scale(sum_e, SUM_EPS)?;
    let big = cx.g.gt(s, lim)?;
    let full = cx.fill(&[1, n], UNITS)?;
    let c = cx.g.div(full, s)?;
    let t = cx.g.scale(c, SPLIT)?;
    let r = cx.g.sub(t, c)?;
    let hi = cx.g.sub(t, r)?;
    let units = cx.g.mul(a, hi)?;
    let units = cx.g.scale_bias(units, 1.0, 0.5)?;
    let units = cx.g.cast(units, DType::I32)?;
    let units = cx.g.cast(units, DType::F32)?;
    let one = cx.fill(&[1, 1], 1.0)?;
    let units = cx.g.where_(big, units, one)?;
    let zero = cx.fill(&[1, 1], 0.0)?;
    let units = cx.g.where_(valid, units, zero)?;
    let total = cx.row_sum(units)?;
    let thr = cx.g.mul(total, z)?;
    let cum = cx.g.cumsum(units)?;
    let over = cx.g.gt(cum, thr)?;
    count_from(cx, over, lm2, len, nv, true)
}

/// Tail-free sampling on the vocabulary row `x [n_vocab, n]` (contiguous, pending transforms
/// applied), as the CPU sampler's vocabulary form: the exponentials `e^(x - max)` and their
/// two-level sum, the row's stable `argsort` descending, the exponentials gathered in that order,
/// [`vocab_count`] with `len` the vocabulary (`masked`: the count of finite entries, the masked
/// row after a cut), and the row masked outside the first `count` of that order by a threshold
/// ([`Lowering::first_in_order`], `Form::Masked`). A bad row (NaN or `+inf`, whose sum is NaN)
/// keeps every entry, so it fails as a bad row at the draw.
fn tail_free_vocab(cx: &mut Lowering<'_>, x: NodeId, masked: bool) -> R<NodeId> {
    let (nv, n) = (cx.n_vocab, cx.n);
    let m = cx.g.max_rows(x)?;
    let xm = cx.g.sub(x, m)?;
    let e = cx.g.exp(xm)?;
    let sum = cx.row_sum(e)?;
    let perm = cx.g.argsort(x, graph::SortOrder::Desc)?;
    let es = cx.gather(e, perm, nv, nv)?;
    let len = if masked {
        let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
        let finite = cx.g.gt(x, ninf)?;
        cx.row_sum(finite)?
    } else {
        cx.fill(&[1, n], nv as f32)?
    };
    let count = vocab_count(cx, es, sum, len)?;
    let keep = cx.first_in_order(x, perm, count, true)?;
    // A NaN sum (a NaN or +inf logit): keep everything, the row stays bad.
    let good = cx.g.equal(sum, sum)?;
    let bad = cx.g.scale_bias(good, -1.0, 1.0)?;
    let keep = cx.g.add(keep, bad)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    cx.g.where_(keep, x, ninf)
}

/// Tail-free sampling on a list (llama.cpp's form): sorted first where it is not (by value
/// descending, ties in list order, as the CPU sampler's sort), the graph's softmax of the
/// values, [`list_count`] with `len` the entries the CPU chain's list still holds (the `k` less
/// those a stage removed), and the entries from `count` on masked (and, `-inf` from the start or
/// not, marked removed: the CPU sampler truncates its list there). Where the CPU sampler leaves
/// the list as it is (at most 2 entries: no sort) an unsorted list keeps its order.
fn tail_free_list(cx: &mut Lowering<'_>, ids: NodeId, vals: NodeId, init: NodeId, k: usize, sorted: bool) -> R<Record> {
    let n = cx.n;
    let vals = cx.contiguous(vals)?;
    let removed = cx.removed(init, vals)?;
    let n_removed = cx.g.sum_rows(removed)?;
    let len = cx.g.scale_bias(n_removed, -1.0, k as f32)?;
    let (s_ids, s_vals, s_init) = if sorted {
        (ids, vals, init)
    } else {
        match cx.sort_list(ids, vals, init, k)? {
            Record::List { ids, vals, init, .. } => (ids, vals, init),
            r => return Ok(r),
        }
    };
    let s_vals = cx.contiguous(s_vals)?;
    let probs = cx.g.soft_max(s_vals, None, 1.0)?;
    let count = list_count(cx, probs, len, k)?;
    // Entries at positions >= count are dropped; none where len <= 2 (the CPU's early return).
    let pos = cx.g.arange(DType::F32, &[k, n], 0.0, 1.0)?;
    let past = cx.g.ge(pos, count)?;
    let two = cx.fill(&[1, 1], 2.0)?;
    let active = cx.g.gt(len, two)?;
    let drop = cx.g.mul(past, active)?;
    let ninf = cx.fill(&[1, 1], f32::NEG_INFINITY)?;
    let zero = cx.fill(&[1, 1], 0.0)?;
    let keep = cx.g.scale_bias(drop, -1.0, 1.0)?;
    let out_vals = cx.g.where_(keep, s_vals, ninf)?;
    let out_init = cx.g.where_(keep, s_init, zero)?;
    if sorted {
        return Ok(Record::List { ids: s_ids, vals: out_vals, k, init: out_init, sorted: true });
    }
    // An unsorted list of at most 2 held entries stays as it came (the CPU sampler returns first).
    let s_ids_f = cx.g.cast(s_ids, DType::F32)?;
    let ids_f = cx.g.cast(ids, DType::F32)?;
    let ids_out = cx.g.where_(active, s_ids_f, ids_f)?;
    let ids_out = cx.g.cast(ids_out, DType::I32)?;
    let vals_out = cx.g.where_(active, out_vals, vals)?;
    let init_out = cx.g.where_(active, out_init, init)?;
    Ok(Record::List { ids: ids_out, vals: vals_out, k, init: init_out, sorted: false })
}

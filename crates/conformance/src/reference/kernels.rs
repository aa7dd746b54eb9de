//! The f64 math of each op on logical (contiguous, ggml-order) values: plain loops that follow the
//! doc comments of `graph::Op` literally. Rounding to the result dtype is the caller's job.

use graph::{BinaryOp, CompareOp, RopeMode, RopeParams, SortOrder, UnaryOp};
use std::cmp::Ordering;

/// `f(x)` for a unary op.
pub fn unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqr => x * x,
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Gelu => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        }
    }
}

/// `a (op) b`.
pub fn binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
    }
}

/// `a (cmp) b` as 1.0 / 0.0 (NaN compares false).
pub fn compare(op: CompareOp, a: f64, b: f64) -> f64 {
    let t = match op {
        CompareOp::Ge => a >= b,
        CompareOp::Gt => a > b,
        CompareOp::Eq => a == b,
    };
    if t { 1.0 } else { 0.0 }
}

/// Softmax of one row (`x * scale + mask` already applied by the caller). An all `-inf` row gives NaN.
pub fn softmax_row(x: &[f64]) -> Vec<f64> {
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = x.iter().map(|&v| (v - max).exp()).collect();
    let sum: f64 = e.iter().sum();
    e.iter().map(|&v| v / sum).collect()
}

/// Maximum of a row; NaN propagates.
pub fn max_row(x: &[f64]) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for &v in x {
        if v.is_nan() {
            return f64::NAN;
        }
        if v > m {
            m = v;
        }
    }
    m
}

/// Index of a row's maximum; ties (and an all `-inf` row) pick the lowest index; a NaN ranks
/// above everything (the first NaN).
pub fn argmax_row(x: &[f64]) -> usize {
    if let Some(i) = x.iter().position(|v| v.is_nan()) {
        return i;
    }
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best
}

fn cmp_values(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

/// Stable sorting permutation of a row (ties keep index order in both directions).
pub fn argsort_row(x: &[f64], order: SortOrder) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    match order {
        SortOrder::Asc => idx.sort_by(|&i, &j| cmp_values(x[i], x[j])),
        SortOrder::Desc => idx.sort_by(|&i, &j| cmp_values(x[j], x[i])),
    }
    idx
}

/// Indices of the `k` largest, value descending, ties lower index first.
pub fn top_k_row(x: &[f64], k: usize) -> Vec<usize> {
    // (value descending, index ascending) is a total order, so selecting the first k under it and
    // sorting them gives exactly the first k of the stable descending argsort.
    let order = |&i: &usize, &j: &usize| cmp_values(x[j], x[i]).then(i.cmp(&j));
    let mut idx: Vec<usize> = (0..x.len()).collect();
    if k < idx.len() {
        idx.select_nth_unstable_by(k, order);
        idx.truncate(k);
    }
    idx.sort_by(order);
    idx
}

/// `top_p_mask` of one row (see `graph::Op::TopPMask`), by sorting the whole row and replaying
/// llama.cpp's single-precision top-p (`llama_sampler_softmax_impl` and
/// `llama_sampler_top_p_apply`): `l = x / t` in f32; the maximum; `expf(l - max)` summed in f32 in
/// array order; each probability that over the sum; the probabilities added in f32 in the order
/// value descending, index ascending until the sum is `>= p` at a position `>= min_keep`.
pub fn top_p_mask_row(x: &[f64], t: f64, p: f64, min_keep: f64) -> Vec<f64> {
    let (t, p) = (t as f32, p as f32);
    if !(t > 0.0 && t.is_finite()) || p.is_nan() || min_keep.is_nan() || min_keep < 0.0 {
        return vec![f64::NAN; x.len()];
    }
    let l: Vec<f32> = x.iter().map(|&v| v as f32 / t).collect();
    let all = || l.iter().map(|&v| f64::from(v)).collect();
    let bad = l.iter().any(|v| v.is_nan() || *v == f32::INFINITY);
    let max = l.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if p >= 1.0 || bad || max == f32::NEG_INFINITY {
        return all();
    }
    let mut sum = 0.0f32;
    for &v in &l {
        sum += (v - max).exp();
    }
    let mut order: Vec<usize> = (0..l.len()).collect();
    order.sort_by(|&i, &j| l[j].total_cmp(&l[i]).then(i.cmp(&j)));
    let mut kept = l.len();
    let mut cum = 0.0f32;
    for (pos, &i) in order.iter().enumerate() {
        cum += (l[i] - max).exp() / sum;
        if cum >= p && (pos + 1) as f64 >= min_keep {
            kept = pos + 1;
            break;
        }
    }
    let mut out = vec![f64::NEG_INFINITY; l.len()];
    for &i in &order[..kept] {
        out[i] = f64::from(l[i]);
    }
    out
}

/// `list_filter` of one row (see `graph::Op::ListFilter`), written from the op's specification:
/// the list as f32, each stage applied in turn in llama.cpp's `f32` operations (the decisions of
/// top-p and min-p depend on their rounding, so the reference replays them rather than computing
/// in f64), removed entries `-inf`.
pub fn list_filter_row(x: &[f64], stages: &[graph::ListStage], params: &[f64]) -> Vec<f64> {
    let mut v: Vec<f32> = x.iter().map(|&a| a as f32).collect();
    let pr: Vec<f32> = params.iter().map(|&a| a as f32).collect();
    if v.iter().chain(&pr).any(|a| a.is_nan()) {
        return vec![f64::NAN; x.len()];
    }
    let n = v.len();
    for (s, stage) in stages.iter().enumerate() {
        let (a, b) = (pr[2 * s], pr[2 * s + 1]);
        // min_keep: entries, a fraction rounded down, below 1 as 1 (the first always stays).
        let min_keep = b.floor().max(1.0) as usize;
        let kept = match stage {
            graph::ListStage::Temp => {
                v.iter_mut().for_each(|e| *e /= a);
                n
            }
            graph::ListStage::TopP if a >= 1.0 => n,
            graph::ListStage::TopP => {
                let max = v.iter().fold(f32::NEG_INFINITY, |m, &e| if e > m { e } else { m });
                let mut sum = 0.0f32;
                for &e in &v {
                    sum += (e - max).exp();
                }
                let mut cum = 0.0f32;
                let mut kept = n;
                for (i, &e) in v.iter().enumerate() {
                    cum += (e - max).exp() / sum;
                    if cum >= a && i + 1 >= min_keep {
                        kept = i + 1;
                        break;
                    }
                }
                kept
            }
            graph::ListStage::MinP => {
                let thr = v[0] + a;
                (1..n).find(|&i| i >= min_keep && v[i] < thr).unwrap_or(n)
            }
        };
        v[kept..].iter_mut().for_each(|e| *e = f32::NEG_INFINITY);
    }
    v.into_iter().map(f64::from).collect()
}

/// Inclusive prefix sums.
pub fn cumsum_row(x: &[f64]) -> Vec<f64> {
    let mut acc = 0.0;
    x.iter()
        .map(|&v| {
            acc += v;
            acc
        })
        .collect()
}

/// `x / sqrt(mean(x^2) + eps)`.
pub fn rms_norm_row(x: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (ms + eps).sqrt();
    x.iter().map(|v| v * s).collect()
}

/// Rope of one head at position `pos` with frequency factors `ff` (one per pair), as ggml's
/// `ggml_rope_ext` (see [`graph::RopeParams::cos_sin`]), in f64 (YaRN's correction range as the
/// op's f32 [`graph::RopeParams::corr_dims`]).
pub fn rope_head(x: &[f64], pos: f64, p: &RopeParams, ff: &[f64]) -> Vec<f64> {
    let mut out = x.to_vec();
    let n_dims = p.n_dims as usize;
    let half = n_dims / 2;
    let corr = p.corr_dims().map(f64::from);
    let (fs, ext) = (f64::from(p.freq_scale), f64::from(p.ext_factor));
    for (i, &f) in ff.iter().enumerate().take(half) {
        let extrap = pos * f64::from(p.freq_base).powf(-2.0 * i as f64 / n_dims as f64) / f;
        let mut theta = fs * extrap;
        let mut mscale = f64::from(p.attn_factor);
        if ext != 0.0 {
            let y = (i as f64 - corr[0]) / (corr[1] - corr[0]).max(0.001);
            let mix = (1.0 - y.clamp(0.0, 1.0)) * ext;
            theta = theta * (1.0 - mix) + extrap * mix;
            mscale *= 1.0 + 0.1 * (1.0 / fs).ln();
        }
        let (sin, cos) = theta.sin_cos();
        let (sin, cos) = (sin * mscale, cos * mscale);
        let (a, b) = match p.mode {
            RopeMode::Normal => (2 * i, 2 * i + 1),
            RopeMode::Neox => (i, i + half),
        };
        out[a] = x[a] * cos - x[b] * sin;
        out[b] = x[a] * sin + x[b] * cos;
    }
    out
}

/// `categorical` of one row with the 53-bit uniform `u`, scale `s` and threshold offset `off`,
/// exactly (f64 weights and sums; the threshold `m + off` rounded to f32 as the op specifies): the
/// first index with a positive weight whose running sum exceeds `u W`, the last positive one if
/// none does; -1 for a row with NaN or `+inf` or no finite value, or bad `s`/`off`; with
/// `s = +inf` the first maximum.
pub(super) fn categorical_row(x: &[f64], u: f64, s: f64, off: f64) -> f64 {
    let cum = match categorical_weights(x, s, off) {
        Weights::None => return -1.0,
        Weights::First(i) => return i as f64,
        Weights::Cumulative(cum) => cum,
    };
    let target = u * cum.last().copied().unwrap_or(0.0);
    let mut last = -1.0;
    let mut prev = 0.0;
    for (i, &c) in cum.iter().enumerate() {
        if c > prev {
            last = i as f64;
            if c > target {
                return last;
            }
        }
        prev = c;
    }
    last
}

/// `spec_verify` of one row with a draft entry `e` (see `graph::Op::SpecVerify`), exactly: `e`
/// if `a W < w_e`, else the draw with `u` from the residual (the weights without `w_e`); as
/// [`categorical_row`] for bad rows and `s = +inf`.
pub(super) fn spec_verify_row(x: &[f64], u: f64, s: f64, off: f64, e: usize, a: f64) -> f64 {
    let cum = match categorical_weights(x, s, off) {
        Weights::None => return -1.0,
        Weights::First(i) => return i as f64,
        Weights::Cumulative(cum) => cum,
    };
    let v = verify_weights(&cum, e, a, u);
    if v.accept.a_w < v.accept.w_e || v.target == 0.0 && v.residual.last().copied().unwrap_or(0.0) == 0.0 {
        return e as f64;
    }
    let mut last = -1.0;
    let mut prev = 0.0;
    for (i, &c) in v.residual.iter().enumerate() {
        if c > prev {
            last = i as f64;
            if c > v.target {
                return last;
            }
        }
        prev = c;
    }
    last
}

/// A `spec_verify` row's acceptance test and residual (running sums without the draft entry's
/// weight, and the residual draw's target `u (W - w_e)`).
pub(crate) struct Verify {
    pub accept: crate::compare::Accept,
    pub residual: Vec<f64>,
    pub target: f64,
}

/// [`Verify`] from a row's running sums `cum`, the draft entry `e` and the uniforms.
pub(super) fn verify_weights(cum: &[f64], e: usize, a: f64, u: f64) -> Verify {
    let total = cum.last().copied().unwrap_or(0.0);
    let w_e = cum[e] - if e == 0 { 0.0 } else { cum[e - 1] };
    let residual: Vec<f64> = cum.iter().enumerate().map(|(j, &c)| if j >= e { c - w_e } else { c }).collect();
    let target = u * (total - w_e);
    Verify { accept: crate::compare::Accept { entry: e, a_w: a * total, w_e, total }, residual, target }
}

/// What a categorical row draws from.
pub(super) enum Weights {
    /// Nothing: the row draws -1.
    None,
    /// Always this index (`s = +inf`: the first maximum).
    First(usize),
    /// The running sums of the weights (`cum[i]` = weight of `0..=i`).
    Cumulative(Vec<f64>),
}

/// The running sums of one categorical row's weights `exp((x - m) s)` for the entries at or above
/// the threshold `m + off` (f32-rounded), 0 elsewhere; see [`categorical_row`] for the rows that
/// draw -1 or a fixed index.
pub(super) fn categorical_weights(x: &[f64], s: f64, off: f64) -> Weights {
    if x.iter().any(|v| v.is_nan() || *v == f64::INFINITY) || s.is_nan() || s <= 0.0 || off.is_nan() {
        return Weights::None;
    }
    let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return Weights::None;
    }
    if s == f64::INFINITY {
        return x.iter().position(|&v| v == m).map_or(Weights::None, Weights::First);
    }
    let thr = f64::from(m as f32 + off as f32);
    let mut sum = 0.0;
    let cum = x
        .iter()
        .map(|&v| {
            if v >= thr {
                sum += ((v - m) * s).exp();
            }
            sum
        })
        .collect::<Vec<f64>>();
    if sum > 0.0 { Weights::Cumulative(cum) } else { Weights::None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_unary() {
        assert_eq!(unary(UnaryOp::Neg, 2.5), -2.5);
        assert_eq!(unary(UnaryOp::Log, 0.0), f64::NEG_INFINITY);
        assert!(unary(UnaryOp::Log, -1.0).is_nan());
        assert!(unary(UnaryOp::Sqrt, -1.0).is_nan());
        assert_eq!(unary(UnaryOp::Sqr, -3.0), 9.0);
        // silu(0) = 0, silu(1) = 1 / (1 + e^-1) = 0.7310585786300049
        assert_eq!(unary(UnaryOp::Silu, 0.0), 0.0);
        assert!((unary(UnaryOp::Silu, 1.0) - 0.731_058_578_630_004_9).abs() < 1e-15);
        // gelu(1) with the tanh approximation: 0.8411919906082768
        assert!((unary(UnaryOp::Gelu, 1.0) - 0.841_191_990_608_276_8).abs() < 1e-15);
        assert_eq!(compare(CompareOp::Eq, f64::NAN, f64::NAN), 0.0);
        assert_eq!(compare(CompareOp::Ge, 2.0, 2.0), 1.0);
        assert_eq!(compare(CompareOp::Gt, 2.0, 2.0), 0.0);
    }

    #[test]
    fn hand_computed_rows() {
        // softmax([0, ln 3]) = [1/4, 3/4]
        let s = softmax_row(&[0.0, 3f64.ln()]);
        assert!((s[0] - 0.25).abs() < 1e-15 && (s[1] - 0.75).abs() < 1e-15);
        assert_eq!(softmax_row(&[0.0, f64::NEG_INFINITY]), [1.0, 0.0]);
        assert!(softmax_row(&[f64::NEG_INFINITY; 3]).iter().all(|v| v.is_nan()));
        assert!(max_row(&[1.0, f64::NAN, 3.0]).is_nan());
        assert_eq!(max_row(&[1.0, 5.0, 3.0]), 5.0);
        assert_eq!(argmax_row(&[1.0, 5.0, 5.0, 2.0]), 1);
        assert_eq!(argmax_row(&[f64::NEG_INFINITY; 3]), 0);
        assert_eq!(argsort_row(&[3.0, 1.0, 3.0, 2.0], SortOrder::Asc), [1, 3, 0, 2]);
        assert_eq!(argsort_row(&[3.0, 1.0, 3.0, 2.0], SortOrder::Desc), [0, 2, 3, 1]);
        assert_eq!(top_k_row(&[1.0, 4.0, 4.0, 9.0, 0.0], 3), [3, 1, 2]);
        assert_eq!(top_k_row(&[4.0, 4.0, 4.0, 4.0, 9.0], 2), [4, 0]);
        assert_eq!(top_k_row(&[2.0, 1.0], 2), [0, 1]);
        assert_eq!(cumsum_row(&[1.0, 2.0, -4.0]), [1.0, 3.0, -1.0]);
        // rms([3, 4]) = sqrt(12.5)
        let r = rms_norm_row(&[3.0, 4.0], 0.0);
        assert!((r[0] - 3.0 / 12.5f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn hand_computed_rope() {
        // n_dims 4, pos 1, base 100: theta_0 = 1, theta_1 = 100^(-1/2) = 0.1.
        let x = [1.0, 0.0, 1.0, 0.0, 7.0];
        let n = rope_head(&x, 1.0, &RopeParams::new(4, RopeMode::Normal, 100.0, 1.0), &[1.0, 1.0]);
        assert!((n[0] - 1f64.cos()).abs() < 1e-15 && (n[1] - 1f64.sin()).abs() < 1e-15);
        assert!((n[2] - 0.1f64.cos()).abs() < 1e-15 && (n[3] - 0.1f64.sin()).abs() < 1e-15);
        assert_eq!(n[4], 7.0);
        // neox pairs (0, 2) and (1, 3): x0 = 1, x2 = 1 rotated by theta 1.
        let m = rope_head(&x, 1.0, &RopeParams::new(4, RopeMode::Neox, 100.0, 1.0), &[1.0, 1.0]);
        assert!((m[0] - (1f64.cos() - 1f64.sin())).abs() < 1e-15);
        assert!((m[2] - (1f64.sin() + 1f64.cos())).abs() < 1e-15);
        assert_eq!(m[1], 0.0);
        assert_eq!(m[3], 0.0);
        // frequency factor 2 on pair 0 halves its angle; freq_scale 0.5 halves both
        let f = rope_head(&x, 1.0, &RopeParams::new(4, RopeMode::Normal, 100.0, 1.0), &[2.0, 1.0]);
        assert!((f[0] - 0.5f64.cos()).abs() < 1e-15 && (f[2] - 0.1f64.cos()).abs() < 1e-15);
        let s = rope_head(&x, 1.0, &RopeParams::new(4, RopeMode::Normal, 100.0, 0.5), &[1.0, 1.0]);
        assert!((s[0] - 0.5f64.cos()).abs() < 1e-15 && (s[2] - 0.05f64.cos()).abs() < 1e-15);
    }
}

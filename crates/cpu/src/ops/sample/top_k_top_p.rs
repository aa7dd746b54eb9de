//! One row of `top_k_top_p_sample` (see `graph::Op::TopKTopPSample` and `docs/FUSED.md`).
//!
//! Weights `w` are `exp(x - x_max)` by the shared exponential (logits mode) or the stored values
//! (probability mode), `Z` their f64 total over the probability domain (the top-K survivors, or the
//! whole row; `Z = 1` in probability mode), `prob = w / Z` in f64. Only the sorted paths order
//! anything, and only as far as they must: top-K selects `k <= 1024` tokens; top-P without top-K
//! in logits mode takes [`super::top_p`]'s one-pass path (weights, `Z` and a histogram by value in
//! one pass, then only the buckets that decide the result are ordered); otherwise (probability
//! mode, or where that path declines) it first selects the `top_k_guess` largest, and if the nucleus
//! does not end inside them, buckets the row by value, finds the bucket where the mass crosses `p Z`
//! and sorts only the tokens up to it (see [`bucket_candidates`]); `top_k_guess` changes the work,
//! never the result. The unsorted path (top-K and top-P skipped) never orders: min-P is a threshold
//! and qSample indexes q by token.

use graph::fused::TopKTopP;
use kernels::select::{argmax_index, top_k_indices};

/// The post stage with its per-row input.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Post<'a> {
    /// The first survivor in the order.
    None,
    /// The row of q noise.
    QSample(&'a [f32]),
    /// The uniform of the draw.
    Multinomial(f64),
}

/// The per-row parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub k: i32,
    pub p: f32,
    pub m: f32,
}

/// Which tokens survive the filters.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kept {
    /// These tokens (in no particular order).
    List(Vec<u32>),
    /// Every token (unsorted row, no min-P).
    All,
    /// Unsorted row with min-P: the tokens whose weight is at least `cut` (`w / Z >= cut`).
    AtLeast { cut: f64 },
}

/// The result of one row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pick {
    pub index: usize,
    pub kept: Kept,
}

/// Scratch reused across the rows of one block.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// Weights of the whole row (unsorted and top-P paths).
    pub e: Vec<f32>,
    keys: Vec<u64>,
    idx: Vec<i32>,
    /// The one-pass top-P path's scratch.
    fast: super::top_p::Scratch,
}

/// The row's maximum, or `None` when the row cannot be sampled: a NaN or `+inf` value; all `-inf`
/// (logits mode); a value outside `[0, 1]` (probability mode); a NaN or `+inf` parameter.
fn checked_max(x: &[f32], a: &TopKTopP, p: Params) -> Option<f32> {
    if p.p.is_nan() || p.p == f32::INFINITY || p.m.is_nan() || p.m == f32::INFINITY {
        return None;
    }
    let (m, bad) = kernels::row::max_bad(x);
    if a.input_is_logits {
        (!bad && m != f32::NEG_INFINITY).then_some(m)
    } else {
        x.iter().all(|v| (0.0..=1.0).contains(v)).then_some(m)
    }
}

/// The sampling of one row `x` (`None` for a bad row, see [`checked_max`]).
pub(crate) fn row(x: &[f32], a: &TopKTopP, p: Params, post: Post<'_>, s: &mut Scratch) -> Option<Pick> {
    row_with(x, a, p, post, s, true)
}

/// [`row`] without the one-pass top-P path (the oracle its tests compare it with).
#[cfg(test)]
pub(crate) fn row_sorted(x: &[f32], a: &TopKTopP, p: Params, post: Post<'_>, s: &mut Scratch) -> Option<Pick> {
    row_with(x, a, p, post, s, false)
}

fn row_with(x: &[f32], a: &TopKTopP, p: Params, post: Post<'_>, s: &mut Scratch, fast: bool) -> Option<Pick> {
    let max = checked_max(x, a, p)?;
    let v = x.len();
    let top_k_runs = p.k >= 1 && (p.k as usize) <= v.min(a.ks() as usize);
    if top_k_runs || p.p < 1.0 {
        if fast && !top_k_runs && p.p > 0.0 && a.input_is_logits {
            super::top_p::exp_pass(x, max, &mut s.e, &mut s.fast.pass);
            if let Some(pick) = super::top_p::row(x, max, p, a.eps, post, &s.e, &mut s.fast) {
                return Some(pick);
            }
        }
        let (list, w, z) = sorted_candidates(x, max, a, p, top_k_runs, s);
        Some(finish_sorted(list, w, z, p.m, a.eps, post))
    } else {
        Some(unsorted(x, a, p.m, post, s))
    }
}

/// Weights of the sorted candidates `idx` (relative to the first, in logits mode).
fn list_weights(x: &[f32], idx: &[i32], logits: bool) -> Vec<f32> {
    if logits {
        let (ea, eb) = kernels::exp::exp_affine(x[idx[0] as usize], 1.0);
        idx.iter().map(|&i| kernels::exp::exp_at(x[i as usize], ea, eb)).collect()
    } else {
        idx.iter().map(|&i| x[i as usize]).collect()
    }
}

/// The sorted survivors of top-K and top-P with their weights and `Z`.
fn sorted_candidates(
    x: &[f32],
    m: f32,
    a: &TopKTopP,
    p: Params,
    top_k_runs: bool,
    s: &mut Scratch,
) -> (Vec<u32>, Vec<f32>, f64) {
    let v = x.len();
    let logits = a.input_is_logits;
    let (mut list, mut w, z): (Vec<u32>, Vec<f32>, f64) = if top_k_runs {
        let k = p.k as usize;
        s.idx.resize(k, 0);
        top_k_indices(x, k, &mut s.keys, &mut s.idx[..k]);
        let w = list_weights(x, &s.idx[..k], logits);
        let z = if logits { sum_f64(&w) } else { 1.0 };
        (s.idx[..k].iter().map(|&i| i as u32).collect(), w, z)
    } else if p.p <= 0.0 {
        let i = argmax_index(x);
        return (vec![i as u32], vec![1.0], 1.0);
    } else {
        // top-P over the whole row: Z first, then the G largest until the nucleus ends inside.
        let z = if logits {
            let (ea, eb) = kernels::exp::exp_affine(m, 1.0);
            s.e.resize(v, 0.0);
            kernels::row::exp2_into(x, ea, eb, &mut s.e);
            sum_f64(&s.e)
        } else {
            1.0
        };
        // The guess first: the nucleus often ends among the few largest tokens.
        if a.top_k_guess > 0 {
            let g = (a.top_k_guess as usize).clamp(1, v);
            s.idx.resize(g, 0);
            top_k_indices(x, g, &mut s.keys, &mut s.idx[..g]);
            if let Some(end) = nucleus_end(x, &s.idx[..g], logits, &s.e, z, p.p) {
                let w = list_weights(x, &s.idx[..end], logits);
                return finish_top_p_none(&s.idx[..end], w, z);
            }
        }
        // Else the tokens of the buckets (by value) that hold the nucleus, in order.
        bucket_candidates(x, m, logits, &s.e, z, p.p, &mut s.keys, &mut s.idx);
        let end = match nucleus_end(x, &s.idx, logits, &s.e, z, p.p) {
            Some(end) => end,
            None if s.idx.len() == v => v,
            None => {
                // Summation order left the bucket bound an ulp short: the whole row, in order.
                s.idx.resize(v, 0);
                top_k_indices(x, v, &mut s.keys, &mut s.idx[..v]);
                nucleus_end(x, &s.idx, logits, &s.e, z, p.p).unwrap_or(v)
            }
        };
        let w = list_weights(x, &s.idx[..end], logits);
        return finish_top_p_none(&s.idx[..end], w, z);
    };
    if p.p <= 0.0 {
        list.truncate(1);
        w.truncate(1);
    } else if p.p < 1.0 {
        let mut excl = 0.0f64;
        let mut end = list.len();
        for (j, &wj) in w.iter().enumerate() {
            if excl / z > f64::from(p.p) {
                end = j;
                break;
            }
            excl += f64::from(wj);
        }
        list.truncate(end);
        w.truncate(end);
    }
    (list, w, z)
}

/// Buckets of value below the row max (logits: 1/128 nat wide over 32 nats; probabilities: 1/4096
/// of the max wide), the last one holding everything below.
const BUCKETS: usize = 4096;

/// The tokens of the first buckets whose mass exceeds `p Z`, in the order value descending, index
/// ascending, into `idx`: every token of the nucleus (the buckets before hold less than `p Z`, so
/// each of their tokens is kept; the ones after start past `p Z`, so none of theirs is). One pass
/// for the bucket masses and counts, one placing the gathered tokens by bucket, and a sort of each
/// bucket's tokens.
#[allow(clippy::too_many_arguments)]
fn bucket_candidates(
    x: &[f32],
    m: f32,
    logits: bool,
    e: &[f32],
    z: f64,
    p: f32,
    keys: &mut Vec<u64>,
    idx: &mut Vec<i32>,
) {
    let scale = if logits {
        BUCKETS as f32 / 32.0
    } else if m > 0.0 {
        BUCKETS as f32 / m
    } else {
        0.0
    };
    // Monotone in x (non-increasing): a value's bucket never precedes a larger value's.
    let bucket = |t: f32| {
        let d = (m - t) * scale;
        if d < (BUCKETS - 1) as f32 { d as usize } else { BUCKETS - 1 }
    };
    let mut mass = vec![0.0f64; BUCKETS];
    let mut count = vec![0u32; BUCKETS + 1];
    for (i, &t) in x.iter().enumerate() {
        let b = bucket(t);
        mass[b] += f64::from(if logits { e[i] } else { t });
        count[b + 1] += 1;
    }
    let target = f64::from(p) * z;
    let mut cum = 0.0;
    let mut last = BUCKETS - 1;
    for (b, &mb) in mass.iter().enumerate() {
        cum += mb;
        if cum > target {
            last = b;
            break;
        }
    }
    // A counting sort by bucket (a bucket never holds a value above one of an earlier bucket),
    // then each bucket's few tokens by value and index.
    for b in 0..BUCKETS {
        count[b + 1] += count[b];
    }
    let n = count[last + 1] as usize;
    keys.clear();
    keys.resize(n, 0);
    let mut next = count[..=last].to_vec();
    for (i, &t) in x.iter().enumerate() {
        let b = bucket(t);
        if b <= last {
            keys[next[b] as usize] = kernels::key::index_key(kernels::key::order_key(t), i);
            next[b] += 1;
        }
    }
    for b in 0..=last {
        keys[count[b] as usize..count[b + 1] as usize].sort_unstable_by(|a, b| b.cmp(a));
    }
    idx.clear();
    idx.extend(keys.iter().map(|&k| kernels::key::key_index(k) as i32));
}

fn finish_top_p_none(idx: &[i32], w: Vec<f32>, z: f64) -> (Vec<u32>, Vec<f32>, f64) {
    (idx.iter().map(|&i| i as u32).collect(), w, z)
}

/// Where the nucleus ends among the sorted candidates `idx` (the first position whose exclusive
/// prefix of `w / Z` exceeds `p`), if it ends inside them.
fn nucleus_end(x: &[f32], idx: &[i32], logits: bool, e: &[f32], z: f64, p: f32) -> Option<usize> {
    let mut excl = 0.0f64;
    for (j, &i) in idx.iter().enumerate() {
        if excl / z > f64::from(p) {
            return Some(j);
        }
        excl += f64::from(if logits { e[i as usize] } else { x[i as usize] });
    }
    if excl / z > f64::from(p) && idx.len() < x.len() {
        // Every candidate is kept and the next one would not be: the nucleus is exactly these.
        return Some(idx.len());
    }
    None
}

/// min-P and the post stage on sorted survivors.
pub(crate) fn finish_sorted(mut list: Vec<u32>, mut w: Vec<f32>, z: f64, m: f32, eps: f32, post: Post<'_>) -> Pick {
    if m >= 1.0 {
        list.truncate(1);
        w.truncate(1);
    } else if m > 0.0 {
        // The survivors are a prefix of the sorted list (weights follow the order), so their
        // positions are their sorted positions, as qSample needs.
        let cut = f64::from(w[0]) / z * f64::from(m);
        let end = w.iter().position(|&wj| f64::from(wj) / z < cut).unwrap_or(w.len());
        list.truncate(end);
        w.truncate(end);
    }
    let index = match post {
        Post::None => list[0] as usize,
        Post::QSample(q) => {
            let mut best = (0usize, f64::NEG_INFINITY);
            for (pos, &wj) in w.iter().enumerate() {
                let r = f64::from(wj) / z / (f64::from(q[pos]) + f64::from(eps));
                if r > best.1 {
                    best = (pos, r);
                }
            }
            list[best.0] as usize
        }
        Post::Multinomial(u) => {
            let mut pairs: Vec<(u32, f32)> = list.iter().copied().zip(w.iter().copied()).collect();
            pairs.sort_unstable_by_key(|&(i, _)| i);
            draw(pairs.iter().map(|&(i, wj)| (i as usize, f64::from(wj) / z)), u).unwrap_or(list[0] as usize)
        }
    };
    Pick { index, kept: Kept::List(list) }
}

/// The unsorted path: top-K and top-P skipped.
fn unsorted(x: &[f32], a: &TopKTopP, m: f32, post: Post<'_>, s: &mut Scratch) -> Pick {
    let v = x.len();
    let first = argmax_index(x);
    let (w, z): (&[f32], f64) = if a.input_is_logits {
        let (ea, eb) = kernels::exp::exp_affine(x[first], 1.0);
        s.e.resize(v, 0.0);
        kernels::row::exp2_into(x, ea, eb, &mut s.e);
        (&s.e, sum_f64(&s.e))
    } else {
        (x, 1.0)
    };
    let (kept, cut) = if m >= 1.0 {
        (Kept::List(vec![first as u32]), None)
    } else if m > 0.0 {
        let cut = f64::from(w[first]) / z * f64::from(m);
        (Kept::AtLeast { cut }, Some(cut))
    } else {
        (Kept::All, None)
    };
    if let Kept::List(l) = &kept {
        return Pick { index: l[0] as usize, kept };
    }
    let survives = |i: usize| cut.is_none_or(|c| f64::from(w[i]) / z >= c);
    let index = match post {
        Post::None => first,
        Post::QSample(q) => {
            let mut best = (first, f64::NEG_INFINITY);
            for i in 0..v {
                if survives(i) {
                    let r = f64::from(w[i]) / z / (f64::from(q[i]) + f64::from(a.eps));
                    if r > best.1 {
                        best = (i, r);
                    }
                }
            }
            best.0
        }
        Post::Multinomial(u) => {
            draw((0..v).filter(|&i| survives(i)).map(|i| (i, f64::from(w[i]) / z)), u).unwrap_or(first)
        }
    };
    Pick { index, kept }
}

/// The multinomial draw over `(index, prob)` in index order: the first with `prob > 0` whose f64
/// running sum exceeds `u` times the total, else the last with `prob > 0`; `None` if every
/// probability is 0.
pub(crate) fn draw(items: impl Iterator<Item = (usize, f64)> + Clone, u: f64) -> Option<usize> {
    let total: f64 = items.clone().map(|(_, p)| p).sum();
    let target = u * total;
    let mut run = 0.0f64;
    let mut last = None;
    for (i, p) in items {
        if p > 0.0 {
            run += p;
            last = Some(i);
            if run > target {
                return Some(i);
            }
        }
    }
    last
}

/// Sum in f64, in index order.
fn sum_f64(w: &[f32]) -> f64 {
    w.iter().map(|&v| f64::from(v)).sum()
}

/// Writes the filtered logits of a picked row: `x[v]` for the survivors, `fill` elsewhere.
pub(crate) fn write_logits(x: &[f32], pick: &Pick, logits: bool, e: &[f32], out: &mut [f32]) {
    let fill = if logits { f32::NEG_INFINITY } else { 0.0 };
    match &pick.kept {
        Kept::All => out.copy_from_slice(x),
        Kept::List(l) => {
            out.fill(fill);
            for &i in l {
                out[i as usize] = x[i as usize];
            }
        }
        Kept::AtLeast { cut } => {
            let w: &[f32] = if logits { e } else { x };
            let z = if logits { sum_f64(e) } else { 1.0 };
            for ((o, &xi), &wi) in out.iter_mut().zip(x).zip(w) {
                *o = if f64::from(wi) / z >= *cut { xi } else { fill };
            }
        }
    }
}

//! One row of `random_sample` (see `graph::Op::RandomSample` and `docs/FUSED.md`), in f64 (f16,
//! bf16 and f32 rows widen exactly).
//!
//! The arithmetic is defined so that a GPU computes the same bits (`shaders/sample.comp`, variant
//! `RANDOM`): `e = kernels::exp64::exp((x - x_(0)) / temperature)` (the project's f64 exponential,
//! not the platform's), and every sum in a fixed order that a workgroup can run in parallel:
//!
//! - the total `c_{n-1}` and the top-K sum `c_{kk-1}` are *lane sums* ([`lane_sum`]) over the
//!   members of the set in index order: lane `t` adds the members with `i % 256 == t` in index
//!   order, then the 256 lanes are added pairwise (`acc[t] += acc[t + s]`, `s = 128, 64, .., 1`);
//! - the running sums `c_i` over the order value descending, index ascending are *chunked*: ranks
//!   in chunks of 256, `c_i = P + s` with `s` the running sum inside rank `i`'s chunk and `P` the
//!   running sum of the previous chunks' totals (`P += s` at each chunk start).
//!
//! Every sum only adds non-negative terms, so `c_i` is non-decreasing in `i`, and the result is a
//! correct evaluation of the spec's f64 algorithm (R5: the spec's own scan is a parallel one).
//!
//! No full sort: the total is one pass; `c_{kk-1}` needs the `kk`-th entry of the order
//! (`select_nth_unstable`, linear) and one membership pass; the crossing rank is then searched
//! among the `G` largest, ordered (`G` from 64, 8 times more until the threshold is crossed inside
//! them). Only those candidates are ever sorted, and ties resolve by index (the composite order
//! value descending, index ascending), so the result is the sorted algorithm's.

use kernels::exp64;

/// Lanes of a [`lane_sum`] (the shader's workgroup size).
pub(crate) const LANES: usize = 256;
/// Ranks per chunk of the running sums.
pub(crate) const CHUNK: usize = 256;

/// The parameters of one row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub random: f32,
    pub topp: f32,
    pub temperature: f32,
    pub topk: i32,
}

/// `a` before `b` in the order value descending, index ascending (no NaN).
fn before(x: &[f64], a: u32, b: u32) -> std::cmp::Ordering {
    let (va, vb) = (x[a as usize], x[b as usize]);
    vb.partial_cmp(&va).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
}

/// The index `random_sample` picks from `x`, or `None` for a bad row (see the op's documentation).
pub(crate) fn row(x: &[f64], p: Params) -> Option<usize> {
    let n = x.len();
    if p.random.is_nan() || p.topp.is_nan() || p.temperature.is_nan() || x.iter().any(|v| v.is_nan()) {
        return None;
    }
    if !(0.0..1.0).contains(&p.random) || p.topp < 0.0 || p.temperature < 0.0 {
        return None;
    }
    // The first maximum (float comparison: -0.0 ties +0.0).
    let mut first = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[first] {
            first = i;
        }
    }
    if p.random == 0.0 || p.topp == 0.0 || p.topk == 1 || p.temperature == 0.0 {
        return Some(first);
    }
    let x0 = x[first];
    if x0.is_infinite() {
        return None;
    }
    let t = f64::from(p.temperature);
    let e = |v: f64| exp64::exp((v - x0) / t);
    let total = lane_sum(x, |_, _| true, e);
    let kk = if p.topk <= 0 || p.topk as usize >= n { n } else { p.topk as usize };
    let mut idx: Vec<u32> = (0..n as u32).collect();
    let top = if kk < n {
        idx.select_nth_unstable_by(kk - 1, |&a, &b| before(x, a, b));
        let (pi, pv) = (idx[kk - 1] as usize, x[idx[kk - 1] as usize]);
        lane_sum(x, |i, v| v > pv || (v == pv && i <= pi), e)
    } else {
        total
    };
    // `f64::min` returns the other operand when one is NaN (a `-inf` entry at an infinite
    // temperature); the shader spells the same rule out.
    let threshold = f64::from(p.random) * (f64::from(p.topp) * total).min(top);
    let mut g = 64.min(n);
    loop {
        if g < n {
            idx.select_nth_unstable_by(g - 1, |&a, &b| before(x, a, b));
        }
        idx[..g].sort_unstable_by(|&a, &b| before(x, a, b));
        let (mut base, mut s) = (0.0f64, 0.0f64);
        for (r, &i) in idx[..g].iter().enumerate() {
            if r > 0 && r % CHUNK == 0 {
                base += s;
                s = 0.0;
            }
            s += e(x[i as usize]);
            if base + s >= threshold {
                return Some(i as usize);
            }
        }
        if g == n {
            // Rounding left the threshold above the sorted total: the last rank.
            return idx.last().map(|&i| i as usize);
        }
        g = (g * 8).min(n);
    }
}

/// The lane sum of `e(x_i)` over the members `i` (`member(i, x_i)`): lane `t` adds its members
/// (`i % LANES == t`) in index order, then the lanes are added pairwise (see the module
/// documentation; the shader's workgroup reduction is the same tree).
fn lane_sum(x: &[f64], member: impl Fn(usize, f64) -> bool, e: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    for (b, block) in x.chunks(LANES).enumerate() {
        for (t, &v) in block.iter().enumerate() {
            if member(b * LANES + t, v) {
                acc[t] += e(v);
            }
        }
    }
    let mut s = LANES / 2;
    while s > 0 {
        for t in 0..s {
            acc[t] += acc[t + s];
        }
        s /= 2;
    }
    acc[0]
}

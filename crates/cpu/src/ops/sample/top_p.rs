//! The fast path of `top_k_top_p_sample` for a logits row whose top-K is skipped and whose top-P
//! runs (`0 < p < 1`): the row's weights, their total `Z` and a histogram of the row by value come
//! from one pass, and only the few tokens whose order can change the result are ever ordered.
//!
//! **The pass** ([`exp_pass`]): per chunk, `e = 2^(x a + b)` by `kernels::row::exp2_into` (the same
//! bits as one call over the row), then `Z += e` in f64 in index order (the same sum, bit for bit,
//! as `sum_f64` of [`super::top_k_top_p`]) and, per bucket of value below the row max (1/128 nat
//! wide, [`BUCKETS`] of them, the last holding everything below 32 nats), the f64 mass and the
//! count. A bucket never holds a value above one of an earlier bucket's, so bucket by bucket is the
//! order value descending, index ascending, up to the order inside each bucket.
//!
//! **Exact sums without the order.** Every candidate weight is an f32 of at least `2^E`, so a
//! multiple of `2^(E-23)`; if their total is below `2^(53+E-23)`, every f64
//! partial sum of candidate weights is exact, whatever the order. The kernel checks that bound on
//! the candidates' smallest weight ([`exact_sums`]); then the sorted path's exclusive prefix `Σ_{i<j} e_i` at the start of a bucket
//! is the sum of the earlier buckets' masses, bit for bit, and the top-P cut is found by summing
//! masses, then ordering the one bucket where `prefix / Z` first exceeds `p`.
//!
//! **Ordering only what matters.** min-P orders at most the first bucket holding a token it cuts;
//! qSample (q indexed by sorted position, the bucket's positions being known from the counts)
//! bounds each surviving bucket's best ratio by `w_max / Z / (q_min + eps)` (f64 rounding is
//! monotone, so it is a true bound of every computed ratio) and orders buckets from the largest
//! bound down, stopping when a bound falls below the best ratio found (with exponential noise,
//! few buckets). The argmax and the multinomial draw need no order beyond the first token.
//!
//! Every decision is made on the numbers the sorted path computes (the same `e`, `Z`, weights
//! `w = exp_at(x, first)`, f64 expressions and tie rules), so the index and the survivors are the
//! sorted path's. Where an assumption fails (the bound on exact sums, the cut in the last bucket, a
//! qSample denominator `q + eps` that is not positive) [`row`] returns `None` and the caller takes
//! the sorted path.

use super::top_k_top_p::{Kept, Params, Pick, Post, draw};
use kernels::key::key_index;

/// Buckets of value below the row max, 1/128 nat wide over 32 nats; the last holds everything
/// below.
pub(crate) const BUCKETS: usize = 4096;
/// Buckets per nat.
const SCALE: f32 = BUCKETS as f32 / 32.0;
/// Entries per call of the exponential kernel (a multiple of its 16 lanes).
const CHUNK: usize = 1024;

/// The bucket of `t` in a row of maximum `m`: non-increasing in `t`.
#[inline(always)]
fn bucket(t: f32, m: f32) -> usize {
    bucket_id(t, m) as usize
}

/// [`bucket`] in a form that vectorises (`t <= m`, so `d >= 0`; NaN and `d >= BUCKETS - 1` clamp
/// to the last bucket).
#[inline(always)]
fn bucket_id(t: f32, m: f32) -> u32 {
    let d = (m - t) * SCALE;
    let c = if d < (BUCKETS - 1) as f32 { d } else { (BUCKETS - 1) as f32 };
    c as i32 as u32
}

/// What the one pass over the row leaves.
#[derive(Debug, Default)]
pub(crate) struct RowPass {
    /// `Σ e` in f64, in index order.
    pub z: f64,
    /// Per bucket: the f64 sum of its weights.
    pub mass: Vec<f64>,
    /// Per bucket: how many tokens it holds.
    pub count: Vec<u32>,
}

/// The one pass: `e[i] = 2^(x[i] a + b)` with `(a, b) = exp_affine(m, 1)`, `Z` and the buckets'
/// masses and counts (see the module documentation).
pub(crate) fn exp_pass(x: &[f32], m: f32, e: &mut Vec<f32>, out: &mut RowPass) {
    let (ea, eb) = kernels::exp::exp_affine(m, 1.0);
    e.resize(x.len(), 0.0);
    out.mass.clear();
    out.mass.resize(BUCKETS, 0.0);
    out.count.clear();
    out.count.resize(BUCKETS, 0);
    let (mass, count) = (&mut out.mass[..], &mut out.count[..]);
    let mut z = 0.0f64;
    let mut ids = [0u32; CHUNK];
    for (xc, ec) in x.chunks(CHUNK).zip(e.chunks_mut(CHUNK)) {
        kernels::row::exp2_into(xc, ea, eb, ec);
        bucket_ids(xc, m, &mut ids);
        for (&w, &b) in ec.iter().zip(&ids) {
            let w = f64::from(w);
            z += w;
            mass[b as usize] += w;
            count[b as usize] += 1;
        }
    }
    out.z = z;
}

#[inline(always)]
fn bucket_ids_body<const FMA: bool>(x: &[f32], m: f32, ids: &mut [u32; CHUNK]) {
    for (id, &t) in ids.iter_mut().zip(x) {
        *id = bucket_id(t, m);
    }
}

kernels::dispatch!(
    /// `ids[j] = bucket(x[j], m)` for a chunk (vectorised).
    fn bucket_ids(x: &[f32], m: f32, ids: &mut [u32; CHUNK]) => bucket_ids_body
);

/// Whether every f64 sum of candidate weights is exact in any order: the candidates' smallest
/// weight `low` is a normal f32 `>= 2^E`, so every weight is a multiple of `2^(E - 23)`, and their
/// total (`total`, computed, so within a factor `1 + 1e-6` of the exact one) stays below
/// `2^(53 + E - 23)`. A zero or subnormal smallest weight declines.
fn exact_sums(low: f32, total: f64) -> bool {
    let exp_bits = (low.to_bits() >> 23) & 0xff;
    if low <= 0.0 || exp_bits == 0 {
        return false;
    }
    let e = exp_bits as i32 - 127;
    total * (1.0 + 1e-6) < (2.0f64).powi(30 + e)
}

/// Per-row scratch of the fast path.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    pub pass: RowPass,
    /// The candidates (tokens of buckets `0..=last`), grouped by bucket, as `index_key`s.
    keys: Vec<u64>,
    /// Their weights `w` (aligned with `keys`).
    w: Vec<f32>,
    /// The gathered candidates (`index_key`s, in index order).
    hits: Vec<u64>,
    /// Whether each candidate bucket is ordered.
    sorted: Vec<bool>,
}

/// The smallest `t` with `bucket(t, m) <= last` (for `last < BUCKETS - 1`): the bucket is
/// non-increasing in `t`, so the candidates are exactly the entries `>= t`. From the real-number
/// bound, a few ulps up or down to the exact edge; `None` if that takes unexpectedly long.
fn edge(m: f32, last: usize) -> Option<f32> {
    let lim = (last + 1) as f32;
    let inside = |t: f32| (m - t) * SCALE < lim;
    let mut t = m - lim / SCALE;
    for _ in 0..256 {
        if !inside(t) {
            t = t.next_up();
        } else if inside(t.next_down()) {
            t = t.next_down();
        } else {
            return Some(t);
        }
    }
    None
}

/// The candidates of buckets `0..=last` grouped by bucket into `s.keys` (`start[b]..start[b + 1]`
/// bucket `b`'s, unordered): the entries at or above the buckets' edge ([`edge`]) by the vector
/// gather `kernels::select::collect_ge` (as `index_key`s), then a counting placement of those few
/// by bucket. Returns their smallest weight `e`, or `None` where the edge was not found.
fn place(x: &[f32], m: f32, last: usize, start: &[u32], e: &[f32], s: &mut Scratch) -> Option<f32> {
    let thr = edge(m, last)?;
    s.hits.clear();
    kernels::select::collect_ge(x, 0, thr, &mut s.hits);
    if s.hits.len() != start[last + 1] as usize {
        return None;
    }
    let mut next = start[..=last].to_vec();
    s.keys.clear();
    s.keys.resize(s.hits.len(), 0);
    let mut low = f32::INFINITY;
    for &k in &s.hits {
        let i = key_index(k) as usize;
        let b = bucket(x[i], m);
        s.keys[next[b] as usize] = k;
        next[b] += 1;
        low = low.min(e[i]);
    }
    Some(low)
}

/// Orders bucket `b`'s candidates (value descending, index ascending) and recomputes their weights.
fn order_bucket(x: &[f32], b: usize, start: &[u32], ea: f32, eb: f32, s: &mut Scratch) {
    if s.sorted[b] {
        return;
    }
    let r = start[b] as usize..start[b + 1] as usize;
    s.keys[r.clone()].sort_unstable_by(|a, b| b.cmp(a));
    for (w, &k) in s.w[r.clone()].iter_mut().zip(&s.keys[r]) {
        *w = kernels::exp::exp_at(x[key_index(k) as usize], ea, eb);
    }
    s.sorted[b] = true;
}

/// The row's sampling by the fast path (see the module documentation), or `None` where it does not
/// apply. `m` is the row max (the row is good), top-K is skipped, `0 < p.p < 1`, logits mode, and
/// [`exp_pass`] has filled `e` and `s.pass`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn row(x: &[f32], m: f32, p: Params, eps: f32, post: Post<'_>, e: &[f32], s: &mut Scratch) -> Option<Pick> {
    let z = s.pass.z;
    let pp = f64::from(p.p);
    // The bucket where the exclusive prefix first exceeds p Z (the last bucket: no bound).
    let (mut before, mut last) = (0.0f64, None);
    for b in 0..BUCKETS - 1 {
        let next = before + s.pass.mass[b];
        if next / z > pp {
            last = Some(b);
            break;
        }
        before = next;
    }
    let last = last?;
    let mut start = Vec::with_capacity(last + 2);
    let mut acc = 0u32;
    start.push(0);
    for &c in &s.pass.count[..=last] {
        acc += c;
        start.push(acc);
    }
    let low = place(x, m, last, &start, e, s)?;
    if !exact_sums(low, before + s.pass.mass[last]) {
        return None;
    }
    s.w.clear();
    s.w.resize(s.keys.len(), 0.0);
    s.sorted.clear();
    s.sorted.resize(last + 1, false);
    // The first token (bucket 0 holds the max), and the weights relative to it, as the sorted path.
    s.keys[..start[1] as usize].sort_unstable_by(|a, b| b.cmp(a));
    let first = key_index(s.keys[0]) as usize;
    let (ea, eb) = kernels::exp::exp_affine(x[first], 1.0);
    order_bucket(x, 0, &start, ea, eb, s);
    order_bucket(x, last, &start, ea, eb, s);
    for b in 1..last {
        for i in start[b] as usize..start[b + 1] as usize {
            s.w[i] = kernels::exp::exp_at(x[key_index(s.keys[i]) as usize], ea, eb);
        }
    }
    // Survivors per bucket (a prefix of each ordered partial bucket): top-P's cut in bucket `last`.
    let mut keep: Vec<u32> = (0..=last).map(|b| start[b + 1] - start[b]).collect();
    let mut excl = before;
    for (j, &k) in s.keys[start[last] as usize..start[last + 1] as usize].iter().enumerate() {
        if excl / z > pp {
            keep[last] = j as u32;
            break;
        }
        excl += f64::from(e[key_index(k) as usize]);
    }
    // min-P: the first position (in order) whose weight falls below the cut ends the list.
    let w0 = s.w[0];
    if p.m >= 1.0 {
        return Some(super::top_k_top_p::finish_sorted(vec![first as u32], vec![w0], z, p.m, eps, post));
    }
    if p.m > 0.0 {
        let cut = f64::from(w0) / z * f64::from(p.m);
        let below = |w: f32| f64::from(w) / z < cut;
        let hit = (0..=last).find(|&b| {
            let r = start[b] as usize..(start[b] + keep[b]) as usize;
            s.w[r].iter().any(|&w| below(w))
        });
        if let Some(b) = hit {
            order_bucket(x, b, &start, ea, eb, s);
            let r = start[b] as usize..(start[b] + keep[b]) as usize;
            keep[b] = s.w[r].iter().position(|&w| below(w)).unwrap_or(keep[b] as usize) as u32;
            for k in &mut keep[b + 1..] {
                *k = 0;
            }
        }
    }
    let survivors = |b: usize| start[b] as usize..(start[b] + keep[b]) as usize;
    let list: Vec<u32> = (0..=last).flat_map(|b| s.keys[survivors(b)].iter().map(|&k| key_index(k))).collect();
    let index = match post {
        Post::None => first,
        Post::QSample(q) => {
            let eps = f64::from(eps);
            let mut bounds = Vec::new();
            for b in 0..=last {
                let r = survivors(b);
                if r.is_empty() {
                    continue;
                }
                let mut den = f64::INFINITY;
                for &qj in &q[r.clone()] {
                    let d = f64::from(qj) + eps;
                    if d.is_nan() || d <= 0.0 {
                        return None;
                    }
                    den = den.min(d);
                }
                let wmax = s.w[r].iter().fold(0.0f32, |a, &w| a.max(w));
                bounds.push((f64::from(wmax) / z / den, b));
            }
            bounds.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
            let mut best = (f64::NEG_INFINITY, usize::MAX);
            for &(bound, b) in &bounds {
                if bound < best.0 {
                    break;
                }
                order_bucket(x, b, &start, ea, eb, s);
                for pos in survivors(b) {
                    let r = f64::from(s.w[pos]) / z / (f64::from(q[pos]) + eps);
                    if r > best.0 || (r == best.0 && pos < best.1) {
                        best = (r, pos);
                    }
                }
            }
            key_index(s.keys[best.1]) as usize
        }
        Post::Multinomial(u) => {
            let mut pairs: Vec<(u32, f32)> =
                (0..=last).flat_map(|b| survivors(b).map(|i| (key_index(s.keys[i]), s.w[i]))).collect();
            pairs.sort_unstable_by_key(|&(i, _)| i);
            draw(pairs.iter().map(|&(i, wj)| (i as usize, f64::from(wj) / z)), u).unwrap_or(first)
        }
    };
    Some(Pick { index, kept: Kept::List(list) })
}

#[cfg(test)]
mod tests {
    use super::super::top_k_top_p::{self, Params, Post};
    use graph::fused::{PostSample, TopKTopP};
    use graph::philox::uniform;

    /// A row of `v` logits: uniform over `width` nats, with ties (values rounded to a grid) in some
    /// rows, `-inf` entries in some, a peak in others, signed zeros in others.
    fn logits_row(seed: u64, v: usize, width: f32, style: u64) -> Vec<f32> {
        (0..v)
            .map(|i| {
                let u = uniform(seed, 0, i as u64);
                let t = u * width - width / 2.0;
                match style % 5 {
                    0 => t,
                    4 => [-0.0, 0.0, -1.0, 1.0][(uniform(seed, 1, i as u64) * 4.0) as usize % 4],
                    1 => (t * 4.0).round() / 4.0,
                    2 if uniform(seed, 1, i as u64) < 0.1 => f32::NEG_INFINITY,
                    3 if i % 97 == 5 => t + 12.0,
                    _ => t,
                }
            })
            .collect()
    }

    /// The one-pass path against the sorted path, bit for bit (index and survivors), over rows,
    /// p, min_p and post stages; also counts that it is taken (and not always declined).
    #[test]
    fn one_pass_path_equals_the_sorted_path() {
        let mut taken = 0;
        let mut total = 0;
        for seed in 0..150u64 {
            let v = [1usize, 2, 7, 33, 300, 4097, 20_000, 151_936][(seed % 8) as usize];
            let width = [0.5f32, 4.0, 16.0, 40.0, 200.0][(seed % 5) as usize];
            let x = logits_row(seed, v, width, seed / 8);
            // Exponential noise, or (every third seed) a few values, so that ratios tie exactly.
            let q: Vec<f32> = (0..v)
                .map(|i| {
                    let u = uniform(seed, 2, i as u64);
                    if seed % 3 == 1 { [0.25, 1.0, 4.0][(u * 3.0) as usize % 3] } else { -(1.0 - u).ln() }
                })
                .collect();
            for (j, &pp) in [1e-6f32, 0.1, 0.5, 0.9, 0.95, 0.999_99].iter().enumerate() {
                let m = [0.0f32, 0.05, 0.5, 1.0, 0.0, 1e-4][(j + seed as usize) % 6];
                for post in 0..3 {
                    let (post, kind) = match post {
                        0 => (Post::None, PostSample::None),
                        1 => (Post::QSample(&q), PostSample::QSample),
                        _ => (Post::Multinomial(uniform(seed, 3, j as u64) as f64), PostSample::Multinomial),
                    };
                    let mut a = TopKTopP::new(kind);
                    a.eps = if seed % 3 == 0 { 0.0 } else { 1e-8 };
                    let p = Params { k: 0, p: pp, m };
                    let mut s = top_k_top_p::Scratch::default();
                    let want = top_k_top_p::row_sorted(&x, &a, p, post, &mut s);
                    let got = top_k_top_p::row(&x, &a, p, post, &mut s);
                    let (Some(want), Some(got)) = (want.clone(), got.clone()) else {
                        assert_eq!(got, want, "seed {seed}");
                        continue;
                    };
                    assert_eq!(got.index, want.index, "seed {seed}, v {v}, width {width}, p {pp}, m {m}, {kind:?}");
                    let sorted = |k: &top_k_top_p::Kept| match k {
                        top_k_top_p::Kept::List(l) => {
                            let mut l = l.clone();
                            l.sort_unstable();
                            l
                        }
                        other => panic!("not a list: {other:?}"),
                    };
                    assert_eq!(sorted(&got.kept), sorted(&want.kept), "seed {seed}, p {pp}, m {m}");
                    let (mx, _) = kernels::row::max_bad(&x);
                    let mut f = super::Scratch::default();
                    let mut e = Vec::new();
                    super::exp_pass(&x, mx, &mut e, &mut f.pass);
                    total += 1;
                    taken += usize::from(super::row(&x, mx, p, a.eps, post, &e, &mut f).is_some());
                }
            }
        }
        assert!(taken * 10 >= total * 7, "the one-pass path was taken in {taken} of {total} cases");
    }
}

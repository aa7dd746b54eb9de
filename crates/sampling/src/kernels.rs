//! The vectorised row kernels behind the fast paths: max/argmax with input checking, a fast
//! `exp`, block-wise sums of exponentials, and threshold gathers and top-k selection straight
//! from a raw logits row.
//!
//! Everything here is plain portable Rust written so that LLVM auto-vectorises it (fixed-size
//! lane arrays over `chunks_exact`, several independent accumulators, selects instead of
//! branches). On x86-64 each public kernel is compiled twice, once for the baseline target and
//! once inside a `#[target_feature(enable = "avx2,fma")]` function, and picks the AVX2 copy at
//! run time when the CPU has it (`is_x86_feature_detected!`, cached by `std`). Elsewhere only the
//! portable copy exists. The two copies compute the same function; the FMA copy rounds the
//! polynomial in [`exp_neg`] differently in the last bit, so probabilities may differ by about
//! 1e-7 relative between machines with and without FMA.
//!
//! # The exponential
//!
//! [`exp_neg`] computes `e^x` for `x <= 0` as `2^y` with `y = x log2(e)`: `y = n + f` with
//! `n = round(y)` (the 1.5*2^23 rounding constant) and `|f| <= 1/2`, `2^f` by a degree-5
//! polynomial (Chebyshev interpolation at six nodes, f32 coefficients: at most 1.6e-7 relative
//! error on `[-1/2, 1/2]`), and `2^n` put straight into the exponent bits. The kernels fold the
//! shift by the row max and the temperature into one multiply-add, `y = x a + b`, with `a =
//! log2(e) / t` and `b = -max a`; the rounding of `b` is a factor common to every token and
//! cancels in the normalisation. The relative error is at most `2.5e-7 + 8e-8 |x|` (tested in
//! `tests::exp_error_bound`): below 1e-6 for `x >= -9`, i.e. for every token within a factor
//! 8000 of the most likely one; the `|x|` term is the f32 rounding of the argument, which
//! llama.cpp's `expf(logit - max)` has as well. Arguments below -87 (`y < -126`, including
//! `-inf`) give exactly 0, so masked tokens get probability 0.

/// Block length for the block-wise kernels: 4 KiB of f32, so a block stays in L1 between the
/// max scan and the exp scan that follow each other.
pub const BLOCK: usize = 1024;

const LANES: usize = 16;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const ROUND_MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
/// Below this, `2^y` is exactly 0: `n = -127` puts 0 into the exponent bits.
const Y_LOW: f32 = -127.0;
/// Chebyshev interpolant of 2^f on [-1/2, 1/2], lowest degree first (the degree-1 coefficient is
/// the fitted value, which happens to round to ln 2).
#[allow(clippy::approx_constant)]
const C: [f32; 6] = [1.000_000_1, 0.693_147_2, 0.240_221_07, 0.055_503_57, 0.009_676_032, 0.001_339_086_3];

#[inline(always)]
fn fmadd<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
    if F { a.mul_add(b, c) } else { a * b + c }
}

/// `2^y` for `y <= 0` (a little above 0 is fine too); exactly 0 for `y <= -126.5`.
#[inline(always)]
pub fn exp2_impl<const F: bool>(y: f32) -> f32 {
    // `y > Y_LOW ? y : Y_LOW` is one max instruction (NaN becomes Y_LOW). At `yc = -127`,
    // n = -127 and the scale below is +0.0, so the result is exactly 0 without a select.
    let yc = if y > Y_LOW { y } else { Y_LOW };
    let t = yc + ROUND_MAGIC;
    let n = t - ROUND_MAGIC;
    let f = yc - n;
    let mut p = C[5];
    p = fmadd::<F>(p, f, C[4]);
    p = fmadd::<F>(p, f, C[3]);
    p = fmadd::<F>(p, f, C[2]);
    p = fmadd::<F>(p, f, C[1]);
    p = fmadd::<F>(p, f, C[0]);
    // The low mantissa bits of `t` hold n as a two's-complement integer.
    let ni = t.to_bits().wrapping_sub(ROUND_MAGIC.to_bits()) as i32;
    let scale = f32::from_bits(((ni + 127) as u32) << 23);
    p * scale
}

/// Fast `e^x` for `x <= 0` (see the module documentation for the error bound); 0 below -87.
#[inline]
pub fn exp_neg(x: f32) -> f32 {
    exp2_impl::<false>(x * LOG2E)
}

/// The multiply-add constants `(a, b)` with `x a + b = (x - m) s log2(e)`.
#[inline]
pub fn exp_affine(m: f32, s: f32) -> (f32, f32) {
    let a = s * LOG2E;
    (a, -m * a)
}

/// `exp((x - m) s)` through the affine form `(a, b) = exp_affine(m, s)` (scalar, portable).
#[inline]
pub fn exp_at(x: f32, a: f32, b: f32) -> f32 {
    exp2_impl::<false>(x * a + b)
}

/// True where a logit is not allowed: NaN or +inf.
#[inline(always)]
fn is_bad(x: f32) -> bool {
    // NaN < inf is false, inf < inf is false.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    let bad = !(x < f32::INFINITY);
    bad
}

macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($a:ident : $t:ty),*) -> $r:ty => $generic:ident, $avx:ident) => {
        $(#[$m])*
        #[inline]
        $vis fn $name($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports AVX2 and FMA (checked just above), which is all
                    // that `$avx` requires.
                    return unsafe { $avx($($a),*) };
                }
            }
            $generic::<false>($($a),*)
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        fn $avx($($a: $t),*) -> $r {
            $generic::<true>($($a),*)
        }
    };
}

// ---------------------------------------------------------------- max with checking

#[inline(always)]
fn max_bad_impl<const F: bool>(xs: &[f32]) -> (f32, bool) {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut bad = [0u32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for j in 0..LANES {
            let x = c[j];
            acc[j] = if x > acc[j] { x } else { acc[j] };
            bad[j] |= u32::from(is_bad(x));
        }
    }
    let mut m = f32::NEG_INFINITY;
    let mut b = false;
    for j in 0..LANES {
        m = if acc[j] > m { acc[j] } else { m };
        b |= bad[j] != 0;
    }
    for &x in rest {
        m = if x > m { x } else { m };
        b |= is_bad(x);
    }
    (m, b)
}

dispatch!(
    /// Maximum of `xs` (ignoring NaN) and whether any element is NaN or +inf. The benchmark
    /// baseline ("a plain max-reduction pass") is this kernel.
    pub fn max_bad(xs: &[f32]) -> (f32, bool) => max_bad_impl, max_bad_avx2
);

/// Position and value of the first NaN or +inf in `xs`, if any (slow path, used for error reports).
pub fn first_bad(xs: &[f32]) -> Option<(usize, f32)> {
    xs.iter().position(|&x| is_bad(x)).map(|i| (i, xs[i]))
}

// ---------------------------------------------------------------- argmax

#[inline(always)]
fn argmax_impl<const F: bool>(xs: &[f32]) -> (usize, f32, bool) {
    let mut best = f32::NEG_INFINITY;
    let mut best_block = usize::MAX;
    let mut bad = false;
    for (b, block) in xs.chunks(BLOCK).enumerate() {
        let (m, bb) = max_bad_impl::<F>(block);
        bad |= bb;
        if m > best || best_block == usize::MAX {
            best = m;
            best_block = b;
        }
    }
    if xs.is_empty() {
        return (0, f32::NEG_INFINITY, false);
    }
    let start = best_block * BLOCK;
    let end = (start + BLOCK).min(xs.len());
    let i = xs[start..end].iter().position(|&x| x == best).unwrap_or(0);
    (start + i, best, bad)
}

dispatch!(
    /// Index of the first maximum of `xs` (llama.cpp's greedy tie rule: the lowest index wins),
    /// the maximum, and whether any element is NaN or +inf. One pass over the row plus a rescan of
    /// one block.
    pub fn argmax(xs: &[f32]) -> (usize, f32, bool) => argmax_impl, argmax_avx2
);

// ---------------------------------------------------------------- sums of exponentials

#[inline(always)]
fn sum_exp_impl<const F: bool>(xs: &[f32], m: f32, s: f32) -> f32 {
    let (a, b) = exp_affine(m, s);
    let mut acc = [0.0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for j in 0..LANES {
            acc[j] += exp2_impl::<F>(fmadd::<F>(c[j], a, b));
        }
    }
    let mut sum = 0.0f32;
    for a in acc {
        sum += a;
    }
    for &x in rest {
        sum += exp2_impl::<F>(fmadd::<F>(x, a, b));
    }
    sum
}

/// Per-block statistics of a row: the block maxima and the sums of `exp((x - block_max) * s)`.
#[derive(Debug, Clone, Default)]
pub struct BlockStats {
    /// Maximum of each block.
    pub max: Vec<f32>,
    /// Sum of `exp((x - max_b) * s)` over each block.
    pub sum: Vec<f32>,
    /// Maximum of each 128-token sub-block (for [`top_k_from_maxima`]).
    pub sub_max: Vec<f32>,
    /// Maximum over the row.
    pub row_max: f32,
    /// Whether a NaN or +inf was seen.
    pub bad: bool,
}

impl BlockStats {
    /// The mass of each block relative to the row maximum, `sum_b * exp((max_b - row_max) * s)`,
    /// and their total.
    pub fn weights(&self, s: f32) -> (Vec<f64>, f64) {
        let mut total = 0.0f64;
        let w: Vec<f64> = self
            .max
            .iter()
            .zip(&self.sum)
            .map(|(&m, &sm)| {
                let w = if m == f32::NEG_INFINITY {
                    0.0
                } else {
                    f64::from(sm) * f64::from(exp_neg((m - self.row_max) * s))
                };
                total += w;
                w
            })
            .collect();
        (w, total)
    }
}

#[inline(always)]
fn block_stats_impl<const F: bool, const SUBS: bool>(xs: &[f32], s: f32, out: &mut BlockStats) {
    out.max.clear();
    out.sum.clear();
    out.sub_max.clear();
    out.bad = false;
    let mut row_max = f32::NEG_INFINITY;
    for block in xs.chunks(BLOCK) {
        let (m, bad) = if SUBS {
            let first = out.sub_max.len();
            let bad = sub_maxima_impl::<F>(block, &mut out.sub_max);
            (out.sub_max[first..].iter().fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a }), bad)
        } else {
            max_bad_impl::<F>(block)
        };
        out.bad |= bad;
        row_max = if m > row_max { m } else { row_max };
        let sum = if m == f32::NEG_INFINITY || bad { 0.0 } else { sum_exp_impl::<F>(block, m, s) };
        out.max.push(m);
        out.sum.push(sum);
    }
    out.row_max = row_max;
}

#[inline(always)]
fn block_stats_plain<const F: bool>(xs: &[f32], s: f32, out: &mut BlockStats) {
    block_stats_impl::<F, false>(xs, s, out)
}

#[inline(always)]
fn block_stats_subs<const F: bool>(xs: &[f32], s: f32, out: &mut BlockStats) {
    block_stats_impl::<F, true>(xs, s, out)
}

dispatch!(
    /// One pass over `xs` block by block: each block's max, then (while it is in L1) its sum of
    /// `exp((x - max) * s)`. This is the online-softmax denominator without a separate max pass.
    pub fn block_stats(xs: &[f32], s: f32, out: &mut BlockStats) -> () => block_stats_plain, block_stats_avx2
);

dispatch!(
    /// [`block_stats`] that also records the 128-token sub-block maxima in
    /// [`BlockStats::sub_max`], for [`top_k_from_maxima`].
    pub fn block_stats_with_sub_max(xs: &[f32], s: f32, out: &mut BlockStats) -> () => block_stats_subs, block_stats_subs_avx2
);

dispatch!(
    /// Sum of `exp((x - m) * s)` over `xs`.
    pub fn sum_exp(xs: &[f32], m: f32, s: f32) -> f32 => sum_exp_impl, sum_exp_avx2
);

#[inline(always)]
fn exp_into_impl<const F: bool>(xs: &[f32], m: f32, s: f32, out: &mut [f32]) {
    let (a, b) = exp_affine(m, s);
    for (o, &x) in out.iter_mut().zip(xs) {
        *o = exp2_impl::<F>(fmadd::<F>(x, a, b));
    }
}

dispatch!(
    /// `out[i] = exp((xs[i] - m) * s)`, computed exactly as [`sum_exp`] computes its terms.
    pub fn exp_into(xs: &[f32], m: f32, s: f32, out: &mut [f32]) -> () => exp_into_impl, exp_into_avx2
);

// ---------------------------------------------------------------- gathers

#[inline(always)]
fn any_ge(c: &[f32], thr: f32) -> bool {
    let mut any = false;
    for &x in c {
        any |= x >= thr;
    }
    any
}

#[inline(always)]
fn gather_ge_impl<const F: bool>(xs: &[f32], base: usize, thr: f32, out: &mut Vec<(u32, f32)>) {
    let chunks = xs.chunks_exact(LANES);
    let rest_start = xs.len() - chunks.remainder().len();
    for (ci, c) in chunks.enumerate() {
        if any_ge(c, thr) {
            for (j, &x) in c.iter().enumerate() {
                if x >= thr {
                    out.push(((base + ci * LANES + j) as u32, x));
                }
            }
        }
    }
    for (j, &x) in xs[rest_start..].iter().enumerate() {
        if x >= thr {
            out.push(((base + rest_start + j) as u32, x));
        }
    }
}

dispatch!(
    /// Appends `(base + i, x)` for every `x = xs[i] >= thr`, in index order.
    pub fn gather_ge(xs: &[f32], base: usize, thr: f32, out: &mut Vec<(u32, f32)>) -> () => gather_ge_impl, gather_ge_avx2
);

#[inline(always)]
fn min_p_gather_impl<const F: bool>(xs: &[f32], ln_p: f32, out: &mut Vec<(u32, f32)>) -> (f32, bool) {
    // Running max: anything >= running_max + ln p is gathered; the final filter (by the caller)
    // removes what the final max rules out. The buffer is compacted when it grows.
    let mut run_max = f32::NEG_INFINITY;
    let mut bad = false;
    for (b, block) in xs.chunks(BLOCK).enumerate() {
        let (m, bb) = max_bad_impl::<F>(block);
        bad |= bb;
        if m > run_max {
            run_max = m;
            let thr = run_max + ln_p;
            if out.len() > 4 * BLOCK {
                out.retain(|&(_, x)| x >= thr);
            }
        }
        gather_ge_impl::<F>(block, b * BLOCK, run_max + ln_p, out);
    }
    (run_max, bad)
}

dispatch!(
    /// Min-p's single pass: returns the row max and the bad flag, and gathers a superset of
    /// `{i : xs[i] >= max + ln_p}` (in index order) into `out`.
    pub fn min_p_gather(xs: &[f32], ln_p: f32, out: &mut Vec<(u32, f32)>) -> (f32, bool) => min_p_gather_impl, min_p_gather_avx2
);

// ---------------------------------------------------------------- top-k selection

/// Orders `(id, logit)` pairs by logit descending, then id ascending: the total order used to
/// break ties everywhere in this crate (llama.cpp leaves ties in an unspecified order).
#[inline]
pub fn desc(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// A sort key for `(id, logit)`: ordering keys as integers descending orders by logit descending
/// (IEEE total order), then id ascending, the order of [`desc`]. Selection and sorting on these
/// keys compare integers instead of floats and ids.
#[inline(always)]
fn key(id: u32, x: f32) -> u64 {
    let b = x.to_bits();
    let ord = if b & 0x8000_0000 != 0 { !b } else { b | 0x8000_0000 };
    (u64::from(ord) << 32) | u64::from(u32::MAX - id)
}

#[inline(always)]
fn unkey(k: u64) -> (u32, f32) {
    let ord = (k >> 32) as u32;
    let b = if ord & 0x8000_0000 != 0 { ord & 0x7fff_ffff } else { !ord };
    (u32::MAX - k as u32, f32::from_bits(b))
}

/// Keeps the `k` best keys of `buf`, unordered; returns the k-th best logit.
fn shrink_to_k(buf: &mut Vec<u64>, k: usize) -> f32 {
    if buf.len() > k {
        buf.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        buf.truncate(k);
    }
    buf.iter().copied().min().map_or(f32::NEG_INFINITY, |m| unkey(m).1)
}

/// Sorts keys best first and decodes them.
fn finish_top_k(keys: &mut Vec<u64>, k: usize, out: &mut Vec<(u32, f32)>) {
    shrink_to_k(keys, k);
    keys.sort_unstable_by(|a, b| b.cmp(a));
    out.clear();
    out.extend(keys.iter().map(|&k| unkey(k)));
}

/// Sub-block length of the top-k selection.
pub const SUB: usize = 128;

#[inline(always)]
fn sub_maxima_impl<const F: bool>(xs: &[f32], out: &mut Vec<f32>) -> bool {
    // Lane-wise NaN/+inf flags for the whole row, reduced once at the end.
    let mut bad = [0u32; LANES];
    for sub in xs.chunks(SUB) {
        let mut acc = [f32::NEG_INFINITY; LANES];
        let chunks = sub.chunks_exact(LANES);
        let rest = chunks.remainder();
        for c in chunks {
            for j in 0..LANES {
                let x = c[j];
                acc[j] = if x > acc[j] { x } else { acc[j] };
                bad[j] |= u32::from(is_bad(x));
            }
        }
        let mut m = f32::NEG_INFINITY;
        for a in acc {
            m = if a > m { a } else { m };
        }
        for &x in rest {
            m = if x > m { x } else { m };
            bad[0] |= u32::from(is_bad(x));
        }
        out.push(m);
    }
    bad.iter().any(|&b| b != 0)
}

/// Top-k in two levels. Pass 1 stores the max of every 128-token sub-block. The k-th largest of
/// those maxima, `T`, is a lower bound of the k-th largest token (the k sub-blocks with the largest
/// maxima hold k tokens `>= T`), so every top-k token is `>= T` and lies in a sub-block whose max
/// is `>= T`: only those (about k of them) are rescanned, and only their tokens `>= T` are
/// selected from.
#[inline(always)]
fn top_k_impl<const F: bool>(xs: &[f32], k: usize, out: &mut Vec<(u32, f32)>) -> bool {
    let mut maxima = Vec::with_capacity(xs.len() / SUB + 1);
    let bad = sub_maxima_impl::<F>(xs, &mut maxima);
    top_k_from_maxima_impl::<F>(xs, &maxima, k, out);
    bad
}

#[inline(always)]
fn top_k_from_maxima_impl<const F: bool>(xs: &[f32], maxima: &[f32], k: usize, out: &mut Vec<(u32, f32)>) {
    let thr = if k >= maxima.len() {
        f32::NEG_INFINITY
    } else {
        // k-th largest maximum, selected on order-preserving integer keys
        let mut m: Vec<u32> = maxima.iter().map(|&x| (key(0, x) >> 32) as u32).collect();
        let kth = *m.select_nth_unstable_by(k - 1, |a, b| b.cmp(a)).1;
        unkey(u64::from(kth) << 32).1
    };
    let mut keys = Vec::with_capacity(2 * k + SUB);
    for (si, &m) in maxima.iter().enumerate() {
        if m >= thr {
            let base = si * SUB;
            let sub = &xs[base..(base + SUB).min(xs.len())];
            let chunks = sub.chunks_exact(LANES);
            let rest_start = sub.len() - chunks.remainder().len();
            for (ci, c) in chunks.enumerate() {
                let mut any = 0u32;
                for &x in c {
                    any |= u32::from(x >= thr);
                }
                if any != 0 {
                    for (j, &x) in c.iter().enumerate() {
                        if x >= thr {
                            keys.push(key((base + ci * LANES + j) as u32, x));
                        }
                    }
                }
            }
            for (j, &x) in sub[rest_start..].iter().enumerate() {
                if x >= thr {
                    keys.push(key((base + rest_start + j) as u32, x));
                }
            }
        }
    }
    finish_top_k(&mut keys, k, out);
}

dispatch!(
    /// The `k` largest entries of `xs` as `(index, logit)`, sorted by [`desc`]: one pass of
    /// sub-block maxima, then a rescan of the ~k sub-blocks that can hold a top-k token (see
    /// `top_k_impl`); also returns whether any element is NaN or +inf. Requires
    /// `1 <= k <= xs.len()`.
    pub fn top_k(xs: &[f32], k: usize, out: &mut Vec<(u32, f32)>) -> bool => top_k_impl, top_k_avx2
);

dispatch!(
    /// The second half of [`top_k`], given the 128-token sub-block maxima of `xs` (as
    /// [`block_stats`] leaves them in [`BlockStats::sub_max`]): rescans only the sub-blocks that
    /// can hold a top-k token. Requires `1 <= k <= xs.len()`.
    pub fn top_k_from_maxima(xs: &[f32], maxima: &[f32], k: usize, out: &mut Vec<(u32, f32)>) -> () => top_k_from_maxima_impl, top_k_from_maxima_avx2
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_error_bound() {
        // Bound: 2.5e-7 (polynomial and evaluation) + 8e-8 |x| (the f32 rounding of the argument,
        // which any f32 softmax has: llama.cpp's expf(l - max) rounds l - max the same way).
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x <= 0.0 {
            let want = f64::from(x).exp();
            for got in [exp_neg(x), exp2_impl::<true>(x * LOG2E)] {
                let rel = ((f64::from(got) - want) / want).abs();
                let bound = 2.5e-7 + 8e-8 * f64::from(x.abs());
                assert!(rel <= bound, "x = {x}: relative error {rel} > {bound}");
                if x > -9.0 {
                    worst = worst.max(rel);
                }
            }
            x += 0.000_731;
        }
        assert!(worst < 1e-6, "worst relative error on [-9, 0]: {worst}");
        assert_eq!(exp_neg(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_neg(-1000.0), 0.0);
        assert!((exp_neg(0.0) - 1.0).abs() < 2e-7);
        // the affine form used by the kernels agrees with exp_neg
        let (a, b) = exp_affine(3.0, 0.5);
        let e = exp2_impl::<false>(1.0 * a + b);
        assert!((f64::from(e) - (-1.0f64).exp()).abs() < 1e-6);
    }

    #[test]
    fn max_and_argmax() {
        let mut v: Vec<f32> = (0..5000).map(|i| ((i * 7919) % 1000) as f32 * 0.01).collect();
        v[3001] = 50.0;
        v[4000] = 50.0;
        assert_eq!(max_bad(&v), (50.0, false));
        assert_eq!(argmax(&v), (3001, 50.0, false));
        v[17] = f32::NAN;
        assert!(max_bad(&v).1);
        assert_eq!(first_bad(&v).map(|(i, _)| i), Some(17));
        v[17] = f32::INFINITY;
        assert!(argmax(&v).2);
    }

    #[test]
    fn top_k_matches_sort() {
        let v: Vec<f32> =
            (0..10_000u32).map(|i| ((i.wrapping_mul(2_654_435_761) >> 7) % 100_000) as f32 / 1000.0).collect();
        for k in [1, 2, 40, 100, 9999, 10_000] {
            let mut out = Vec::new();
            assert!(!top_k(&v, k, &mut out));
            let mut all: Vec<(u32, f32)> = v.iter().enumerate().map(|(i, &x)| (i as u32, x)).collect();
            all.sort_by(desc);
            all.truncate(k);
            assert_eq!(out, all, "k = {k}");
        }
    }

    #[test]
    fn keys_order_like_desc() {
        let xs = [f32::NEG_INFINITY, -1.5, -0.0, 0.0, 1e-30, 2.0, 2.0, f32::MAX];
        for (i, &a) in xs.iter().enumerate() {
            assert_eq!(unkey(key(i as u32, a)), (i as u32, a));
            for (j, &b) in xs.iter().enumerate() {
                let by_key = key(j as u32, b).cmp(&key(i as u32, a));
                assert_eq!(by_key, desc(&(i as u32, a), &(j as u32, b)), "{a} {b}");
            }
        }
    }

    #[test]
    fn block_stats_sum() {
        let v: Vec<f32> = (0..3000).map(|i| (i % 37) as f32 * 0.1).collect();
        let mut st = BlockStats::default();
        block_stats(&v, 1.0, &mut st);
        let (_, total) = st.weights(1.0);
        let m = st.row_max;
        let want: f64 = v.iter().map(|&x| f64::from(x - m).exp()).sum();
        assert!((total - want).abs() / want < 1e-6);
    }
}

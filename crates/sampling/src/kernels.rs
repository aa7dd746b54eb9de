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
//! [`exp_neg`] computes `e^x` for `x <= 88` as `2^n * e^r` with `n = round(x / ln 2)` (found with
//! the 1.5*2^23 rounding constant), `r = x - n ln 2` (two-constant Cody-Waite split, `|r| <= ln2/2`)
//! and `e^r` by its degree-6 Taylor polynomial. The truncation error is at most
//! `(ln2/2)^7 / 7! / e^(-ln2/2) < 1.7e-7` relative; with float rounding the measured maximum
//! relative error over `[-87, 0]` is below 4e-7 (tested in `tests::exp_error_bound`).
//! Arguments below -87 (including -inf) give exactly 0, so masked tokens get probability 0.

/// Block length for the block-wise kernels: 4 KiB of f32, so a block stays in L1 between the
/// max scan and the exp scan that follow each other.
pub const BLOCK: usize = 1024;

const LANES: usize = 16;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const ROUND_MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
const LN2_HI: f32 = 0.693_359_4; // 0.693359375, few mantissa bits so n * LN2_HI is exact
const LN2_LO: f32 = -2.121_944_4e-4;
const EXP_LOW: f32 = -87.0;
const EXP_HIGH: f32 = 88.0;

#[inline(always)]
fn fmadd<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
    if F { a.mul_add(b, c) } else { a * b + c }
}

/// Fast `e^x` for `x <= 88` (see the module documentation for the error bound); 0 below -87.
#[inline(always)]
pub fn exp_neg_impl<const F: bool>(x: f32) -> f32 {
    // Not `clamp`: this select form vectorises and passes NaN through without panicking.
    #[allow(clippy::manual_clamp)]
    let xc = if x < EXP_LOW {
        EXP_LOW
    } else if x > EXP_HIGH {
        EXP_HIGH
    } else {
        x
    };
    let t = fmadd::<F>(xc, LOG2E, ROUND_MAGIC);
    let n = t - ROUND_MAGIC;
    let r = fmadd::<F>(n, -LN2_HI, xc);
    let r = fmadd::<F>(n, -LN2_LO, r);
    let mut p = 1.0 / 720.0;
    p = fmadd::<F>(p, r, 1.0 / 120.0);
    p = fmadd::<F>(p, r, 1.0 / 24.0);
    p = fmadd::<F>(p, r, 1.0 / 6.0);
    p = fmadd::<F>(p, r, 0.5);
    p = fmadd::<F>(p, r, 1.0);
    p = fmadd::<F>(p, r, 1.0);
    // The low mantissa bits of `t` hold n as a two's-complement integer.
    let ni = t.to_bits().wrapping_sub(ROUND_MAGIC.to_bits()) as i32;
    let scale = f32::from_bits(((ni + 127) as u32) << 23);
    let y = p * scale;
    if x < EXP_LOW { 0.0 } else { y }
}

/// Scalar entry point of the fast exponential (portable rounding).
#[inline]
pub fn exp_neg(x: f32) -> f32 {
    exp_neg_impl::<false>(x)
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
    let mut bad = [false; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for j in 0..LANES {
            let x = c[j];
            acc[j] = if x > acc[j] { x } else { acc[j] };
            bad[j] |= is_bad(x);
        }
    }
    let mut m = f32::NEG_INFINITY;
    let mut b = false;
    for j in 0..LANES {
        m = if acc[j] > m { acc[j] } else { m };
        b |= bad[j];
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
    let mut acc = [0.0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for j in 0..LANES {
            acc[j] += exp_neg_impl::<F>((c[j] - m) * s);
        }
    }
    let mut sum = 0.0f32;
    for a in acc {
        sum += a;
    }
    for &x in rest {
        sum += exp_neg_impl::<F>((x - m) * s);
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
fn block_stats_impl<const F: bool>(xs: &[f32], s: f32, out: &mut BlockStats) {
    out.max.clear();
    out.sum.clear();
    out.bad = false;
    let mut row_max = f32::NEG_INFINITY;
    for block in xs.chunks(BLOCK) {
        let (m, bad) = max_bad_impl::<F>(block);
        out.bad |= bad;
        row_max = if m > row_max { m } else { row_max };
        let sum = if m == f32::NEG_INFINITY || bad { 0.0 } else { sum_exp_impl::<F>(block, m, s) };
        out.max.push(m);
        out.sum.push(sum);
    }
    out.row_max = row_max;
}

dispatch!(
    /// One pass over `xs` block by block: each block's max, then (while it is in L1) its sum of
    /// `exp((x - max) * s)`. This is the online-softmax denominator without a separate max pass.
    pub fn block_stats(xs: &[f32], s: f32, out: &mut BlockStats) -> () => block_stats_impl, block_stats_avx2
);

dispatch!(
    /// Sum of `exp((x - m) * s)` over `xs`.
    pub fn sum_exp(xs: &[f32], m: f32, s: f32) -> f32 => sum_exp_impl, sum_exp_avx2
);

#[inline(always)]
fn exp_into_impl<const F: bool>(xs: &[f32], m: f32, s: f32, out: &mut [f32]) {
    for (o, &x) in out.iter_mut().zip(xs) {
        *o = exp_neg_impl::<F>((x - m) * s);
    }
}

dispatch!(
    /// `out[i] = exp((xs[i] - m) * s)`.
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

/// Keeps the `k` best entries of `buf` (by [`desc`]), unordered; returns the k-th best logit.
fn shrink_to_k(buf: &mut Vec<(u32, f32)>, k: usize) -> f32 {
    if buf.len() > k {
        buf.select_nth_unstable_by(k - 1, desc);
        buf.truncate(k);
    }
    buf.iter().map(|e| e.1).fold(f32::INFINITY, f32::min)
}

#[inline(always)]
fn top_k_impl<const F: bool>(xs: &[f32], k: usize, out: &mut Vec<(u32, f32)>) -> bool {
    out.clear();
    let cap = (2 * k).max(k + 64);
    let mut thr = f32::NEG_INFINITY;
    let mut bad = [false; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest_start = xs.len() - chunks.remainder().len();
    for (ci, c) in chunks.enumerate() {
        let mut any = false;
        for j in 0..LANES {
            any |= c[j] >= thr;
            bad[j] |= is_bad(c[j]);
        }
        if any {
            for (j, &x) in c.iter().enumerate() {
                if x >= thr {
                    out.push(((ci * LANES + j) as u32, x));
                }
            }
            if out.len() >= cap {
                thr = shrink_to_k(out, k);
            }
        }
    }
    let mut b = bad.iter().any(|&x| x);
    for (j, &x) in xs[rest_start..].iter().enumerate() {
        b |= is_bad(x);
        if x >= thr {
            out.push(((rest_start + j) as u32, x));
        }
    }
    shrink_to_k(out, k);
    out.sort_unstable_by(desc);
    b
}

dispatch!(
    /// The `k` largest entries of `xs` as `(index, logit)`, sorted by [`desc`], in one pass that
    /// keeps a running threshold (a buffer of about 2k candidates shrunk by `select_nth`); also
    /// returns whether any element is NaN or +inf. Requires `1 <= k <= xs.len()`.
    pub fn top_k(xs: &[f32], k: usize, out: &mut Vec<(u32, f32)>) -> bool => top_k_impl, top_k_avx2
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_error_bound() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x <= 0.0 {
            let got = f64::from(exp_neg(x));
            let want = f64::from(x).exp();
            worst = worst.max(((got - want) / want).abs());
            // also the FMA flavour
            let got2 = f64::from(exp_neg_impl::<true>(x));
            worst = worst.max(((got2 - want) / want).abs());
            x += 0.000_731;
        }
        assert!(worst < 4e-7, "worst relative error {worst}");
        assert_eq!(exp_neg(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_neg(-1000.0), 0.0);
        assert_eq!(exp_neg(0.0), 1.0);
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

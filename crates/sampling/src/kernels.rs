//! The row kernels behind the fast paths: block statistics (block maxima, 128-token sub-block
//! maxima and block sums of exponentials in one pass), argmax, threshold gathers and top-k selection
//! straight from a raw logits row.
//!
//! The exponential and the plain max scan are the shared ones of the `kernels` crate, re-exported
//! here: [`exp_neg`], [`exp_affine`], [`exp_at`] ([`kernels::exp`], where its error
//! bound is documented and tested) and [`max_bad`] ([`kernels::row`]).
//!
//! Every kernel exists twice: an explicit AVX2+FMA version (`std::arch` intrinsics in the private
//! `x86` module, chosen at run time by [`::kernels::has_avx2_fma`]) and a portable version (module
//! `portable`) that LLVM vectorises for the baseline target. Both compute the same function: maxima,
//! flags, gathered sets and selections are identical; sums of exponentials differ only in rounding
//! (summation order, and the fused multiply-adds of the AVX2 exponential), about 1e-7 relative.
//!
//! # One pass for the block statistics
//!
//! [`block_stats`] walks the row in 1024-token blocks and is software-pipelined: while it sums the
//! exponentials of block `b` (already in L1, relative to its own max), it computes the 128-token
//! sub-block maxima of block `b + 1` in the same loop, so the row is read from memory once and the
//! memory reads of the next block overlap the arithmetic of the current one. (On the Zen 3 this was
//! measured on, the loop is bound by its vector instruction count, so the max scan still adds its
//! own cost: about 0.33 ns per token against 0.25 for the exponentials alone.) NaN is found by
//! unordered compares of pairs of vectors, +inf by comparing the sub-block maxima with +inf. The last, partial, block is copied into a `-inf`-padded buffer (a `-inf` changes no
//! maximum and has weight exactly 0).

pub use ::kernels::exp::{exp_affine, exp_at, exp_neg};
pub use ::kernels::row::{is_bad, max_bad};

/// Block length for the block-wise kernels: 4 KiB of f32, so a block stays in L1 between the
/// scans that read it.
pub const BLOCK: usize = 1024;

/// Sub-block length of the top-k selection.
pub const SUB: usize = 128;

/// Sub-blocks per block.
const SUBS: usize = BLOCK / SUB;

/// Position and value of the first NaN or +inf in `xs`, if any (slow path, used for error reports).
pub fn first_bad(xs: &[f32]) -> Option<(usize, f32)> {
    xs.iter().position(|&x| is_bad(x)).map(|i| (i, xs[i]))
}

/// Defines `pub fn $name(args) -> ret` calling `x86::$name` when the CPU has AVX2+FMA, else
/// `portable::$name`.
macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($a:ident : $t:ty),*) -> $r:ty) => {
        $(#[$m])*
        #[inline]
        $vis fn $name($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            {
                if ::kernels::has_avx2_fma() {
                    // SAFETY: the CPU has AVX2 and FMA, all that the x86 version requires.
                    return unsafe { x86::$name($($a),*) };
                }
            }
            portable::$name($($a),*)
        }
    };
}

// ---------------------------------------------------------------- block statistics

/// Per-block statistics of a row: the block maxima and the sums of `exp((x - block_max) * s)`.
/// The buffers are reused from call to call (no allocation once they have grown).
#[derive(Debug, Clone, Default)]
pub struct BlockStats {
    /// Maximum of each block.
    pub max: Vec<f32>,
    /// Sum of `exp((x - max_b) * s)` over each block (0 for an all `-inf` block or when `bad`).
    pub sum: Vec<f32>,
    /// Maximum of each 128-token sub-block (only from [`block_stats_with_sub_max`]; empty otherwise).
    pub sub_max: Vec<f32>,
    /// The block masses filled by [`BlockStats::weights`].
    pub weight: Vec<f64>,
    /// Maximum over the row.
    pub row_max: f32,
    /// Whether a NaN or +inf was seen.
    pub bad: bool,
}

impl BlockStats {
    /// Fills [`BlockStats::weight`] with the mass of each block relative to the row maximum,
    /// `sum_b * exp((max_b - row_max) * s)`, and returns their total.
    pub fn weights(&mut self, s: f32) -> f64 {
        let mut total = 0.0f64;
        self.weight.clear();
        for (&m, &sm) in self.max.iter().zip(&self.sum) {
            let w =
                if m == f32::NEG_INFINITY { 0.0 } else { f64::from(sm) * f64::from(exp_neg((m - self.row_max) * s)) };
            total += w;
            self.weight.push(w);
        }
        total
    }

    /// Sizes the buffers for a row of `n` tokens.
    fn reset(&mut self, n: usize, subs: bool) {
        let nb = n.div_ceil(BLOCK);
        self.max.clear();
        self.max.resize(nb, f32::NEG_INFINITY);
        self.sum.clear();
        self.sum.resize(nb, 0.0);
        self.sub_max.clear();
        if subs {
            self.sub_max.resize(n.div_ceil(SUB), f32::NEG_INFINITY);
        }
        self.row_max = f32::NEG_INFINITY;
        self.bad = false;
    }
}

dispatch!(
    /// One pass over `xs` block by block: each block's max, then (while it is in L1) its sum of
    /// `exp((x - max) * s)`. This is the online-softmax denominator without a separate max pass.
    pub fn block_stats(xs: &[f32], s: f32, out: &mut BlockStats) -> ()
);

dispatch!(
    /// [`block_stats`] that also records the 128-token sub-block maxima in
    /// [`BlockStats::sub_max`], for [`top_k_from_maxima`].
    pub fn block_stats_with_sub_max(xs: &[f32], s: f32, out: &mut BlockStats) -> ()
);

dispatch!(
    /// The maximum of every 128-token sub-block of `xs` (the last one may be shorter) into `out`
    /// (cleared first), and whether any element is NaN or +inf.
    pub fn sub_maxima(xs: &[f32], out: &mut Vec<f32>) -> bool
);

// ---------------------------------------------------------------- argmax and gathers

dispatch!(
    /// Index of the first maximum of `xs` (llama.cpp's greedy tie rule: the lowest index wins),
    /// the maximum, and whether any element is NaN or +inf. One pass over the row plus a rescan of
    /// one block.
    pub fn argmax(xs: &[f32]) -> (usize, f32, bool)
);

dispatch!(
    /// Appends `(base + i, x)` for every `x = xs[i] >= thr`, in index order.
    pub fn gather_ge(xs: &[f32], base: usize, thr: f32, out: &mut Vec<(u32, f32)>) -> ()
);

dispatch!(
    /// Min-p's single pass: returns the row max and the bad flag, and gathers a superset of
    /// `{i : xs[i] >= max + ln_p}` (in index order) into `out`.
    pub fn min_p_gather(xs: &[f32], ln_p: f32, out: &mut Vec<(u32, f32)>) -> (f32, bool)
);

// ---------------------------------------------------------------- top-k selection

/// Orders `(id, logit)` pairs by logit descending, then id ascending: the total order used to
/// break ties everywhere in this crate (llama.cpp leaves ties in an unspecified order).
#[inline]
pub fn desc(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The order-preserving integer image of a logit: comparing these as integers compares the logits
/// in IEEE total order.
#[inline(always)]
fn ord(x: f32) -> u32 {
    let b = x.to_bits();
    if b & 0x8000_0000 != 0 { !b } else { b | 0x8000_0000 }
}

/// Inverse of [`ord`].
#[inline(always)]
fn unord(o: u32) -> f32 {
    f32::from_bits(if o & 0x8000_0000 != 0 { o & 0x7fff_ffff } else { !o })
}

/// A sort key for `(id, logit)`: ordering keys as integers descending orders by logit descending
/// (IEEE total order), then id ascending, the order of [`desc`]. Selection and sorting on these
/// keys compare integers instead of floats and ids.
#[inline(always)]
fn key(id: u32, x: f32) -> u64 {
    (u64::from(ord(x)) << 32) | u64::from(u32::MAX - id)
}

#[inline(always)]
fn unkey(k: u64) -> (u32, f32) {
    (u32::MAX - k as u32, unord((k >> 32) as u32))
}

/// Keeps the `k` best keys of `buf`, sorts them best first and decodes them into `out`.
fn finish_top_k(keys: &mut Vec<u64>, k: usize, out: &mut Vec<(u32, f32)>) {
    if keys.len() > k {
        keys.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        keys.truncate(k);
    }
    keys.sort_unstable_by(|a, b| b.cmp(a));
    out.clear();
    out.extend(keys.iter().map(|&k| unkey(k)));
}

/// The k-th largest of the sub-block `maxima` (IEEE total order), or `-inf` when there are at most
/// `k` of them. A lower bound `L` comes first at the cost of one read of the maxima: split the
/// first `k g` maxima into `k` groups of `g = len / k`; the `k` group maxima are `k` distinct
/// entries `>= L = min(group maxima)`, so the k-th largest is `>= L`, and only the entries `>= L`
/// (usually a few times `k`) go to the selection. (Float comparisons; the maxima of a row without
/// NaN hold no NaN. With NaN the result is meaningless but the call is safe: the row is rejected.)
#[inline(always)]
fn kth_largest_impl(maxima: &[f32], k: usize, scratch: &mut Vec<u32>) -> f32 {
    if k == 0 || k >= maxima.len() {
        return f32::NEG_INFINITY;
    }
    let g = maxima.len() / k;
    let mut lower = f32::INFINITY;
    for group in maxima[..g * k].chunks_exact(g) {
        let gm = group.iter().fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
        lower = if gm < lower { gm } else { lower };
    }
    // Branch-free filter: store every key, advance past the ones that pass.
    scratch.clear();
    scratch.resize(maxima.len(), 0);
    let mut n = 0;
    for &x in maxima {
        scratch[n] = ord(x);
        n += usize::from(x >= lower);
    }
    scratch.truncate(n);
    if scratch.len() < k {
        return f32::NEG_INFINITY;
    }
    unord(*scratch.select_nth_unstable_by(k - 1, |a, b| b.cmp(a)).1)
}

dispatch!(
    /// [`kth_largest_impl`], compiled for AVX2 where the CPU has it.
    fn kth_largest(maxima: &[f32], k: usize, scratch: &mut Vec<u32>) -> f32
);

dispatch!(
    /// Appends `key(i, x)` for every `x = xs[i] >= thr` of every 128-token sub-block whose max (in
    /// `maxima`) is `>= thr`.
    fn rescan(xs: &[f32], maxima: &[f32], thr: f32, keys: &mut Vec<u64>) -> ()
);

/// The `k` largest entries of `xs` as `(index, logit)`, sorted by [`desc`]: one pass of
/// sub-block maxima, then a rescan of the ~k sub-blocks that can hold a top-k token (see
/// [`top_k_from_maxima`]); also returns whether any element is NaN or +inf. Requires
/// `1 <= k <= xs.len()`.
pub fn top_k(xs: &[f32], k: usize, out: &mut Vec<(u32, f32)>) -> bool {
    let mut maxima = Vec::with_capacity(xs.len().div_ceil(SUB));
    let bad = sub_maxima(xs, &mut maxima);
    top_k_from_maxima(xs, &maxima, k, out);
    bad
}

/// The second half of [`top_k`], given the 128-token sub-block maxima of `xs` (as
/// [`block_stats_with_sub_max`] leaves them in [`BlockStats::sub_max`]). The k-th largest of the
/// maxima, `T`, is a lower bound of the k-th largest token (the k sub-blocks with the largest
/// maxima hold k tokens `>= T`), so every top-k token is `>= T` and lies in a sub-block whose max
/// is `>= T`: only those (about k of them) are rescanned, and only their tokens `>= T` are
/// selected from. Requires `1 <= k <= xs.len()`.
pub fn top_k_from_maxima(xs: &[f32], maxima: &[f32], k: usize, out: &mut Vec<(u32, f32)>) {
    let mut scratch = Vec::new();
    let thr = kth_largest(maxima, k, &mut scratch);
    let mut keys = Vec::with_capacity(2 * k + SUB);
    rescan(xs, maxima, thr, &mut keys);
    finish_top_k(&mut keys, k, out);
}

// ---------------------------------------------------------------- portable versions

mod portable {
    #![allow(clippy::needless_range_loop)]

    use super::{BLOCK, BlockStats, SUB, SUBS, exp_affine, is_bad, key};

    const LANES: usize = 16;

    /// Max (ignoring NaN) and NaN/+inf flag of a short slice.
    #[inline(always)]
    pub fn max_bad(xs: &[f32]) -> (f32, bool) {
        let mut acc = [f32::NEG_INFINITY; LANES];
        let mut bad = [0u32; LANES];
        let (chunks, rest) = xs.as_chunks::<LANES>();
        for c in chunks {
            for j in 0..LANES {
                acc[j] = if c[j] > acc[j] { c[j] } else { acc[j] };
                bad[j] |= u32::from(is_bad(c[j]));
            }
        }
        let mut m = f32::NEG_INFINITY;
        for &x in acc.iter().chain(rest) {
            m = if x > m { x } else { m };
        }
        (m, bad.iter().any(|&b| b != 0) || rest.iter().any(|&x| is_bad(x)))
    }

    /// `sum 2^(x a + b)`: the shared kernel (its portable build on the CPUs that come here).
    use ::kernels::row::sum_exp2;

    fn stats(xs: &[f32], s: f32, out: &mut BlockStats, subs: bool) {
        out.reset(xs.len(), subs);
        for (bi, block) in xs.chunks(BLOCK).enumerate() {
            let mut m = f32::NEG_INFINITY;
            let mut bad = false;
            for (si, sub) in block.chunks(SUB).enumerate() {
                let (sm, sb) = max_bad(sub);
                if subs {
                    out.sub_max[bi * SUBS + si] = sm;
                }
                m = if sm > m { sm } else { m };
                bad |= sb;
            }
            out.max[bi] = m;
            out.bad |= bad;
            out.row_max = if m > out.row_max { m } else { out.row_max };
            if m != f32::NEG_INFINITY && !bad {
                let (a, b) = exp_affine(m, s);
                out.sum[bi] = sum_exp2(block, a, b);
            }
        }
    }

    pub fn block_stats(xs: &[f32], s: f32, out: &mut BlockStats) {
        stats(xs, s, out, false);
    }

    pub fn block_stats_with_sub_max(xs: &[f32], s: f32, out: &mut BlockStats) {
        stats(xs, s, out, true);
    }

    pub fn sub_maxima(xs: &[f32], out: &mut Vec<f32>) -> bool {
        out.clear();
        let mut bad = false;
        for sub in xs.chunks(SUB) {
            let (m, b) = max_bad(sub);
            out.push(m);
            bad |= b;
        }
        bad
    }

    pub fn argmax(xs: &[f32]) -> (usize, f32, bool) {
        let mut best = f32::NEG_INFINITY;
        let mut best_block = 0;
        let mut bad = false;
        for (b, block) in xs.chunks(BLOCK).enumerate() {
            let (m, bb) = max_bad(block);
            bad |= bb;
            if m > best {
                best = m;
                best_block = b;
            }
        }
        let start = best_block * BLOCK;
        let end = (start + BLOCK).min(xs.len());
        let i = xs[start..end].iter().position(|&x| x == best).unwrap_or(0);
        (start + i, best, bad)
    }

    pub fn gather_ge(xs: &[f32], base: usize, thr: f32, out: &mut Vec<(u32, f32)>) {
        let (chunks, rest) = xs.as_chunks::<LANES>();
        for (ci, c) in chunks.iter().enumerate() {
            let mut any = false;
            for &x in c {
                any |= x >= thr;
            }
            if any {
                for (j, &x) in c.iter().enumerate() {
                    if x >= thr {
                        out.push(((base + ci * LANES + j) as u32, x));
                    }
                }
            }
        }
        let rest_start = xs.len() - rest.len();
        for (j, &x) in rest.iter().enumerate() {
            if x >= thr {
                out.push(((base + rest_start + j) as u32, x));
            }
        }
    }

    pub fn min_p_gather(xs: &[f32], ln_p: f32, out: &mut Vec<(u32, f32)>) -> (f32, bool) {
        // Running max: anything >= running_max + ln p is gathered; the final filter (by the caller)
        // removes what the final max rules out. The buffer is compacted when it grows.
        let mut run_max = f32::NEG_INFINITY;
        let mut bad = false;
        for (b, block) in xs.chunks(BLOCK).enumerate() {
            let (m, bb) = max_bad(block);
            bad |= bb;
            if m > run_max {
                run_max = m;
                let thr = run_max + ln_p;
                if out.len() > 4 * BLOCK {
                    out.retain(|&(_, x)| x >= thr);
                }
            }
            gather_ge(block, b * BLOCK, run_max + ln_p, out);
        }
        (run_max, bad)
    }

    pub fn kth_largest(maxima: &[f32], k: usize, scratch: &mut Vec<u32>) -> f32 {
        super::kth_largest_impl(maxima, k, scratch)
    }

    pub fn rescan(xs: &[f32], maxima: &[f32], thr: f32, keys: &mut Vec<u64>) {
        for (si, &m) in maxima.iter().enumerate() {
            if m >= thr {
                let base = si * SUB;
                let sub = &xs[base..(base + SUB).min(xs.len())];
                for (j, &x) in sub.iter().enumerate() {
                    if x >= thr {
                        keys.push(key((base + j) as u32, x));
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------- AVX2 + FMA versions

#[cfg(target_arch = "x86_64")]
mod x86 {
    #![allow(clippy::needless_range_loop)]

    use super::{BLOCK, BlockStats, SUB, SUBS, exp_affine, key};
    use ::kernels::exp::x86::exp2_affine;
    use std::arch::x86_64::*;

    /// Max of the 8 lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn hmax(v: __m256) -> f32 {
        let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)))
    }

    /// Sum of the 8 lanes (a fixed order).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    /// Lane `j` of the result is the max of the 8 lanes of `v[j]` (a transposing max tree).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn transpose_max(v: &[__m256; 8]) -> __m256 {
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        fn pair(a: __m256, b: __m256) -> __m256 {
            // Per 128-bit half: [a0, a2, b0, b2] max [a1, a3, b1, b3].
            _mm256_max_ps(_mm256_shuffle_ps::<0x88>(a, b), _mm256_shuffle_ps::<0xDD>(a, b))
        }
        let m0123 = pair(pair(v[0], v[1]), pair(v[2], v[3]));
        let m4567 = pair(pair(v[4], v[5]), pair(v[6], v[7]));
        _mm256_max_ps(_mm256_permute2f128_ps::<0x20>(m0123, m4567), _mm256_permute2f128_ps::<0x31>(m0123, m4567))
    }

    /// Loads 8 vectors (64 f32) of `p` from `off`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn load8(p: &[f32; BLOCK], off: usize) -> [__m256; 8] {
        assert!(off + 64 <= BLOCK);
        let q = p.as_ptr();
        // SAFETY: `off + 64 <= BLOCK` (asserted; the callers' offsets make it a constant check),
        // so every load reads inside `p`.
        unsafe {
            [
                _mm256_loadu_ps(q.add(off)),
                _mm256_loadu_ps(q.add(off + 8)),
                _mm256_loadu_ps(q.add(off + 16)),
                _mm256_loadu_ps(q.add(off + 24)),
                _mm256_loadu_ps(q.add(off + 32)),
                _mm256_loadu_ps(q.add(off + 40)),
                _mm256_loadu_ps(q.add(off + 48)),
                _mm256_loadu_ps(q.add(off + 56)),
            ]
        }
    }

    /// The software-pipelined block kernel. With `MAX`: the 8 sub-block maxima of `next` into
    /// `subs`, its max and its NaN/+inf flag. With `EXP`: the sum of `2^(x a + b)` over `cur`.
    /// Both in one loop, so the max scan (loads, max, compares) overlaps the exponentials.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn fused<const MAX: bool, const EXP: bool>(
        next: &[f32; BLOCK],
        cur: &[f32; BLOCK],
        a: f32,
        b: f32,
        subs: &mut [f32; SUBS],
    ) -> (f32, bool, f32) {
        let (va, vb) = (_mm256_set1_ps(a), _mm256_set1_ps(b));
        let mut bad = _mm256_setzero_ps();
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut lm = [_mm256_setzero_ps(); SUBS];
        for (j, lmj) in lm.iter_mut().enumerate() {
            let mut half = [_mm256_setzero_ps(); 2];
            for (h, hm) in half.iter_mut().enumerate() {
                let off = j * SUB + h * 64;
                if MAX {
                    let v = load8(next, off);
                    let m01 = _mm256_max_ps(v[0], v[1]);
                    let m23 = _mm256_max_ps(v[2], v[3]);
                    let m45 = _mm256_max_ps(v[4], v[5]);
                    let m67 = _mm256_max_ps(v[6], v[7]);
                    *hm = _mm256_max_ps(_mm256_max_ps(m01, m23), _mm256_max_ps(m45, m67));
                    // Unordered compares of pairs: true where either is NaN (+inf: below).
                    let n01 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[0], v[1]);
                    let n23 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[2], v[3]);
                    let n45 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[4], v[5]);
                    let n67 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[6], v[7]);
                    bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_or_ps(n01, n23), _mm256_or_ps(n45, n67)));
                }
                if EXP {
                    let v = load8(cur, off);
                    for u in 0..8 {
                        acc[u % 4] = _mm256_add_ps(acc[u % 4], exp2_affine(v[u], va, vb));
                    }
                }
            }
            *lmj = _mm256_max_ps(half[0], half[1]);
        }
        let (mut m, mut is_bad) = (f32::NEG_INFINITY, false);
        if MAX {
            let r = transpose_max(&lm);
            // SAFETY: `subs` holds SUBS = 8 f32.
            unsafe { _mm256_storeu_ps(subs.as_mut_ptr(), r) };
            bad = _mm256_or_ps(bad, _mm256_cmp_ps::<_CMP_EQ_OQ>(r, _mm256_set1_ps(f32::INFINITY)));
            m = hmax(r);
            is_bad = _mm256_movemask_ps(bad) != 0;
        }
        let sum =
            if EXP { hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) } else { 0.0 };
        (m, is_bad, sum)
    }

    /// The row as whole blocks plus the `-inf`-padded copy of the partial last block.
    struct Blocks<'a> {
        full: &'a [[f32; BLOCK]],
        tail: [f32; BLOCK],
        n: usize,
    }

    impl<'a> Blocks<'a> {
        fn new(xs: &'a [f32]) -> Self {
            let (full, rest) = xs.as_chunks::<BLOCK>();
            let mut tail = [f32::NEG_INFINITY; BLOCK];
            tail[..rest.len()].copy_from_slice(rest);
            Self { full, tail, n: xs.len() }
        }

        fn count(&self) -> usize {
            self.n.div_ceil(BLOCK)
        }

        fn get(&self, b: usize) -> &[f32; BLOCK] {
            if b < self.full.len() { &self.full[b] } else { &self.tail }
        }

        /// Sub-blocks of block `b` that hold tokens.
        fn subs_in(&self, b: usize) -> usize {
            (self.n - b * BLOCK).div_ceil(SUB).min(SUBS)
        }
    }

    #[target_feature(enable = "avx2,fma")]
    fn stats<const SUBMAX: bool>(xs: &[f32], s: f32, out: &mut BlockStats) {
        out.reset(xs.len(), SUBMAX);
        let blocks = Blocks::new(xs);
        let nb = blocks.count();
        if nb == 0 {
            return;
        }
        let mut subs = [0.0f32; SUBS];
        let record = |out: &mut BlockStats, b: usize, m: f32, bad: bool, subs: &[f32; SUBS]| {
            out.max[b] = m;
            if SUBMAX {
                let k = blocks.subs_in(b);
                out.sub_max[b * SUBS..b * SUBS + k].copy_from_slice(&subs[..k]);
            }
            out.bad |= bad;
            out.row_max = if m > out.row_max { m } else { out.row_max };
            bad
        };
        let first = blocks.get(0);
        let (m, bad, _) = fused::<true, false>(first, first, 0.0, 0.0, &mut subs);
        let mut cur_bad = record(out, 0, m, bad, &subs);
        for b in 0..nb {
            let m = out.max[b];
            let (a, c) = exp_affine(m, s);
            let cur = blocks.get(b);
            let sum = if b + 1 < nb {
                let (m2, bad2, sum) = fused::<true, true>(blocks.get(b + 1), cur, a, c, &mut subs);
                let this_bad = cur_bad;
                cur_bad = record(out, b + 1, m2, bad2, &subs);
                if m == f32::NEG_INFINITY || this_bad { 0.0 } else { sum }
            } else if m == f32::NEG_INFINITY || cur_bad {
                0.0
            } else {
                fused::<false, true>(cur, cur, a, c, &mut subs).2
            };
            out.sum[b] = sum;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn block_stats(xs: &[f32], s: f32, out: &mut BlockStats) {
        stats::<false>(xs, s, out);
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn block_stats_with_sub_max(xs: &[f32], s: f32, out: &mut BlockStats) {
        stats::<true>(xs, s, out);
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn sub_maxima(xs: &[f32], out: &mut Vec<f32>) -> bool {
        out.clear();
        out.resize(xs.len().div_ceil(SUB), f32::NEG_INFINITY);
        let blocks = Blocks::new(xs);
        let mut bad = false;
        let mut subs = [0.0f32; SUBS];
        for b in 0..blocks.count() {
            let blk = blocks.get(b);
            let (_, bb, _) = fused::<true, false>(blk, blk, 0.0, 0.0, &mut subs);
            bad |= bb;
            let k = blocks.subs_in(b);
            out[b * SUBS..b * SUBS + k].copy_from_slice(&subs[..k]);
        }
        bad
    }

    /// Max (ignoring NaN) and NaN/+inf flag of a slice: 4 accumulators, scalar tail.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn max_bad(xs: &[f32]) -> (f32, bool) {
        let inf = _mm256_set1_ps(f32::INFINITY);
        let mut acc = [_mm256_set1_ps(f32::NEG_INFINITY); 4];
        let mut bad = _mm256_setzero_ps();
        let (chunks, rest) = xs.as_chunks::<32>();
        for c in chunks {
            for u in 0..4 {
                // SAFETY: `c` holds 32 f32, so lanes 8u..8u+8 are in bounds.
                let v = unsafe { _mm256_loadu_ps(c.as_ptr().add(8 * u)) };
                // max(v, acc) returns acc when v is NaN: NaN is skipped.
                acc[u] = _mm256_max_ps(v, acc[u]);
                bad = _mm256_or_ps(bad, _mm256_cmp_ps::<_CMP_NLT_UQ>(v, inf));
            }
        }
        let m = _mm256_max_ps(_mm256_max_ps(acc[0], acc[1]), _mm256_max_ps(acc[2], acc[3]));
        let (mut m, mut b) = (hmax(m), _mm256_movemask_ps(bad) != 0);
        for &x in rest {
            m = if x > m { x } else { m };
            b |= super::is_bad(x);
        }
        (m, b)
    }

    /// Calls `f(i)` for every `i` with `xs[i] >= thr` (`cmp` is `_CMP_GE_OQ` or `_CMP_EQ_OQ`), in
    /// index order, until `f` returns false.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn for_each_cmp<const CMP: i32>(xs: &[f32], thr: f32, mut f: impl FnMut(usize, f32) -> bool) {
        let t = _mm256_set1_ps(thr);
        let (chunks, rest) = xs.as_chunks::<16>();
        for (ci, c) in chunks.iter().enumerate() {
            // SAFETY: `c` holds 16 f32.
            let (v0, v1) = unsafe { (_mm256_loadu_ps(c.as_ptr()), _mm256_loadu_ps(c.as_ptr().add(8))) };
            let lo = _mm256_movemask_ps(_mm256_cmp_ps::<CMP>(v0, t)) as u32;
            let hi = _mm256_movemask_ps(_mm256_cmp_ps::<CMP>(v1, t)) as u32;
            let mut mask = lo | (hi << 8);
            while mask != 0 {
                let j = mask.trailing_zeros() as usize;
                if !f(ci * 16 + j, c[j]) {
                    return;
                }
                mask &= mask - 1;
            }
        }
        let rest_start = xs.len() - rest.len();
        for (j, &x) in rest.iter().enumerate() {
            let hit = if CMP == _CMP_EQ_OQ { x == thr } else { x >= thr };
            if hit && !f(rest_start + j, x) {
                return;
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn argmax(xs: &[f32]) -> (usize, f32, bool) {
        let mut best = f32::NEG_INFINITY;
        let mut best_block = 0;
        let mut bad = false;
        for (b, block) in xs.chunks(BLOCK).enumerate() {
            let (m, bb) = max_bad(block);
            bad |= bb;
            if m > best {
                best = m;
                best_block = b;
            }
        }
        let start = best_block * BLOCK;
        let end = (start + BLOCK).min(xs.len());
        let mut first = 0;
        for_each_cmp::<_CMP_EQ_OQ>(&xs[start..end], best, |i, _| {
            first = i;
            false
        });
        (start + first, best, bad)
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn gather_ge(xs: &[f32], base: usize, thr: f32, out: &mut Vec<(u32, f32)>) {
        for_each_cmp::<_CMP_GE_OQ>(xs, thr, |i, x| {
            out.push(((base + i) as u32, x));
            true
        });
    }

    /// Min-p in one read of each block: the maxima of its 64-token groups (kept in registers or
    /// L1), the block max and flag, then a gather that visits only the groups whose max reaches the
    /// threshold.
    #[target_feature(enable = "avx2,fma")]
    pub fn min_p_gather(xs: &[f32], ln_p: f32, out: &mut Vec<(u32, f32)>) -> (f32, bool) {
        let inf = _mm256_set1_ps(f32::INFINITY);
        let mut run_max = f32::NEG_INFINITY;
        let mut bad = false;
        let mut gm = [_mm256_setzero_ps(); BLOCK / 64];
        for (b, block) in xs.chunks(BLOCK).enumerate() {
            let (groups, rest) = block.as_chunks::<64>();
            let mut accm = _mm256_set1_ps(f32::NEG_INFINITY);
            let mut nan = _mm256_setzero_ps();
            for (g, c) in groups.iter().enumerate() {
                let q = c.as_ptr();
                // SAFETY: `c` holds 64 f32: the loads at 0, 8, ..., 56 are in bounds.
                let v: [__m256; 8] = unsafe {
                    [
                        _mm256_loadu_ps(q),
                        _mm256_loadu_ps(q.add(8)),
                        _mm256_loadu_ps(q.add(16)),
                        _mm256_loadu_ps(q.add(24)),
                        _mm256_loadu_ps(q.add(32)),
                        _mm256_loadu_ps(q.add(40)),
                        _mm256_loadu_ps(q.add(48)),
                        _mm256_loadu_ps(q.add(56)),
                    ]
                };
                let m = _mm256_max_ps(
                    _mm256_max_ps(_mm256_max_ps(v[0], v[1]), _mm256_max_ps(v[2], v[3])),
                    _mm256_max_ps(_mm256_max_ps(v[4], v[5]), _mm256_max_ps(v[6], v[7])),
                );
                gm[g] = m;
                accm = _mm256_max_ps(accm, m);
                let n01 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[0], v[1]);
                let n23 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[2], v[3]);
                let n45 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[4], v[5]);
                let n67 = _mm256_cmp_ps::<_CMP_UNORD_Q>(v[6], v[7]);
                nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_or_ps(n01, n23), _mm256_or_ps(n45, n67)));
            }
            // +inf shows in the max (or, where a NaN hid it, the NaN is flagged).
            let flags = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_EQ_OQ>(accm, inf));
            let (mut m, mut bb) = (hmax(accm), _mm256_movemask_ps(flags) != 0);
            for &x in rest {
                m = if x > m { x } else { m };
                bb |= super::is_bad(x);
            }
            bad |= bb;
            if m > run_max {
                run_max = m;
                let thr = run_max + ln_p;
                if out.len() > 4 * BLOCK {
                    out.retain(|&(_, x)| x >= thr);
                }
            }
            let thr = run_max + ln_p;
            let tv = _mm256_set1_ps(thr);
            for (g, c) in groups.iter().enumerate() {
                if _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GE_OQ>(gm[g], tv)) != 0 {
                    let base = b * BLOCK + g * 64;
                    for_each_cmp::<_CMP_GE_OQ>(c, thr, |i, x| {
                        out.push(((base + i) as u32, x));
                        true
                    });
                }
            }
            let base = b * BLOCK + groups.len() * 64;
            for (i, &x) in rest.iter().enumerate() {
                if x >= thr {
                    out.push(((base + i) as u32, x));
                }
            }
        }
        (run_max, bad)
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn kth_largest(maxima: &[f32], k: usize, scratch: &mut Vec<u32>) -> f32 {
        super::kth_largest_impl(maxima, k, scratch)
    }

    /// The rescan of [`super::top_k_from_maxima`]: the sub-blocks to visit are listed and
    /// prefetched first (they are scattered over a row that is usually out of L2), then scanned.
    #[target_feature(enable = "avx2,fma")]
    pub fn rescan(xs: &[f32], maxima: &[f32], thr: f32, keys: &mut Vec<u64>) {
        let mut visit = Vec::with_capacity(64);
        for_each_cmp::<_CMP_GE_OQ>(maxima, thr, |si, _| {
            visit.push(si);
            let sub = &xs[si * SUB..(si * SUB + SUB).min(xs.len())];
            for line in sub.chunks(16) {
                _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast());
            }
            true
        });
        for si in visit {
            let base = si * SUB;
            let sub = &xs[base..(base + SUB).min(xs.len())];
            for_each_cmp::<_CMP_GE_OQ>(sub, thr, |j, x| {
                keys.push(key((base + j) as u32, x));
                true
            });
        }
    }
}

#[cfg(test)]
mod tests;

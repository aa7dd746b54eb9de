//! Per-block statistics of a logits row, in one pass: the block maxima, the 128-token sub-block
//! maxima and the block sums of `exp((x - block_max) * s)` ([`BlockStats`], filled by
//! [`block_stats`] and [`block_stats_with_sub_max`]; [`sub_maxima`] alone). The samplers' softmax
//! denominators and the top-k threshold of [`crate::select::top_k_from_maxima`] come from here.
//!
//! Each kernel exists twice, an explicit AVX2+FMA version and a portable one, picked by
//! [`crate::dispatch!`]; both compute the same maxima and flags, and sums that differ only in
//! rounding (summation order and the fused multiply-adds of the AVX2 exponential), about 1e-7
//! relative.
//!
//! # One pass for the block statistics
//!
//!
//! [`block_stats`] walks the row in 1024-token blocks and is software-pipelined: while it sums the
//! exponentials of block `b` (already in L1, relative to its own max), it computes the 128-token
//! sub-block maxima of block `b + 1` in the same loop, so the row is read from memory once and the
//! memory reads of the next block overlap the arithmetic of the current one. (On the Zen 3 this was
//! measured on, the loop is bound by its vector instruction count, so the max scan still adds its
//! own cost: about 0.33 ns per token against 0.25 for the exponentials alone.) NaN is found by
//! unordered compares of pairs of vectors, +inf by comparing the sub-block maxima with +inf. The last, partial, block is copied into a `-inf`-padded buffer (a `-inf` changes no

use crate::exp::exp_neg;

/// Block length for the block-wise kernels: 4 KiB of f32, so a block stays in L1 between the
/// scans that read it.
pub const BLOCK: usize = 1024;

/// Sub-block length of the top-k selection.
pub const SUB: usize = 128;

/// Sub-blocks per block.
const SUBS: usize = BLOCK / SUB;

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

crate::dispatch!(
    /// One pass over `xs` block by block: each block's max, then (while it is in L1) its sum of
    /// `exp((x - max) * s)`. This is the online-softmax denominator without a separate max pass.
    pub fn block_stats(xs: &[f32], s: f32, out: &mut BlockStats) -> () => x86::block_stats | portable::block_stats
);

crate::dispatch!(
    /// [`block_stats`] that also records the 128-token sub-block maxima in
    /// [`BlockStats::sub_max`], for [`crate::select::top_k_from_maxima`].
    pub fn block_stats_with_sub_max(xs: &[f32], s: f32, out: &mut BlockStats) -> () => x86::block_stats_with_sub_max | portable::block_stats_with_sub_max
);

crate::dispatch!(
    /// The maximum of every 128-token sub-block of `xs` (the last one may be shorter) into `out`
    /// (cleared first), and whether any element is NaN or +inf.
    pub fn sub_maxima(xs: &[f32], out: &mut Vec<f32>) -> bool => x86::sub_maxima | portable::sub_maxima
);

// ---------------------------------------------------------------- portable versions

pub(crate) mod portable {
    use super::{BLOCK, BlockStats, SUB, SUBS};
    use crate::exp::exp_affine;
    use crate::row::max_bad_portable as max_bad;
    /// `sum 2^(x a + b)`: the shared kernel (its portable build on the CPUs that come here).
    use crate::row::sum_exp2;

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
}

// ---------------------------------------------------------------- AVX2 + FMA versions

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    #![allow(clippy::needless_range_loop)]

    use super::{BLOCK, BlockStats, SUB, SUBS};
    use crate::exp::{exp_affine, x86::exp2_affine};
    pub(crate) use crate::row::x86::{hmax, hsum};
    use std::arch::x86_64::*;

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
}

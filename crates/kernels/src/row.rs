//! Whole-row kernels: the max of a row (or of each block of a row) with a NaN/+inf flag, and sums of exponentials
//! `2^(x a + b)` (see [`crate::exp`]) with or without storing them (also in place). Each has an explicit AVX2+FMA
//! version, picked at run time, and a portable one.

#![allow(clippy::needless_range_loop)]

use crate::exp::exp2;

/// Lanes of the portable loops (two AVX2 vectors: enough independent accumulators).
const LANES: usize = 16;

/// True for the values a logits row must not hold: NaN or +inf.
#[inline(always)]
pub fn is_bad(x: f32) -> bool {
    // NaN < inf is false, inf < inf is false.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    let bad = !(x < f32::INFINITY);
    bad
}

/// Position and value of the first NaN or +inf in `xs`, if any (slow path, used for error reports).
pub fn first_bad(xs: &[f32]) -> Option<(usize, f32)> {
    xs.iter().position(|&x| is_bad(x)).map(|i| (i, xs[i]))
}

/// The portable [`max_bad`] (also the per-sub-block scan of the portable kernels of [`crate::stats`]
/// and [`crate::select`]).
#[inline(always)]
pub(crate) fn max_bad_portable(xs: &[f32]) -> (f32, bool) {
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
    let mut b = bad.iter().any(|&b| b != 0);
    for &x in acc.iter().chain(rest) {
        m = if x > m { x } else { m };
    }
    b |= rest.iter().any(|&x| is_bad(x));
    (m, b)
}

crate::dispatch!(
    /// Maximum of `xs` ignoring NaN (`-inf` for an empty or all-NaN row) and whether any element is
    /// NaN or +inf. One read of the row: the "max pass" the benchmarks measure against.
    pub fn max_bad(xs: &[f32]) -> (f32, bool) => x86::max_bad | max_bad_portable
);

fn block_max_bad_portable(xs: &[f32], block: usize, out: &mut [f32]) -> bool {
    let mut bad = false;
    for (b, o) in xs.chunks(block).zip(out.iter_mut()) {
        let (m, bb) = max_bad_portable(b);
        *o = m;
        bad |= bb;
    }
    bad
}

crate::dispatch!(
    /// The maximum (ignoring NaN) of each `block`-long piece of `xs` (the last may be shorter) into
    /// `out[i]` (`out` needs `xs.len().div_ceil(block)` entries; extra ones are left alone), and
    /// whether any element is NaN or +inf. One pass and one call for the whole row: a per-block call
    /// of [`max_bad`] costs more than the scan itself on short blocks. Panics if `block == 0`.
    pub fn block_max_bad(xs: &[f32], block: usize, out: &mut [f32]) -> bool => x86::block_max_bad | block_max_bad_portable
);

fn sum_exp2_portable(xs: &[f32], a: f32, b: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (chunks, rest) = xs.as_chunks::<LANES>();
    for c in chunks {
        for j in 0..LANES {
            acc[j] += exp2::<false>(c[j] * a + b);
        }
    }
    let mut s: f32 = acc.iter().sum();
    for &x in rest {
        s += exp2::<false>(x * a + b);
    }
    s
}

crate::dispatch!(
    /// `sum_i 2^(xs[i] a + b)`.
    pub fn sum_exp2(xs: &[f32], a: f32, b: f32) -> f32 => x86::sum_exp2 | sum_exp2_portable
);

fn exp2_into_portable(xs: &[f32], a: f32, b: f32, out: &mut [f32]) -> f32 {
    let n = xs.len().min(out.len());
    let (xs, out) = (&xs[..n], &mut out[..n]);
    let mut acc = [0.0f32; LANES];
    let (xc, xr) = xs.as_chunks::<LANES>();
    let (oc, or) = out.as_chunks_mut::<LANES>();
    for (c, o) in xc.iter().zip(oc) {
        for j in 0..LANES {
            let e = exp2::<false>(c[j] * a + b);
            o[j] = e;
            acc[j] += e;
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (&x, o) in xr.iter().zip(or) {
        *o = exp2::<false>(x * a + b);
        s += *o;
    }
    s
}

crate::dispatch!(
    /// `out[i] = 2^(xs[i] a + b)` (over the shorter of the two), returning their sum.
    pub fn exp2_into(xs: &[f32], a: f32, b: f32, out: &mut [f32]) -> f32 => x86::exp2_into | exp2_into_portable
);

fn exp2_inplace_portable(xs: &mut [f32], a: f32, b: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (chunks, rest) = xs.as_chunks_mut::<LANES>();
    for c in chunks {
        for j in 0..LANES {
            c[j] = exp2::<false>(c[j] * a + b);
            acc[j] += c[j];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for x in rest {
        *x = exp2::<false>(*x * a + b);
        s += *x;
    }
    s
}

crate::dispatch!(
    /// [`exp2_into`] in place: `xs[i] = 2^(xs[i] a + b)`, returning their sum.
    pub fn exp2_inplace(xs: &mut [f32], a: f32, b: f32) -> f32 => x86::exp2_inplace | exp2_inplace_portable
);

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use crate::exp::{exp2, x86::exp2_affine};
    use std::arch::x86_64::*;

    /// Sum of the 8 lanes (a fixed order).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    /// Max of the 8 lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn hmax(v: __m256) -> f32 {
        let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)))
    }

    /// Max of `xs` ignoring NaN. NaN lanes are or-ed into `bad` (one unordered compare per pair of
    /// vectors); a +inf shows in the returned max, and the scalar tail sets `tail_bad` for both.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn scan_max(xs: &[f32], bad: &mut __m256, tail_bad: &mut bool) -> f32 {
        let mut acc = [_mm256_set1_ps(f32::NEG_INFINITY); 4];
        let (chunks, rest) = xs.as_chunks::<32>();
        for c in chunks {
            // SAFETY: `c` holds 32 f32, so lanes 8u..8u+8 are in bounds.
            let v: [__m256; 4] = std::array::from_fn(|u| unsafe { _mm256_loadu_ps(c.as_ptr().add(8 * u)) });
            for u in 0..4 {
                // max(v, acc) returns acc when v is NaN: NaN is skipped.
                acc[u] = _mm256_max_ps(v[u], acc[u]);
            }
            let nan =
                _mm256_or_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(v[0], v[1]), _mm256_cmp_ps::<_CMP_UNORD_Q>(v[2], v[3]));
            *bad = _mm256_or_ps(*bad, nan);
        }
        let mut m = hmax(_mm256_max_ps(_mm256_max_ps(acc[0], acc[1]), _mm256_max_ps(acc[2], acc[3])));
        for &x in rest {
            m = if x > m { x } else { m };
            *tail_bad |= super::is_bad(x);
        }
        m
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn max_bad(xs: &[f32]) -> (f32, bool) {
        let (mut bad, mut tail_bad) = (_mm256_setzero_ps(), false);
        let m = scan_max(xs, &mut bad, &mut tail_bad);
        (m, tail_bad || m == f32::INFINITY || _mm256_movemask_ps(bad) != 0)
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn block_max_bad(xs: &[f32], block: usize, out: &mut [f32]) -> bool {
        let (mut bad, mut tail_bad) = (_mm256_setzero_ps(), false);
        for (b, o) in xs.chunks(block).zip(out.iter_mut()) {
            *o = scan_max(b, &mut bad, &mut tail_bad);
            tail_bad |= *o == f32::INFINITY;
        }
        tail_bad || _mm256_movemask_ps(bad) != 0
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn sum_exp2(xs: &[f32], a: f32, b: f32) -> f32 {
        let (va, vb) = (_mm256_set1_ps(a), _mm256_set1_ps(b));
        let mut acc = [_mm256_setzero_ps(); 2];
        let (chunks, rest) = xs.as_chunks::<16>();
        for c in chunks {
            for u in 0..2 {
                // SAFETY: `c` holds 16 f32.
                let v = unsafe { _mm256_loadu_ps(c.as_ptr().add(8 * u)) };
                acc[u] = _mm256_add_ps(acc[u], exp2_affine(v, va, vb));
            }
        }
        let mut s = hsum(_mm256_add_ps(acc[0], acc[1]));
        for &x in rest {
            s += exp2::<true>(x.mul_add(a, b));
        }
        s
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn exp2_into(xs: &[f32], a: f32, b: f32, out: &mut [f32]) -> f32 {
        let n = xs.len().min(out.len());
        let (xs, out) = (&xs[..n], &mut out[..n]);
        let (va, vb) = (_mm256_set1_ps(a), _mm256_set1_ps(b));
        let mut acc = [_mm256_setzero_ps(); 2];
        let (xc, xr) = xs.as_chunks::<16>();
        let (oc, or) = out.as_chunks_mut::<16>();
        for (c, o) in xc.iter().zip(oc) {
            for u in 0..2 {
                // SAFETY: `c` and `o` hold 16 f32 each.
                unsafe {
                    let e = exp2_affine(_mm256_loadu_ps(c.as_ptr().add(8 * u)), va, vb);
                    _mm256_storeu_ps(o.as_mut_ptr().add(8 * u), e);
                    acc[u] = _mm256_add_ps(acc[u], e);
                }
            }
        }
        let mut s = hsum(_mm256_add_ps(acc[0], acc[1]));
        for (&x, o) in xr.iter().zip(or) {
            *o = exp2::<true>(x.mul_add(a, b));
            s += *o;
        }
        s
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn exp2_inplace(xs: &mut [f32], a: f32, b: f32) -> f32 {
        let (va, vb) = (_mm256_set1_ps(a), _mm256_set1_ps(b));
        let mut acc = [_mm256_setzero_ps(); 2];
        let (chunks, rest) = xs.as_chunks_mut::<16>();
        for c in chunks {
            for u in 0..2 {
                // SAFETY: `c` holds 16 f32.
                unsafe {
                    let p = c.as_mut_ptr().add(8 * u);
                    let e = exp2_affine(_mm256_loadu_ps(p), va, vb);
                    _mm256_storeu_ps(p, e);
                    acc[u] = _mm256_add_ps(acc[u], e);
                }
            }
        }
        let mut s = hsum(_mm256_add_ps(acc[0], acc[1]));
        for x in rest {
            *x = exp2::<true>(x.mul_add(a, b));
            s += *x;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp::{exp_affine, exp_at};

    fn row(n: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 7919) % 1000) as f32 * 0.013 - 6.0).collect()
    }

    #[test]
    fn max_bad_matches_scalar_and_flags() {
        for n in [0usize, 1, 7, 31, 32, 33, 100, 1029] {
            let mut v = row(n);
            let want = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(max_bad(&v), (want, false), "n = {n}");
            assert_eq!(max_bad_portable(&v), (want, false), "n = {n}");
            for (pos, bad) in [(0, f32::NAN), (n / 2, f32::INFINITY), (n.saturating_sub(1), f32::NAN)] {
                if n == 0 {
                    continue;
                }
                let keep = v[pos];
                v[pos] = bad;
                assert!(max_bad(&v).1 && max_bad_portable(&v).1, "n = {n}, {bad} at {pos}");
                v[pos] = keep;
            }
        }
        assert_eq!(max_bad(&[f32::NAN, -1.0, f32::NAN]), (-1.0, true));
        assert_eq!(max_bad(&[f32::NEG_INFINITY; 40]), (f32::NEG_INFINITY, false));
    }

    #[test]
    fn block_maxima() {
        for (n, block) in [(0usize, 16usize), (1, 16), (100, 16), (1000, 64), (1029, 256), (4099, 100), (4096, 4096)] {
            let mut v = row(n);
            let nb = n.div_ceil(block);
            let want: Vec<f32> = v.chunks(block).map(|c| c.iter().copied().fold(f32::NEG_INFINITY, f32::max)).collect();
            let mut got = vec![7.0; nb + 1];
            let mut got_p = vec![7.0; nb + 1];
            assert!(!block_max_bad(&v, block, &mut got));
            assert!(!block_max_bad_portable(&v, block, &mut got_p));
            assert_eq!(&got[..nb], &want[..], "n = {n}, block = {block}");
            assert_eq!(got, got_p);
            assert_eq!(got[nb], 7.0, "entries past the blocks are left alone");
            for pos in [0, n / 3, n.saturating_sub(1)] {
                if n == 0 {
                    continue;
                }
                for bad in [f32::NAN, -f32::NAN, f32::INFINITY] {
                    let keep = v[pos];
                    v[pos] = bad;
                    assert!(block_max_bad(&v, block, &mut got), "n = {n}, {bad} at {pos}");
                    assert!(block_max_bad_portable(&v, block, &mut got_p));
                    v[pos] = keep;
                }
                let keep = v[pos];
                v[pos] = f32::NEG_INFINITY;
                assert!(!block_max_bad(&v, block, &mut got));
                v[pos] = keep;
            }
        }
    }

    #[test]
    fn sums_of_exponentials() {
        for n in [1usize, 15, 16, 17, 1000, 4099] {
            let v = row(n);
            let m = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let (a, b) = exp_affine(m, 0.7);
            let want: f64 = v.iter().map(|&x| (f64::from(x - m) * 0.7).exp()).sum();
            let mut out = vec![0.0; n];
            for got in [sum_exp2(&v, a, b), sum_exp2_portable(&v, a, b), exp2_into(&v, a, b, &mut out)] {
                assert!((f64::from(got) - want).abs() / want < 2e-6, "n = {n}: {got} vs {want}");
            }
            // Fused and unfused `x a + b` differ in rounding: within the module's error bound.
            for (i, &x) in v.iter().enumerate() {
                let e = exp_at(x, a, b);
                assert!((out[i] - e).abs() <= 1e-6 * e, "n = {n}, i = {i}");
            }
            let mut out2 = vec![0.0; n];
            exp2_into_portable(&v, a, b, &mut out2);
            assert!(out.iter().zip(&out2).all(|(x, y)| (x - y).abs() <= 1e-6 * x));
            // In place: the same values and sum as `exp2_into`, bit for bit (same kernel shape).
            let mut inplace = v.clone();
            let s_in = exp2_inplace(&mut inplace, a, b);
            assert_eq!(inplace, out, "n = {n}");
            assert_eq!(s_in.to_bits(), exp2_into(&v, a, b, &mut out2).to_bits());
            let mut inplace2 = v.clone();
            let s_in2 = exp2_inplace_portable(&mut inplace2, a, b);
            assert_eq!(s_in2.to_bits(), exp2_into_portable(&v, a, b, &mut out2).to_bits());
            assert_eq!(inplace2, out2);
        }
        // Masked entries weigh exactly 0.
        let mut out = [1.0f32; 20];
        let s = exp2_into(&[f32::NEG_INFINITY; 20], 1.0, 0.0, &mut out);
        assert_eq!((s, out), (0.0, [0.0; 20]));
    }
}

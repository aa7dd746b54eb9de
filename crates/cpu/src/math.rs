//! Vectorisation-friendly numeric building blocks of the CPU kernels: row reductions with several
//! independent accumulators and the prefix scan (AVX2 or portable, picked at run time). The order
//! key, the selections, the exponential, the run-time feature probe and the dispatch macro live in
//! the `kernels` crate (shared with the samplers); the probe and the macro are re-exported here
//! under the names the `mul_mat` kernels use.

// Indexed lane loops are deliberate: they are the shape LLVM turns into SIMD.
#![allow(clippy::needless_range_loop)]

/// The one dispatch macro, [`kernels::dispatch!`], in its "generic body compiled twice" form.
pub(crate) use kernels::dispatch as multiversion;
/// The one feature probe, [`kernels::has_avx2_fma`] (AVX2, FMA and F16C).
pub use kernels::has_avx2_fma as has_avx2;

/// `a * b + c`, fused when `FMA` (the caller is compiled with FMA), else two roundings.
#[inline(always)]
pub fn fma<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

#[inline(always)]
fn max_body<const FMA: bool>(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 16];
    let (chunks, rem) = x.as_chunks::<16>();
    for c in chunks {
        for l in 0..16 {
            acc[l] = if c[l] > acc[l] { c[l] } else { acc[l] };
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &v in acc.iter().chain(rem) {
        m = if v > m { v } else { m };
    }
    m
}
multiversion!(
    /// Maximum of `x` (NaN entries are skipped; `-inf` for an empty or all-NaN slice).
    pub fn max_f32(x: &[f32]) -> f32 => max_body
);

#[inline(always)]
fn sum_body<const FMA: bool>(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let (chunks, rem) = x.as_chunks::<16>();
    for c in chunks {
        for l in 0..16 {
            acc[l] += c[l];
        }
    }
    let mut s = 0.0f32;
    for &v in acc.iter().chain(rem) {
        s += v;
    }
    s
}
multiversion!(
    /// Sum of `x` with 32 interleaved accumulators.
    pub fn sum_f32(x: &[f32]) -> f32 => sum_body
);

#[inline(always)]
fn sum_sq_body<const FMA: bool>(x: &[f32]) -> f32 {
    let mut acc = [[0.0f32; 8]; 2];
    let (chunks, rem) = x.as_chunks::<16>();
    for c in chunks {
        for j in 0..2 {
            for l in 0..8 {
                acc[j][l] = fma::<FMA>(c[8 * j + l], c[8 * j + l], acc[j][l]);
            }
        }
    }
    let mut s = 0.0f32;
    for &v in acc.iter().flatten() {
        s += v;
    }
    for &v in rem {
        s += v * v;
    }
    s
}
multiversion!(
    /// Sum of squares of `x`.
    pub fn sum_sq_f32(x: &[f32]) -> f32 => sum_sq_body
);

#[inline(always)]
fn scale_body<const FMA: bool>(x: &mut [f32], s: f32) {
    for v in x.iter_mut() {
        *v *= s;
    }
}
multiversion!(
    /// `x[i] *= s`.
    pub fn scale_f32(x: &mut [f32], s: f32) => scale_body
);

#[inline(always)]
fn scan_block(v: &mut [f32; 8]) {
    // Inclusive scan of 8 lanes: two shift-and-add steps inside each half of 4 (shifts that stay
    // within 128-bit lanes are cheap), then the low half's total added to the high half.
    let t = [0.0, v[0], v[1], v[2], 0.0, v[4], v[5], v[6]];
    for l in 0..8 {
        v[l] += t[l];
    }
    let t = [0.0, 0.0, v[0], v[1], 0.0, 0.0, v[4], v[5]];
    for l in 0..8 {
        v[l] += t[l];
    }
    let t = [0.0, 0.0, 0.0, 0.0, v[3], v[3], v[3], v[3]];
    for l in 0..8 {
        v[l] += t[l];
    }
}

/// Segments scanned side by side by [`cumsum_f32`] (independent carry chains).
const SEGMENTS: usize = 4;

#[inline(always)]
fn cumsum_body<const FMA: bool>(x: &[f32], out: &mut [f32]) {
    // Portable: four segments side by side (independent carry chains).
    let n = x.len().min(out.len());
    let (x, out) = (&x[..n], &mut out[..n]);
    let seg = (n / SEGMENTS) / 8 * 8;
    let mut carry = [0.0f32; SEGMENTS];
    if seg >= 64 {
        for s in 1..SEGMENTS {
            carry[s] = carry[s - 1] + sum_body::<FMA>(&x[(s - 1) * seg..s * seg]);
        }
        let mut j = 0;
        while j < seg {
            for s in 0..SEGMENTS {
                let at = s * seg + j;
                let mut v: [f32; 8] = x[at..at + 8].try_into().expect("8 lanes");
                scan_block(&mut v);
                let o = &mut out[at..at + 8];
                for l in 0..8 {
                    o[l] = v[l] + carry[s];
                }
                carry[s] = o[7];
            }
            j += 8;
        }
    }
    let start = if seg >= 64 { SEGMENTS * seg } else { 0 };
    let mut c = if seg >= 64 { carry[SEGMENTS - 1] } else { 0.0 };
    let mut xc = x[start..].chunks_exact(8);
    let mut oc = out[start..].chunks_exact_mut(8);
    for (a, o) in (&mut xc).zip(&mut oc) {
        let mut v: [f32; 8] = a.try_into().expect("8 lanes");
        scan_block(&mut v);
        for l in 0..8 {
            o[l] = v[l] + c;
        }
        c = o[7];
    }
    for (a, o) in xc.remainder().iter().zip(oc.into_remainder()) {
        c += *a;
        *o = c;
    }
}

kernels::dispatch! {
    /// Inclusive prefix sum of `x` into `out` (over the shorter of the two). With AVX2, 16 entries per
    /// step: each 8-lane vector is scanned in registers (two in-lane shift-and-add steps, then the low
    /// half's total added to the high half), the running total is added to both, and the total moves on by
    /// one addition per 16 entries, so the loop is not bound by a chain of dependent additions. Without
    /// AVX2, four segments are scanned side by side after a summing pass. The summation order differs from
    /// a sequential loop (results agree to f32 rounding, not bit for bit).
    pub fn cumsum_f32(x: &[f32], out: &mut [f32]) => x86::cumsum | cumsum_portable
}

fn cumsum_portable(x: &[f32], out: &mut [f32]) {
    cumsum_body::<false>(x, out)
}

/// Explicit AVX2 kernels.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Inclusive scan of the 8 lanes of `v`.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn scan8(v: __m256) -> __m256 {
        // Shifts by whole lanes inside each 128-bit half: [a, b, c, d] -> [a, a+b, a+b+c, a+b+c+d].
        let v = _mm256_add_ps(v, _mm256_castsi256_ps(_mm256_slli_si256::<4>(_mm256_castps_si256(v))));
        let v = _mm256_add_ps(v, _mm256_castsi256_ps(_mm256_slli_si256::<8>(_mm256_castps_si256(v))));
        // [0, 0, 0, 0, v3, v3, v3, v3]: the low half's total, added to the high half.
        let low_total = _mm256_permute2f128_ps::<0x08>(_mm256_permute_ps::<0xff>(v), v);
        _mm256_add_ps(v, low_total)
    }

    /// Lane 7 of `v` in every lane.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn last(v: __m256) -> __m256 {
        let hi = _mm256_permute_ps::<0xff>(v);
        _mm256_permute2f128_ps::<0x11>(hi, hi)
    }

    #[target_feature(enable = "avx2,fma")]
    pub fn cumsum(x: &[f32], out: &mut [f32]) {
        let n = x.len().min(out.len());
        let (x, out) = (&x[..n], &mut out[..n]);
        let (xc, xr) = x.as_chunks::<16>();
        let (oc, or) = out.as_chunks_mut::<16>();
        let mut carry = _mm256_setzero_ps();
        for (c, o) in xc.iter().zip(oc) {
            // SAFETY: `c` and `o` hold 16 f32 each.
            unsafe {
                let a = scan8(_mm256_loadu_ps(c.as_ptr()));
                let b = scan8(_mm256_loadu_ps(c.as_ptr().add(8)));
                let ta = last(a);
                _mm256_storeu_ps(o.as_mut_ptr(), _mm256_add_ps(a, carry));
                _mm256_storeu_ps(o.as_mut_ptr().add(8), _mm256_add_ps(b, _mm256_add_ps(carry, ta)));
                carry = _mm256_add_ps(carry, _mm256_add_ps(ta, last(b)));
            }
        }
        let mut c = _mm256_cvtss_f32(carry);
        for (&v, o) in xr.iter().zip(or) {
            c += v;
            *o = c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_match_scalar() {
        let x: Vec<f32> = (0..1003).map(|i| ((i * 7919) % 1000) as f32 * 0.01 - 5.0).collect();
        let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(max_f32(&x), m);
        let s: f64 = x.iter().map(|&v| f64::from(v)).sum();
        assert!((f64::from(sum_f32(&x)) - s).abs() < 1e-3);
        let sq: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        assert!((f64::from(sum_sq_f32(&x)) - sq).abs() / sq < 1e-5);
        let mut y = x.clone();
        scale_f32(&mut y, 0.5);
        assert!(y.iter().zip(&x).all(|(a, b)| *a == b * 0.5));
    }

    #[test]
    fn cumsum_matches_sequential() {
        for n in [1usize, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 255, 256, 257, 1000, 4099] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 31) % 17) as f32 - 8.0).collect();
            // The dispatched kernel (AVX2 here when the CPU has it) and the portable one.
            let mut out = vec![0.0; n];
            cumsum_f32(&x, &mut out);
            let mut portable = vec![0.0; n];
            cumsum_body::<false>(&x, &mut portable);
            let mut acc = 0.0f64;
            for i in 0..n {
                acc += f64::from(x[i]);
                // Small integers: every partial sum is exact in f32.
                assert_eq!(f64::from(out[i]), acc, "n = {n}, i = {i}");
                assert_eq!(f64::from(portable[i]), acc, "portable: n = {n}, i = {i}");
            }
        }
    }
}

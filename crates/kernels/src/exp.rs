//! The exponential used by softmax and by every sampler: `2^y`, for `y <= 0` (a little above 0 is
//! fine too), with `e^x = 2^(x log2 e)`.
//!
//! `y = n + f` with `n = round(y)` (adding the 1.5·2^23 rounding constant, with the exponent bias 127
//! folded into it) and `|f| <= 1/2`; `2^f` by a degree-5 polynomial (Chebyshev interpolation at six
//! nodes, f32 coefficients: at most 1.6e-7 relative error on `[-1/2, 1/2]`), and `2^n` put straight
//! into the exponent bits. Callers fold the shift by the row max and the temperature into one
//! multiply-add, `y = x a + b`, with `(a, b) =` [`exp_affine`]`(max, s)`; the rounding of `b` is a
//! factor common to every element and cancels in a normalisation. The relative error of
//! `exp2(x a + b)` against `e^((x - max) s)` is at most `2.5e-7 + 8e-8 |(x - max) s|` (tested): below
//! 1e-6 for every element within a factor 8000 of the largest one; the second term is the f32
//! rounding of the argument, which an f32 softmax computing `expf(x - max)` has as well.
//!
//! `y <= -126.5` (including `-inf`) gives exactly 0 (`n = -127` puts 0 into the exponent bits), so
//! masked elements get exactly zero weight. A NaN `y` also gives 0: callers that must propagate NaN
//! check for it first (see `row::max_bad`).
//!
//! [`exp2`] (scalar, with `FMA = true`) and [`x86::exp2`] (8 lanes) round identically, so a row
//! kernel may finish its tail with the scalar function.

/// `log2(e)`.
pub const LOG2E: f32 = std::f32::consts::LOG2_E;
/// 1.5·2^23 + 127: adding it rounds `y` to an integer `n` and leaves `n + 127` in the low mantissa
/// bits; those bits shifted left by 23 are the exponent field of `2^n`.
const ROUND: f32 = 12_583_039.0;
/// Below this `n = -127`, whose exponent field is 0: the scale is +0.0.
const Y_LOW: f32 = -127.0;
/// Chebyshev interpolant of `2^f` on `[-1/2, 1/2]`, lowest degree first.
#[allow(clippy::approx_constant)]
const C: [f32; 6] = [1.000_000_1, 0.693_147_2, 0.240_221_07, 0.055_503_57, 0.009_676_032, 0.001_339_086_3];

#[inline(always)]
fn fmadd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// `2^y` for `y <= 0` (see the module documentation). With `FMA` the multiply-adds are fused
/// (call it so only where the CPU has FMA, or it is slow); without, they round twice.
#[inline(always)]
pub fn exp2<const FMA: bool>(y: f32) -> f32 {
    // One max instruction in vector form; NaN becomes Y_LOW (comparisons with NaN are false).
    let yc = if y > Y_LOW { y } else { Y_LOW };
    let t = yc + ROUND;
    let n = t - ROUND;
    let f = yc - n;
    let mut p = C[5];
    p = fmadd::<FMA>(p, f, C[4]);
    p = fmadd::<FMA>(p, f, C[3]);
    p = fmadd::<FMA>(p, f, C[2]);
    p = fmadd::<FMA>(p, f, C[1]);
    p = fmadd::<FMA>(p, f, C[0]);
    // bits(t) = bits(1.5·2^23) + 127 + n, and bits(1.5·2^23) << 23 is 0 (mod 2^32).
    p * f32::from_bits(t.to_bits() << 23)
}

/// `e^x` for `x <= 0` (portable; 0 below about -87.7 and for `-inf`).
#[inline]
pub fn exp_neg(x: f32) -> f32 {
    exp2::<false>(x * LOG2E)
}

/// The multiply-add constants `(a, b)` with `x a + b = (x - m) s log2(e)`.
#[inline]
pub fn exp_affine(m: f32, s: f32) -> (f32, f32) {
    let a = s * LOG2E;
    (a, -m * a)
}

/// `e^((x - m) s)` through the affine form `(a, b) = exp_affine(m, s)` (scalar, portable).
#[inline]
pub fn exp_at(x: f32, a: f32, b: f32) -> f32 {
    exp2::<false>(x * a + b)
}

/// The 8-lane AVX2+FMA form.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::{C, ROUND, Y_LOW};
    use std::arch::x86_64::*;

    /// [`super::exp2`]`::<true>` on 8 lanes (bit-identical to it).
    ///
    /// # Safety
    /// Callable only where the CPU has AVX2 and FMA (from code compiled with them, it is safe).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn exp2(y: __m256) -> __m256 {
        let yc = _mm256_max_ps(y, _mm256_set1_ps(Y_LOW));
        let round = _mm256_set1_ps(ROUND);
        let t = _mm256_add_ps(yc, round);
        let f = _mm256_sub_ps(yc, _mm256_sub_ps(t, round));
        let mut p = _mm256_set1_ps(C[5]);
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(C[4]));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(C[3]));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(C[2]));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(C[1]));
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(C[0]));
        _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_castps_si256(t))))
    }

    /// `exp2(x a + b)` on 8 lanes.
    ///
    /// # Safety
    /// As [`exp2`].
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn exp2_affine(x: __m256, a: __m256, b: __m256) -> __m256 {
        exp2(_mm256_fmadd_ps(x, a, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bound() {
        // 2.5e-7 (polynomial and evaluation) + 8e-8 |x| (the f32 rounding of the argument).
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x <= 0.0 {
            let want = f64::from(x).exp();
            for got in [exp_neg(x), exp2::<true>(x * LOG2E)] {
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
        let (a, b) = exp_affine(3.0, 0.5);
        assert!((f64::from(exp_at(1.0, a, b)) - (-1.0f64).exp()).abs() < 1e-6);
    }

    #[test]
    fn special_values() {
        for f in [exp2::<false>, exp2::<true>] {
            assert_eq!(f(f32::NEG_INFINITY), 0.0);
            assert_eq!(f(-127.0), 0.0);
            assert_eq!(f(-1000.0), 0.0);
            assert_eq!(f(f32::NAN), 0.0);
            assert!((f(0.0) - 1.0).abs() < 2e-7);
            // The smallest normal results are still right: 2^-126 and 2^-126.4.
            assert!((f64::from(f(-126.0)) / 2f64.powi(-126) - 1.0).abs() < 1e-6);
            assert!((f64::from(f(-126.4)) / 2f64.powf(-126.4) - 1.0).abs() < 1e-6);
            assert!(f(0.3) > 1.0 && f(0.3).is_finite());
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_matches_scalar_bit_for_bit() {
        use std::arch::x86_64::*;
        if !crate::has_avx2_fma() {
            return;
        }
        let mut ys: Vec<f32> = (0..200_000).map(|i| -130.0 + i as f32 * 0.000_66).collect();
        ys.extend([f32::NEG_INFINITY, f32::NAN, -0.0, 0.0, 0.49, 0.5, 0.51, -126.5, -126.49, -127.0]);
        while !ys.len().is_multiple_of(8) {
            ys.push(-1.0);
        }
        for c in ys.chunks_exact(8) {
            let mut out = [0.0f32; 8];
            // SAFETY: the CPU has AVX2 and FMA (checked above); `c` and `out` hold 8 f32 each.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), x86::exp2(_mm256_loadu_ps(c.as_ptr()))) };
            for (&y, &v) in c.iter().zip(&out) {
                assert_eq!(v.to_bits(), exp2::<true>(y).to_bits(), "y = {y}");
            }
        }
    }
}

//! The project's f64 exponential, [`exp`]: the one `e^y` in f64 that the CPU backend and a Vulkan
//! shader compute bit for bit alike (GLSL has no f64 `exp`, and `f64::exp` is the platform's libm,
//! which no shader reproduces). Used by `random_sample` (`cpu::ops::sample::random_sample` and
//! `shaders/sample.comp`'s `RANDOM` variant, which writes this function out with the same
//! constants).
//!
//! Only IEEE-754 f64 `+`, `-`, `*` (each rounded to nearest, never fused: no `mul_add`, and the
//! shader marks every operation `precise`), comparisons and exponent-bit construction:
//!
//! 1. `k = round(y / ln 2)` as `(y * (1/ln 2) + 1.5·2^52) - 1.5·2^52` (round half to even of the
//!    rounded product; the constant's ulp is 1).
//! 2. Cody–Waite reduction: `r = (y - k ln2_hi) - k ln2_lo`, with fdlibm's split of ln 2 (`ln2_hi`
//!    has 32 significant bits, so `k ln2_hi` is exact for `|k| < 2^21`); `|r| <= 0.3466`.
//! 3. `e^r` by its Taylor polynomial of degree 13 (coefficients `1/n!` rounded to f64; truncation
//!    below 5e-18 on that interval), as `1 + (r + r^2 (1/2! + r (1/3! + ...)))` in Horner form.
//! 4. `2^k` from its exponent bits, one exact multiply (`k = 1024` by `2^1023` and then 2).
//!
//! Special values: NaN gives NaN; `y > 709.782712893384` gives `+inf`; a result below the normal
//! range (below 2^-1022: `y` below about -708.4, and `-inf`) is +0.0, so the function never
//! produces a subnormal (a device that flushes f64 denormals still agrees). `exp(0) = 1` exactly.
//! Accuracy against `f64::exp` (tested over millions of points of `[-745, 709.7]`, densely on
//! `[-40, 0]` where sampling weights live): at most 1 ulp apart on normal results (about 10% of the
//! points differ by 1 ulp, none by more).

/// `1 / ln 2`.
const INV_LN2: f64 = std::f64::consts::LOG2_E;
/// 1.5·2^52: adding and subtracting it rounds to an integer.
const SHIFT: f64 = 6_755_399_441_055_744.0;
/// fdlibm's `ln2_hi` (0x3fe62e42_fee00000): ln 2 to 32 significant bits.
#[allow(clippy::excessive_precision)]
const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-1;
/// fdlibm's `ln2_lo` (0x3dea39ef_35793c76): `ln 2 - ln2_hi`.
#[allow(clippy::excessive_precision)]
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
/// Above this the result overflows (ln of the largest f64).
const Y_HIGH: f64 = 709.782_712_893_384;
/// Below this `k < -1022` for certain (the result is flushed to +0.0).
const Y_LOW: f64 = -745.2;
/// `1/n!` for `n = 2..=13` (the shader holds the same bits).
#[allow(clippy::excessive_precision)]
pub const TAYLOR: [f64; 12] = [
    0.5,
    0.166_666_666_666_666_66,
    0.041_666_666_666_666_664,
    0.008_333_333_333_333_333,
    0.001_388_888_888_888_888_9,
    0.000_198_412_698_412_698_4,
    2.480_158_730_158_73e-5,
    2.755_731_922_398_589_3e-6,
    2.755_731_922_398_589e-7,
    2.505_210_838_544_172e-8,
    2.087_675_698_786_81e-9,
    1.605_904_383_682_161_3e-10,
];

/// `e^y` in f64 (see the module documentation): NaN for NaN, `+inf` above 709.78, +0.0 where the
/// result would not be a normal number, otherwise within 1 ulp of `f64::exp`.
#[inline]
pub fn exp(y: f64) -> f64 {
    if y.is_nan() {
        return y;
    }
    if y > Y_HIGH {
        return f64::INFINITY;
    }
    if y < Y_LOW {
        return 0.0;
    }
    let kd = (y * INV_LN2 + SHIFT) - SHIFT;
    let k = kd as i32;
    if k < -1022 {
        return 0.0;
    }
    let r = (y - kd * LN2_HI) - kd * LN2_LO;
    let mut q = TAYLOR[11];
    for &c in TAYLOR[..11].iter().rev() {
        q = q * r + c;
    }
    let p = 1.0 + (r + (r * r) * q);
    if k == -1022 && p < 1.0 {
        return 0.0; // subnormal
    }
    if k == 1024 { p * pow2(1023) * 2.0 } else { p * pow2(k) }
}

/// Inputs with `|y| <= IN_RANGE` take no special case in [`exp`] (`|k| <= 1010`).
pub const IN_RANGE: f64 = 700.0;

/// [`exp`] without its special cases, for `|y| <=` [`IN_RANGE`]: the same operations in the same
/// order (so the same bits), with `2^k` built from the rounding sum's bits (`bits(y / ln 2 + 1.5·2^52)
/// = bits(1.5·2^52) + k`, whose low 12 bits plus 1023, shifted into the exponent field, are
/// `bits(2^k)`), so that a loop of it vectorises. Meaningless outside that range and for NaN.
#[inline(always)]
pub fn exp_in_range(y: f64) -> f64 {
    let t = y * INV_LN2 + SHIFT;
    let kd = t - SHIFT;
    let r = (y - kd * LN2_HI) - kd * LN2_LO;
    let mut q = TAYLOR[11];
    for &c in TAYLOR[..11].iter().rev() {
        q = q * r + c;
    }
    let p = 1.0 + (r + (r * r) * q);
    p * f64::from_bits(t.to_bits().wrapping_add(1023) << 52)
}

#[inline(always)]
fn exp_into_body<const FMA: bool>(ys: &[f64], out: &mut [f64]) {
    for (o, &y) in out.iter_mut().zip(ys) {
        *o = exp_in_range(y);
    }
    for (o, &y) in out.iter_mut().zip(ys) {
        // NaN is out of range too.
        if y.is_nan() || y.abs() > IN_RANGE {
            *o = exp(y);
        }
    }
}

crate::dispatch!(
    /// `out[i] = exp(ys[i])` ([`exp`], bit for bit) over the shorter of the two, vectorised.
    pub fn exp_into(ys: &[f64], out: &mut [f64]) => exp_into_body
);

/// `2^k` for `-1022 <= k <= 1023`, from its exponent bits.
#[inline(always)]
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_form_is_bit_identical() {
        let mut next = points(77);
        let mut ys: Vec<f64> = (0..200_000).map(|_| -60.0 * next()).collect();
        ys.extend((0..50_000).map(|_| 1500.0 * next() - 750.0));
        ys.extend([0.0, -0.0, IN_RANGE, -IN_RANGE, 700.1, -700.1, 709.9, -708.5, -745.3, f64::NEG_INFINITY]);
        ys.extend([f64::INFINITY, f64::NAN, -1e-300, 1e-300]);
        let mut out = vec![0.0; ys.len()];
        exp_into(&ys, &mut out);
        let mut portable = vec![0.0; ys.len()];
        exp_into_body::<false>(&ys, &mut portable);
        for (i, &y) in ys.iter().enumerate() {
            let want = exp(y);
            assert!(out[i].to_bits() == want.to_bits() || (want.is_nan() && out[i].is_nan()), "y = {y}");
            assert!(portable[i].to_bits() == want.to_bits() || (want.is_nan() && portable[i].is_nan()));
            if y.abs() <= IN_RANGE {
                assert_eq!(exp_in_range(y).to_bits(), want.to_bits(), "y = {y}");
            }
        }
    }

    /// Distance in representable f64 values between two finite non-negative numbers.
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    /// A fixed 64-bit generator (splitmix64) for reproducible points.
    fn points(seed: u64) -> impl FnMut() -> f64 {
        let mut s = seed;
        move || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn taylor_coefficients_are_the_rounded_reciprocal_factorials() {
        let mut f = 1.0f64;
        for (n, &c) in (2..=13).zip(&TAYLOR) {
            f *= n as f64; // exact: 13! < 2^53
            assert_eq!(c, 1.0 / f, "1/{n}!");
        }
        // The bits the shader holds (`shaders/sample.comp`, EXP64_C).
        assert_eq!(TAYLOR[11].to_bits(), 0x3de6_1246_13a8_6d09);
        assert_eq!(LN2_HI.to_bits(), 0x3fe6_2e42_fee0_0000);
        assert_eq!(LN2_LO.to_bits(), 0x3dea_39ef_3579_3c76);
    }

    #[test]
    fn within_one_ulp_of_the_platform_exp() {
        let mut u = points(12);
        let (mut worst, mut diff, mut count) = ((0u64, 0.0f64), 0u64, 0u64);
        // 4 million points on [-40, 0] (where sampling weights that matter live), 2 million on
        // the whole normal range, and the reduction's boundaries (k ln 2 / 2 and neighbours).
        let mut check = |y: f64| {
            let (a, b) = (exp(y), y.exp());
            if b < f64::MIN_POSITIVE * (1.0 + 4.0 * f64::EPSILON) {
                assert!(a == 0.0 || a >= f64::MIN_POSITIVE, "exp({y}) = {a} is subnormal");
                return;
            }
            let d = ulps(a, b);
            diff += u64::from(d > 0);
            count += 1;
            if d > worst.0 {
                worst = (d, y);
            }
        };
        for _ in 0..4_000_000 {
            check(-40.0 * u());
        }
        for _ in 0..2_000_000 {
            check(-745.0 + 1454.7 * u());
        }
        for k in -1100..1100 {
            let m = (k as f64 + 0.5) * std::f64::consts::LN_2;
            let mut y = m;
            for _ in 0..4 {
                check(y);
                y = f64::from_bits(y.to_bits() + 1);
            }
            check(k as f64 * std::f64::consts::LN_2);
        }
        assert!(worst.0 <= 1, "max {} ulp at {}", worst.0, worst.1);
        // Measured: about 10% of the points are 1 ulp apart (f64::exp is itself not always
        // correctly rounded), none more.
        assert!(diff * 5 < count, "{diff} of {count} points differ");
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(exp(f64::NEG_INFINITY).to_bits(), 0);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert!(exp(709.78).is_finite());
        assert_eq!(exp(709.8), f64::INFINITY);
        assert_eq!(exp(-708.5), 0.0); // would be subnormal: flushed
        assert!(exp(-707.0) >= f64::MIN_POSITIVE);
        assert!(ulps(exp(1.0), std::f64::consts::E) <= 1);
        assert!(exp(-708.0) >= f64::MIN_POSITIVE);
        // Monotone over a fine sweep of the sampling range.
        let mut prev = 0.0;
        for i in 0..=200_000 {
            let y = -50.0 + 50.0 * i as f64 / 200_000.0;
            let v = exp(y);
            assert!(v >= prev, "not monotone at {y}");
            prev = v;
        }
    }
}

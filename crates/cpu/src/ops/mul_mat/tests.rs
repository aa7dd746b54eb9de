//! Kernel-level tests of `mul_mat`: the AVX2 mat-vec and mat-mat kernels and the widening against
//! an f64 reference at odd sizes.

use super::*;
use graph::DType;
use half::{bf16, f16};

/// Deterministic values of magnitude in [0.5, 1] with random signs: a dropped or doubled term
/// moves a dot product by at least 0.25, far above the rounding tolerance.
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 40) as f32 / (1u64 << 24) as f32;
            let v = 0.5 + 0.5 * u;
            if s & 1 == 0 { v } else { -v }
        })
        .collect()
}

/// `a` (rows of `k` values, `pad` unused elements between rows) stored as `dt` bytes, and the
/// stored values read back as f64.
fn store(dt: DType, vals: &[f32], k: usize, pad: usize) -> (Vec<u8>, Vec<f64>) {
    let m = vals.len() / k;
    let es = dt.size();
    let mut bytes = vec![0xFFu8; m * (k + pad) * es];
    let mut exact = Vec::with_capacity(vals.len());
    for (i, &v) in vals.iter().enumerate() {
        let at = ((i / k) * (k + pad) + i % k) * es;
        let (b, x): (Vec<u8>, f64) = match dt {
            DType::F16 => (f16::from_f32(v).to_le_bytes().to_vec(), f16::from_f32(v).to_f64()),
            DType::BF16 => (bf16::from_f32(v).to_le_bytes().to_vec(), bf16::from_f32(v).to_f64()),
            _ => (v.to_le_bytes().to_vec(), f64::from(v)),
        };
        bytes[at..at + es].copy_from_slice(&b);
        exact.push(x);
    }
    (bytes, exact)
}

#[test]
#[cfg(target_arch = "x86_64")]
fn matvec_kernel_matches_f64_reference_at_odd_sizes() {
    if !crate::math::has_avx2() {
        // The kernel needs AVX2+FMA+F16C; without them mul_mat never calls it.
        return;
    }
    let mut seed = 1;
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for k in [1, 7, 8, 15, 16, 17, 100, 4099] {
            for m in [1, 3, 4, 5, 9, 33] {
                for n in 1..=MV_MAX_N {
                    seed += 1;
                    let pad = 3;
                    let (abytes, aexact) = store(dt, &values(seed, m * k), k, pad);
                    let bcols: Vec<Vec<f32>> = (0..n).map(|j| values(seed * 31 + j as u64, k)).collect();
                    let bptr: Vec<*const f32> = bcols.iter().map(|c| c.as_ptr()).collect();
                    let mut out = vec![f32::NAN; m * n + 1];
                    let lda = (k + pad) * dt.size();
                    // SAFETY: the CPU has AVX2+FMA+F16C (checked above); `abytes` holds `m` rows
                    // of `k` elements `lda` bytes apart, each column `k` f32; `out` has room.
                    unsafe {
                        let ap = abytes.as_ptr();
                        match dt {
                            DType::F16 => simd::matvec::<DT_F16>(ap, lda, m, k, &bptr, &mut out),
                            DType::BF16 => simd::matvec::<DT_BF16>(ap, lda, m, k, &bptr, &mut out),
                            _ => simd::matvec::<DT_F32>(ap, lda, m, k, &bptr, &mut out),
                        }
                    }
                    assert!(out[m * n].is_nan(), "{dt} k={k} m={m} n={n}: wrote past the output");
                    let tol = 1e-6 * k as f64 + 1e-6;
                    for i in 0..m {
                        for j in 0..n {
                            let want: f64 = (0..k).map(|t| aexact[i * k + t] * f64::from(bcols[j][t])).sum::<f64>();
                            let got = f64::from(out[i * n + j]);
                            assert!(
                                (got - want).abs() <= tol,
                                "{dt} k={k} m={m} n={n} [{i}, {j}]: got {got}, want {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn matmat_kernel_and_widening_match_f64_reference_at_odd_sizes() {
    if !crate::math::has_avx2() {
        return;
    }
    let mut seed = 1000;
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for k in [1, 7, 8, 15, 16, 17, 100, 4099] {
            for m in [1, 3, 4, 5, 9, 33] {
                for n in [5, 6, 7, 8, 13] {
                    seed += 1;
                    let pad = 5;
                    let (abytes, aexact) = store(dt, &values(seed, m * k), k, pad);
                    // Widen `a` row by row (as mul_mat_mat does for f16/bf16), then run the f32 kernel.
                    let mut wide = vec![f32::NAN; m * (k + 1)];
                    for i in 0..m {
                        let src = abytes[i * (k + pad) * dt.size()..].as_ptr();
                        let dst = &mut wide[i * (k + 1)..i * (k + 1) + k];
                        // SAFETY: the CPU has AVX2+FMA+F16C; row `i` holds `k` elements of `dt`.
                        unsafe {
                            match dt {
                                DType::F16 => simd::widen::<DT_F16>(src, dst),
                                DType::BF16 => simd::widen::<DT_BF16>(src, dst),
                                _ => simd::widen::<DT_F32>(src, dst),
                            }
                        }
                        assert!(wide[i * (k + 1) + k].is_nan(), "{dt} k={k}: widen wrote past the row");
                    }
                    let bcols: Vec<Vec<f32>> = (0..n).map(|j| values(seed * 37 + j as u64, k)).collect();
                    let bptr: Vec<*const f32> = bcols.iter().map(|c| c.as_ptr()).collect();
                    // Accumulates onto what is there: start from 1.0 and subtract it below.
                    let mut acc = vec![1.0f32; m * n + 1];
                    // SAFETY: the CPU has AVX2+FMA+F16C; `wide` holds `m` f32 rows of `k` elements
                    // `(k + 1) * 4` bytes apart, each column `k` f32; `acc` has room.
                    unsafe { simd::matmat_acc(wide.as_ptr() as *const u8, (k + 1) * 4, m, k, &bptr, &mut acc) };
                    assert_eq!(acc[m * n], 1.0, "{dt} k={k} m={m} n={n}: wrote past the output");
                    let tol = 1e-6 * k as f64 + 1e-5;
                    for i in 0..m {
                        for j in 0..n {
                            let want: f64 = (0..k).map(|t| aexact[i * k + t] * f64::from(bcols[j][t])).sum::<f64>();
                            let got = f64::from(acc[i * n + j]) - 1.0;
                            assert!(
                                (got - want).abs() <= tol,
                                "{dt} k={k} m={m} n={n} [{i}, {j}]: got {got}, want {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}

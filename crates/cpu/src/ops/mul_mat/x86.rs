//! The AVX2+FMA+F16C drivers of `mul_mat`: how the work is cut into tasks and K passes, around the
//! intrinsics kernels of `simd.rs`.

use super::{DT_BF16, DT_F16, DT_F32, KC, MM_ROWS, MV_MAX_N, MV_ROWS, put, simd};
use crate::tensor::TensorRef;
use graph::DType;

/// The matrix-vector product for `1 <= n <= MV_MAX_N` columns of `b` on an AVX2+FMA+F16C CPU: tasks
/// of `MV_ROWS` rows (times one batch) read `a` once in its stored type, no f32 scratch.
pub(super) fn mul_mat_vec(a: &TensorRef, b: &TensorRef, d: &TensorRef) {
    let (kk, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    let blocks = m.div_ceil(MV_ROWS);
    crate::par::for_blocks(b.ne[2] * b.ne[3] * blocks, MV_ROWS * kk * n, |range| {
        let mut out = [0.0f32; MV_ROWS * MV_MAX_N];
        for t in range {
            let (batch, blk) = (t / blocks, t % blocks);
            let (b2, b3) = (batch % b.ne[2], batch / b.ne[2]);
            let (a2, a3) = (b2 / r2, b3 / r3);
            let rows = blk * MV_ROWS..((blk + 1) * MV_ROWS).min(m);
            let cols: [*const f32; MV_MAX_N] = std::array::from_fn(|j| b.ptr(0, j.min(n - 1), b2, b3) as *const f32);
            let (ap, lda) = (a.ptr(0, rows.start, a2, a3) as *const u8, a.nb[1]);
            // SAFETY: the CPU has AVX2+FMA+F16C (the caller checked); `a` and `b` have contiguous rows
            // of `kk` elements (builder rule) valid for reads; rows `rows` of `a` are `lda` bytes
            // apart; `out` holds `MV_ROWS * MV_MAX_N` values. Each task writes its own rows of `d`
            // for its batch only.
            unsafe {
                let nr = rows.len();
                match a.dtype {
                    DType::F16 => simd::matvec::<DT_F16>(ap, lda, nr, kk, &cols[..n], &mut out),
                    DType::BF16 => simd::matvec::<DT_BF16>(ap, lda, nr, kk, &cols[..n], &mut out),
                    _ => simd::matvec::<DT_F32>(ap, lda, nr, kk, &cols[..n], &mut out),
                }
                for (q, i) in rows.enumerate() {
                    for j in 0..n {
                        put(d, i, j, b2, b3, out[q * n + j]);
                    }
                }
            }
        }
    });
}

/// The matrix-matrix product (more than `MV_MAX_N` columns of `b`) on an AVX2+FMA+F16C CPU: tasks of
/// `MM_ROWS` rows (times one batch), K cut into passes of `KC`; for f16/bf16 each pass's
/// `MM_ROWS x KC` panel is widened into a cache-resident f32 scratch first, f32 rows are read in place.
pub(super) fn mul_mat_mat(a: &TensorRef, b: &TensorRef, d: &TensorRef) {
    let (kk, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    let blocks = m.div_ceil(MM_ROWS);
    let convert = a.dtype != DType::F32;
    crate::par::for_blocks(b.ne[2] * b.ne[3] * blocks, MM_ROWS * kk * n, |range| {
        let mut scratch = if convert { vec![0.0f32; MM_ROWS * KC] } else { Vec::new() };
        let mut acc = vec![0.0f32; MM_ROWS * n];
        let mut cols = vec![std::ptr::null::<f32>(); n];
        for t in range {
            let (batch, blk) = (t / blocks, t % blocks);
            let (b2, b3) = (batch % b.ne[2], batch / b.ne[2]);
            let (a2, a3) = (b2 / r2, b3 / r3);
            let rows = blk * MM_ROWS..((blk + 1) * MM_ROWS).min(m);
            let nr = rows.len();
            acc.fill(0.0);
            let mut k0 = 0;
            while k0 < kk {
                let kc = KC.min(kk - k0);
                for (j, c) in cols.iter_mut().enumerate() {
                    *c = b.ptr(k0, j, b2, b3) as *const f32;
                }
                // SAFETY: the CPU has AVX2+FMA+F16C (the caller checked); `a` and `b` have contiguous
                // rows of `kk` elements (builder rule) valid for reads, so elements `k0 .. k0 + kc` of
                // each are; the scratch holds `MM_ROWS` rows of `KC`; `acc` holds `MM_ROWS * n`.
                unsafe {
                    let (ap, lda) = if convert {
                        for (q, i) in rows.clone().enumerate() {
                            let src = a.ptr(k0, i, a2, a3) as *const u8;
                            let dst = &mut scratch[q * KC..q * KC + kc];
                            match a.dtype {
                                DType::F16 => simd::widen::<DT_F16>(src, dst),
                                _ => simd::widen::<DT_BF16>(src, dst),
                            }
                        }
                        (scratch.as_ptr() as *const u8, KC * 4)
                    } else {
                        (a.ptr(k0, rows.start, a2, a3) as *const u8, a.nb[1])
                    };
                    simd::matmat_acc(ap, lda, nr, kc, &cols, &mut acc);
                }
                k0 += kc;
            }
            for (q, i) in rows.enumerate() {
                for j in 0..n {
                    // SAFETY: each task writes its own rows of `d` for its batch only.
                    unsafe { put(d, i, j, b2, b3, acc[q * n + j]) };
                }
            }
        }
    });
}

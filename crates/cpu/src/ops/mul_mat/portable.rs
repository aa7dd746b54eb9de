//! The portable blocked `mul_mat` (any CPU; the AVX2 paths in `x86.rs` take over where the CPU has
//! AVX2+FMA+F16C): tasks of [`ROWS`] rows of `a`, f16/bf16 blocks converted to f32 once per task,
//! register tiles of 4 rows x 2 columns (or 8 rows x 1 column) with FMA when the CPU has it.

// Indexed lane loops are deliberate: they are the shape LLVM turns into SIMD.
#![allow(clippy::needless_range_loop)]

use super::put;
use crate::math::{fma, multiversion};
use crate::tensor::{TensorRef, load_f32};
use graph::DType;

/// Rows of `a` per task.
const ROWS: usize = 16;

#[inline(always)]
fn dot_body<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let (ac, ar) = a.as_chunks::<8>();
    let (bc, br) = b.as_chunks::<8>();
    let (mut c0, mut c1) = ([0.0f32; 8], [0.0f32; 8]);
    let mut i = 0;
    while i + 2 <= ac.len() {
        fma8::<FMA>(&mut c0, &ac[i], &bc[i]);
        fma8::<FMA>(&mut c1, &ac[i + 1], &bc[i + 1]);
        i += 2;
    }
    if i < ac.len() {
        fma8::<FMA>(&mut c0, &ac[i], &bc[i]);
    }
    let mut s = hsum(&c0) + hsum(&c1);
    for (x, y) in ar.iter().zip(br) {
        s += x * y;
    }
    s
}
multiversion!(
    /// Dot product of two f32 slices.
    fn dot(a: &[f32], b: &[f32]) -> f32 => dot_body
);

/// `acc[l] += x[l] * y[l]` for 8 lanes (one vector FMA).
#[inline(always)]
fn fma8<const FMA: bool>(acc: &mut [f32; 8], x: &[f32; 8], y: &[f32; 8]) {
    for l in 0..8 {
        acc[l] = fma::<FMA>(x[l], y[l], acc[l]);
    }
}

#[inline(always)]
fn hsum(acc: &[f32; 8]) -> f32 {
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

#[inline(always)]
fn tile_4x2_body<const FMA: bool>(a: &[&[f32]; 4], b: &[&[f32]; 2]) -> [[f32; 2]; 4] {
    let n = b[0].len();
    let (a0, a1, a2, a3) =
        (a[0].as_chunks::<8>().0, a[1].as_chunks::<8>().0, a[2].as_chunks::<8>().0, a[3].as_chunks::<8>().0);
    let (b0, b1) = (b[0].as_chunks::<8>().0, b[1].as_chunks::<8>().0);
    let m = b0.len().min(b1.len()).min(a0.len()).min(a1.len()).min(a2.len()).min(a3.len());
    let (mut c00, mut c01, mut c10, mut c11) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
    let (mut c20, mut c21, mut c30, mut c31) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
    for i in 0..m {
        let (y0, y1) = (&b0[i], &b1[i]);
        fma8::<FMA>(&mut c00, &a0[i], y0);
        fma8::<FMA>(&mut c01, &a0[i], y1);
        fma8::<FMA>(&mut c10, &a1[i], y0);
        fma8::<FMA>(&mut c11, &a1[i], y1);
        fma8::<FMA>(&mut c20, &a2[i], y0);
        fma8::<FMA>(&mut c21, &a2[i], y1);
        fma8::<FMA>(&mut c30, &a3[i], y0);
        fma8::<FMA>(&mut c31, &a3[i], y1);
    }
    let mut out =
        [[hsum(&c00), hsum(&c01)], [hsum(&c10), hsum(&c11)], [hsum(&c20), hsum(&c21)], [hsum(&c30), hsum(&c31)]];
    for r in 0..4 {
        for c in 0..2 {
            for t in 8 * m..n {
                out[r][c] += a[r][t] * b[c][t];
            }
        }
    }
    out
}
multiversion!(
    /// Four rows of `a` times two columns of `b`.
    fn tile_4x2(a: &[&[f32]; 4], b: &[&[f32]; 2]) -> [[f32; 2]; 4] => tile_4x2_body
);

#[inline(always)]
fn tile_8x1_body<const FMA: bool>(a: &[&[f32]; 8], b: &[f32]) -> [f32; 8] {
    let n = b.len();
    let y = b.as_chunks::<8>().0;
    let r: [&[[f32; 8]]; 8] = std::array::from_fn(|q| a[q].as_chunks::<8>().0);
    let m = r.iter().map(|x| x.len()).min().unwrap_or(0).min(y.len());
    let mut c = [[0.0f32; 8]; 8];
    let (mut c0, mut c1, mut c2, mut c3) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
    let (mut c4, mut c5, mut c6, mut c7) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
    for i in 0..m {
        let yi = &y[i];
        fma8::<FMA>(&mut c0, &r[0][i], yi);
        fma8::<FMA>(&mut c1, &r[1][i], yi);
        fma8::<FMA>(&mut c2, &r[2][i], yi);
        fma8::<FMA>(&mut c3, &r[3][i], yi);
        fma8::<FMA>(&mut c4, &r[4][i], yi);
        fma8::<FMA>(&mut c5, &r[5][i], yi);
        fma8::<FMA>(&mut c6, &r[6][i], yi);
        fma8::<FMA>(&mut c7, &r[7][i], yi);
    }
    c[0] = c0;
    c[1] = c1;
    c[2] = c2;
    c[3] = c3;
    c[4] = c4;
    c[5] = c5;
    c[6] = c6;
    c[7] = c7;
    let mut out = [0.0f32; 8];
    for q in 0..8 {
        out[q] = hsum(&c[q]);
        for t in 8 * m..n {
            out[q] += a[q][t] * b[t];
        }
    }
    out
}
multiversion!(
    /// Eight rows of `a` times one column of `b`.
    fn tile_8x1(a: &[&[f32]; 8], b: &[f32]) -> [f32; 8] => tile_8x1_body
);

/// The blocked path for CPUs without AVX2+FMA+F16C: tasks of `ROWS` rows of `a` (times one batch),
/// an f16/bf16 block converted to f32 once per task, 4x2 (or 8x1) register tiles.
pub(super) fn mul_mat(a: &TensorRef, b: &TensorRef, d: &TensorRef) {
    let (kk, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    let batches = b.ne[2] * b.ne[3];
    let blocks = m.div_ceil(ROWS);
    let convert = a.dtype != DType::F32;
    crate::par::for_blocks(batches * blocks, ROWS * kk * n, |range| {
        let mut scratch = if convert { vec![0.0f32; ROWS * kk] } else { Vec::new() };
        for t in range {
            let (batch, blk) = (t / blocks, t % blocks);
            let (b2, b3) = (batch % b.ne[2], batch / b.ne[2]);
            let (a2, a3) = (b2 / r2, b3 / r3);
            let rows = blk * ROWS..((blk + 1) * ROWS).min(m);
            // SAFETY: `a` and `b` have contiguous rows (builder rule) and are valid for reads; each task
            // writes its own rows `rows` of `out` for its batch only.
            unsafe {
                let a_rows: Vec<&[f32]> = if convert {
                    for (q, i) in rows.clone().enumerate() {
                        load_f32(a.dtype, a.ptr(0, i, a2, a3), &mut scratch[q * kk..(q + 1) * kk]);
                    }
                    scratch.chunks_exact(kk).take(rows.len()).collect()
                } else {
                    rows.clone().map(|i| a.row::<f32>([i, a2, a3])).collect()
                };
                let b_col = |j: usize| b.row::<f32>([j, b2, b3]);
                let i0 = rows.start;
                let mut q = 0;
                if n == 1 {
                    let bc = b_col(0);
                    while q + 8 <= a_rows.len() {
                        let tile: &[&[f32]; 8] = a_rows[q..q + 8].try_into().expect("8 rows");
                        for (r, v) in tile_8x1(tile, bc).into_iter().enumerate() {
                            put(d, i0 + q + r, 0, b2, b3, v);
                        }
                        q += 8;
                    }
                } else {
                    while q + 4 <= a_rows.len() {
                        let tile: &[&[f32]; 4] = a_rows[q..q + 4].try_into().expect("4 rows");
                        let mut j = 0;
                        while j + 2 <= n {
                            let out = tile_4x2(tile, &[b_col(j), b_col(j + 1)]);
                            for (r, row) in out.iter().enumerate() {
                                put(d, i0 + q + r, j, b2, b3, row[0]);
                                put(d, i0 + q + r, j + 1, b2, b3, row[1]);
                            }
                            j += 2;
                        }
                        if j < n {
                            for r in 0..4 {
                                put(d, i0 + q + r, j, b2, b3, dot(tile[r], b_col(j)));
                            }
                        }
                        q += 4;
                    }
                }
                for (r, ar) in a_rows.iter().enumerate().skip(q) {
                    for j in 0..n {
                        put(d, i0 + r, j, b2, b3, dot(ar, b_col(j)));
                    }
                }
            }
        }
    });
}

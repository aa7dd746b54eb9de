//! `mul_mat`: `out[i, j] = sum_k a[k, i] * b[k, j]`, `a` f32/f16/bf16 (weights), `b` f32, out f32;
//! `a`'s batch index is `b`'s divided by the broadcast ratio (ggml's rule).
//!
//! Matrix-vector products (1 to [`MV_MAX_N`] columns of `b`) on a CPU with AVX2+FMA+F16C take their
//! dot products straight from `a`'s stored type: an explicit intrinsics kernel widens 8 elements at a
//! time in registers (f16 with F16C's `vcvtph2ps`, bf16 by a 16-bit left shift, f32 plain loads), so
//! `a` is read once and nothing is written back. A register tile covers several rows of `a` (4 rows for
//! one or two columns, 2 rows for three or four) with independent accumulators, so each load of `b`
//! serves every row and FMA latency is hidden; a `K % 8` tail goes through zero-padded registers,
//! leftover rows through a one-row tile. Tasks are blocks of [`MV_ROWS`] rows (times one batch).
//!
//! Matrix-matrix products (more columns) on such a CPU use the same register tiles from f32 rows: 4
//! rows x 3 columns (12 accumulators, 7 loads per 12 FMAs), narrower tiles for leftover rows and
//! columns. Tasks are blocks of [`MM_ROWS`] rows (times one batch); K is cut into passes of [`KC`]
//! elements whose partial sums accumulate in a per-task buffer. f32 rows of `a` are read in place; an
//! f16/bf16 pass first widens its `MM_ROWS x KC` panel into a cache-resident f32 scratch (F16C or a
//! shift), which every column tile then reuses.
//!
//! Without AVX2+FMA+F16C (or with no columns) the portable blocked path runs: tasks of `ROWS` rows of
//! `a` (times one batch); an f16/bf16 block is converted to f32 once per task and reused for every
//! column of `b`. Inside a task, register tiles of 4 rows x 2 columns (or 8 rows x 1 column for a
//! matrix-vector product) accumulate 8-lane partial sums with FMA when the CPU has it (the
//! `multiversion!` build), so each loaded `a` value serves several columns.

// Indexed lane loops are deliberate: they are the shape LLVM turns into SIMD.
#![allow(clippy::needless_range_loop)]

use super::K;
use crate::error::CpuError;
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

/// Writes `v` at `out[i, j]` of batch `(b2, b3)`.
///
/// # Safety
/// The element must be written by no one else concurrently.
#[inline]
unsafe fn put(d: &TensorRef, i: usize, j: usize, b2: usize, b3: usize, v: f32) {
    // SAFETY: forwarded.
    unsafe { *(d.ptr(i, j, b2, b3) as *mut f32) = v };
}

/// Columns of `b` up to which the matrix-vector path is taken (on CPUs with AVX2+FMA+F16C).
const MV_MAX_N: usize = 4;
/// Rows of `a` per matrix-vector work item (for_blocks groups items into a few tasks per thread).
const MV_ROWS: usize = 64;

/// `a`'s element type as a const-generic tag for the matrix-vector kernels.
const DT_F32: u8 = 0;
const DT_F16: u8 = 1;
const DT_BF16: u8 = 2;

/// Explicit AVX2+FMA+F16C kernels: the matrix-vector product taken straight from `a`'s stored type,
/// the widening of f16/bf16 rows, and the f32 matrix-matrix register tiles.
#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    /// Bytes per element of the tag `DT`.
    const fn size<const DT: u8>() -> usize {
        if DT == super::DT_F32 { 4 } else { 2 }
    }

    /// Eight consecutive elements of type `DT` at `p`, widened to f32.
    ///
    /// # Safety
    /// `p` must be valid for reads of 8 elements of `DT` (no alignment needed).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8<const DT: u8>(p: *const u8) -> __m256 {
        // SAFETY: the caller guarantees 8 readable elements (32 bytes for f32, 16 for f16/bf16);
        // every load here is unaligned.
        unsafe {
            match DT {
                super::DT_F32 => _mm256_loadu_ps(p as *const f32),
                super::DT_F16 => _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
                // bf16 is the high half of an f32: zero-extend to 32 bits and shift left by 16.
                _ => _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(
                    p as *const __m128i,
                )))),
            }
        }
    }

    /// Sum of the 8 lanes of `v`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    /// One register tile: `R` rows of `a` (the first at `a`, `lda` bytes apart, `k` elements of `DT`
    /// each) times the `C` columns `b` (each `k` f32), with `U` independent accumulators per output
    /// (the loop steps `8 * U` elements). A tail of `k % 8` elements is copied into zero-padded
    /// registers, so every element is used exactly once. Returns `out[r][c]`.
    ///
    /// # Safety
    /// The `R` rows of `a` must be valid for reads of `k` elements of `DT`; every `b[c]` of `k` f32.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile<const DT: u8, const R: usize, const C: usize, const U: usize>(
        a: *const u8,
        lda: usize,
        k: usize,
        b: &[*const f32; C],
    ) -> [[f32; C]; R] {
        let es = size::<DT>();
        let mut acc = [[[_mm256_setzero_ps(); U]; C]; R];
        let mut i = 0;
        // SAFETY: every load below reads elements `i .. i + 8 <= k` of a row of `a` or of a column of
        // `b` (the loop conditions), or a local buffer.
        unsafe {
            while i + 8 * U <= k {
                for u in 0..U {
                    let o = i + 8 * u;
                    let bv: [__m256; C] = std::array::from_fn(|c| _mm256_loadu_ps(b[c].add(o)));
                    for r in 0..R {
                        let av = load8::<DT>(a.add(r * lda + o * es));
                        for c in 0..C {
                            acc[r][c][u] = _mm256_fmadd_ps(av, bv[c], acc[r][c][u]);
                        }
                    }
                }
                i += 8 * U;
            }
            while i + 8 <= k {
                let bv: [__m256; C] = std::array::from_fn(|c| _mm256_loadu_ps(b[c].add(i)));
                for r in 0..R {
                    let av = load8::<DT>(a.add(r * lda + i * es));
                    for c in 0..C {
                        acc[r][c][0] = _mm256_fmadd_ps(av, bv[c], acc[r][c][0]);
                    }
                }
                i += 8;
            }
            let t = k - i;
            if t > 0 {
                // Zero padding on both sides: the padded lanes add 0 * 0.
                let bv: [__m256; C] = std::array::from_fn(|c| {
                    let mut buf = [0.0f32; 8];
                    std::ptr::copy_nonoverlapping(b[c].add(i), buf.as_mut_ptr(), t);
                    _mm256_loadu_ps(buf.as_ptr())
                });
                for r in 0..R {
                    let mut buf = [0u8; 32];
                    std::ptr::copy_nonoverlapping(a.add(r * lda + i * es), buf.as_mut_ptr(), t * es);
                    let av = load8::<DT>(buf.as_ptr());
                    for c in 0..C {
                        acc[r][c][0] = _mm256_fmadd_ps(av, bv[c], acc[r][c][0]);
                    }
                }
            }
        }
        let mut out = [[0.0f32; C]; R];
        for r in 0..R {
            for c in 0..C {
                let mut s = acc[r][c][0];
                for u in 1..U {
                    s = _mm256_add_ps(s, acc[r][c][u]);
                }
                out[r][c] = hsum(s);
            }
        }
        out
    }

    /// `rows` rows of `a` times the `C` columns `b`: tiles of `R` rows, then single rows.
    /// `out[r * C + c]` receives row `r` times column `c`.
    ///
    /// # Safety
    /// As [`tile`], for `rows` rows; `out` holds at least `rows * C` values.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn rows_c<const DT: u8, const R: usize, const C: usize, const U: usize>(
        a: *const u8,
        lda: usize,
        rows: usize,
        k: usize,
        b: &[*const f32],
        out: &mut [f32],
    ) {
        let b: &[*const f32; C] = b.try_into().expect("C columns");
        let mut r = 0;
        // SAFETY: rows `r .. r + R <= rows` (then `r < rows`) are valid by the caller's guarantee.
        unsafe {
            while r + R <= rows {
                let v = tile::<DT, R, C, U>(a.add(r * lda), lda, k, b);
                for (q, row) in v.iter().enumerate() {
                    out[(r + q) * C..(r + q + 1) * C].copy_from_slice(row);
                }
                r += R;
            }
            while r < rows {
                let v = tile::<DT, 1, C, U>(a.add(r * lda), lda, k, b);
                out[r * C..(r + 1) * C].copy_from_slice(&v[0]);
                r += 1;
            }
        }
    }

    /// `rows` rows of `a` (type `DT`, the first at `a`, `lda` bytes apart, `k` elements each) times
    /// the columns `b` (1 to 4, `k` f32 each); `out[r * b.len() + c]` receives row `r` times column `c`.
    /// Tiles keep at most 8 accumulators (of 16 vector registers): 4 rows x 1 column x 2, 4 x 2 x 1,
    /// 2 x 3 x 1 or 2 x 4 x 1.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C. The rows and columns must be valid for reads;
    /// `out.len() >= rows * b.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn matvec<const DT: u8>(
        a: *const u8,
        lda: usize,
        rows: usize,
        k: usize,
        b: &[*const f32],
        out: &mut [f32],
    ) {
        assert!(out.len() >= rows * b.len());
        // SAFETY: forwarded from the caller.
        unsafe {
            match b.len() {
                1 => rows_c::<DT, 4, 1, 2>(a, lda, rows, k, b, out),
                2 => rows_c::<DT, 4, 2, 1>(a, lda, rows, k, b, out),
                3 => rows_c::<DT, 2, 3, 1>(a, lda, rows, k, b, out),
                4 => rows_c::<DT, 2, 4, 1>(a, lda, rows, k, b, out),
                n => panic!("matvec takes 1 to 4 columns, not {n}"),
            }
        }
    }
    /// Widens `out.len()` elements of type `DT` at `src` into `out`.
    ///
    /// # Safety
    /// `src` must be valid for reads of `out.len()` elements of `DT`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn widen<const DT: u8>(src: *const u8, out: &mut [f32]) {
        let (es, n) = (size::<DT>(), out.len());
        let mut i = 0;
        // SAFETY: elements `i .. i + 8 <= n` of `src` and of `out`, then a zero-padded local copy.
        unsafe {
            while i + 8 <= n {
                _mm256_storeu_ps(out.as_mut_ptr().add(i), load8::<DT>(src.add(i * es)));
                i += 8;
            }
            if i < n {
                let mut buf = [0u8; 32];
                std::ptr::copy_nonoverlapping(src.add(i * es), buf.as_mut_ptr(), (n - i) * es);
                let mut v = [0.0f32; 8];
                _mm256_storeu_ps(v.as_mut_ptr(), load8::<DT>(buf.as_ptr()));
                out[i..].copy_from_slice(&v[..n - i]);
            }
        }
    }

    /// `acc[r * n + j] += dot(row r of a, b[j])` for `rows` f32 rows of `a` (`lda` bytes apart, `k`
    /// elements each) and the `n = b.len()` columns `b`: tiles of `MM_R` rows x `MM_C` columns (each
    /// row tile's `a` stays in cache while the columns stream past), then narrower tiles for the leftovers.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C. The rows and columns must be valid for reads of `k`
    /// elements; `acc.len() >= rows * b.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn matmat_acc(
        a: *const u8,
        lda: usize,
        rows: usize,
        k: usize,
        b: &[*const f32],
        acc: &mut [f32],
    ) {
        const R: usize = super::MM_R;
        const C: usize = super::MM_C;
        let n = b.len();
        assert!(acc.len() >= rows * n);
        let mut r = 0;
        // SAFETY: every tile reads rows `< rows` and columns `< n`, valid by the caller's guarantee.
        unsafe {
            while r < rows {
                let ar = a.add(r * lda);
                let mut j = 0;
                if r + R <= rows {
                    while j + C <= n {
                        let bj: &[*const f32; C] = b[j..j + C].try_into().expect("C columns");
                        let v = tile::<{ super::DT_F32 }, R, C, 1>(ar, lda, k, bj);
                        for (q, row) in v.iter().enumerate() {
                            for (c, x) in row.iter().enumerate() {
                                acc[(r + q) * n + j + c] += x;
                            }
                        }
                        j += C;
                    }
                    if j + 2 <= n {
                        let v = tile::<{ super::DT_F32 }, R, 2, 1>(ar, lda, k, &[b[j], b[j + 1]]);
                        for (q, row) in v.iter().enumerate() {
                            acc[(r + q) * n + j] += row[0];
                            acc[(r + q) * n + j + 1] += row[1];
                        }
                        j += 2;
                    }
                    while j < n {
                        let v = tile::<{ super::DT_F32 }, R, 1, 2>(ar, lda, k, &[b[j]]);
                        for (q, row) in v.iter().enumerate() {
                            acc[(r + q) * n + j] += row[0];
                        }
                        j += 1;
                    }
                    r += R;
                } else {
                    while j + 4 <= n {
                        let bj: &[*const f32; 4] = b[j..j + 4].try_into().expect("4 columns");
                        let v = tile::<{ super::DT_F32 }, 1, 4, 1>(ar, lda, k, bj);
                        for (c, x) in v[0].iter().enumerate() {
                            acc[r * n + j + c] += x;
                        }
                        j += 4;
                    }
                    while j < n {
                        acc[r * n + j] += tile::<{ super::DT_F32 }, 1, 1, 2>(ar, lda, k, &[b[j]])[0][0];
                        j += 1;
                    }
                    r += 1;
                }
            }
        }
    }
}

/// The matrix-vector product for `1 <= n <= MV_MAX_N` columns of `b` on an AVX2+FMA+F16C CPU: tasks
/// of `MV_ROWS` rows (times one batch) read `a` once in its stored type, no f32 scratch.
#[cfg(target_arch = "x86_64")]
fn mul_mat_vec(a: &TensorRef, b: &TensorRef, d: &TensorRef) {
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

/// Row tile and column tile of the AVX2 matrix-matrix kernel (`MM_R * MM_C` accumulators).
const MM_R: usize = 4;
const MM_C: usize = 3;
/// Rows of `a` per matrix-matrix work item.
const MM_ROWS: usize = 16;
/// Elements of K per pass of the matrix-matrix kernel (bounds the f16/bf16 scratch to 256 KiB, an L2's
/// worth). Shorter passes measured no faster on Zen 3, whether each pass ended in horizontal sums or
/// kept vector partial sums.
const KC: usize = 4096;

/// The matrix-matrix product (more than `MV_MAX_N` columns of `b`) on an AVX2+FMA+F16C CPU: tasks of
/// `MM_ROWS` rows (times one batch), K cut into passes of `KC`; for f16/bf16 each pass's
/// `MM_ROWS x KC` panel is widened into a cache-resident f32 scratch first, f32 rows are read in place.
#[cfg(target_arch = "x86_64")]
fn mul_mat_mat(a: &TensorRef, b: &TensorRef, d: &TensorRef) {
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

pub(crate) fn mul_mat(k: &K<'_>) -> Result<(), CpuError> {
    let (a, b, d) = (k.srcs[0], k.srcs[1], k.dst);
    let (kk, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    #[cfg(target_arch = "x86_64")]
    if (1..=MV_MAX_N).contains(&n) && crate::math::has_avx2() {
        mul_mat_vec(&a, &b, &d);
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if n > MV_MAX_N && crate::math::has_avx2() {
        mul_mat_mat(&a, &b, &d);
        return Ok(());
    }
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
                            put(&d, i0 + q + r, 0, b2, b3, v);
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
                                put(&d, i0 + q + r, j, b2, b3, row[0]);
                                put(&d, i0 + q + r, j + 1, b2, b3, row[1]);
                            }
                            j += 2;
                        }
                        if j < n {
                            for r in 0..4 {
                                put(&d, i0 + q + r, j, b2, b3, dot(tile[r], b_col(j)));
                            }
                        }
                        q += 4;
                    }
                }
                for (r, ar) in a_rows.iter().enumerate().skip(q) {
                    for j in 0..n {
                        put(&d, i0 + r, j, b2, b3, dot(ar, b_col(j)));
                    }
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
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
}

//! Explicit AVX2+FMA+F16C kernels: the matrix-vector product taken straight from `a`'s stored type,
//! the widening of f16/bf16 rows, and the f32 matrix-matrix register tiles.

// Indexed lane loops over register tiles are deliberate: they unroll into straight-line code.
#![allow(clippy::needless_range_loop)]

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
pub(super) unsafe fn matmat_acc(a: *const u8, lda: usize, rows: usize, k: usize, b: &[*const f32], acc: &mut [f32]) {
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

//! `mul_mat`: `out[i, j] = sum_k a[k, i] * b[k, j]`, `a` f32/f16/bf16 (weights), `b` f32, out f32;
//! `a`'s batch index is `b`'s divided by the broadcast ratio (ggml's rule).
//!
//! Files: `portable.rs` (the blocked path), `x86.rs` (the AVX2 drivers: work split and K passes),
//! `simd.rs` (their intrinsics kernels), `tests.rs`.
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

mod portable;
#[cfg(target_arch = "x86_64")]
mod simd;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

use super::K;
use crate::error::CpuError;
use crate::tensor::TensorRef;

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

/// Row tile and column tile of the AVX2 matrix-matrix kernel (`MM_R * MM_C` accumulators).
const MM_R: usize = 4;
const MM_C: usize = 3;
/// Rows of `a` per matrix-matrix work item.
const MM_ROWS: usize = 16;
/// Elements of K per pass of the matrix-matrix kernel (bounds the f16/bf16 scratch to 256 KiB, an L2's
/// worth). Shorter passes measured no faster on Zen 3, whether each pass ended in horizontal sums or
/// kept vector partial sums.
const KC: usize = 4096;

pub(crate) fn mul_mat(k: &K<'_>) -> Result<(), CpuError> {
    let (a, b, d) = (k.srcs[0], k.srcs[1], k.dst);
    let n = b.ne[1];
    #[cfg(target_arch = "x86_64")]
    if (1..=MV_MAX_N).contains(&n) && crate::math::has_avx2() {
        x86::mul_mat_vec(&a, &b, &d);
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if n > MV_MAX_N && crate::math::has_avx2() {
        x86::mul_mat_mat(&a, &b, &d);
        return Ok(());
    }
    portable::mul_mat(&a, &b, &d);
    Ok(())
}

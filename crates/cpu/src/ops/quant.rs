//! Kernels that read quantized tensors (`q8_0`, `q4_0`, `q4_1`, `q5_0`, `q5_1`, `q4_K`, `q5_K`,
//! `q6_K`), on the `kernels` crate's `quant` row kernels: `mul_mat` with a quantized weight `a` and
//! f32 `b`, and `get_rows` from a quantized table (the gathered rows dequantized to f32).
//!
//! `mul_mat` follows ggml on x86: each column of `b` is first quantized to 8-bit blocks
//! (`kernels::quant::quantize_act`: `q8_0`, `q8_1` for a `q4_1`/`q5_1` weight, `q8_K` for the
//! K-quants), then every output is
//! an integer block dot product of a weight row with a quantized column
//! (`kernels::quant::dot`). The weights are read once per task, in place, and never expanded
//! to f32 (the matrix-vector product runs at the memory floor); the quantized columns (about a
//! quarter of `b`'s bytes) are the only scratch. The activation rounding bounds the error: see
//! `kernels::quant` (at most `amax_block / 254` per activation element).
//!
//! Tasks are blocks of [`ROWS`] rows of `a` times one batch; within a task the products run in
//! register tiles (`kernels::quant::dot_tile` in `kernels::quant::tile_shape`'s shape: each weight
//! block unpacked once per tile of up to eight columns, each activation block loaded once per tile
//! of rows), and every column of `b` reuses the block's weight rows from cache. The first tile of
//! each row group, which reads the rows from memory, hints them `kernels::quant::TILE_PREFETCH`
//! bytes ahead (`Tile::prefetch`); the hardware prefetchers alone left a batch-4 decode step
//! waiting on memory. A mat-vec (one column) runs through `kernels::quant::dot_rows` instead: the
//! column's block scales converted to f32 once, a task's rows per call in groups of one or two
//! (`mv_rows`; with AVX-512, two rows per register), the weights prefetched a few KiB ahead. Each
//! output is still ggml's `vec_dot` of its pair, bit for bit.

use super::K;
use super::rows::check_ids;
use crate::error::CpuError;
use graph::DType;
use kernels::quant::{self, Format};

/// Rows of `a` per work item.
const ROWS: usize = 32;

/// The kernels' format of a quantized dtype.
fn format(d: DType) -> Format {
    match d {
        DType::Q8_0 => Format::Q8_0,
        DType::Q4_0 => Format::Q4_0,
        DType::Q4_1 => Format::Q4_1,
        DType::Q5_0 => Format::Q5_0,
        DType::Q5_1 => Format::Q5_1,
        DType::Q4_K => Format::Q4K,
        DType::Q5_K => Format::Q5K,
        DType::Q6_K => Format::Q6K,
        DType::F32 | DType::F16 | DType::BF16 | DType::I32 => unreachable!("called for quantized dtypes only"),
    }
}

pub(crate) fn mul_mat(k: &K<'_>) -> Result<(), CpuError> {
    let (a, b, d) = (k.srcs[0], k.srcs[1], k.dst);
    let f = format(a.dtype);
    let (kk, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    let nbk = kk / f.block_elems();
    let (wrow, arow) = (a.dtype.row_bytes(kk), nbk * f.act_block_bytes());
    let batches = b.ne[2] * b.ne[3];
    // Quantize every column of b (serially: n * kk work against the product's m * n * kk).
    let mut act = vec![0u8; batches * n * arow];
    for (c, out) in act.chunks_exact_mut(arow).enumerate() {
        let (j, batch) = (c % n, c / n);
        let (b2, b3) = (batch % b.ne[2], batch / b.ne[2]);
        // SAFETY: `b` is f32 with contiguous rows of `kk` elements (builder rule), valid for reads.
        let col = unsafe { std::slice::from_raw_parts(b.ptr(0, j, b2, b3) as *const f32, kk) };
        quant::quantize_act(f, col, out);
    }
    // A mat-vec's activation block scales as f32 pairs (`kernels::quant::act_scales`).
    let mut scales = vec![0.0f32; if n == 1 { batches * 2 * nbk } else { 0 }];
    if n == 1 {
        for (c, out) in scales.chunks_exact_mut(2 * nbk).enumerate() {
            quant::act_scales(f, &act[c * arow..], nbk, out);
        }
    }
    // The tiles' activation block scales as f32, block-major per batch (`kernels::quant::tile_scales`).
    let tsc: Vec<(Vec<f32>, Vec<f32>)> = if n > 1 {
        (0..batches).map(|b| quant::tile_scales(f, &act[b * n * arow..], arow, n, nbk)).collect()
    } else {
        Vec::new()
    };
    let blocks = m.div_ceil(ROWS);
    let (act, scales, tsc) = (&act, &scales, &tsc);
    let (tr, tc) = quant::tile_shape(f);
    crate::par::for_blocks(batches * blocks, ROWS * wrow.max(1) * n, |range| {
        let mut out = [0.0f32; quant::TILE * quant::TILE_COLS];
        for t in range {
            let (batch, blk) = (t / blocks, t % blocks);
            let (b2, b3) = (batch % b.ne[2], batch / b.ne[2]);
            let (a2, a3) = (b2 / r2, b3 / r3);
            let rows = blk * ROWS..((blk + 1) * ROWS).min(m);
            // SAFETY: rows `rows` of `a` (batch `a2, a3`) are whole rows of `wrow` bytes inside its
            // binding (bounds-checked by the dispatcher), contiguous (builder rule), `nb[1]` apart.
            let w = unsafe {
                std::slice::from_raw_parts(a.ptr(0, rows.start, a2, a3) as *const u8, (rows.len() - 1) * a.nb[1] + wrow)
            };
            let cols = &act[batch * n * arow..(batch + 1) * n * arow];
            if n == 1 {
                // a mat-vec: the task's rows in one call, `mv_rows` at a time sharing each
                // activation block's loads
                let scales = &scales[batch * 2 * nbk..(batch + 1) * 2 * nbk];
                let t = quant::Rows {
                    f,
                    w,
                    wstride: a.nb[1],
                    rows: rows.len(),
                    group: mv_rows(f),
                    a: cols,
                    scales,
                    nblocks: nbk,
                };
                let mut mv = [0.0f32; ROWS];
                quant::dot_rows(&t, &mut mv);
                for (i, &v) in rows.clone().zip(&mv) {
                    // SAFETY: element (i, 0) of batch (b2, b3) belongs to this task only.
                    unsafe { *(d.ptr(i, 0, b2, b3) as *mut f32) = v };
                }
                continue;
            }
            for j0 in (0..n).step_by(tc) {
                let nc = tc.min(n - j0);
                for i0 in (0..rows.len()).step_by(tr) {
                    let nr = tr.min(rows.len() - i0);
                    let tile = quant::Tile {
                        f,
                        w: &w[i0 * a.nb[1]..],
                        wstride: a.nb[1],
                        rows: nr,
                        a: &cols[j0 * arow..],
                        astride: arow,
                        cols: nc,
                        nblocks: nbk,
                        scales: (!f.is_k()).then(|| {
                            let (d, s) = &tsc[batch];
                            quant::TileScales { d: &d[j0..], s: &s[j0..], stride: n }
                        }),
                        // the first columns read the rows from memory; the others find them cached
                        prefetch: j0 == 0,
                    };
                    quant::dot_tile(&tile, &mut out);
                    for r in 0..nr {
                        for c in 0..nc {
                            // SAFETY: element (i, j) of batch (b2, b3) belongs to this task only.
                            unsafe { *(d.ptr(rows.start + i0 + r, j0 + c, b2, b3) as *mut f32) = out[r * nc + c] };
                        }
                    }
                }
            }
        }
    });
    Ok(())
}

// More than one column runs in register tiles of `kernels::quant::tile_shape` (weight rows,
// columns of `b`): four by eight with AVX-512 VNNI, else two by four (eight AVX2 accumulators). A
// mat-vec runs one row at a time instead: a four-row tile measured slower in the runner's decode
// step, whose weights stream from memory, and twice as slow on the q8_0 LM head
// (`docs/BENCHMARKS.md`).

/// Weight rows per `kernels::quant::dot_rows` group of a mat-vec in its AVX2 form (its AVX-512 form
/// takes rows two to a register, four at a time, whatever the group): two for `q4_1` (6.9 ms against
/// 7.4-7.7 ms for one at a time over SmolLM2's 66 MB of `q4_1` weights, min of 15), one for the
/// others (two or four rows of `q8_0` measured 1.5-2.5x slower on the 30 MB LM head, as the 4-row
/// tile before them did; see `docs/BENCHMARKS.md`).
fn mv_rows(f: Format) -> usize {
    if f == Format::Q4_1 { 2 } else { 1 }
}

pub(crate) fn get_rows(k: &K<'_>) -> Result<(), CpuError> {
    let (a, ids, d) = (k.srcs[0], k.srcs[1], k.dst);
    check_ids(&ids, a.ne[1], &a)?;
    let f = format(a.dtype);
    let n = d.ne[0];
    let wrow = a.dtype.row_bytes(n);
    super::for_rows(&d, n, 0, |r, _| {
        // SAFETY: ids checked above, so row `id` of `a` is a whole row of `wrow` bytes of its binding;
        // row `r` of the f32 destination is written here only.
        unsafe {
            let id = ids.read_i32_at(ids.ptr(r[0], r[1], r[2], 0)) as usize;
            let src = std::slice::from_raw_parts(a.ptr(0, id, r[1], r[2]) as *const u8, wrow);
            quant::dequantize_row(f, src, d.row_mut::<f32>(r));
        }
    });
    Ok(())
}

//! `soft_max`: `softmax(x * scale + mask)` along `ne[0]`, f32 out. An all `-inf` row gives NaN.
//!
//! The fast path (every row without NaN or +inf) is online softmax by blocks of [`BLOCK`] entries,
//! with the shared exponential of `kernels::exp`: one pass that, block by block, takes the block's
//! max (the block is then in L1) and writes `e = exp((x - block_max) * scale)` with the block's sum;
//! then one normalising pass, in reverse block order so that it starts on the blocks still in L2,
//! multiplies each block by `exp((block_max - row_max) * scale) / total`. A masked row (or a scale
//! `<= 0`) is first written as `x * scale + mask` into the output and processed in place. A row
//! holding NaN or +inf (after scale and mask) is all NaN: either poisons the sum (`inf - inf`).

use super::{K, for_rows};
use crate::error::CpuError;
use crate::math::scale_f32;
use crate::tensor::{load_f32, row_f32};
use graph::DType;
use kernels::exp::{exp_affine, exp2};
use kernels::row::{exp2_inplace, exp2_into, max_bad};

/// Entries per block of the online pass: 16 KiB of f32, well inside L1 (and a multiple of 16 lanes).
const BLOCK: usize = 4096;

pub(crate) fn soft_max(k: &K<'_>, scale: f32) -> Result<(), CpuError> {
    let (x, d) = (k.srcs[0], k.dst);
    let mask = k.srcs.get(1).copied();
    let n = d.ne[0];
    let nx = if x.dtype == DType::F32 { 0 } else { n };
    let nm = if mask.is_some_and(|m| m.dtype != DType::F32) { n } else { 0 };
    let blocks = n.div_ceil(BLOCK);
    // Scratch: converted x, converted mask, then the per-block (max, sum) pairs.
    for_rows(&d, n * 4, nx + nm + 2 * blocks, |r, scratch| {
        let (sx, rest) = scratch.split_at_mut(nx);
        let (sm, stats) = rest.split_at_mut(nm);
        // SAFETY: sources valid for reads (rows contiguous, checked by the builder); row `r` of `d`
        // written only here.
        unsafe {
            let xr = row_f32(&x, r, sx);
            let out = d.row_mut::<f32>(r);
            let (src, s) = match mask {
                None if scale > 0.0 => (Some(xr), scale),
                _ => {
                    match mask {
                        Some(mt) => {
                            let mr = [r[0], r[1] % mt.ne[2], r[2] % mt.ne[3]];
                            let mrow: &[f32] = if mt.dtype == DType::F32 {
                                mt.row::<f32>(mr)
                            } else {
                                load_f32(mt.dtype, mt.row_ptr(mr), sm);
                                sm
                            };
                            for ((o, &a), &b) in out.iter_mut().zip(xr).zip(mrow) {
                                *o = a * scale + b;
                            }
                        }
                        None => out.iter_mut().zip(xr).for_each(|(o, &a)| *o = a * scale),
                    }
                    (None, 1.0)
                }
            };
            if !online(src, out, s, stats) {
                // A NaN poisons the sum, and so does +inf (`inf - inf`): the whole row is NaN.
                out.fill(f32::NAN);
            }
        }
    });
    Ok(())
}

/// The fast path on one row: `src * s` (or `out` itself, in place, when `src` is `None`) into `out`.
/// Returns false, leaving `out` partly written, when the row holds NaN or +inf.
fn online(src: Option<&[f32]>, out: &mut [f32], s: f32, stats: &mut [f32]) -> bool {
    let (maxes, sums) = stats.split_at_mut(out.len().div_ceil(BLOCK));
    let mut row_max = f32::NEG_INFINITY;
    for (b, o) in out.chunks_mut(BLOCK).enumerate() {
        let (m, bad) = match src {
            Some(xr) => max_bad(&xr[b * BLOCK..b * BLOCK + o.len()]),
            None => max_bad(o),
        };
        if bad {
            return false;
        }
        maxes[b] = m;
        row_max = row_max.max(m);
        sums[b] = if m == f32::NEG_INFINITY {
            o.fill(0.0);
            0.0
        } else {
            let (a, c) = exp_affine(m, s);
            match src {
                Some(xr) => exp2_into(&xr[b * BLOCK..b * BLOCK + o.len()], a, c, o),
                None => exp2_inplace(o, a, c),
            }
        };
    }
    if row_max == f32::NEG_INFINITY {
        out.fill(f32::NAN);
        return true;
    }
    // Block weights relative to the row max; their total.
    let (a, _) = exp_affine(row_max, s);
    let mut total = 0.0f64;
    for (m, sum) in maxes.iter_mut().zip(sums.iter()) {
        // Reuse `maxes` for the weight 2^((m - row_max) a) (0 for an all -inf block).
        *m = if *m == f32::NEG_INFINITY { 0.0 } else { exp2::<false>((*m - row_max) * a) };
        total += f64::from(*m) * f64::from(*sum);
    }
    let inv = (1.0 / total) as f32;
    let n = out.len();
    for (b, &w) in maxes.iter().enumerate().rev() {
        scale_f32(&mut out[b * BLOCK..(b * BLOCK + BLOCK).min(n)], w * inv);
    }
    true
}

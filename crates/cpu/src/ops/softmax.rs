//! `soft_max`: `softmax(x * scale + mask)` along `ne[0]`, f32 out, with the fast polynomial exp
//! (`math::exp_fast`). Three passes over a row: max, exp-and-sum, normalise. An all `-inf` row gives
//! NaN (`-inf - -inf`).

use super::{K, for_rows};
use crate::error::CpuError;
use crate::math::{exp_sub_f32, exp_sub_inplace_f32, max_f32, scale_f32};
use crate::tensor::{load_f32, row_f32};
use graph::DType;

pub(crate) fn soft_max(k: &K<'_>, scale: f32) -> Result<(), CpuError> {
    let (x, d) = (k.srcs[0], k.dst);
    let mask = k.srcs.get(1).copied();
    let n = d.ne[0];
    let nx = if x.dtype == DType::F32 { 0 } else { n };
    let nm = if mask.is_some_and(|m| m.dtype != DType::F32) { n } else { 0 };
    for_rows(&d, n * 4, nx + nm, |r, scratch| {
        let (sx, sm) = scratch.split_at_mut(nx);
        // SAFETY: sources valid for reads (rows contiguous, checked by the builder); row `r` of `d`
        // written only here.
        unsafe {
            let xr = row_f32(&x, r, sx);
            let out = d.row_mut::<f32>(r);
            let sum = match mask {
                None if scale > 0.0 => {
                    // NaN entries are skipped by `max_f32` but poison the sum, so the row is NaN.
                    let m = max_f32(xr) * scale;
                    exp_sub_f32(xr, scale, m, out)
                }
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
                    let m = max_f32(out);
                    exp_sub_inplace_f32(out, m)
                }
            };
            scale_f32(out, 1.0 / sum);
        }
    });
    Ok(())
}

//! Source-less generators: `fill` (every element one value, any dtype) and `arange`
//! (`start + step * i0` per row, f32 or i32).

use super::{K, for_rows};
use crate::error::CpuError;
use graph::{DType, bf16, f16};

pub(crate) fn fill(k: &K<'_>, value: f32) -> Result<(), CpuError> {
    let d = k.dst;
    // SAFETY (all arms): row `r` of `d` is written by this call only.
    for_rows(&d, d.ne[0], 0, |r, _| unsafe {
        match d.dtype {
            DType::F32 => d.row_mut::<f32>(r).fill(value),
            DType::F16 => d.row_mut::<f16>(r).fill(f16::from_f32(value)),
            DType::BF16 => d.row_mut::<bf16>(r).fill(bf16::from_f32(value)),
            DType::I32 => d.row_mut::<i32>(r).fill(value as i32),
            _ => unreachable!("{}", crate::tensor::QUANT_ONLY),
        }
    });
    Ok(())
}

pub(crate) fn arange(k: &K<'_>, start: f32, step: f32) -> Result<(), CpuError> {
    let d = k.dst;
    // SAFETY (all arms): row `r` of `d` is written by this call only.
    for_rows(&d, d.ne[0], 0, |r, _| unsafe {
        match d.dtype {
            DType::I32 => {
                let (s, t) = (start as i32, step as i32);
                for (i, o) in d.row_mut::<i32>(r).iter_mut().enumerate() {
                    *o = s.wrapping_add(t.wrapping_mul(i as i32));
                }
            }
            _ => {
                for (i, o) in d.row_mut::<f32>(r).iter_mut().enumerate() {
                    *o = start + step * i as f32;
                }
            }
        }
    });
    Ok(())
}

//! Row reductions: `sum_rows`, `max_rows` (NaN propagates) and `argmax` (ties: lowest index; the
//! order is `math::order_key`'s, the one every ordering op uses, so positive NaN ranks highest).

use super::{K, for_rows};
use crate::error::CpuError;
use crate::math::{max_f32, max_key_f32, order_key, sum_f32};
use crate::tensor::{load_f32, row_f32};
use graph::DType;

pub(crate) fn sum_rows(k: &K<'_>) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    for_rows(&d, s.ne[0], if s.dtype == DType::F32 { 0 } else { s.ne[0] }, |r, scratch| {
        // SAFETY: valid source rows; element `r` of `d` written only here.
        unsafe { d.row_mut::<f32>(r)[0] = sum_f32(row_f32(&s, r, scratch)) }
    });
    Ok(())
}

pub(crate) fn max_rows(k: &K<'_>) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    for_rows(&d, s.ne[0], if s.dtype == DType::F32 { 0 } else { s.ne[0] }, |r, scratch| {
        // SAFETY: as `sum_rows`.
        unsafe {
            let x = row_f32(&s, r, scratch);
            let m = max_f32(x);
            d.row_mut::<f32>(r)[0] = if x.iter().any(|v| v.is_nan()) { f32::NAN } else { m };
        }
    });
    Ok(())
}

/// Block length of the two-level argmax (block maxima, then one scan of the winning block).
const BLOCK: usize = 1024;

/// Index of the first entry with the largest `order_key`.
pub(crate) fn argmax_f32(x: &[f32]) -> usize {
    let mut best: Option<(u32, usize)> = None;
    for (b, block) in x.chunks(BLOCK).enumerate() {
        let m = max_key_f32(block);
        if best.is_none_or(|(k, _)| m > k) {
            best = Some((m, b));
        }
    }
    let Some((key, b)) = best else { return 0 };
    let block = &x[b * BLOCK..(b * BLOCK + BLOCK).min(x.len())];
    b * BLOCK + block.iter().position(|&v| order_key(v) == key).expect("the block holds its maximum")
}

pub(crate) fn argmax(k: &K<'_>) -> Result<(), CpuError> {
    let (s, d) = (k.srcs[0], k.dst);
    let n = s.ne[0];
    let convert = s.dtype != DType::F32;
    for_rows(&d, n, if convert { n } else { 0 }, |r, scratch| {
        // SAFETY: as `sum_rows`.
        unsafe {
            let x = if convert {
                load_f32(s.dtype, s.row_ptr(r), scratch);
                &*scratch
            } else {
                s.row::<f32>(r)
            };
            d.row_mut::<i32>(r)[0] = argmax_f32(x) as i32;
        }
    });
    Ok(())
}

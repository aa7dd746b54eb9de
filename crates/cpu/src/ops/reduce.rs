//! Row reductions: `sum_rows`, `max_rows` (NaN propagates) and `argmax` (ties: lowest index; the
//! order is `kernels::key::order_key`'s, the one every ordering op uses, so a NaN (of either sign)
//! ranks highest; the row kernel is `kernels::select::argmax_index`).

use super::{K, for_rows};
use crate::error::CpuError;
use crate::math::sum_f32;
use crate::tensor::{load_f32, row_f32};
use graph::DType;
use kernels::select::argmax_index;

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
            // One vectorised pass; only a row flagged bad (NaN or +inf) is scanned again for NaN.
            let (m, bad) = kernels::row::max_bad(x);
            d.row_mut::<f32>(r)[0] = if bad && x.iter().any(|v| v.is_nan()) { f32::NAN } else { m };
        }
    });
    Ok(())
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
            d.row_mut::<i32>(r)[0] = argmax_index(x) as i32;
        }
    });
    Ok(())
}

//! `rms_norm`: `x / sqrt(mean(x^2) + eps)` along `ne[0]`, f32 out.

use super::{K, map_rows};
use crate::error::CpuError;
use crate::math::sum_sq_f32;

pub(crate) fn rms_norm(k: &K<'_>, eps: f32) -> Result<(), CpuError> {
    map_rows(k, |_, x, y| {
        let mean = sum_sq_f32(x) / x.len() as f32;
        let s = 1.0 / (mean + eps).sqrt();
        y.iter_mut().zip(x).for_each(|(y, &x)| *y = x * s);
    });
    Ok(())
}

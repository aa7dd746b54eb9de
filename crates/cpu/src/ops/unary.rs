//! Element-wise ops of one float source: `unary` (neg, exp, log, sqr, sqrt, silu, gelu), `scale`
//! (`x * s + b`) and `clamp`. Computed in f32, stored in the source's dtype.

use super::{K, map_rows};
use crate::error::CpuError;
use graph::UnaryOp;

/// GELU, tanh approximation (as ggml, without its f16 lookup table).
#[inline]
pub(crate) fn gelu(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
}

pub(crate) fn unary(k: &K<'_>, op: UnaryOp) -> Result<(), CpuError> {
    map_rows(k, |_, x, y| match op {
        UnaryOp::Neg => y.iter_mut().zip(x).for_each(|(y, &x)| *y = -x),
        UnaryOp::Exp => y.iter_mut().zip(x).for_each(|(y, &x)| *y = x.exp()),
        UnaryOp::Log => y.iter_mut().zip(x).for_each(|(y, &x)| *y = x.ln()),
        UnaryOp::Sqr => y.iter_mut().zip(x).for_each(|(y, &x)| *y = x * x),
        UnaryOp::Sqrt => y.iter_mut().zip(x).for_each(|(y, &x)| *y = x.sqrt()),
        UnaryOp::Silu => y.iter_mut().zip(x).for_each(|(y, &x)| *y = x / (1.0 + (-x).exp())),
        UnaryOp::Gelu => y.iter_mut().zip(x).for_each(|(y, &x)| *y = gelu(x)),
    });
    Ok(())
}

pub(crate) fn scale(k: &K<'_>, s: f32, b: f32) -> Result<(), CpuError> {
    map_rows(k, |_, x, y| y.iter_mut().zip(x).for_each(|(y, &x)| *y = x * s + b));
    Ok(())
}

pub(crate) fn clamp(k: &K<'_>, lo: f32, hi: f32) -> Result<(), CpuError> {
    // `max` then `min` as the op says; NaN stays NaN.
    map_rows(k, |_, x, y| y.iter_mut().zip(x).for_each(|(y, &x)| *y = if x.is_nan() { x } else { x.max(lo).min(hi) }));
    Ok(())
}

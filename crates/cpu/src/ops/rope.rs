//! `rope`: rotary position embedding of `x [head_dim, n_head, n_tokens]` by `pos [n_tokens]`:
//! pair `i` of the first `n_dims` entries of each head rotates by
//! `theta_i = pos * freq_scale * freq_base^(-2i/n_dims)`; pairs are `(2i, 2i+1)` (normal) or
//! `(i, i + n_dims/2)` (neox); the remaining entries are copied.

use super::{K, for_rows};
use crate::error::CpuError;
use graph::RopeMode;

pub(crate) fn rope(k: &K<'_>, n_dims: u32, mode: RopeMode, base: f32, freq_scale: f32) -> Result<(), CpuError> {
    let (x, pos, d) = (k.srcs[0], k.srcs[1], k.dst);
    let n = d.ne[0];
    let half = n_dims as usize / 2;
    let inv: Vec<f32> = (0..half).map(|i| base.powf(-2.0 * i as f32 / n_dims as f32)).collect();
    for_rows(&d, n * 8, 0, |r, _| {
        // SAFETY: `pos` is an i32 tensor with `ne[0] = n_tokens`; row `r` of `d` written only here.
        unsafe {
            let p = pos.read_i32_at(pos.ptr(r[1], 0, 0, 0)) as f32;
            let src = x.row::<f32>(r);
            let out = d.row_mut::<f32>(r);
            out[2 * half..].copy_from_slice(&src[2 * half..]);
            for (i, &f) in inv.iter().enumerate() {
                let theta = p * freq_scale * f;
                let (s, c) = theta.sin_cos();
                let (i0, i1) = match mode {
                    RopeMode::Normal => (2 * i, 2 * i + 1),
                    RopeMode::Neox => (i, i + half),
                };
                let (a, b) = (src[i0], src[i1]);
                out[i0] = a * c - b * s;
                out[i1] = a * s + b * c;
            }
        }
    });
    Ok(())
}

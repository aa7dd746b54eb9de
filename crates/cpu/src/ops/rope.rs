//! `rope`: rotary position embedding of `x [head_dim, n_head, n_tokens]` by `pos [n_tokens]`, as
//! ggml's `ggml_rope_ext`: pair `i` of the first `n_dims` entries of each head rotates by the
//! angle and magnitude of [`graph::RopeParams::cos_sin`] (`freq_scale * pos *
//! freq_base^(-2i/n_dims) / freq_factors[i]`, YaRN's correction where `ext_factor != 0`,
//! `attn_factor`); pairs are `(2i, 2i+1)` (normal) or `(i, i + n_dims/2)` (neox); the remaining
//! entries are copied. The optional third source holds the per-pair frequency factors.

use super::{K, for_rows};
use crate::error::CpuError;
use graph::{RopeMode, RopeParams};

pub(crate) fn rope(k: &K<'_>, p: &RopeParams) -> Result<(), CpuError> {
    let (x, pos, d) = (k.srcs[0], k.srcs[1], k.dst);
    let n = d.ne[0];
    let half = p.n_dims as usize / 2;
    let inv: Vec<f32> = (0..half).map(|i| p.freq_base.powf(-2.0 * i as f32 / p.n_dims as f32)).collect();
    let ff: Vec<f32> = match k.srcs.get(2) {
        // SAFETY: the builder checked an f32 row of at least n_dims/2 contiguous entries.
        Some(f) => unsafe { f.row::<f32>([0, 0, 0])[..half].to_vec() },
        None => vec![1.0; half],
    };
    let corr = p.corr_dims();
    for_rows(&d, n * 8, 0, |r, _| {
        // SAFETY: `pos` is an i32 tensor with `ne[0] = n_tokens`; row `r` of `d` written only here.
        unsafe {
            let at = pos.read_i32_at(pos.ptr(r[1], 0, 0, 0)) as f32;
            let src = x.row::<f32>(r);
            let out = d.row_mut::<f32>(r);
            out[2 * half..].copy_from_slice(&src[2 * half..]);
            for (i, (&inv_i, &ff_i)) in inv.iter().zip(&ff).enumerate() {
                let (c, s) = p.cos_sin(i, at, inv_i, ff_i, corr);
                let (i0, i1) = match p.mode {
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

//! `penalize`: llama.cpp's repetition, frequency and presence penalties on whole rows from each
//! token's count, in one pass, with the CPU sampler's own `f32` arithmetic (`samplers/penalties.rs`
//! in `sampling`): where the count is positive, `x / repeat` for a positive `x`, else `x * repeat`,
//! minus `count * freq + present`.

use super::K;
use crate::error::CpuError;

pub(crate) fn penalize(k: &K<'_>) -> Result<(), CpuError> {
    let (x, counts, params, d) = (k.srcs[0], k.srcs[1], k.srcs[2], k.dst);
    let n = x.ne[0];
    crate::par::for_blocks(d.nrows(), 3 * n, |range| {
        for row in range {
            let r = d.row_index(row);
            // SAFETY: the builder checked that `x` and `counts` are f32 of one shape and `params`
            // f32 with 3 per row, all with contiguous rows and `d`'s row count; row `r` of `d` is
            // written only here.
            unsafe {
                let (xr, cr, pr) = (x.row::<f32>(r), counts.row::<f32>(r), params.row::<f32>(r));
                penalize_row(xr, cr, pr[0], pr[1], pr[2], d.row_mut::<f32>(r));
            }
        }
    });
    Ok(())
}

/// One row of `penalize` (see `graph::Op::Penalize`).
fn penalize_row(x: &[f32], counts: &[f32], repeat: f32, freq: f32, present: f32, out: &mut [f32]) {
    for ((o, &v), &c) in out.iter_mut().zip(x).zip(counts) {
        *o = if c > 0.0 { kernels::penalize::penalize(v, c, repeat, freq, present) } else { v };
    }
}

#[cfg(test)]
mod tests {
    use super::penalize_row;

    #[test]
    fn only_counted_tokens_change_as_the_cpu_sampler_changes_them() {
        let x = [2.0f32, -2.0, 0.0, 3.0, f32::NEG_INFINITY, 1.5];
        let c = [1.0f32, 2.0, 1.0, 0.0, 3.0, 0.0];
        let mut out = [0.0f32; 6];
        penalize_row(&x, &c, 2.0, 0.5, 0.25, &mut out);
        // 2 / 2 - (0.5 + 0.25); -2 * 2 - (1 + 0.25); 0 * 2 - 0.75; unchanged; -inf stays; unchanged.
        assert_eq!(out, [0.25, -5.25, -0.75, 3.0, f32::NEG_INFINITY, 1.5]);
    }
}

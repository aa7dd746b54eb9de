//! `list_filter`: the sampler chain's list stages (top-p, min-p, temperature) on a candidate list,
//! one row at a time, with the chain's own arithmetic: top-p's cut is `kernels::list::top_p_kept`
//! (llama.cpp's `f32` softmax and running sum, as the chain's `top_p` on a list) and min-p's is
//! `kernels::list::min_p_kept`, the walk the chain's `min_p` calls on a sorted list.

use super::K;
use crate::error::CpuError;
use graph::{ListStage, ListStages};
use kernels::list::{min_p_kept, top_p_kept};

pub(crate) fn list_filter(k: &K<'_>, stages: ListStages) -> Result<(), CpuError> {
    let (x, params, d) = (k.srcs[0], k.srcs[1], k.dst);
    let n = x.ne[0];
    crate::par::for_blocks(d.nrows(), 8 * n * stages.len(), |range| {
        for row in range {
            let r = d.row_index(row);
            // SAFETY: the builder checked that `vals` and `params` (2 per stage) are f32 with
            // contiguous rows and `d`'s row count; row `r` of `d` is written only here.
            unsafe {
                let (xr, pr, out) = (x.row::<f32>(r), params.row::<f32>(r), d.row_mut::<f32>(r));
                out.copy_from_slice(xr);
                filter_row(out, stages.as_slice(), pr);
            }
        }
    });
    Ok(())
}

/// `min_keep` as the chain's count: a fraction rounds down, anything below 1 keeps at least the
/// first (0 and 1 alike; the parameters were checked for NaN).
fn count(min_keep: f32) -> usize {
    min_keep.max(0.0) as usize
}

/// One row of `list_filter` in place (see `graph::Op::ListFilter`).
fn filter_row(v: &mut [f32], stages: &[ListStage], params: &[f32]) {
    if v.iter().any(|x| x.is_nan()) || params[..2 * stages.len()].iter().any(|x| x.is_nan()) {
        v.fill(f32::NAN);
        return;
    }
    for (s, &stage) in stages.iter().enumerate() {
        let (a, b) = (params[2 * s], params[2 * s + 1]);
        let kept = match stage {
            ListStage::TopP if a >= 1.0 => continue,
            ListStage::TopP => top_p_kept(v, a, count(b)),
            ListStage::MinP => min_p_kept(v.len(), |i| v[i], a, count(b)),
            ListStage::Temp => {
                for x in v.iter_mut() {
                    *x /= a;
                }
                continue;
            }
        };
        v[kept..].fill(f32::NEG_INFINITY);
    }
}

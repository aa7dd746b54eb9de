//! `scatter_add`: a copy of `base` with `values` added at the positions `ids` name, per row; ids
//! outside `[0, n)` (such as the padding id -1) are skipped.

use super::{K, for_rows};
use crate::error::CpuError;

pub(crate) fn scatter_add(k: &K<'_>) -> Result<(), CpuError> {
    let (base, ids, vals, d) = (k.srcs[0], k.srcs[1], k.srcs[2], k.dst);
    let n = d.ne[0];
    let m = ids.ne[0];
    let constant = vals.ne.numel() == 1;
    for_rows(&d, n + m, 0, |r, _| {
        // SAFETY: sources valid for reads (rows contiguous, checked by the builder); row `r` of `d`
        // written only here.
        unsafe {
            let out = d.row_mut::<f32>(r);
            out.copy_from_slice(base.row::<f32>(r));
            let id_row = ids.row::<i32>(r);
            let c = if constant { *(vals.data as *const f32) } else { 0.0 };
            let v_row: &[f32] = if constant { &[] } else { vals.row::<f32>(r) };
            for (j, &id) in id_row.iter().enumerate() {
                if id >= 0 && (id as usize) < n {
                    out[id as usize] += if constant { c } else { v_row[j] };
                }
            }
        }
    });
    Ok(())
}

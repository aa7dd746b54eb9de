//! `token_mask`: bans the tokens a packed per-row bitmask does not allow, in one pass over rows in
//! vocabulary order or over candidate lists with their token ids, with `kernels::token_mask`'s
//! arithmetic (`x + -inf` where banned, as the CPU constraint samplers' bans in `sampling`).

use super::K;
use crate::error::CpuError;

pub(crate) fn token_mask(k: &K<'_>, ids: bool) -> Result<(), CpuError> {
    let (x, bits, d) = (k.srcs[0], k.srcs[1], k.dst);
    let m = x.ne[0];
    crate::par::for_blocks(d.nrows(), m, |range| {
        for row in range {
            let r = d.row_index(row);
            // SAFETY: the builder checked that `x` is f32 and `bits` (and with `ids`, `ids`) i32 with
            // `x`'s rows, all with contiguous rows, `ids` of `x`'s shape; an i32 word is read as the
            // u32 of its bits (same size and alignment); row `r` of `d` is written only here.
            unsafe {
                let (xr, br, out) = (x.row::<f32>(r), bits.row::<u32>(r), d.row_mut::<f32>(r));
                if ids {
                    kernels::token_mask::mask_ids(xr, k.srcs[2].row::<i32>(r), br, out);
                } else {
                    kernels::token_mask::mask_vocab(xr, br, out);
                }
            }
        }
    });
    Ok(())
}

//! `random_uniform`: element `[i0, row]` is `philox::uniform(seed, step, stream::element(stream, i0))`
//! with the row's seed and step read from `keys i32 [4, rows..]` (seed lo, seed hi, step lo, step hi).
//! Uses `graph::philox`, the single implementation of the generator.

use super::K;
use crate::error::CpuError;
use graph::philox;

pub(crate) fn random_uniform(k: &K<'_>, stream: u32) -> Result<(), CpuError> {
    let (keys, d) = (k.srcs[0], k.dst);
    let n = d.ne[0];
    let nrows = d.nrows();
    // Split by elements, not rows, so one long row also uses every thread.
    crate::par::for_blocks(nrows * n, 32, |range| {
        let mut e = range.start;
        while e < range.end {
            let (row, i0) = (e / n, e % n);
            let len = (n - i0).min(range.end - e);
            let r = d.row_index(row);
            // SAFETY: `keys` rows hold 4 contiguous i32; elements `i0..i0 + len` of row `r` of `d` are
            // written only by this block.
            unsafe {
                let kr = keys.row::<i32>(r);
                let seed = u64::from(kr[0] as u32) | (u64::from(kr[1] as u32) << 32);
                let step = u64::from(kr[2] as u32) | (u64::from(kr[3] as u32) << 32);
                let out = std::slice::from_raw_parts_mut((d.row_ptr(r) as *mut f32).add(i0), len);
                for (j, o) in out.iter_mut().enumerate() {
                    let el = philox::stream::element(u64::from(stream), (i0 + j) as u64);
                    *o = philox::uniform(seed, step, el);
                }
            }
            e += len;
        }
    });
    Ok(())
}

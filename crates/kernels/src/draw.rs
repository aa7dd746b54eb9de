//! The inverse-CDF draw of an index from a row's softmax, shared by the CPU sampler chain's
//! `dist` and the CPU backend's `categorical` op (so both pick the same token from the same row):
//! the block by its mass from [`crate::stats::BlockStats`], then, in that block only, the first
//! index whose f64 running sum exceeds the rest of the target.

use crate::stats::{BLOCK, BlockStats};

/// The index drawn from `row` (logits `row[i] * s`) with the uniform `u` in `[0, 1)`, given its
/// block statistics `st` (from `stats::block_stats(row, s, st)`, for a row that is not bad and has
/// a finite maximum): the first index whose running sum exceeds `u` times the total.
pub fn from_stats(row: &[f32], s: f32, u: f64, st: &mut BlockStats) -> usize {
    let total = st.weights(s);
    let target = u * total;
    let mut before = 0.0f64;
    let mut block = None;
    let mut last_nonzero = 0;
    for (b, &wb) in st.weight.iter().enumerate() {
        if wb > 0.0 {
            last_nonzero = b;
            if before + wb > target {
                block = Some(b);
                break;
            }
            before += wb;
        }
    }
    let b = block.unwrap_or(last_nonzero);
    let start = b * BLOCK;
    let end = (start + BLOCK).min(row.len());
    let mut e = [0.0f32; BLOCK];
    let e = &mut e[..end - start];
    let (a, c) = crate::exp::exp_affine(st.row_max, s);
    crate::row::exp2_into(&row[start..end], a, c, e);
    start + in_block(e, target - before)
}

/// Group length of the in-block draw.
const GROUP: usize = 64;

/// The first index of `e` whose running sum exceeds `rem` (zero weights skipped); the last nonzero
/// one if rounding leaves `rem` just past the total. Running sums in f64, a group of 64 at a time:
/// a group whose sum keeps the running sum at or below `rem` is skipped whole.
pub fn in_block(e: &[f32], rem: f64) -> usize {
    let mut cum = 0.0f64;
    let mut last_group = None;
    for (g, grp) in e.chunks(GROUP).enumerate() {
        let mut acc = [0.0f64; 8];
        let (chunks, rest) = grp.as_chunks::<8>();
        for c in chunks {
            for (a, &x) in acc.iter_mut().zip(c) {
                *a += f64::from(x);
            }
        }
        let gs = acc.iter().sum::<f64>() + rest.iter().map(|&x| f64::from(x)).sum::<f64>();
        if gs > 0.0 {
            last_group = Some(g);
        }
        if cum + gs <= rem {
            cum += gs;
            continue;
        }
        for (j, &ej) in grp.iter().enumerate() {
            if ej > 0.0 {
                cum += f64::from(ej);
                if cum > rem {
                    return g * GROUP + j;
                }
            }
        }
    }
    // Rounding left the target just past the block's last token: take it.
    last_group.map_or(0, |g| {
        let grp = &e[g * GROUP..(g * GROUP + GROUP).min(e.len())];
        g * GROUP + grp.iter().rposition(|&x| x > 0.0).unwrap_or(0)
    })
}

#[cfg(test)]
mod tests {
    use super::in_block;

    /// The token-by-token definition: the first index whose running f64 sum exceeds `rem`, zero
    /// weights skipped; the last nonzero one if none does.
    fn reference(e: &[f32], rem: f64) -> usize {
        let mut cum = 0.0f64;
        let mut last = 0;
        for (j, &x) in e.iter().enumerate() {
            if x > 0.0 {
                cum += f64::from(x);
                last = j;
                if cum > rem {
                    return j;
                }
            }
        }
        last
    }

    #[test]
    fn in_block_draw_matches_token_by_token_scan() {
        for n in [1usize, 2, 63, 64, 65, 127, 1000, 1024] {
            // Weights of very different sizes, with zeros (masked tokens), including whole zero groups.
            let e: Vec<f32> = (0..n as u32)
                .map(|i| {
                    let h = i.wrapping_mul(2_654_435_761) >> 20;
                    if h % 5 == 0 || (64..128).contains(&i) { 0.0 } else { (h % 97) as f32 * 1e-3 * (1 + h % 3) as f32 }
                })
                .collect();
            let total: f64 = e.iter().map(|&x| f64::from(x)).sum();
            for k in 0..=200 {
                let rem = total * f64::from(k) / 200.0;
                assert_eq!(in_block(&e, rem), reference(&e, rem), "n = {n}, rem = {rem}");
            }
            assert_eq!(in_block(&e, total * 2.0), reference(&e, total * 2.0));
        }
        // All zero: index 0, as before.
        assert_eq!(in_block(&[0.0; 10], 0.0), 0);
    }
}

//! `random_uniform` and `categorical`.
//!
//! `random_uniform`: element `[i0, row]` is `philox::uniform(seed, step, stream::element(stream, i0))`
//! with the row's seed and step read from `keys i32 [4, rows..]` (seed lo, seed hi, step lo, step hi).
//! Uses `graph::philox`, the single implementation of the generator.
//!
//! `categorical`: per row, the weights `w_i = exp(x_i - max)` by the shared exponential
//! (`kernels::row::exp2_into`, the same one the CPU sampler chain's `dist` uses), their f64 total
//! `W`, and the first index with `w_i > 0` whose f64 running sum exceeds `u W` for the 53-bit
//! uniform `u` of `philox::uniform_f64`. A row holding NaN or `+inf`, or no finite value, gives -1.

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
                let (seed, step) = seed_step(keys.row::<i32>(r));
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

/// The seed and step of one row of a keys tensor (seed lo, seed hi, step lo, step hi).
fn seed_step(kr: &[i32]) -> (u64, u64) {
    let seed = u64::from(kr[0] as u32) | (u64::from(kr[1] as u32) << 32);
    let step = u64::from(kr[2] as u32) | (u64::from(kr[3] as u32) << 32);
    (seed, step)
}

pub(crate) fn categorical(k: &K<'_>, stream: u32) -> Result<(), CpuError> {
    let (x, keys, d) = (k.srcs[0], k.srcs[1], k.dst);
    let n = x.ne[0];
    super::for_rows(&d, 4 * n, 0, |r, _| {
        // SAFETY: the builder checked that `x` (f32) and `keys` (i32, 4 per row) have contiguous rows
        // with `d`'s row count; row `r` of `d` is written only here.
        unsafe {
            let (seed, step) = seed_step(keys.row::<i32>(r));
            let u = philox::uniform_f64(seed, step, philox::stream::element(u64::from(stream), 0));
            d.row_mut::<i32>(r)[0] = draw(x.row::<f32>(r), u).map_or(-1, |i| i as i32);
        }
    });
    Ok(())
}

/// Block length of the draw: weights are recomputed for one block only.
const BLOCK: usize = 1024;

/// The draw of one row with the uniform `u` (see the module documentation); `None` for a row with
/// NaN or `+inf` or no finite value. Two passes over the row (the maximum; each block's f64 sum of
/// weights) and a rescan of the one block that holds the target.
pub(crate) fn draw(x: &[f32], u: f64) -> Option<usize> {
    let (max, bad) = kernels::row::max_bad(x);
    if bad || max == f32::NEG_INFINITY {
        return None;
    }
    let (a, b) = kernels::exp::exp_affine(max, 1.0);
    let mut w = [0.0f32; BLOCK];
    let sums: Vec<f64> = x
        .chunks(BLOCK)
        .map(|c| {
            let w = &mut w[..c.len()];
            kernels::row::exp2_into(c, a, b, w);
            sum_f64(w)
        })
        .collect();
    let target = u * sums.iter().sum::<f64>();
    let mut before = 0.0f64;
    let mut last = None;
    for (blk, &s) in sums.iter().enumerate() {
        if s > 0.0 {
            last = Some(blk);
            if before + s > target {
                let c = &x[blk * BLOCK..(blk * BLOCK + BLOCK).min(x.len())];
                let w = &mut w[..c.len()];
                kernels::row::exp2_into(c, a, b, w);
                return Some(blk * BLOCK + draw_in(w, target - before));
            }
            before += s;
        }
    }
    // Rounding left the target at or past the total: the last positive weight.
    let blk = last?;
    let c = &x[blk * BLOCK..(blk * BLOCK + BLOCK).min(x.len())];
    let w = &mut w[..c.len()];
    kernels::row::exp2_into(c, a, b, w);
    w.iter().rposition(|&v| v > 0.0).map(|j| blk * BLOCK + j)
}

/// The first index of `w` with a positive weight whose f64 running sum exceeds `rem`, skipping
/// whole chunks of 64 that keep it at or below; the last positive one if rounding leaves none.
fn draw_in(w: &[f32], rem: f64) -> usize {
    let mut cum = 0.0f64;
    for (c, chunk) in w.chunks(64).enumerate() {
        let s = sum_f64(chunk);
        if cum + s <= rem {
            cum += s;
            continue;
        }
        for (j, &wj) in chunk.iter().enumerate() {
            if wj > 0.0 {
                cum += f64::from(wj);
                if cum > rem {
                    return c * 64 + j;
                }
            }
        }
    }
    w.iter().rposition(|&v| v > 0.0).unwrap_or(0)
}

/// Sum in f64 with eight accumulators (the order is fixed, so the result is reproducible).
fn sum_f64(w: &[f32]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (chunks, rest) = w.as_chunks::<8>();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f64::from(v);
        }
    }
    acc.iter().sum::<f64>() + rest.iter().map(|&v| f64::from(v)).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::draw;

    #[test]
    fn draw_edges() {
        assert_eq!(draw(&[0.0, f32::NAN, 1.0], 0.5), None);
        assert_eq!(draw(&[0.0, f32::INFINITY], 0.5), None);
        assert_eq!(draw(&[f32::NEG_INFINITY; 3], 0.5), None);
        let ninf = f32::NEG_INFINITY;
        // Masked entries are never drawn, at either end of [0, 1).
        assert_eq!(draw(&[ninf, 1.0, ninf, 1.0], 0.0), Some(1));
        assert_eq!(draw(&[ninf, 1.0, ninf, 1.0], 0.999_999), Some(3));
        assert_eq!(draw(&[ninf, 1.0, ninf, 1.0], 0.49), Some(1));
        assert_eq!(draw(&[ninf, 1.0, ninf, 1.0], 0.51), Some(3));
        assert_eq!(draw(&[2.0, ninf, ninf, ninf], 0.999_999), Some(0));
    }

    /// A token of probability 1e-9 behind 3000 others (three blocks) is drawn exactly where the
    /// uniform falls inside its bracket: an f32 running sum could not even represent it.
    #[test]
    fn a_one_in_a_billion_token_has_its_bracket() {
        let n = 3000;
        let mut x = vec![0.0f32; n + 1];
        // weight of each of the n tokens is 1; the last one's is 1e-9 * n (probability ~1e-9).
        x[n] = (1e-9f64 * n as f64).ln() as f32;
        let wt = f64::from(kernels::exp::exp_at(x[n], kernels::exp::LOG2E, 0.0));
        let total = n as f64 + wt;
        // Just inside the last bracket, and just before it.
        let inside = (n as f64 + wt / 2.0) / total;
        let before = (n as f64 - 0.5) / total;
        assert_eq!(draw(&x, inside), Some(n));
        assert_eq!(draw(&x, before), Some(n - 1));
        assert!(wt / total > 0.9e-9 && wt / total < 1.1e-9);
    }
}

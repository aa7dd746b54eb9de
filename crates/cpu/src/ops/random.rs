//! `random_uniform` and `categorical`.
//!
//! `random_uniform`: element `[i0, row]` is `philox::uniform(seed, step, stream::element(stream, i0))`
//! with the row's seed and step read from `keys i32 [4, rows..]` (seed lo, seed hi, step lo, step hi).
//! Uses `graph::philox`, the single implementation of the generator.
//!
//! `categorical` (`s = +inf`: the first maximum, from the block-maxima pass and one block's
//! rescan; without a cut: the CPU sampler chain's own draw, `kernels::draw`): per row, the weights `w_i = exp(x_i - max)` by the shared exponential
//! (`kernels::row::exp2_into`, the same one the CPU sampler chain's `dist` uses), their f64 total
//! `W`, and the first index with `w_i > 0` whose f64 running sum exceeds `u W` for the 53-bit
//! uniform `u` of `philox::uniform_f64`. A row holding NaN or `+inf`, or no finite value, gives -1.
//!
//! `spec_verify`: `categorical` with a draft entry `e` (see `graph::Op::SpecVerify`), on the
//! weights `categorical`'s own draw uses (without a cut: the one-pass block statistics; with one:
//! f64 block sums of the f32 exponentials); `w_e` is recomputed from `e`'s block by the code the
//! draw's rescan uses, so `a W < w_e` compares the weight the draw itself would give `e`; a
//! rejected draft is drawn from the same blocks with `w_e` taken out of its block's mass and
//! zeroed in the rescan. A row without a draft entry is exactly `categorical`'s draw.

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
    let params = k.srcs.get(2).copied();
    let n = x.ne[0];
    super::for_rows(&d, 4 * n, 0, |r, _| {
        // SAFETY: the builder checked that `x` (f32), `keys` (i32, 4 per row) and `params` (f32, 2
        // per row) have contiguous rows with `d`'s row count; row `r` of `d` is written only here.
        unsafe {
            let (seed, step) = seed_step(keys.row::<i32>(r));
            let u = philox::uniform_f64(seed, step, philox::stream::element(u64::from(stream), 0));
            let (s, off) = params.map_or((1.0, f32::NEG_INFINITY), |p| {
                let p = p.row::<f32>(r);
                (p[0], p[1])
            });
            d.row_mut::<i32>(r)[0] = draw(x.row::<f32>(r), u, s, off).map_or(-1, |i| i as i32);
        }
    });
    Ok(())
}

pub(crate) fn spec_verify(k: &K<'_>, stream: u32, ids: bool) -> Result<(), CpuError> {
    let (x, keys, d) = (k.srcs[0], k.srcs[1], k.dst);
    let aux = k.srcs.get(2).copied();
    let n = x.ne[0];
    super::for_rows(&d, 4 * n, 0, |r, _| {
        // SAFETY: the builder checked that `x` (f32), `keys` (i32, 5 per row) and `aux` (f32, 2 per
        // row, or i32, `n` per row) have contiguous rows with `d`'s row count; row `r` of `d` is
        // written only here.
        unsafe {
            let kr = keys.row::<i32>(r);
            let (seed, step) = seed_step(kr);
            let draft = kr[4];
            let u = philox::uniform_f64(seed, step, philox::stream::element(u64::from(stream), 0));
            let (s, off, entry) = match (aux, ids) {
                (Some(i), true) => (1.0, f32::NEG_INFINITY, i.row::<i32>(r).iter().position(|&t| t == draft)),
                (p, _) => {
                    let (s, off) = p.map_or((1.0, f32::NEG_INFINITY), |p| {
                        let p = p.row::<f32>(r);
                        (p[0], p[1])
                    });
                    (s, off, usize::try_from(draft).ok().filter(|&e| e < n))
                }
            };
            let xr = x.row::<f32>(r);
            let got = match entry {
                Some(e) if draft >= 0 => {
                    let a = philox::uniform_f64(seed, step, philox::stream::element(philox::stream::SPECULATIVE, 0));
                    verify_draw(xr, u, a, s, off, e)
                }
                _ => draw(xr, u, s, off),
            };
            d.row_mut::<i32>(r)[0] = got.map_or(-1, |i| i as i32);
        }
    });
    Ok(())
}

/// One row of `spec_verify` with a draft entry `e`: `e` if `a W < w_e`, else the draw with `u`
/// from the weights without `w_e` (`e` if nothing else weighs); `None` for a bad row, as
/// [`draw`]. `s = +inf` is [`draw`]'s first maximum.
pub(crate) fn verify_draw(x: &[f32], u: f64, a: f64, s: f32, off: f32, e: usize) -> Option<usize> {
    if s.is_nan() || s <= 0.0 || off.is_nan() {
        return None;
    }
    if s == f32::INFINITY {
        return draw(x, u, s, off);
    }
    if off == f32::NEG_INFINITY {
        return verify_from_stats(x, u, a, s, e);
    }
    let mut maxima = vec![0.0f32; x.len().div_ceil(BLOCK)];
    let bad = kernels::row::block_max_bad(x, BLOCK, &mut maxima);
    let max = maxima.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if bad || max == f32::NEG_INFINITY {
        return None;
    }
    let thr = max + off;
    let (ea, eb) = kernels::exp::exp_affine(max, s);
    let mut w = [0.0f32; BLOCK];
    let block = |blk: usize| &x[blk * BLOCK..(blk * BLOCK + BLOCK).min(x.len())];
    let sums: Vec<f64> = maxima
        .iter()
        .enumerate()
        .map(|(blk, &bm)| {
            if bm < thr || bm == f32::NEG_INFINITY {
                return 0.0;
            }
            let c = block(blk);
            weights(c, ea, eb, thr, &mut w[..c.len()]);
            sum_f64(&w[..c.len()])
        })
        .collect();
    let total: f64 = sums.iter().sum();
    if total == 0.0 {
        return None;
    }
    let (eblk, ej) = (e / BLOCK, e % BLOCK);
    let c = block(eblk);
    weights(c, ea, eb, thr, &mut w[..c.len()]);
    let we = f64::from(w[ej]);
    if a * total < we {
        return Some(e);
    }
    let rest = total - we;
    if rest <= 0.0 {
        return Some(e);
    }
    let target = u * rest;
    // The block sums without `w_e`, and a block's weights with `w_e` zeroed.
    let sum_of = |blk: usize| if blk == eblk { (sums[blk] - we).max(0.0) } else { sums[blk] };
    let fill = |blk: usize, w: &mut [f32; BLOCK]| {
        let c = block(blk);
        weights(c, ea, eb, thr, &mut w[..c.len()]);
        if blk == eblk {
            w[ej] = 0.0;
        }
        c.len()
    };
    let mut before = 0.0f64;
    let mut last = None;
    for blk in 0..sums.len() {
        let bs = sum_of(blk);
        if bs > 0.0 {
            last = Some(blk);
            if before + bs > target {
                let len = fill(blk, &mut w);
                return Some(blk * BLOCK + kernels::draw::in_block(&w[..len], target - before));
            }
            before += bs;
        }
    }
    let blk = last?;
    let len = fill(blk, &mut w);
    w[..len].iter().rposition(|&v| v > 0.0).map(|j| blk * BLOCK + j).or(Some(e))
}

/// [`verify_draw`] without a cut, on the weights of `categorical`'s own uncut draw (the CPU
/// sampler chain's `kernels::draw`: one pass of block statistics, block masses relative to the row
/// maximum, one block's exponentials recomputed): `w_e` is `e`'s exponential as that rescan
/// computes it.
fn verify_from_stats(x: &[f32], u: f64, a: f64, s: f32, e: usize) -> Option<usize> {
    let mut st = kernels::stats::BlockStats::default();
    kernels::stats::block_stats(x, s, &mut st);
    if st.bad || st.row_max == f32::NEG_INFINITY {
        return None;
    }
    let total = st.weights(s);
    let (ea, eb) = kernels::exp::exp_affine(st.row_max, s);
    let mut w = [0.0f32; BLOCK];
    let fill = |blk: usize, w: &mut [f32; BLOCK]| {
        let c = &x[blk * BLOCK..(blk * BLOCK + BLOCK).min(x.len())];
        kernels::row::exp2_into(c, ea, eb, &mut w[..c.len()]);
        if blk == e / BLOCK {
            w[e % BLOCK] = 0.0;
        }
        c.len()
    };
    let eblk = e / BLOCK;
    let ec = &x[eblk * BLOCK..(eblk * BLOCK + BLOCK).min(x.len())];
    kernels::row::exp2_into(ec, ea, eb, &mut w[..ec.len()]);
    let we = f64::from(w[e % BLOCK]);
    if a * total < we {
        return Some(e);
    }
    let rest = total - we;
    if rest <= 0.0 {
        return Some(e);
    }
    let target = u * rest;
    let mut before = 0.0f64;
    let mut last = None;
    for (blk, &wb) in st.weight.iter().enumerate() {
        let wb = if blk == eblk { (wb - we).max(0.0) } else { wb };
        if wb > 0.0 {
            last = Some(blk);
            if before + wb > target {
                let len = fill(blk, &mut w);
                return Some(blk * BLOCK + kernels::draw::in_block(&w[..len], target - before));
            }
            before += wb;
        }
    }
    let blk = last?;
    let len = fill(blk, &mut w);
    w[..len].iter().rposition(|&v| v > 0.0).map(|j| blk * BLOCK + j).or(Some(e))
}

/// Block length of the draw: weights are recomputed for one block only.
const BLOCK: usize = 1024;

/// The weights of one block into `w`: `exp((x - max) s)` by the shared exponential (the affine
/// constants `(a, b)`), zeroed below `thr`.
fn weights(c: &[f32], a: f32, b: f32, thr: f32, w: &mut [f32]) {
    kernels::row::exp2_into(c, a, b, w);
    if thr > f32::NEG_INFINITY {
        for (wi, &xi) in w.iter_mut().zip(c) {
            if xi < thr {
                *wi = 0.0;
            }
        }
    }
}

/// The draw of one row with the uniform `u`, scale `s` and threshold offset `off` (see the module
/// documentation); `None` for a row with NaN or `+inf` or no finite value, or bad `s`/`off`. One
/// pass for the block maxima, one over the blocks that can hold a weight (with a min-p cut most are
/// skipped unread), and a rescan of the one block that holds the target.
pub(crate) fn draw(x: &[f32], u: f64, s: f32, off: f32) -> Option<usize> {
    if s.is_nan() || s <= 0.0 || off.is_nan() {
        return None;
    }
    let mut maxima = vec![0.0f32; x.len().div_ceil(BLOCK)];
    let bad = kernels::row::block_max_bad(x, BLOCK, &mut maxima);
    let max = maxima.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if bad || max == f32::NEG_INFINITY {
        return None;
    }
    if s == f32::INFINITY {
        // The zero-temperature limit: the first maximum (its block is the first whose max it is).
        let blk = maxima.iter().position(|&m| m == max)?;
        return x[blk * BLOCK..].iter().position(|&v| v == max).map(|j| blk * BLOCK + j);
    }
    if off == f32::NEG_INFINITY {
        // No cut: the CPU sampler chain's own draw (one pass of block statistics), so both pick
        // the same token from the same row.
        let mut st = kernels::stats::BlockStats::default();
        kernels::stats::block_stats(x, s, &mut st);
        return Some(kernels::draw::from_stats(x, s, u, &mut st));
    }
    let thr = max + off;
    let (a, b) = kernels::exp::exp_affine(max, s);
    let mut w = [0.0f32; BLOCK];
    let block = |blk: usize| &x[blk * BLOCK..(blk * BLOCK + BLOCK).min(x.len())];
    let sums: Vec<f64> = maxima
        .iter()
        .enumerate()
        .map(|(blk, &bm)| {
            if bm < thr || bm == f32::NEG_INFINITY {
                return 0.0;
            }
            let c = block(blk);
            weights(c, a, b, thr, &mut w[..c.len()]);
            sum_f64(&w[..c.len()])
        })
        .collect();
    let target = u * sums.iter().sum::<f64>();
    let mut before = 0.0f64;
    let mut last = None;
    for (blk, &bs) in sums.iter().enumerate() {
        if bs > 0.0 {
            last = Some(blk);
            if before + bs > target {
                let c = block(blk);
                weights(c, a, b, thr, &mut w[..c.len()]);
                return Some(blk * BLOCK + kernels::draw::in_block(&w[..c.len()], target - before));
            }
            before += bs;
        }
    }
    // Rounding left the target at or past the total: the last positive weight.
    let blk = last?;
    let c = block(blk);
    weights(c, a, b, thr, &mut w[..c.len()]);
    w[..c.len()].iter().rposition(|&v| v > 0.0).map(|j| blk * BLOCK + j)
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
    const NINF: f32 = f32::NEG_INFINITY;

    #[test]
    fn draw_edges() {
        assert_eq!(draw(&[0.0, f32::NAN, 1.0], 0.5, 1.0, NINF), None);
        assert_eq!(draw(&[0.0, f32::INFINITY], 0.5, 1.0, NINF), None);
        assert_eq!(draw(&[f32::NEG_INFINITY; 3], 0.5, 1.0, NINF), None);
        let ninf = f32::NEG_INFINITY;
        // Masked entries are never drawn, at either end of [0, 1).
        assert_eq!(draw(&[ninf, 1.0, ninf, 1.0], 0.0, 1.0, NINF), Some(1));
        assert_eq!(draw(&[ninf, 1.0, ninf, 1.0], 0.999_999, 1.0, NINF), Some(3));
        assert_eq!(draw(&[ninf, 1.0, ninf, 1.0], 0.49, 1.0, NINF), Some(1));
        assert_eq!(draw(&[ninf, 1.0, ninf, 1.0], 0.51, 1.0, NINF), Some(3));
        assert_eq!(draw(&[2.0, ninf, ninf, ninf], 0.999_999, 1.0, NINF), Some(0));
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
        assert_eq!(draw(&x, inside, 1.0, NINF), Some(n));
        assert_eq!(draw(&x, before, 1.0, NINF), Some(n - 1));
        assert!(wt / total > 0.9e-9 && wt / total < 1.1e-9);
    }

    /// The scale and the min-p cut: weights `exp((x - max) s)` above `max + off` only.
    #[test]
    fn scale_and_threshold() {
        // Four tokens of logits 0, -1, -2, -3; s = 2: weights 1, e^-2, e^-4, e^-6.
        let x = [0.0f32, -1.0, -2.0, -3.0];
        let w: Vec<f64> = (0..4).map(|i| (-2.0 * i as f64).exp()).collect();
        let total: f64 = w.iter().sum();
        let mid = |i: usize| (w[..i].iter().sum::<f64>() + w[i] / 2.0) / total;
        for i in 0..4 {
            assert_eq!(draw(&x, mid(i), 2.0, NINF), Some(i));
        }
        // Cut at max - 1.5: only tokens 0 and 1 keep their weight.
        let t2 = w[0] + w[1];
        assert_eq!(draw(&x, 0.99 * t2 / t2, 2.0, -1.5), Some(1));
        assert_eq!(draw(&x, 0.5 * w[0] / t2, 2.0, -1.5), Some(0));
        // Bad parameters: -1.
        assert_eq!(draw(&x, 0.5, 0.0, NINF), None);
        assert_eq!(draw(&x, 0.5, f32::NAN, NINF), None);
        assert_eq!(draw(&x, 0.5, -1.0, NINF), None);
        // s = +inf: the first maximum, whatever u (ties of -0.0 and +0.0 included).
        assert_eq!(draw(&x, 0.999, f32::INFINITY, NINF), Some(0));
        assert_eq!(draw(&[-1.0, 2.0, -0.0, 2.0], 0.9, f32::INFINITY, NINF), Some(1));
        assert_eq!(draw(&[-1.0, -0.0, 0.0], 0.9, f32::INFINITY, NINF), Some(1));
        let mut long = vec![0.0f32; 5000];
        long[4000] = 3.0;
        long[4500] = 3.0;
        assert_eq!(draw(&long, 0.1, f32::INFINITY, NINF), Some(4000));
        assert_eq!(draw(&x, 0.5, 1.0, f32::NAN), None);
        // A cut above the max keeps nothing: no finite weight, -1.
        assert_eq!(draw(&x, 0.5, 1.0, 0.5), None);
    }
}

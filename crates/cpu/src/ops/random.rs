//! `random_uniform` and `categorical`.
//!
//! `random_uniform`: element `[i0, row]` is `philox::uniform(seed, step, stream::element(stream, i0))`
//! with the row's seed and step read from `keys i32 [4, rows..]` (seed lo, seed hi, step lo, step hi).
//! Uses `graph::philox`, the single implementation of the generator.
//!
//! `categorical` (`s = +inf`: the first maximum, by the CPU sampler chain's greedy scan
//! `kernels::select::argmax`; without a cut: the CPU sampler chain's own draw, `kernels::draw`): per row, the weights `w_i = exp(x_i - max)` by the shared exponential
//! (`kernels::row::exp2_into`, the same one the CPU sampler chain's `dist` uses), their f64 total
//! `W`, and the first index with `w_i > 0` whose f64 running sum exceeds `u W` for the 53-bit
//! uniform `u` of `philox::uniform_f64`. A row holding NaN or `+inf`, or no finite value, gives -1.
//! With `ids` (a candidate list's token ids) the result is the drawn entry's id, not its index.
//!
//! `spec_verify`: `categorical` with a draft entry `e` (see `graph::Op::SpecVerify`), on the
//! weights `categorical`'s own draw uses (without a cut: the one-pass block statistics; with one:
//! f64 block sums of the f32 exponentials); `w_e` is recomputed from `e`'s block by the code the
//! draw's rescan uses, so `a W < w_e` compares the weight the draw itself would give `e`; a
//! rejected draft is drawn from the same blocks with `w_e` taken out of its block's mass and
//! zeroed in the rescan. A row without a draft entry is exactly `categorical`'s draw. With `ids`
//! the result is the chosen entry's id.
//!
//! `spec_verify_sampled`: `spec_verify` for a draft drawn from a distribution `q`, in
//! `random/sampled.rs` (the same weights).

mod sampled;
pub(crate) use sampled::spec_verify_sampled;

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

pub(crate) fn categorical(k: &K<'_>, stream: u32, ids: bool) -> Result<(), CpuError> {
    let (x, keys, d) = (k.srcs[0], k.srcs[1], k.dst);
    let (params, ids) = match k.srcs.get(2).copied() {
        Some(i) if ids => (None, Some(i)),
        p => (p, None),
    };
    let n = x.ne[0];
    super::for_rows(&d, 4 * n, 0, |r, _| {
        // SAFETY: the builder checked that `x` (f32), `keys` (i32, 4 per row) and `params` (f32, 2
        // per row) or `ids` (i32, `n` per row) have contiguous rows with `d`'s row count; row `r`
        // of `d` is written only here.
        unsafe {
            let (seed, step) = seed_step(keys.row::<i32>(r));
            let u = philox::uniform_f64(seed, step, philox::stream::element(u64::from(stream), 0));
            let (s, off) = params.map_or((1.0, f32::NEG_INFINITY), |p| {
                let p = p.row::<f32>(r);
                (p[0], p[1])
            });
            let got = draw(x.row::<f32>(r), u, s, off);
            d.row_mut::<i32>(r)[0] = match (got, ids) {
                (None, _) => -1,
                (Some(i), None) => i as i32,
                (Some(i), Some(t)) => t.row::<i32>(r)[i],
            };
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
            let verify = entry
                .filter(|_| draft >= 0)
                .map(|e| (e, philox::uniform_f64(seed, step, philox::stream::element(philox::stream::SPECULATIVE, 0))));
            let got = draw_with(xr, u, s, off, verify);
            d.row_mut::<i32>(r)[0] = match (got, aux) {
                (None, _) => -1,
                (Some(i), Some(t)) if ids => t.row::<i32>(r)[i],
                (Some(i), _) => i as i32,
            };
        }
    });
    Ok(())
}

/// Block length of the draw: weights are recomputed for one block only.
const BLOCK: usize = 1024;

/// Whether the threshold `thr` zeroes anything (false for `-inf`, and for NaN as before).
fn cuts(thr: f32) -> bool {
    thr > f32::NEG_INFINITY
}

/// Entries per piece of a block in [`weights`] with a cut: a multiple of the exponential's 16
/// lanes, so that every entry takes the path (vector or scalar tail) it takes in a whole-block
/// call and gets the same weight.
const PIECE: usize = 64;

/// The weights of one block into `w`: `exp((x - max) s)` by the shared exponential (the affine
/// constants `(a, b)`), zeroed below `thr`. With a cut, a piece with nothing at or above `thr` is
/// zeroed without computing its exponentials (a min-p cut or a top-p mask leaves a few entries
/// per block).
fn weights(c: &[f32], a: f32, b: f32, thr: f32, w: &mut [f32]) {
    if !cuts(thr) {
        kernels::row::exp2_into(c, a, b, w);
        return;
    }
    for (cp, wp) in c.chunks(PIECE).zip(w.chunks_mut(PIECE)) {
        piece_weights(cp, a, b, thr, wp);
    }
}

/// One piece of [`weights`] with the cut `thr`; false if it is all zero.
fn piece_weights(c: &[f32], a: f32, b: f32, thr: f32, w: &mut [f32]) -> bool {
    if kernels::row::max_bad(c).0 >= thr {
        kernels::row::exp2_into(c, a, b, w);
        for (wi, &xi) in w.iter_mut().zip(c) {
            *wi = if xi < thr { 0.0 } else { *wi };
        }
        true
    } else {
        w.fill(0.0);
        false
    }
}

/// [`weights`] and their [`sum_f64`], the block's mass, exactly: with a cut the all-zero pieces are
/// not added (a piece is a whole number of the sum's 8 lanes, and adding `+0.0` to a non-negative
/// accumulator changes nothing).
fn weights_mass(c: &[f32], a: f32, b: f32, thr: f32, w: &mut [f32]) -> f64 {
    if !cuts(thr) {
        weights(c, a, b, thr, w);
        return sum_f64(w);
    }
    let mut acc = [0.0f64; 8];
    for (cp, wp) in c.chunks(PIECE).zip(w.chunks_mut(PIECE)) {
        if piece_weights(cp, a, b, thr, wp) {
            for ch in wp.as_chunks::<8>().0 {
                for (a, &v) in acc.iter_mut().zip(ch) {
                    *a += f64::from(v);
                }
            }
        }
    }
    let rest = &w[w.len() / 8 * 8..];
    acc.iter().sum::<f64>() + rest.iter().map(|&v| f64::from(v)).sum::<f64>()
}

/// The draw of one row with the uniform `u`, scale `s` and threshold offset `off` (see the module
/// documentation); `None` for a row with NaN or `+inf` or no finite value, or bad `s`/`off`.
/// Without a cut: one pass of block statistics and a rescan of one block. With one: a pass for the
/// block maxima, one over the blocks that can hold a weight (with a min-p cut most are skipped
/// unread), and the rescan.
pub(crate) fn draw(x: &[f32], u: f64, s: f32, off: f32) -> Option<usize> {
    draw_with(x, u, s, off, None)
}

/// [`draw`], or with `verify = Some((e, a))` one row of `spec_verify` with the draft entry `e`
/// and the acceptance uniform `a`: `e` if `a W < w_e`, else the draw with `u` from the weights
/// without `w_e` (`e` itself if nothing else weighs). `s = +inf` is the first maximum either way.
fn draw_with(x: &[f32], u: f64, s: f32, off: f32, verify: Option<(usize, f64)>) -> Option<usize> {
    if verify.is_none() && off == f32::NEG_INFINITY && s > 0.0 && s < f32::INFINITY {
        // No cut: the CPU sampler chain's own draw (one pass of block statistics, which also
        // finds a bad row), so both pick the same token from the same row.
        let mut st = kernels::stats::BlockStats::default();
        kernels::stats::block_stats(x, s, &mut st);
        if st.bad || st.row_max == f32::NEG_INFINITY {
            return None;
        }
        return Some(kernels::draw::from_stats(x, s, u, &mut st));
    }
    match row_weights(x, s, off) {
        Prepared::Bad => None,
        Prepared::First(i) => Some(i),
        Prepared::Weights(rw) => rw.pick(u, verify),
    }
}

/// A row prepared for a draw: bad (-1), the zero-temperature limit's first maximum, or weights.
enum Prepared<'a> {
    Bad,
    First(usize),
    Weights(RowWeights<'a>),
}

/// The weights of a draw with scale `s` and threshold offset `off` (see [`draw_with`]).
fn row_weights(x: &[f32], s: f32, off: f32) -> Prepared<'_> {
    if s.is_nan() || s <= 0.0 || off.is_nan() {
        return Prepared::Bad;
    }
    if off == f32::NEG_INFINITY && s < f32::INFINITY {
        // No cut: the block statistics of the CPU sampler chain's own draw, so that a
        // verification weighs with the statistics a plain draw uses.
        let mut st = kernels::stats::BlockStats::default();
        kernels::stats::block_stats(x, s, &mut st);
        if st.bad || st.row_max == f32::NEG_INFINITY {
            return Prepared::Bad;
        }
        st.weights(s);
        let (a, b) = kernels::exp::exp_affine(st.row_max, s);
        return Prepared::Weights(RowWeights { x, mass: st.weight, a, b, thr: f32::NEG_INFINITY });
    }
    if s == f32::INFINITY {
        // The zero-temperature limit: the first maximum, by the CPU sampler chain's own greedy
        // scan (one pass and one block's rescan; a cut never removes the maximum).
        let (i, max, bad) = kernels::select::argmax(x);
        return if !bad && max > f32::NEG_INFINITY { Prepared::First(i) } else { Prepared::Bad };
    }
    let mut maxima = vec![0.0f32; x.len().div_ceil(BLOCK)];
    let bad = kernels::row::block_max_bad(x, BLOCK, &mut maxima);
    let max = maxima.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if bad || max == f32::NEG_INFINITY {
        return Prepared::Bad;
    }
    let thr = max + off;
    let (a, b) = kernels::exp::exp_affine(max, s);
    let mut w = [0.0f32; BLOCK];
    let mut rw = RowWeights { x, mass: Vec::new(), a, b, thr };
    rw.mass = maxima
        .iter()
        .enumerate()
        .map(|(blk, &bm)| {
            if bm < thr || bm == f32::NEG_INFINITY {
                return 0.0;
            }
            rw.fill_mass(blk, &mut w)
        })
        .collect();
    Prepared::Weights(rw)
}

/// A row's draw weights: the mass of each block and the affine constants and threshold that
/// recompute one block's weights.
struct RowWeights<'a> {
    x: &'a [f32],
    mass: Vec<f64>,
    a: f32,
    b: f32,
    thr: f32,
}

impl RowWeights<'_> {
    /// Block `blk`'s weights into `w`; its length.
    fn fill(&self, blk: usize, w: &mut [f32; BLOCK]) -> usize {
        let c = &self.x[blk * BLOCK..(blk * BLOCK + BLOCK).min(self.x.len())];
        weights(c, self.a, self.b, self.thr, &mut w[..c.len()]);
        c.len()
    }

    /// Block `blk`'s weights into `w`; their sum ([`weights_mass`]).
    fn fill_mass(&self, blk: usize, w: &mut [f32; BLOCK]) -> f64 {
        let c = &self.x[blk * BLOCK..(blk * BLOCK + BLOCK).min(self.x.len())];
        weights_mass(c, self.a, self.b, self.thr, &mut w[..c.len()])
    }

    /// The first index with a positive weight whose running sum exceeds `u` times the total (the
    /// last positive one if rounding leaves none), `None` without weight; with `verify`, the
    /// acceptance test first and the draw without the draft entry (see [`draw_with`]).
    fn pick(&self, u: f64, verify: Option<(usize, f64)>) -> Option<usize> {
        let mut w = [0.0f32; BLOCK];
        let total: f64 = self.mass.iter().sum();
        let mut excluded = None;
        if let Some((e, a)) = verify {
            self.fill(e / BLOCK, &mut w);
            let we = f64::from(w[e % BLOCK]);
            if a * total < we {
                return Some(e);
            }
            if total - we <= 0.0 {
                return (we > 0.0).then_some(e);
            }
            excluded = Some((e, we));
        }
        let fill = |blk: usize, w: &mut [f32; BLOCK]| {
            let len = self.fill(blk, w);
            if let Some((e, _)) = excluded.filter(|(e, _)| e / BLOCK == blk) {
                w[e % BLOCK] = 0.0;
            }
            len
        };
        let target = u * (total - excluded.map_or(0.0, |(_, we)| we));
        let mut before = 0.0f64;
        let mut last = None;
        for (blk, &m) in self.mass.iter().enumerate() {
            let m = match excluded {
                Some((e, we)) if e / BLOCK == blk => (m - we).max(0.0),
                _ => m,
            };
            if m > 0.0 {
                last = Some(blk);
                if before + m > target {
                    let len = fill(blk, &mut w);
                    return Some(blk * BLOCK + kernels::draw::in_block(&w[..len], target - before));
                }
                before += m;
            }
        }
        // Rounding left the target at or past the total: the last positive weight.
        let blk = last?;
        let len = fill(blk, &mut w);
        w[..len].iter().rposition(|&v| v > 0.0).map(|j| blk * BLOCK + j).or(excluded.map(|(e, _)| e))
    }
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

    /// The piecewise weights and masses of a cut equal the whole-block computation bit for bit:
    /// every exponential over the block, then the entries below the cut zeroed, then `sum_f64`.
    #[test]
    fn piecewise_weights_equal_whole_block_ones() {
        use super::{BLOCK, sum_f64, weights, weights_mass};
        let mut rng = conformance::generate::Rng::new(0x2545_f491);
        let mut next = || rng.unit() as f32;
        for len in [BLOCK, 384, 1000, 1023, 100, 37, 8, 1] {
            for case in 0..6 {
                // Sparse high entries over low noise, some -inf (a top-p mask), or all below the cut.
                let x: Vec<f32> = (0..len)
                    .map(|_| {
                        let r = next();
                        match case {
                            0 | 1 if r < 0.01 => 10.0 + 5.0 * next(),
                            2 if r < 0.9 => NINF,
                            2 => 3.0 * next(),
                            _ => 4.0 * next() - 2.0,
                        }
                    })
                    .collect();
                let max = x.iter().copied().fold(NINF, f32::max);
                let (a, b) = kernels::exp::exp_affine(max, 1.25);
                for thr in [max - 3.0, max - f32::MAX, max + 1.0, max - 0.5] {
                    let mut whole = vec![0.0f32; len];
                    kernels::row::exp2_into(&x, a, b, &mut whole);
                    for (w, &v) in whole.iter_mut().zip(&x) {
                        if v < thr {
                            *w = 0.0;
                        }
                    }
                    let (mut w1, mut w2) = (vec![7.0f32; len], vec![7.0f32; len]);
                    weights(&x, a, b, thr, &mut w1);
                    let mass = weights_mass(&x, a, b, thr, &mut w2);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&w1), bits(&whole), "weights, len {len} case {case} thr {thr}");
                    assert_eq!(bits(&w2), bits(&whole), "weights_mass, len {len} case {case} thr {thr}");
                    assert_eq!(mass.to_bits(), sum_f64(&whole).to_bits(), "mass, len {len} case {case} thr {thr}");
                }
            }
        }
    }
}

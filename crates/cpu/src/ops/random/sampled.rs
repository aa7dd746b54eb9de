//! `spec_verify_sampled`: speculative verification of a draft token drawn from a distribution
//! `q` (see `graph::Op::SpecVerifySampled`), on the weights `spec_verify` and `categorical` use
//! ([`super::row_weights`]).
//!
//! Per row: `q` is normalised in f64 in list order (as `sampling::speculative::verify` normalises
//! `DraftProbs::Sampled`); its entries are located (token `t` is entry `t` on the vocabulary, the
//! first entry holding `t` on a candidate list) and merged per entry, in list order. The draft
//! entry `e` is accepted iff `a q(d) W < w_e`, `w_e` recomputed from `e`'s block by the draw's
//! own code. On a rejection every block holding a `q` entry is recomputed with the residual
//! weights `max(0, w_i - q(i) W)` and its residual mass summed from them (so a block `q` covers
//! exactly has mass exactly 0); the other blocks keep their mass. The draw walks the blocks to
//! the one where the running sum passes `u R` and that block's residual weights in f64.

use super::{BLOCK, K, Prepared, RowWeights, row_weights, seed_step};
use crate::error::CpuError;
use graph::philox;

pub(crate) fn spec_verify_sampled(k: &K<'_>, stream: u32, ids: bool) -> Result<(), CpuError> {
    let (x, keys, q_ids, q_probs, d) = (k.srcs[0], k.srcs[1], k.srcs[2], k.srcs[3], k.dst);
    let aux = k.srcs.get(4).copied();
    let n = x.ne[0];
    let m = q_ids.ne[0];
    super::super::for_rows(&d, 4 * n + 8 * m, 0, |r, _| {
        // SAFETY: the builder checked that `x` (f32), `keys` (i32, 5 per row), `q_ids` (i32, `m`
        // per row), `q_probs` (f32, `m` per row) and `aux` (f32, 2 per row, or i32, `n` per row)
        // have contiguous rows with `d`'s row count; row `r` of `d` is written only here.
        unsafe {
            let kr = keys.row::<i32>(r);
            let (seed, step) = seed_step(kr);
            let draft = kr[4];
            let u = philox::uniform_f64(seed, step, philox::stream::element(u64::from(stream), 0));
            let list = match &aux {
                Some(i) if ids => Some(i.row::<i32>(r)),
                _ => None,
            };
            let (s, off) = match &aux {
                Some(p) if !ids => {
                    let p = p.row::<f32>(r);
                    (p[0], p[1])
                }
                _ => (1.0, f32::NEG_INFINITY),
            };
            let xr = x.row::<f32>(r);
            let got = if draft < 0 {
                super::draw(xr, u, s, off)
            } else {
                let a = philox::uniform_f64(seed, step, philox::stream::element(philox::stream::SPECULATIVE, 0));
                let q = DraftQ { ids: q_ids.row::<i32>(r), probs: q_probs.row::<f32>(r) };
                verify_row(xr, u, s, off, list, draft, a, q)
            };
            d.row_mut::<i32>(r)[0] = match (got, list) {
                (None, _) => -1,
                (Some(i), Some(t)) => t[i],
                (Some(i), None) => i as i32,
            };
        }
    });
    Ok(())
}

/// One row's draft distribution as given: token ids and weights.
#[derive(Clone, Copy)]
pub(crate) struct DraftQ<'a> {
    pub ids: &'a [i32],
    pub probs: &'a [f32],
}

/// One row with a draft token `d`: the chosen entry, `None` for a bad row (logits, scale, cut or
/// `q`). `list`: the entries' token ids (a candidate list), `None` on the vocabulary.
#[allow(clippy::too_many_arguments)]
pub(crate) fn verify_row(
    x: &[f32],
    u: f64,
    s: f32,
    off: f32,
    list: Option<&[i32]>,
    d: i32,
    a: f64,
    q: DraftQ<'_>,
) -> Option<usize> {
    let mut total_q = 0.0f64;
    for &p in q.probs {
        if !(p >= 0.0 && p.is_finite()) {
            return None;
        }
        total_q += f64::from(p);
    }
    if total_q <= 0.0 {
        return None;
    }
    let n = x.len();
    let entry_of = |t: i32| -> Option<usize> {
        match list {
            None => usize::try_from(t).ok().filter(|&e| e < n),
            Some(l) => l.iter().position(|&v| v == t),
        }
    };
    // `q(d)`, and `q` per entry: (entry, list position, normalised probability), merged per
    // entry in list order.
    let mut qd = 0.0f64;
    let mut per: Vec<(usize, usize, f64)> = Vec::with_capacity(q.ids.len());
    for (j, (&t, &p)) in q.ids.iter().zip(q.probs).enumerate() {
        let qj = f64::from(p) / total_q;
        if t == d {
            qd += qj;
        }
        if let Some(e) = entry_of(t).filter(|_| t >= 0) {
            per.push((e, j, qj));
        }
    }
    per.sort_unstable_by_key(|&(e, j, _)| (e, j));
    let mut qe: Vec<(usize, f64)> = Vec::with_capacity(per.len());
    for (e, _, qj) in per {
        match qe.last_mut() {
            Some(last) if last.0 == e => last.1 += qj,
            _ => qe.push((e, qj)),
        }
    }
    let rw = match row_weights(x, s, off) {
        Prepared::Bad => return None,
        Prepared::First(i) => return Some(i),
        Prepared::Weights(rw) => rw,
    };
    rw.pick_sampled(u, a, entry_of(d).filter(|_| d >= 0), qd, &qe)
}

impl RowWeights<'_> {
    /// The acceptance test of the draft entry `e` with `q(d) = qd`, then the residual draw with
    /// `q` per entry `qe` (sorted by entry, one pair per entry); see the module documentation.
    fn pick_sampled(&self, u: f64, a: f64, e: Option<usize>, qd: f64, qe: &[(usize, f64)]) -> Option<usize> {
        let mut w = [0.0f32; BLOCK];
        let total: f64 = self.mass.iter().sum();
        if let Some(e) = e {
            self.fill(e / BLOCK, &mut w);
            if a * qd * total < f64::from(w[e % BLOCK]) {
                return Some(e);
            }
        }
        // Residual masses: blocks holding a `q` entry summed from their residual weights.
        let mut mass = self.mass.clone();
        let mut r = [0.0f64; BLOCK];
        let mut i = 0;
        while i < qe.len() {
            let blk = qe[i].0 / BLOCK;
            let end = i + qe[i..].iter().take_while(|p| p.0 / BLOCK == blk).count();
            mass[blk] = if mass[blk] > 0.0 { self.residual(blk, &qe[i..end], total, &mut w, &mut r).1 } else { 0.0 };
            i = end;
        }
        let rtotal: f64 = mass.iter().sum();
        if rtotal <= 0.0 {
            // `q` covers `p`: no residual in exact arithmetic; the CPU verifier then draws from `p`.
            return self.pick(u, None);
        }
        let target = u * rtotal;
        let mut before = 0.0f64;
        let mut last = None;
        let in_blk = |blk: usize| {
            let lo = qe.partition_point(|p| p.0 / BLOCK < blk);
            let hi = qe.partition_point(|p| p.0 / BLOCK <= blk);
            &qe[lo..hi]
        };
        for (blk, &mb) in mass.iter().enumerate() {
            if mb > 0.0 {
                last = Some(blk);
                if before + mb > target {
                    let (len, _) = self.residual(blk, in_blk(blk), total, &mut w, &mut r);
                    let rem = target - before;
                    let mut cum = 0.0f64;
                    for (j, &v) in r[..len].iter().enumerate() {
                        if v > 0.0 {
                            cum += v;
                            if cum > rem {
                                return Some(blk * BLOCK + j);
                            }
                        }
                    }
                    return r[..len].iter().rposition(|&v| v > 0.0).map(|j| blk * BLOCK + j);
                }
                before += mb;
            }
        }
        // Rounding left the target at or past the total: the last positive residual weight.
        let blk = last?;
        let (len, _) = self.residual(blk, in_blk(blk), total, &mut w, &mut r);
        r[..len].iter().rposition(|&v| v > 0.0).map(|j| blk * BLOCK + j)
    }

    /// Block `blk`'s residual weights `max(0, w_i - q(i) W)` into `r` (`qe`: the block's `q`
    /// entries); the block's length and residual mass.
    fn residual(
        &self,
        blk: usize,
        qe: &[(usize, f64)],
        total: f64,
        w: &mut [f32; BLOCK],
        r: &mut [f64; BLOCK],
    ) -> (usize, f64) {
        let len = self.fill(blk, w);
        for (rv, &wv) in r[..len].iter_mut().zip(&w[..len]) {
            *rv = f64::from(wv);
        }
        for &(e, qv) in qe {
            let j = e - blk * BLOCK;
            r[j] = (r[j] - qv * total).max(0.0);
        }
        (len, r[..len].iter().sum())
    }
}

#[cfg(test)]
mod tests {
    use super::{DraftQ, verify_row};
    const NINF: f32 = f32::NEG_INFINITY;

    fn q<'a>(ids: &'a [i32], probs: &'a [f32]) -> DraftQ<'a> {
        DraftQ { ids, probs }
    }

    /// Exact cases on four tokens of weights 1, 1, 1, 1 (p = 1/4 each).
    #[test]
    fn acceptance_and_residual() {
        let x = [0.0f32; 4];
        // q = (1/2 on 0, 1/2 on 1): draft 0 accepted iff a * 1/2 < 1/4, i.e. a < 1/2.
        let (ids, pr) = ([0, 1], [1.0f32, 1.0]);
        assert_eq!(verify_row(&x, 0.0, 1.0, NINF, None, 0, 0.49, q(&ids, &pr)), Some(0));
        // Rejected: the residual is (0, 0, 1/4, 1/4): u < 1/2 gives 2, else 3.
        assert_eq!(verify_row(&x, 0.25, 1.0, NINF, None, 0, 0.51, q(&ids, &pr)), Some(2));
        assert_eq!(verify_row(&x, 0.75, 1.0, NINF, None, 0, 0.51, q(&ids, &pr)), Some(3));
        // q = p: always accepted (a q W = a < 1 = w).
        let (ids4, pr4) = ([3, 2, 1, 0], [1.0f32; 4]);
        assert_eq!(verify_row(&x, 0.9, 1.0, NINF, None, 2, 0.999, q(&ids4, &pr4)), Some(2));
        // A draft token masked out (-inf): rejected, the residual still takes q off the others.
        let xm = [0.0f32, NINF, 0.0, 0.0];
        let (ids2, pr2) = ([1, 0], [3.0f32, 1.0]);
        // p = (1/3, 0, 1/3, 1/3), q = (1/4, 3/4, 0, 0): residual (1/12, 0, 1/3, 1/3), R = 3/4.
        assert_eq!(verify_row(&xm, 0.1, 1.0, NINF, None, 1, 0.0, q(&ids2, &pr2)), Some(0));
        assert_eq!(verify_row(&xm, 0.2, 1.0, NINF, None, 1, 0.0, q(&ids2, &pr2)), Some(2));
        assert_eq!(verify_row(&xm, 0.99, 1.0, NINF, None, 1, 0.0, q(&ids2, &pr2)), Some(3));
        // Duplicates merge; out-of-range ids and -1 padding have no entry but count in Q.
        let (ids3, pr3) = ([0, -1, 0, 99], [1.0f32, 0.0, 1.0, 2.0]);
        // q(0) = 1/2 -> residual (0, 1/4, 1/4, 1/4) after a rejection.
        assert_eq!(verify_row(&x, 0.0, 1.0, NINF, None, 0, 0.6, q(&ids3, &pr3)), Some(1));
        // Bad q: -1 (None).
        assert_eq!(verify_row(&x, 0.5, 1.0, NINF, None, 0, 0.5, q(&[0], &[f32::NAN])), None);
        assert_eq!(verify_row(&x, 0.5, 1.0, NINF, None, 0, 0.5, q(&[0], &[-1.0])), None);
        assert_eq!(verify_row(&x, 0.5, 1.0, NINF, None, 0, 0.5, q(&[0], &[0.0])), None);
        // Bad logits: None.
        assert_eq!(verify_row(&[f32::NAN, 0.0], 0.5, 1.0, NINF, None, 0, 0.5, q(&[0], &[1.0])), None);
        // Greedy: the first maximum whatever q.
        assert_eq!(verify_row(&[0.0, 2.0, 2.0], 0.5, f32::INFINITY, NINF, None, 0, 0.0, q(&[0], &[1.0])), Some(1));
    }

    /// On a list: entries located by token id; q covering p exactly falls back to p's draw.
    #[test]
    fn list_form_and_covered_residual() {
        let x = [0.0f32, 0.0, NINF];
        let list = [7, 3, 5];
        // q = p = (1/2 on 7, 1/2 on 3): never rejected (a < 1)...
        let (ids, pr) = ([3, 7], [1.0f32, 1.0]);
        assert_eq!(verify_row(&x, 0.3, 1.0, NINF, Some(&list), 7, 0.999, q(&ids, &pr)), Some(0));
        // ...but a draft token outside p (5, weight 0) is, and the residual is empty: p's draw.
        let (ids5, pr5) = ([3, 7, 5], [1.0f32, 1.0, 0.5]);
        // q = (0.4, 0.4, 0.2): residual (0.1, 0.1, 0) -> u 0.3 picks entry 0, u 0.7 entry 1.
        assert_eq!(verify_row(&x, 0.3, 1.0, NINF, Some(&list), 5, 0.0, q(&ids5, &pr5)), Some(0));
        assert_eq!(verify_row(&x, 0.7, 1.0, NINF, Some(&list), 5, 0.0, q(&ids5, &pr5)), Some(1));
        // A draft token without an entry whose q covers p exactly: no residual, p's own draw.
        let (idc, prc) = ([7, 3, 9], [1.0f32, 1.0, 0.0]);
        assert_eq!(verify_row(&x, 0.3, 1.0, NINF, Some(&list), 9, 0.0, q(&idc, &prc)), Some(0));
        assert_eq!(verify_row(&x, 0.7, 1.0, NINF, Some(&list), 9, 0.0, q(&idc, &prc)), Some(1));
        // A block boundary: the residual walks past whole blocks.
        let mut long = vec![NINF; 3000];
        long[10] = 0.0;
        long[2500] = 0.0;
        let (idl, prl) = ([10], [1.0f32]);
        assert_eq!(verify_row(&long, 0.01, 1.0, NINF, None, 10, 0.9, q(&idl, &prl)), Some(2500));
    }
}

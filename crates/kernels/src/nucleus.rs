//! Top-p (nucleus) selection straight from a raw logits row, never sorting the vocabulary: the
//! decision of the CPU sampler chain's `top_p` and of the CPU backend's `top_p_mask` op, one
//! function so that both keep the same tokens.
//!
//! The nucleus of a row (logits `row[i] / div`) is the shortest prefix of its tokens in the order
//! value descending, id ascending whose probabilities sum to at least `p`, but at least
//! `min_keep` tokens (llama.cpp's `llama_sampler_top_p_apply`); all of them if the sum never
//! reaches `p`.
//!
//! One pass, block by block, computes the softmax denominator (online max) and the 128-token
//! sub-block maxima; the best `k` tokens are then selected by rescanning only the sub-blocks that
//! can hold one ([`crate::select::top_k_from_maxima`]), with `k` twice the size of the previous
//! row's nucleus (at least 64); only if their mass is not yet `p` (a flatter row) is the selection
//! widened eightfold, up to the whole vocabulary.
//!
//! Decisions follow llama.cpp's `f32` arithmetic, whose rounding decides at boundaries: rows of at
//! most [`EXACT_ROW`] tokens are decided in it ([`crate::llama_f32`]); longer rows by an `f64`
//! running sum unless the cut is within [`EXACT_TOL`] of the mass from `p`, where the row is
//! replayed in it.

use crate::exp::{exp_affine, exp_at};
use crate::llama_f32;
use crate::select::top_k_from_maxima;
use crate::stats::{BlockStats, block_stats_with_sub_max};

/// Rows of at most this many tokens are always decided with llama.cpp's `f32` arithmetic: it
/// costs one `expf` per token, which on such rows is small.
pub const EXACT_ROW: usize = 4096;

/// On longer rows the `f64` running sum decides unless it is within this fraction of the row's
/// mass from `p` (at the cut or just before it): the shared polynomial exponential is within about
/// 3e-6 of `expf` over the range that carries mass, and llama.cpp's `f32` sums stray by about as
/// much, so closer calls are replayed exactly.
pub const EXACT_TOL: f64 = 1e-5;

/// How the probabilities of the nucleus' tokens were computed (and are to be reported).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Probs {
    /// llama.cpp's `f32` softmax: the row's maximum logit and `sum(expf(logit - max))`.
    Exact {
        /// Maximum logit (after the division by `div`).
        max: f32,
        /// The `f32` sum of the exponentials.
        sum: f32,
    },
    /// The shared exponential `exp_at(raw, a, b)` over the `f64` total, as `inv = 1 / total`.
    Fast {
        /// Affine constants of [`crate::exp::exp_affine`].
        a: f32,
        /// Affine constants of [`crate::exp::exp_affine`].
        b: f32,
        /// `1 / total`, in f32.
        inv: f32,
    },
}

impl Probs {
    /// The probability of a token whose raw value is `raw` (the logit is `raw / div`).
    #[inline]
    pub fn prob(&self, raw: f32, div: f32) -> f32 {
        match *self {
            Probs::Exact { max, sum } => llama_f32::prob(logit(raw, div), max, sum),
            Probs::Fast { a, b, inv } => exp_at(raw, a, b) * inv,
        }
    }
}

/// The logit of a raw value under a pending temperature `div` (`raw` itself when `div = 1`).
#[inline]
fn logit(raw: f32, div: f32) -> f32 {
    if div == 1.0 { raw } else { raw / div }
}

/// Scratch reused from row to row: block statistics, the selection buffer and the size hint.
#[derive(Debug, Clone)]
pub struct Scratch {
    /// Block statistics of the last row.
    pub stats: BlockStats,
    /// The selected `(id, raw value)` pairs of the last row, value descending, id ascending; the
    /// first [`Nucleus::kept`] are its nucleus.
    pub buf: Vec<(u32, f32)>,
    /// Size of the last nucleus: the next row's first selection asks for twice that.
    pub hint: usize,
}

impl Default for Scratch {
    fn default() -> Self {
        Self { stats: BlockStats::default(), buf: Vec::new(), hint: 32 }
    }
}

/// A row's nucleus: the first `kept` entries of [`Scratch::buf`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Nucleus {
    /// How many tokens it holds.
    pub kept: usize,
    /// Their probabilities (the softmax over the whole row).
    pub probs: Probs,
}

/// The outcome for a row that has no nucleus: it holds a NaN or `+inf`, or no finite value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadRow {
    /// A NaN or `+inf` was seen.
    pub bad: bool,
}

/// The `f64` fast path's cut over the selected `buf` (sorted, raw values): `(kept, close)`, where
/// `kept` is `None` if the selection's mass stays short of `p`, and `close` says the decision is
/// within [`EXACT_TOL`] of flipping.
fn fast_cut(buf: &[(u32, f32)], p: f32, min_keep: usize, a: f32, b: f32, total: f64) -> (Option<usize>, bool) {
    let target = f64::from(p) * total;
    let tol = EXACT_TOL * total;
    let mut cum = 0.0f64;
    for (i, &(_, x)) in buf.iter().enumerate() {
        let before = cum;
        cum += f64::from(exp_at(x, a, b));
        if cum >= target && i + 1 >= min_keep {
            // Earlier prefixes count only where min_keep did not force this one; with p = 0 every
            // prefix reaches p, so no rounding can move the cut.
            let close = p > 0.0 && (cum - target <= tol || (i >= min_keep && target - before <= tol));
            return (Some(i + 1), close);
        }
    }
    (None, target - cum <= tol)
}

/// The nucleus of `row` with the pending temperature `div` (positive and finite), mass `p` in
/// `[0, 1)` and `min_keep` (0 and 1 alike); `sc.buf` receives the selection, sorted. A row with a
/// NaN or `+inf`, or no finite value, has none ([`BadRow`]).
pub fn select(row: &[f32], div: f32, p: f32, min_keep: usize, sc: &mut Scratch) -> Result<Nucleus, BadRow> {
    select_within(row, div, p, min_keep, row.len(), sc)
}

/// The nucleus cut inside the `cap` largest tokens of `row` only (top-p approximated by top-k):
/// the shortest prefix of those `cap` tokens whose probabilities, each the softmax over the
/// *whole* row, sum to at least `p` (at least `min_keep`), or all `cap` where they carry less
/// than `p`. The same decision, in the same arithmetic, as [`select`] on every prefix it
/// examines, so it keeps exactly the first `min(kept, cap)` tokens of [`select`]'s nucleus
/// (`kept` its size): exact where the nucleus fits in the `cap` largest, and never a selection of
/// more than `cap` tokens. `cap >= row.len()` is [`select`]; `cap = 0` is taken as 1.
pub fn select_within(
    row: &[f32],
    div: f32,
    p: f32,
    min_keep: usize,
    cap: usize,
    sc: &mut Scratch,
) -> Result<Nucleus, BadRow> {
    let s = 1.0 / div;
    let n = row.len();
    let cap = cap.clamp(1, n.max(1));
    let mut k = (2 * sc.hint).clamp(64, 4096).max(min_keep).min(cap);
    block_stats_with_sub_max(row, s, &mut sc.stats);
    if sc.stats.bad || sc.stats.row_max == f32::NEG_INFINITY || n == 0 {
        return Err(BadRow { bad: sc.stats.bad });
    }
    top_k_from_maxima(row, &sc.stats.sub_max, k, &mut sc.buf);
    let total = sc.stats.weights(s);
    let (a, b) = exp_affine(sc.stats.row_max, s);
    // Short rows are always decided with llama.cpp's own arithmetic; long ones switch to it when
    // the fast f64 sum lands within `EXACT_TOL` of the boundary.
    let replay = || llama_f32::softmax_sum(row.iter().map(|&x| logit(x, div)));
    let mut exact = (n <= EXACT_ROW).then(replay);
    let kept = loop {
        let cut = match exact {
            Some((max, sum)) => {
                let probs = sc.buf.iter().map(|&(_, x)| llama_f32::prob(logit(x, div), max, sum));
                llama_f32::top_p_cut(probs, p, min_keep)
            }
            None => match fast_cut(&sc.buf, p, min_keep, a, b, total) {
                (_, true) => {
                    exact = Some(replay());
                    continue;
                }
                (cut, false) => cut,
            },
        };
        if cut.is_some() || k == cap {
            break cut.unwrap_or(k);
        }
        // The best k do not carry mass p yet (a flat row): widen and select again.
        k = (k * 8).min(cap);
        top_k_from_maxima(row, &sc.stats.sub_max, k, &mut sc.buf);
    };
    sc.hint = kept;
    let probs = match exact {
        Some((max, sum)) => Probs::Exact { max, sum },
        None => Probs::Fast { a, b, inv: (1.0 / total) as f32 },
    };
    Ok(Nucleus { kept, probs })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift values in `[-scale / 2, scale / 2)`.
    fn row(n: usize, seed: u64, scale: f32) -> Vec<f32> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
            })
            .collect()
    }

    #[test]
    fn within_a_cap_is_the_nucleus_cut_to_its_first_cap_tokens() {
        let mut full = Scratch::default();
        let mut capped = Scratch::default();
        let mut short = 0;
        for (i, &(n, scale)) in
            [(50usize, 4.0f32), (1000, 2.0), (1000, 20.0), (5000, 1.0), (20_000, 12.0), (20_000, 30.0)]
                .iter()
                .enumerate()
        {
            let x = row(n, 77 + i as u64, scale);
            for p in [0.0f32, 0.5, 0.9, 0.95] {
                for min_keep in [0usize, 3, 40] {
                    let nuc = select(&x, 1.0, p, min_keep, &mut full).unwrap();
                    let want: Vec<(u32, f32)> = full.buf[..nuc.kept].to_vec();
                    for cap in [1usize, 8, 32, 256, n, n + 5] {
                        let got = select_within(&x, 1.0, p, min_keep, cap, &mut capped).unwrap();
                        let k = nuc.kept.min(cap);
                        assert_eq!(got.kept, k, "n {n} p {p} min_keep {min_keep} cap {cap}");
                        assert_eq!(&capped.buf[..k], &want[..k], "n {n} p {p} cap {cap}");
                        short += usize::from(nuc.kept > cap);
                    }
                }
            }
        }
        assert!(short > 20, "the caps cut some nuclei ({short})");
    }
}

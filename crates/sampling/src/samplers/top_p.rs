//! `top_p` (nucleus): keeps the smallest prefix of the candidates sorted by probability whose
//! cumulative probability reaches `p`, but at least `min_keep` (llama.cpp's
//! `llama_sampler_init_top_p`). The kept candidates carry llama.cpp's probabilities: the softmax
//! over the set *before* truncation.
//!
//! Edge values (llama.cpp `src/llama-sampler.cpp`, `llama_sampler_init_top_p` and
//! `llama_sampler_top_p_apply`):
//! * `p >= 1`, `+inf` included: disabled (`init_top_p` returns the empty sampler, `apply` returns
//!   at `p >= 1`);
//! * `p <= 0`, `-inf` included: the single most likely token, or the top `min_keep` (the running
//!   sum of non-negative probabilities is `>= 0 >= p` from the first token on, so only the
//!   `i + 1 >= min_keep` condition decides). `p < 0` decides exactly as `p = 0`, so [`TopP::new`]
//!   stores `max(p, 0)`;
//! * `min_keep` 0 and 1 are the same; `min_keep >= n` keeps all `n`;
//! * NaN `p` is an error: llama.cpp would keep everything, but only because `cum_sum >= NaN` is
//!   false for every prefix, an accident of the comparison rather than a defined behaviour.
//!
//! On the vocabulary view the vocabulary is never sorted: one pass, block by block, computes the
//! softmax denominator (online max) and the 128-token sub-block maxima; the best `k` tokens are
//! then selected by rescanning only the sub-blocks that can hold one (`kernels::top_k_from_maxima`),
//! with `k` twice the size of the previous row's kept set (at least 64); only if their mass is not
//! yet `p` (a flatter row) is the selection widened eightfold, up to the whole vocabulary.
//!
//! Decisions follow llama.cpp's `f32` arithmetic, whose rounding decides at boundaries: short rows
//! and lists are decided in it (`crate::llama_f32`); long rows by the fast path unless the cut is
//! within `EXACT_TOL` (1e-5 of the mass) of `p`, where the row is replayed in it. So a long row
//! can differ from llama.cpp only where llama.cpp's own rounding moves its sums by more than that
//! (docs/SAMPLING.md, "Exactness of top-p").

use crate::candidates::{Candidates, TokenData, check_list, sort_desc};
use crate::error::{Result, not_nan};
use crate::kernels::{self, BlockStats};
use crate::llama_f32;
use crate::sampler::Sampler;

/// Nucleus sampling.
#[derive(Debug, Clone)]
pub struct TopP {
    p: f32,
    min_keep: usize,
    stats: BlockStats,
    /// Size of the last kept set: the next row's first selection asks for twice that.
    hint: usize,
}

const NAME: &str = "top_p";

impl TopP {
    /// Top-p with mass `p` and `min_keep`: `p >= 1` disables it, `p <= 0` keeps the top
    /// `max(min_keep, 1)` (stored as `p = 0`, which llama.cpp cannot tell apart); NaN: error.
    pub fn new(p: f32, min_keep: usize) -> Result<Self> {
        not_nan(NAME, "p", p)?;
        Ok(Self { p: p.max(0.0), min_keep, stats: BlockStats::default(), hint: 32 })
    }
}

/// Rows of at most this many tokens are always decided with llama.cpp's `f32` arithmetic
/// ([`llama_f32`]): it costs one `expf` per token, which on such rows is small.
const EXACT_ROW: usize = 4096;

/// On longer rows the fast path's `f64` running sum decides unless it is within this fraction of
/// the row's mass from `p` (at the cut or just before it): our polynomial exponential is within
/// about 3e-6 of `expf` over the range that carries mass, and llama.cpp's `f32` sums stray by
/// about as much, so closer calls are replayed exactly.
const EXACT_TOL: f64 = 1e-5;

impl TopP {
    /// The fast path's cut over the selected `buf` (sorted, raw logits): `(kept, close)`, where
    /// `kept` is `None` if the selection's mass stays short of `p`, and `close` says the decision
    /// is within [`EXACT_TOL`] of flipping.
    fn fast_cut(&self, buf: &[(u32, f32)], a: f32, b: f32, total: f64) -> (Option<usize>, bool) {
        let target = f64::from(self.p) * total;
        let tol = EXACT_TOL * total;
        let mut cum = 0.0f64;
        for (i, &(_, x)) in buf.iter().enumerate() {
            let before = cum;
            cum += f64::from(kernels::exp_at(x, a, b));
            if cum >= target && i + 1 >= self.min_keep {
                // Earlier prefixes count only where min_keep did not force this one; with p = 0
                // every prefix reaches p, so no rounding can move the cut.
                let close = self.p > 0.0 && (cum - target <= tol || (i >= self.min_keep && target - before <= tol));
                return (Some(i + 1), close);
            }
        }
        (None, target - cum <= tol)
    }
}

impl Sampler for TopP {
    fn name(&self) -> &'static str {
        NAME
    }

    fn apply(&mut self, cur: &mut Candidates<'_>) -> Result<()> {
        if self.p >= 1.0 {
            return Ok(());
        }
        if let Some((row, div)) = cur.vocab_row() {
            let s = 1.0 / div;
            let n = row.len();
            let logit = |x: f32| if div == 1.0 { x } else { x / div };
            let mut k = (2 * self.hint).clamp(64, 4096).max(self.min_keep).min(n);
            let mut buf = Vec::new();
            kernels::block_stats_with_sub_max(row, s, &mut self.stats);
            crate::candidates::check_scan(NAME, row, self.stats.bad, self.stats.row_max)?;
            kernels::top_k_from_maxima(row, &self.stats.sub_max, k, &mut buf);
            let total = self.stats.weights(s);
            let (a, b) = kernels::exp_affine(self.stats.row_max, s);
            // Short rows are always decided with llama.cpp's own arithmetic; long ones switch to it
            // when the fast f64 sum lands within `EXACT_TOL` of the boundary.
            let replay = || llama_f32::softmax_sum(row.iter().map(|&x| logit(x)));
            let mut exact = (n <= EXACT_ROW).then(replay);
            let last = loop {
                let cut = match exact {
                    Some((max, sum)) => {
                        let probs = buf.iter().map(|&(_, x)| llama_f32::prob(logit(x), max, sum));
                        llama_f32::top_p_cut(probs, self.p, self.min_keep)
                    }
                    None => match self.fast_cut(&buf, a, b, total) {
                        (_, true) => {
                            exact = Some(replay());
                            continue;
                        }
                        (cut, false) => cut,
                    },
                };
                if cut.is_some() || k == n {
                    break cut.unwrap_or(k);
                }
                // The best k do not carry mass p yet (a flat row): widen and select again.
                k = (k * 8).min(n);
                kernels::top_k_from_maxima(row, &self.stats.sub_max, k, &mut buf);
            };
            let inv = (1.0 / total) as f32;
            let list: Vec<TokenData> = buf[..last]
                .iter()
                .map(|&(id, x)| {
                    let logit = logit(x);
                    let p = match exact {
                        Some((max, sum)) => llama_f32::prob(logit, max, sum),
                        None => kernels::exp_at(x, a, b) * inv,
                    };
                    TokenData { id, logit, p }
                })
                .collect();
            self.hint = last;
            cur.set_list(list, true);
            return Ok(());
        }
        let sorted = cur.is_sorted();
        let list = cur.list_mut(NAME)?;
        check_list(NAME, list)?;
        let (max, sum) = llama_f32::softmax_sum(list.iter().map(|t| t.logit));
        for t in list.iter_mut() {
            t.p = llama_f32::prob(t.logit, max, sum);
        }
        if !sorted {
            sort_desc(list);
        }
        if let Some(last) = llama_f32::top_p_cut(list.iter().map(|t| t.p), self.p, self.min_keep) {
            list.truncate(last);
        }
        cur.set_sorted(true);
        cur.set_selected(None);
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn Sampler> {
        Box::new(self.clone())
    }

    fn backend_stage(&self) -> Option<crate::backend::BackendStage> {
        Some(crate::backend::BackendStage::TopP { p: self.p, min_keep: self.min_keep })
    }
}
